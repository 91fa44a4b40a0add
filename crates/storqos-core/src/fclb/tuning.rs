//! Profiling the storage and tuning the FCLB controller (seed 003 §4.2 and §4.4).
//!
//! **Profiling** (§4.2, Fig. 4; §4.3, Fig. 5): drive the simulated storage with the mixed
//! workload at a total rate `T` — one stream of evenly spaced requests (as bucket-paced
//! releases are), each belonging to workload `i` "with a probability of IOPS_i/T" and
//! landing at a random offset — through the chosen back end, and measure the achieved
//! IOPS and each workload's 95th percentile response time ([`Fclb`] in [`Mode::Off`]
//! is the monitor). Random labels matter: two separately paced streams whose periods
//! divide each other would collide at every tick of the slower one. Sweeping `T`
//! gives the IOPS → p95 curve and its **stable area**: the rates at which the storage
//! keeps up with the offered load ([`STABLE_THROUGHPUT_FRACTION`]) and the p95 stays
//! within [`STABLE_RT_GROWTH`] times its light-load value ("the growth of response times
//! is gradual according to the increase of IOPS in this area").
//!
//! **Plant gain** (§4.4: "we approximate G by running a set of shared storage profiling
//! experiments"): the least-squares slope of p95 (ms) over offered IOPS at
//! [`GAIN_PROBE_OFFSETS`] around the operating point.
//!
//! **Pole placement** (§4.4, Eq. 7): `p = 1 − K·G` ⇒ `K = (1 − p)/G`; the pole must lie
//! in (−1, 1) (Eq. 8). "In the case of shared storage having a non-linear property ...
//! we determine that the location of the pole is close to 1 in order to stabilize the
//! system": [`DEFAULT_POLE`].

/// Pole placement lives with the controller it tunes ([`crate::fclb::controller`]).
pub use crate::fclb::controller::{pole_placement, Tuning, DEFAULT_POLE, PAPER_PLANT_GAIN_MS_PER_IOPS};

use crate::error::{config, Result};
use crate::fclb::gate::{Fclb, Mode, WorkloadSpec};
use crate::request::Request;
use crate::rng::SimRng;
use crate::sim::{simulate, SimConfig};
use crate::spec::{DeviceSpec, SchedulerSpec};
use crate::time::{Nanos, NS_PER_MS, NS_PER_SEC};

/// Length of one profiling run (simulated): 60 s gives ~4,000 requests at the seed disk's
/// 60–80 IOPS, enough for a p95 to within a few percent.
pub const PROFILE_DURATION: Nanos = 60 * NS_PER_SEC;

/// Salt mixed into the run's seed for the profiling stream's labels and offsets (so the
/// stream does not replay the device's own random draws).
pub const PROFILE_STREAM_SALT: u64 = 0x5EED_0003;

/// A rate is in the stable area only if the storage serves at least this fraction of it.
pub const STABLE_THROUGHPUT_FRACTION: f64 = 0.98;

/// ... and if its p95 is at most this multiple of the p95 at the lowest profiled rate.
pub const STABLE_RT_GROWTH: f64 = 3.0;

/// Relative offsets around the operating point at which the plant gain is probed.
/// ±4 % keeps the probes on the linear stretch of a disk's curve near its knee.
pub const GAIN_PROBE_OFFSETS: [f64; 5] = [-0.04, -0.02, 0.0, 0.02, 0.04];

/// One workload of a profiled mix: its share of the rate and its request size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MixEntry {
    /// Demanded IOPS_i (sets the share IOPS_i/ΣIOPS).
    pub iops: f64,
    /// Request size (bytes).
    pub bytes: u32,
}

/// What a profile runs on.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileConfig {
    /// The storage.
    pub device: DeviceSpec,
    /// The back end behind the buckets (e.g. YFQ with the run's weights).
    pub backend: SchedulerSpec,
    /// Simulated length of each run.
    pub duration: Nanos,
    /// Seed of each run.
    pub seed: u64,
    /// Offsets uniform over this many bytes (random access).
    pub span_bytes: u64,
}

impl ProfileConfig {
    /// Profile `device` behind `backend` for [`PROFILE_DURATION`] with random offsets
    /// over `span_bytes`.
    pub fn new(device: DeviceSpec, backend: SchedulerSpec, span_bytes: u64) -> Self {
        ProfileConfig { device, backend, duration: PROFILE_DURATION, seed: 1, span_bytes }
    }
}

/// One profiled rate.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfilePoint {
    /// Offered total rate T (IOPS).
    pub offered_iops: f64,
    /// Achieved total throughput (IOPS).
    pub achieved_iops: f64,
    /// p95 response time of each workload (ns).
    pub p95_ns: Vec<Nanos>,
    /// p95 over all requests (ns).
    pub p95_all_ns: Nanos,
    /// Mean response time over all requests (ns).
    pub mean_ns: f64,
}

/// Drive the mix at total rate `total_iops` and measure it.
pub fn profile_point(cfg: &ProfileConfig, mix: &[MixEntry], total_iops: f64) -> Result<ProfilePoint> {
    if mix.is_empty() {
        return config("profile: the mix has no workloads");
    }
    if !(total_iops > 0.0 && total_iops.is_finite()) {
        return config(format!("profile: rate must be > 0 IOPS, got {total_iops}"));
    }
    let sum: f64 = mix.iter().map(|m| m.iops).sum();
    if !(sum > 0.0 && sum.is_finite()) || mix.iter().any(|m| m.iops.is_nan() || m.iops <= 0.0 || m.bytes == 0) {
        return config("profile: every workload needs IOPS > 0 and a size > 0 bytes");
    }
    // Workload i's demand, only for monitoring (mode `off`: no bucket, no control).
    let workloads: Vec<WorkloadSpec> = mix.iter().map(|m| WorkloadSpec::new(m.iops, Nanos::MAX)).collect();
    let mut sched = Fclb::new(cfg.backend.build()?, &workloads, 0.0, Mode::Off)?;
    // One stream at T, evenly spaced (as bucket-paced releases are); each request
    // belongs to workload i with probability IOPS_i / ΣIOPS and lands at a random offset.
    let n = (total_iops * cfg.duration as f64 / NS_PER_SEC as f64).floor() as u64;
    let mut rng = SimRng::new(cfg.seed ^ PROFILE_STREAM_SALT);
    let cum: Vec<f64> = mix
        .iter()
        .scan(0.0, |acc, m| {
            *acc += m.iops / sum;
            Some(*acc)
        })
        .collect();
    let requests: Vec<Request> = (0..n)
        .map(|k| {
            let u = rng.uniform();
            let i = cum.iter().position(|&c| u < c).unwrap_or(mix.len() - 1);
            let bytes = mix[i].bytes;
            let blocks = cfg.span_bytes / bytes as u64;
            let mut r = Request::new(k, i as u32, (k as f64 * NS_PER_SEC as f64 / total_iops).round() as Nanos, bytes);
            r.offset = if blocks > 1 { rng.below(blocks) * bytes as u64 } else { 0 };
            r
        })
        .collect();
    let mut dev = cfg.device.build()?;
    let sim = SimConfig { seed: cfg.seed, until: Some(cfg.duration), ..SimConfig::default() };
    simulate(requests, &[], &mut sched, &mut dev, &sim)?;
    let mut all = crate::sim::GroupSummary::default();
    let mut p95 = Vec::with_capacity(mix.len());
    for i in 0..mix.len() {
        let s = sched.monitor(i).summary();
        p95.push(s.quantile(0.95));
        all.merge(&s);
    }
    // The run stops with the offered period: beyond the stable area the backlog left
    // over shows as achieved < offered.
    let achieved = all.completed;
    Ok(ProfilePoint {
        offered_iops: total_iops,
        achieved_iops: achieved as f64 * NS_PER_SEC as f64 / cfg.duration as f64,
        p95_ns: p95,
        p95_all_ns: all.quantile(0.95),
        mean_ns: all.mean_response(),
    })
}

/// Profile the mix at each rate of `rates` (IOPS, ascending).
pub fn profile_curve(cfg: &ProfileConfig, mix: &[MixEntry], rates: &[f64]) -> Result<Vec<ProfilePoint>> {
    if rates.windows(2).any(|w| w[0] >= w[1]) {
        return config("profile: rates must be strictly ascending");
    }
    rates.iter().map(|&r| profile_point(cfg, mix, r)).collect()
}

/// The end of the stable area of a profiled curve: the largest rate such that it and
/// every lower rate keep [`STABLE_THROUGHPUT_FRACTION`] of the offered load and a p95
/// within [`STABLE_RT_GROWTH`] × the first point's. `None` if even the first is not.
pub fn stable_limit(curve: &[ProfilePoint]) -> Option<f64> {
    let base = curve.first()?.p95_all_ns as f64;
    let mut last = None;
    for p in curve {
        let keeps_up = p.achieved_iops >= STABLE_THROUGHPUT_FRACTION * p.offered_iops;
        let gradual = p.p95_all_ns as f64 <= STABLE_RT_GROWTH * base;
        if !(keeps_up && gradual) {
            break;
        }
        last = Some(p.offered_iops);
    }
    last
}

/// The operating point of the closed loop on a profiled curve: the rate at which the
/// p95 (all requests) reaches `reference_ns`, interpolated linearly between the two
/// profiled rates around it. `None` if the curve never reaches it.
pub fn operating_point(curve: &[ProfilePoint], reference_ns: Nanos) -> Option<f64> {
    let r = reference_ns as f64;
    curve.windows(2).find_map(|w| {
        let (a, b) = (w[0].p95_all_ns as f64, w[1].p95_all_ns as f64);
        (a <= r && r <= b && b > a)
            .then(|| w[0].offered_iops + (r - a) / (b - a) * (w[1].offered_iops - w[0].offered_iops))
    })
}

/// A plant-gain estimate and the points it was fitted to.
#[derive(Clone, Debug, PartialEq)]
pub struct GainEstimate {
    /// G: least-squares slope of p95 over offered rate (ms per IOPS).
    pub gain_ms_per_iops: f64,
    /// Operating point (IOPS).
    pub operating_iops: f64,
    /// p95 at the operating point by the fitted line (ms).
    pub rt0_ms: f64,
    /// The probes.
    pub points: Vec<ProfilePoint>,
}

/// Estimate G around `operating_iops` (total) by probing at [`GAIN_PROBE_OFFSETS`].
pub fn estimate_gain(cfg: &ProfileConfig, mix: &[MixEntry], operating_iops: f64) -> Result<GainEstimate> {
    let rates: Vec<f64> = GAIN_PROBE_OFFSETS.iter().map(|o| operating_iops * (1.0 + o)).collect();
    let points = profile_curve(cfg, mix, &rates)?;
    let xs: Vec<f64> = points.iter().map(|p| p.offered_iops).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.p95_all_ns as f64 / NS_PER_MS as f64).collect();
    let n = xs.len() as f64;
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    let g = sxy / sxx;
    if !(g > 0.0 && g.is_finite()) {
        return config(format!(
            "tuning: the p95 response time does not rise with the rate around {operating_iops:.1} IOPS \
             (fitted G = {g:.4} ms/IOPS): profile nearer the operating point or run longer"
        ));
    }
    Ok(GainEstimate { gain_ms_per_iops: g, operating_iops, rt0_ms: my + g * (operating_iops - mx), points })
}

/// Profile G around `operating_iops` and place the pole: the tuning the paper's §4.4
/// does by hand.
pub fn tune(cfg: &ProfileConfig, mix: &[MixEntry], operating_iops: f64, pole: f64) -> Result<(Tuning, GainEstimate)> {
    let est = estimate_gain(cfg, mix, operating_iops)?;
    Ok((pole_placement(est.gain_ms_per_iops, pole)?, est))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_limit_stops_at_the_first_unstable_rate() {
        let pt = |o: f64, a: f64, p: u64| ProfilePoint {
            offered_iops: o,
            achieved_iops: a,
            p95_ns: vec![p],
            p95_all_ns: p,
            mean_ns: 0.0,
        };
        let curve =
            [pt(10.0, 10.0, 20), pt(50.0, 49.5, 30), pt(70.0, 69.0, 55), pt(80.0, 76.0, 300), pt(90.0, 90.0, 30)];
        assert_eq!(stable_limit(&curve), Some(70.0));
        assert_eq!(stable_limit(&[]), None);
    }
}
