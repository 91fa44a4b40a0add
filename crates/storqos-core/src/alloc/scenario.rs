//! Seed 004 §5.1 simulation set-up: backlogged clients on an SSD + HDD array, through
//! the two-level scheduler ([`BaaScheduler`]) with BAA, DRF or FQ weights.
//!
//! Seed 004 §5 ("Each request is randomly assigned to the SSD or HD based on its hit
//! ratio. The request service time is an exponentially distributed random variable with
//! mean equal to the reciprocal of the device IOPS capacity"); §5.1 Figs. 3–4 (static
//! hit ratios) and Fig. 5 (client 1's hit ratio falls from 0.45 to 0.2 at 510 s).
//!
//! Each client is a closed-loop tenant keeping [`TieredScenario::outstanding`] requests
//! queued (always backlogged). The array is a [`Tiered`] device over two [`Exponential`]
//! servers holding at most [`TieredScenario::depth`] requests. A thin device wrapper
//! draws each request's tier from its client's hit ratio *at dispatch time* (piecewise
//! constant phases) and counts completions per client and per tier in sample buckets.

use super::{Policy, SSD};
use crate::device::{Device, DeviceState};
use crate::devices::tiered::{FAST, SLOW};
use crate::devices::{Exponential, Tiered};
use crate::error::{config, Result};
use crate::request::{Completion, Request};
use crate::rng::SimRng;
use crate::schedulers::baa_sched::{Alarm, BaaScheduler};
use crate::sim::{simulate, ClosedClient, SimConfig};
use crate::time::{Nanos, NS_PER_SEC};

/// One experiment: devices, clients' hit-ratio phases, policy and the scheduler's timing.
#[derive(Clone, Debug, PartialEq)]
pub struct TieredScenario {
    /// HDD capacity (IOPS).
    pub hdd_iops: f64,
    /// SSD capacity (IOPS).
    pub ssd_iops: f64,
    /// Per client: `(from, hit ratio)` phases in time order, the first from 0.
    pub hit_phases: Vec<Vec<(Nanos, f64)>>,
    /// Weight policy.
    pub policy: Policy,
    /// Hit-ratio monitor window (ns).
    pub window: Nanos,
    /// Re-allocation period (ns).
    pub period: Nanos,
    /// Optional utilisation alarm.
    pub alarm: Option<Alarm>,
    /// Start from the allocation for the first phase's hit ratios (else equal weights
    /// until the first period ends).
    pub initial_allocation: bool,
    /// Requests each client keeps queued.
    pub outstanding: u32,
    /// Requests the array keeps outstanding (both tiers together).
    pub depth: usize,
    /// Simulated time (ns).
    pub duration: Nanos,
    /// Length of a sample bucket of the output series (ns).
    pub sample: Nanos,
    /// Seed.
    pub seed: u64,
}

/// Per-sample series of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScenarioResult {
    /// Start of each sample (ns).
    pub start: Vec<Nanos>,
    /// `throughput[s][i]`: IOPS of client `i` in sample `s`.
    pub throughput: Vec<Vec<f64>>,
    /// `utilisation[s] = [hdd, ssd]`: busy fraction (served IOPS / capacity).
    pub utilisation: Vec<[f64; 2]>,
    /// Allocator runs.
    pub recomputations: u64,
}

impl ScenarioResult {
    /// Mean of each client's throughput and of each device's utilisation over the samples
    /// starting at or after `from`.
    pub fn steady_state(&self, from: Nanos) -> (Vec<f64>, [f64; 2]) {
        let idx: Vec<usize> = (0..self.start.len()).filter(|&s| self.start[s] >= from).collect();
        let n = idx.len().max(1) as f64;
        let clients = self.throughput.first().map_or(0, |r| r.len());
        let tp = (0..clients).map(|i| idx.iter().map(|&s| self.throughput[s][i]).sum::<f64>() / n).collect();
        let u = [0, 1].map(|k| idx.iter().map(|&s| self.utilisation[s][k]).sum::<f64>() / n);
        (tp, u)
    }
}

/// The tiered array with per-client, time-varying hit ratios and sample counters.
struct PhasedArray {
    inner: Tiered<Exponential, Exponential>,
    phases: Vec<Vec<(Nanos, f64)>>,
    sample: Nanos,
    /// `[sample][client]` completions.
    per_client: Vec<Vec<u64>>,
    /// `[sample][hdd, ssd]` completions.
    per_tier: Vec<[u64; 2]>,
}

impl PhasedArray {
    fn hit_ratio(&self, tenant: u32, now: Nanos) -> f64 {
        let ph = &self.phases[tenant as usize];
        ph.iter().rev().find(|(from, _)| *from <= now).map_or(ph[0].1, |p| p.1)
    }
}

impl Device for PhasedArray {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn state(&self) -> DeviceState {
        self.inner.state()
    }
    fn submit(&mut self, req: Request, now: Nanos, rng: &mut SimRng) {
        let h = self.hit_ratio(req.tenant, now);
        let target = if rng.bernoulli(h) { FAST } else { SLOW };
        self.inner.submit(Request { target, ..req }, now, rng)
    }
    fn next_completion(&self) -> Option<Nanos> {
        self.inner.next_completion()
    }
    fn pop_completion(&mut self, rng: &mut SimRng) -> Option<Completion> {
        let c = self.inner.pop_completion(rng)?;
        let s = (c.finish / self.sample) as usize;
        if s >= self.per_tier.len() {
            self.per_tier.resize(s + 1, [0, 0]);
            self.per_client.resize(s + 1, vec![0; self.phases.len()]);
        }
        // Tier index in alloc order: HDD = 0, SSD = 1.
        self.per_tier[s][if c.req.target == FAST { SSD } else { 0 }] += 1;
        self.per_client[s][c.req.tenant as usize] += 1;
        Some(c)
    }
}

/// Run `sc`.
pub fn run(sc: &TieredScenario) -> Result<ScenarioResult> {
    if sc.hit_phases.is_empty() || sc.hit_phases.iter().any(|p| p.is_empty()) {
        return config("scenario: every client needs at least one hit-ratio phase");
    }
    if sc.sample == 0 || sc.duration < sc.sample || sc.outstanding == 0 {
        return config("scenario: sample must be > 0 and <= duration, outstanding >= 1");
    }
    let mut sched = BaaScheduler::new(sc.hdd_iops, sc.ssd_iops, sc.policy, sc.window, sc.period)?;
    if sc.initial_allocation {
        let first: Vec<f64> = sc.hit_phases.iter().map(|p| p[0].1).collect();
        sched = sched.with_initial_hit_ratios(&first)?;
    }
    if let Some(a) = sc.alarm {
        sched = sched.with_alarm(a)?;
    }
    let tiered =
        Tiered::new(Exponential::new(sc.ssd_iops)?, Exponential::new(sc.hdd_iops)?, 0.0)?.with_depth(sc.depth)?;
    let mut dev = PhasedArray {
        inner: tiered,
        phases: sc.hit_phases.clone(),
        sample: sc.sample,
        per_client: Vec::new(),
        per_tier: Vec::new(),
    };
    for (i, p) in sc.hit_phases.iter().enumerate() {
        for &(_, h) in p {
            if !(0.0..=1.0).contains(&h) {
                return config(format!("scenario: client {i}'s hit ratio must lie in [0, 1], got {h}"));
            }
        }
    }
    let clients: Vec<ClosedClient> = (0..sc.hit_phases.len() as u32)
        .map(|t| ClosedClient { tenant: t, outstanding: sc.outstanding, stop: sc.duration, ..Default::default() })
        .collect();
    let cfg = SimConfig { seed: sc.seed, window: sc.sample, keep_requests: false, until: Some(sc.duration) };
    simulate(std::iter::empty(), &clients, &mut sched, &mut dev, &cfg)?;
    let samples = (sc.duration / sc.sample) as usize; // whole samples only
    let secs = sc.sample as f64 / NS_PER_SEC as f64;
    dev.per_tier.resize(samples.max(dev.per_tier.len()), [0, 0]);
    dev.per_client.resize(samples.max(dev.per_client.len()), vec![0; sc.hit_phases.len()]);
    let mut out = ScenarioResult { recomputations: sched.recomputations(), ..Default::default() };
    for s in 0..samples {
        out.start.push(s as Nanos * sc.sample);
        out.throughput.push(dev.per_client[s].iter().map(|&c| c as f64 / secs).collect());
        let t = dev.per_tier[s];
        out.utilisation.push([t[0] as f64 / (sc.hdd_iops * secs), t[1] as f64 / (sc.ssd_iops * secs)]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::{allocate, Problem};

    #[test]
    fn example_i_simulation_meets_the_allocator() {
        // Example I through the two-level scheduler: BAA 100 / 500, both devices ~full.
        let s = NS_PER_SEC;
        let sc = TieredScenario {
            hdd_iops: 100.0,
            ssd_iops: 500.0,
            hit_phases: vec![vec![(0, 0.5)], vec![(0, 0.9)]],
            policy: Policy::Baa,
            window: 60 * s,
            period: 100 * s,
            alarm: None,
            initial_allocation: true,
            outstanding: 64,
            depth: 64,
            duration: 200 * s,
            sample: 10 * s,
            seed: 4,
        };
        let r = run(&sc).unwrap();
        let (tp, u) = r.steady_state(20 * s);
        let want = allocate(&Problem::two_tier(100.0, 500.0, &[0.5, 0.9]).unwrap(), Policy::Baa).unwrap();
        for (x, w) in tp.iter().zip(&want.throughput) {
            assert!((x / w - 1.0).abs() < 0.05, "{tp:?} vs {:?}", want.throughput);
        }
        assert!(u[0] > 0.9 && u[1] > 0.9, "{u:?}");
        assert_eq!(r.recomputations, 3); // initial + 100 s + 200 s
    }
}
