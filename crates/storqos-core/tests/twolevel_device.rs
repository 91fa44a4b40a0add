//! The storage utility AVATAR exists for (seed 001 §3.2, §4): an 8-disk striped array
//! whose disks reorder their queues (SPTF), so that a deeper utility queue raises
//! throughput *and* latency together. Driven through AVATAR held at a fixed threshold
//! (a huge window keeps the controller from moving it), with a saturating backlog.

use storqos_core::devices::{DiskProfile, Parallel, QueuePolicy, ServiceModel};
use storqos_core::sim::{simulate, SimConfig};
use storqos_core::time::NS_PER_SEC;
use storqos_core::twolevel::{Avatar, Slo, SloSet};
use storqos_core::{Request, SimRng};

/// Seed 001's utility: 8 disks (§4: "RAID 5 system with 8 Seagate Cheetah9LP 10K RPM
/// disks"), 64 KiB stripes, each disk a 10k RPM model serving its queue SPTF.
fn array() -> Parallel {
    let service = ServiceModel::disk(DiskProfile::enterprise_10k(), QueuePolicy::Sptf).unwrap();
    Parallel::striped(8, 65536, service).unwrap()
}

/// `n` random 8 KiB reads over the whole array, all arriving at t = 0 (a backlog that
/// keeps AVATAR's threshold the only limit on outstanding requests).
fn backlog(n: u64, seed: u64) -> Vec<Request> {
    let mut rng = SimRng::new(seed);
    let span_blocks = 8 * 9_100_000_000u64 / 8192;
    (0..n).map(|i| Request { offset: rng.below(span_blocks) * 8192, ..Request::new(i, 0, 0, 8192) }).collect()
}

/// (throughput IOPS, mean device time ms) at threshold `depth`.
fn at_depth(depth: f64) -> (f64, f64) {
    let slos = SloSet::new(vec![Slo::new(1e6, 1_000 * NS_PER_SEC)], 0.95).unwrap();
    let mut avatar = Avatar::new(slos, 1_000_000 * NS_PER_SEC).unwrap().with_threshold(depth).unwrap();
    let n = 6_000;
    let cfg = SimConfig { keep_requests: true, ..Default::default() };
    let r = simulate(backlog(n, 3), &[], &mut avatar, &mut array(), &cfg).unwrap();
    let log = r.log.unwrap();
    let iops = n as f64 / (r.end as f64 / NS_PER_SEC as f64);
    let device_ms = log.finish.iter().zip(&log.dispatch).map(|(f, d)| (f - d) as f64).sum::<f64>() / n as f64 / 1e6;
    (iops, device_ms)
}

#[test]
fn deeper_utility_queue_raises_throughput_and_latency() {
    let depths = [1.0, 4.0, 16.0, 64.0, 256.0];
    let points: Vec<(f64, f64)> = depths.iter().map(|&d| at_depth(d)).collect();
    for (d, (x, t)) in depths.iter().zip(&points) {
        eprintln!("depth {d:>4}: {x:7.1} IOPS, device time {t:7.2} ms");
    }
    for w in points.windows(2) {
        assert!(w[1].0 > w[0].0 * 1.05, "throughput must rise with depth: {points:?}");
        assert!(w[1].1 > w[0].1, "device latency must rise with depth: {points:?}");
    }
    // Depth 1 is one disk's worth (10k RPM: 150–200 random IOPS); deep queues use all 8
    // disks and shorten seeks beyond that.
    assert!((120.0..220.0).contains(&points[0].0), "{points:?}");
    assert!(points[4].0 > 8.0 * points[0].0, "{points:?}");
}
