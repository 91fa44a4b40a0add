//! Seed 001's experiments in miniature (synthetic arrivals shaped like the paper's; the
//! trace-driven versions are `examples/twolevel/e1.py` and `e2.py`).
//!
//! Device: the paper's utility, 8 striped 10k RPM disks serving their queues SPTF
//! (≈ 160 IOPS at depth 1, ≈ 1,850 at depth 256, see `twolevel_device.rs`). The paper's
//! array delivered ≈ 560 io/s near capacity (Table 1), so its SLO rates are scaled by
//! [`RATE_SCALE`] to this array.
//!
//! - **E1** (§4.1): a steady WebSearch-like class ⟨160·s IOPS, 400 ms⟩ and a bursty
//!   OLTP class ⟨190·s IOPS, 900 ms⟩ whose arrival rate jumps far above its SLO rate for
//!   a while (the paper's TPC-C bursts above 1,000 io/s): SARC+AVATAR misses few
//!   low-level deadlines, SARC+Facade many; AVATAR's threshold rises (overload → ∞)
//!   during the burst while Facade's depth collapses.
//! - **E2** (§4.2): two bursty classes with loose SLOs near capacity: average throughput
//!   FIXED < ADAPTIVE ≤ SARC, every policy keeping its miss ratio below 5 %.

use storqos_core::devices::{DiskProfile, Parallel, QueuePolicy, ServiceModel};
use storqos_core::scheduler::Scheduler;
use storqos_core::sim::{simulate, SimConfig, SimResult};
use storqos_core::spec::{from_json, AnyScheduler, SchedulerSpec};
use storqos_core::time::{Nanos, NS_PER_MS, NS_PER_SEC};
use storqos_core::twolevel::LowLevel;
use storqos_core::{Request, SimRng};

/// Paper SLO rates × RATE_SCALE = rates on our array (≈ 1,850 / 560 ≈ 3.3 at full depth;
/// we take 2.5 so that Σ R_i sits near the array's throughput at depth ≈ 10).
const RATE_SCALE: f64 = 2.5;

fn array() -> Parallel {
    let service = ServiceModel::disk(DiskProfile::enterprise_10k(), QueuePolicy::Sptf).unwrap();
    Parallel::striped(8, 65536, service).unwrap()
}

/// Poisson arrivals of `tenant` whose rate is piecewise constant: `(start s, end s, IOPS)`.
fn piecewise(tenant: u32, segments: &[(f64, f64, f64)], bytes: u32, seed: u64) -> Vec<Request> {
    let mut rng = SimRng::new(seed);
    let span_blocks = 8 * 9_100_000_000u64 / bytes as u64;
    let mut out = Vec::new();
    for &(a, b, rate) in segments {
        let mut t = a * 1e9;
        loop {
            t += rng.exp(1e9 / rate);
            if t >= b * 1e9 {
                break;
            }
            let offset = rng.below(span_blocks) * bytes as u64;
            out.push(Request { offset, ..Request::new(0, tenant, t as Nanos, bytes) });
        }
    }
    out
}

fn merge(mut parts: Vec<Vec<Request>>) -> Vec<Request> {
    let mut all: Vec<Request> = parts.drain(..).flatten().collect();
    all.sort_by_key(|r| (r.arrival, r.tenant));
    for (i, r) in all.iter_mut().enumerate() {
        r.id = i as u64;
    }
    all
}

fn slo_json(slos: &[(f64, u64)]) -> String {
    let v: Vec<String> = slos
        .iter()
        .map(|(r, d)| format!(r#"{{"rate_iops":{r},"latency_ns":{}}}"#, d * NS_PER_MS))
        .collect();
    format!("[{}]", v.join(","))
}

fn build(kind: &str, slos: &[(f64, u64)]) -> AnyScheduler {
    let spec: SchedulerSpec = from_json("policy", &format!(r#"{{"kind":"{kind}","slo":{}}}"#, slo_json(slos))).unwrap();
    spec.build().unwrap()
}

/// Low-level (completions, misses) per class.
fn misses(s: &AnyScheduler, classes: usize) -> Vec<(u64, u64)> {
    let m = match s {
        AnyScheduler::SarcAvatar(x) => x.inner().monitor(),
        AnyScheduler::SarcFacade(x) => x.inner().monitor(),
        _ => unreachable!(),
    };
    (0..classes).map(|i| m.totals(i)).collect()
}

fn gauge(r: &SimResult, name: &str) -> Vec<(f64, f64)> {
    let g = &r.gauges;
    (0..g.name.len()).filter(|&i| g.name[i] == name).map(|i| (g.start[i] as f64 / 1e9, g.value[i])).collect()
}

fn run(trace: &[Request], s: &mut AnyScheduler) -> SimResult {
    simulate(trace.iter().copied(), &[], s, &mut array(), &SimConfig::default()).unwrap()
}

/// E1's workload: web steady at 85 % of its rate; oltp at 60 % of its rate with a
/// transient burst at 5× its rate from 60 s to 100 s; 240 s in all.
fn e1_trace() -> Vec<Request> {
    let (r0, r1) = (160.0 * RATE_SCALE, 190.0 * RATE_SCALE);
    let web = piecewise(0, &[(0.0, 240.0, 0.85 * r0)], 16384, 1);
    let oltp = piecewise(1, &[(0.0, 60.0, 0.6 * r1), (60.0, 100.0, 5.0 * r1), (100.0, 240.0, 0.6 * r1)], 8192, 2);
    merge(vec![web, oltp])
}

#[test]
fn e1_explore() {
    let slos = [(160.0 * RATE_SCALE, 400), (190.0 * RATE_SCALE, 900)];
    let trace = e1_trace();
    for kind in ["sarc_avatar", "sarc_facade"] {
        let mut s = build(kind, &slos);
        let r = run(&trace, &mut s);
        let m = misses(&s, 2);
        eprintln!("{kind}: misses {m:?} ratio {:.3} {:.3}", m[0].1 as f64 / m[0].0 as f64, m[1].1 as f64 / m[1].0 as f64);
        let lo: Vec<String> = gauge(&r, "lo").iter().map(|(t, v)| format!("{t:.0}:{v:.0}")).collect();
        eprintln!("  lo {}", lo.join(" "));
        let p: Vec<String> = gauge(&r, "low_p_ms.1").iter().map(|(t, v)| format!("{t:.0}:{v:.0}")).collect();
        eprintln!("  p95 oltp {}", p.join(" "));
    }
}
