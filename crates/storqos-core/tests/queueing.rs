//! Device models against queueing theory (spec "Device models"; the checks every
//! simulated experiment of the seeds rests on).
//!
//! - M/M/1 ([`Exponential`] behind FCFS): mean response 1/(μ − λ).
//! - M/D/1 ([`ConstantRate`] behind FCFS): Pollaczek–Khinchine, 1/μ + ρ/(2μ(1 − ρ)).
//! - M/M/k ([`Parallel`], shared queue, exponential servers): Erlang C.
//! - Disk model: depth-1 random IOPS inside the profile's documented range; a striped
//!   array (seed 001's RAID) whose throughput and mean latency both rise with closed-loop
//!   depth; SPTF making a single disk faster with depth.
//! - Tiered (seeds 002, 004): targets from the trace respected, hit ratio honoured, no
//!   sub-device ever over-submitted.
//!
//! Open-loop checks run 10^6 Poisson arrivals at ρ = 0.7 with fixed seeds; the measured
//! relative errors are printed (`cargo test -- --nocapture`).

use storqos_core::devices::array::DEFAULT_STRIPE_BYTES;
use storqos_core::devices::disk::{DESKTOP_7200_DEPTH1_IOPS, ENTERPRISE_10K_DEPTH1_IOPS};
use storqos_core::devices::{
    ConstantRate, Disk, DiskProfile, Exponential, Parallel, QueuePolicy, ServiceModel, Tiered,
};
use storqos_core::schedulers::Fcfs;
use storqos_core::sim::generate::{Poisson, Shape};
use storqos_core::sim::{simulate, ClosedClient, SimConfig, SimResult};
use storqos_core::time::{Nanos, NS_PER_SEC};
use storqos_core::{Completion, Device, DeviceState, Request, SimRng};

/// Requests per open-loop check (the brief: at least 10^6).
const N: u64 = 1_000_000;
/// Total service rate μ of every open-loop check (IOPS): 1 ms mean service.
const MU: f64 = 1000.0;
/// Utilisation of the open-loop checks: high enough for queueing to dominate, low enough
/// for 10^6 samples to pin the mean within ~1 %.
const RHO: f64 = 0.7;
/// Arrival seed of the open-loop checks.
const ARRIVAL_SEED: u64 = 20240601;
/// Device (service-time) seed of the simulator.
const SIM_SEED: u64 = 7;

/// Poisson arrivals at λ = ρμ through FCFS into `dev`; returns the mean response (s).
fn open_loop<D: Device>(dev: &mut D) -> f64 {
    let arrivals = Poisson::new(RHO * MU, N, Nanos::MAX, Shape::default(), ARRIVAL_SEED).unwrap();
    let cfg = SimConfig { seed: SIM_SEED, ..Default::default() };
    let r = simulate(arrivals, &[], &mut Fcfs::new(), dev, &cfg).unwrap();
    assert_eq!(r.total.completed, N);
    assert_eq!(r.unfinished, 0);
    r.total.mean_response() / NS_PER_SEC as f64
}

fn check(what: &str, simulated: f64, formula: f64, tolerance: f64) {
    let err = simulated / formula - 1.0;
    println!(
        "{what}: simulated {:.4} ms, formula {:.4} ms, error {:+.2} %",
        simulated * 1e3,
        formula * 1e3,
        err * 100.0
    );
    assert!(err.abs() < tolerance, "{what}: simulated {simulated} s vs formula {formula} s ({:+.2} %)", err * 100.0);
}

#[test]
fn mm1_mean_response_is_one_over_mu_minus_lambda() {
    let lambda = RHO * MU;
    let sim = open_loop(&mut Exponential::new(MU).unwrap());
    check("M/M/1", sim, 1.0 / (MU - lambda), 0.02);
}

#[test]
fn md1_mean_response_is_pollaczek_khinchine() {
    // M/G/1 with deterministic service: W_q = ρ / (2μ(1 − ρ)), T = W_q + 1/μ.
    let pk = RHO / (2.0 * MU * (1.0 - RHO)) + 1.0 / MU;
    let sim = open_loop(&mut ConstantRate::new(MU).unwrap());
    check("M/D/1", sim, pk, 0.02);
}

/// Erlang C: probability that an arrival waits in an M/M/k queue with offered load
/// `a` = λ/μ Erlangs (a < k).
fn erlang_c(k: u32, a: f64) -> f64 {
    let rho = a / k as f64;
    let mut term = 1.0; // a^n / n!
    let mut sum = 0.0;
    for n in 0..k {
        sum += term;
        term *= a / (n + 1) as f64;
    }
    let tail = term / (1.0 - rho); // a^k / k! / (1 − ρ)
    tail / (sum + tail)
}

#[test]
fn mmk_mean_response_is_erlang_c() {
    const K: u32 = 4;
    let mu = MU / K as f64; // per server, so the array's total rate is MU
    let lambda = RHO * MU;
    let a = lambda / mu;
    let formula = erlang_c(K, a) / (K as f64 * mu - lambda) + 1.0 / mu;
    let mut dev = Parallel::shared(K as usize, ServiceModel::exponential(mu).unwrap()).unwrap();
    let sim = open_loop(&mut dev);
    check("M/M/4", sim, formula, 0.03);
}

#[test]
fn erlang_c_reduces_to_mm1() {
    // k = 1: C = ρ, response = ρ/(μ − λ) + 1/μ = 1/(μ − λ).
    assert!((erlang_c(1, 0.7) - 0.7).abs() < 1e-12);
}

/// A closed-loop run: one client keeping `outstanding` random 4 KiB reads over
/// `span_bytes` in flight for `secs` simulated seconds. Returns (IOPS, mean response s).
fn closed_loop<D: Device>(dev: &mut D, outstanding: u32, span_bytes: u64, secs: u64) -> (f64, f64) {
    let until = secs * NS_PER_SEC;
    let client = ClosedClient { outstanding, span_bytes, stop: until, ..Default::default() };
    let cfg = SimConfig { seed: SIM_SEED, until: Some(until), ..Default::default() };
    let r: SimResult = simulate(Vec::new(), &[client], &mut Fcfs::new(), dev, &cfg).unwrap();
    (r.total.completed as f64 / secs as f64, r.total.mean_response() / NS_PER_SEC as f64)
}

#[test]
fn disk_depth_one_iops_lies_in_the_profile_range() {
    for (profile, (lo, hi)) in [
        (DiskProfile::enterprise_10k(), ENTERPRISE_10K_DEPTH1_IOPS),
        (DiskProfile::desktop_7200(), DESKTOP_7200_DEPTH1_IOPS),
    ] {
        let expected = NS_PER_SEC as f64 / profile.mean_random_service(4096);
        let span = profile.capacity_bytes;
        let mut disk = Disk::new(profile.clone(), QueuePolicy::Fifo).unwrap();
        let (iops, _) = closed_loop(&mut disk, 1, span, 100);
        println!(
            "{}: depth-1 random 4 KiB IOPS {iops:.1} (model mean {expected:.1}, documented {lo}–{hi})",
            profile.name
        );
        assert!(lo <= iops && iops <= hi, "{}: {iops} IOPS outside {lo}–{hi}", profile.name);
        assert!((iops / expected - 1.0).abs() < 0.02, "{}: {iops} vs {expected}", profile.name);
    }
}

#[test]
fn striped_array_throughput_and_latency_rise_with_depth() {
    // Seed 001's array: 8 disks striped (RAID-5 reads), random 4 KiB reads over all of it.
    const DISKS: usize = 8;
    let profile = DiskProfile::enterprise_10k();
    let span = profile.capacity_bytes * DISKS as u64;
    for queue in [QueuePolicy::Fifo, QueuePolicy::Sptf] {
        let mut last = (0.0, 0.0);
        for depth in [1, 4, 16] {
            let service = ServiceModel::disk(profile.clone(), queue).unwrap();
            let mut array = Parallel::striped(DISKS, DEFAULT_STRIPE_BYTES, service).unwrap();
            let (iops, resp) = closed_loop(&mut array, depth, span, 30);
            // Busy disks expected from striping alone: k(1 − (1 − 1/k)^d).
            let busy = DISKS as f64 * (1.0 - (1.0 - 1.0 / DISKS as f64).powi(depth as i32));
            println!("striped 8 × {queue:?}, depth {depth:2}: {iops:7.1} IOPS, mean {:.2} ms (≈ {busy:.1} disks busy by striping)", resp * 1e3);
            assert!(iops > last.0 && resp > last.1, "{queue:?} depth {depth}: ({iops}, {resp}) after {last:?}");
            last = (iops, resp);
        }
    }
}

#[test]
fn positional_queue_makes_one_disk_faster_with_depth() {
    let profile = DiskProfile::enterprise_10k();
    let span = profile.capacity_bytes;
    let run = |queue, depth| closed_loop(&mut Disk::new(profile.clone(), queue).unwrap(), depth, span, 60).0;
    let fifo = (run(QueuePolicy::Fifo, 1), run(QueuePolicy::Fifo, 16));
    let sptf = (run(QueuePolicy::Sptf, 1), run(QueuePolicy::Sptf, 16));
    let scan = run(QueuePolicy::Scan, 16);
    println!("one disk: FIFO {fifo:.1?}, SPTF {sptf:.1?}, SCAN@16 {scan:.1} IOPS at depths 1 and 16");
    // FIFO gains nothing from depth (same random seeks), the positional policies do.
    assert!((fifo.1 / fifo.0 - 1.0).abs() < 0.03, "{fifo:?}");
    assert!(sptf.1 > 1.25 * sptf.0, "{sptf:?}");
    assert!(scan > 1.15 * fifo.1, "{scan} vs {fifo:?}");
}

/// A device wrapper that fails if it is ever submitted to without a free slot, and
/// records the most requests it ever held.
struct Strict<D> {
    inner: D,
    max_outstanding: usize,
    capacity: usize,
}

impl<D: Device> Strict<D> {
    fn new(inner: D) -> Self {
        let capacity = inner.state().free_slots;
        Strict { inner, max_outstanding: 0, capacity }
    }
}

impl<D: Device> Device for Strict<D> {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn state(&self) -> DeviceState {
        self.inner.state()
    }
    fn submit(&mut self, req: Request, now: Nanos, rng: &mut SimRng) {
        assert!(self.inner.state().free_slots > 0, "{} over-submitted at {now}", self.inner.name());
        self.inner.submit(req, now, rng);
        self.max_outstanding = self.max_outstanding.max(self.inner.state().outstanding);
    }
    fn next_completion(&self) -> Option<Nanos> {
        self.inner.next_completion()
    }
    fn pop_completion(&mut self, rng: &mut SimRng) -> Option<Completion> {
        self.inner.pop_completion(rng)
    }
}

/// SSD (5,000 IOPS exponential, one slot) over an HDD (one desktop disk, 4 slots),
/// 16 slots in total, so both tiers' FIFOs are exercised.
fn ssd_over_hdd(hit_ratio: f64) -> Tiered<Strict<Exponential>, Strict<Disk>> {
    let ssd = Strict::new(Exponential::new(5000.0).unwrap());
    let hdd = Strict::new(Disk::new(DiskProfile::desktop_7200(), QueuePolicy::Scan).unwrap().with_depth(4).unwrap());
    Tiered::new(ssd, hdd, hit_ratio).unwrap().with_depth(16).unwrap()
}

#[test]
fn tiered_respects_trace_targets() {
    // Every third request is pinned to the slow tier, the rest to the fast one; the hit
    // ratio (1.0) must not override a target.
    let mut rng = SimRng::new(3);
    let mut t = 0;
    let trace: Vec<Request> = (0..20_000u64)
        .map(|i| {
            t += rng.exp(1e9 / 500.0) as Nanos;
            let target = if i % 3 == 0 { 1 } else { 0 };
            Request { offset: rng.below(1 << 20) * 4096, target, ..Request::new(i, 0, t, 4096) }
        })
        .collect();
    let mut dev = ssd_over_hdd(1.0);
    let cfg = SimConfig { seed: SIM_SEED, keep_requests: true, ..Default::default() };
    let r = simulate(trace, &[], &mut Fcfs::new(), &mut dev, &cfg).unwrap();
    assert_eq!(r.unfinished, 0);
    let log = r.log.unwrap();
    assert_eq!(log.len(), 20_000);
    for (id, target) in log.id.iter().zip(&log.target) {
        assert_eq!(*target, if id % 3 == 0 { 1 } else { 0 }, "request {id}");
    }
    assert_eq!(dev.routed(), [13_333, 6_667]);
    assert!(dev.fast().max_outstanding <= dev.fast().capacity && dev.slow().max_outstanding <= dev.slow().capacity);
}

#[test]
fn tiered_hit_ratio_splits_traffic_and_never_oversubmits_a_tier() {
    // 200 IOPS offered, 80 % hits: the HDD sees ~40 IOPS (about half its capacity),
    // bursts still fill its 4 slots and its FIFO.
    const REQUESTS: u64 = 200_000;
    let arrivals =
        Poisson::new(200.0, REQUESTS, Nanos::MAX, Shape { span_bytes: 8 << 30, ..Default::default() }, ARRIVAL_SEED)
            .unwrap();
    let mut dev = ssd_over_hdd(0.8);
    let cfg = SimConfig { seed: SIM_SEED, keep_requests: true, ..Default::default() };
    let r = simulate(arrivals, &[], &mut Fcfs::new(), &mut dev, &cfg).unwrap();
    assert_eq!(r.unfinished, 0);
    let log = r.log.unwrap();
    let fast = log.target.iter().filter(|&&t| t == 0).count() as f64 / log.len() as f64;
    println!(
        "tiered: {:.2} % to the fast tier; most outstanding: fast {} / {}, slow {} / {}",
        fast * 100.0,
        dev.fast().max_outstanding,
        dev.fast().capacity,
        dev.slow().max_outstanding,
        dev.slow().capacity
    );
    // Binomial standard deviation sqrt(0.16 / 2e5) ≈ 0.09 %.
    assert!((fast - 0.8).abs() < 0.005, "fast fraction {fast}");
    assert_eq!(dev.routed()[0] as f64 / REQUESTS as f64, fast);
    assert_eq!(dev.slow().max_outstanding, dev.slow().capacity, "the slow tier's slots were never all used");
    assert!(dev.fast().max_outstanding <= dev.fast().capacity);
    // A response is never shorter than the service it got: dispatch ≤ finish, arrival ≤ dispatch.
    assert!(log.arrival.iter().zip(&log.dispatch).zip(&log.finish).all(|((a, d), f)| a <= d && d <= f));
}
