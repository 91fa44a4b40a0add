//! The experiments of seed 003 §4 on our simulated storage: the two workloads of Table 2,
//! the buckets of Table 1, YFQ weights 2:1, one random-read disk served FIFO, and the
//! four cases of §4.5, each run with FCLB and, in the same conditions, with plain YFQ
//! (no bucket) and with a fixed (non-feedback) leaky bucket.
//!
//! | | W1 | W2 |
//! |---|---|---|
//! | size | 4 KiB | 4 KiB |
//! | IOPS_i | 40 | 20 |
//! | RT_i | 35 ms | 38 ms |
//! | bucket b_i | 8 | 4 |
//!
//! The disk is [`DiskProfile::desktop_7200`](crate::devices::DiskProfile::desktop_7200)
//! (the seed's IBM DNES-309170 is a 7,200 RPM drive), FIFO queue, random 4 KiB reads
//! over the whole 9.1 GB; its stable area ends near 75 IOPS like the seed's Fig. 4.
//!
//! Workloads are closed-loop ("two competing I/O workloads based on a closed model",
//! §4.1): each keeps [`CLIENT_OUTSTANDING`] reads in flight with no think time, so it
//! always wants more than its demanded IOPS and the bucket decides its pace. Cases
//! (run length [`RUN_LENGTH`]):
//! 1. one workload inactive, the other alone;
//! 2. a step: one workload starts at [`STEP_AT`] (30 s);
//! 3. a pulse: one workload is on for [`PULSE_ON`] and off for [`PULSE_OFF`] (5 s each);
//! 4. both active.
//!
//! Metrics: per workload the throughput over the 1 s windows in which it is active,
//! the fraction of its completions whose response time (from its bucket) exceeded RT_i
//! ("violation"), and the throughput ratio W1 : W2.

use crate::devices::disk::SEED_DISK_CAPACITY_BYTES;
use crate::devices::QueuePolicy;
use crate::error::{config, Result};
use crate::fclb::admission::{admit, AdmissionReport, Candidate};
use crate::fclb::gate::{FclbParams, Mode, WorkloadSpec};
use crate::fclb::tuning::MixEntry;
use crate::fclb::tuning::{operating_point, tune, GainEstimate, ProfileConfig, Tuning, DEFAULT_POLE};
use crate::schedulers::tags::{CostModel, FlowKey};
use crate::sim::summary::{GaugeSeries, WindowSeries};
use crate::sim::{simulate, ClosedClient, SimConfig};
use crate::spec::{DeviceSpec, SchedulerSpec};
use crate::time::{Nanos, NS_PER_MS, NS_PER_SEC};

/// W1's demanded IOPS (Table 2).
pub const W1_IOPS: f64 = 40.0;
/// W1's demanded response time (Table 2): 35 ms.
pub const W1_RT: Nanos = 35 * NS_PER_MS;
/// W1's bucket size (Table 1).
pub const W1_BUCKET: f64 = 8.0;
/// W2's demanded IOPS (Table 2).
pub const W2_IOPS: f64 = 20.0;
/// W2's demanded response time (Table 2): 38 ms.
pub const W2_RT: Nanos = 38 * NS_PER_MS;
/// W2's bucket size (Table 1).
pub const W2_BUCKET: f64 = 4.0;
/// Request size of both workloads (Table 2: 4 KB).
pub const REQUEST_BYTES: u32 = 4096;
/// YFQ weights φ1 : φ2 (§4.1: "We also set YFQ weight to φ1:φ2=2:1").
pub const YFQ_WEIGHTS: [f64; 2] = [2.0, 1.0];
/// Reads each closed-loop workload keeps in flight: enough that it always waits at its
/// bucket (so the bucket sets its pace) at any rate the disk can serve.
pub const CLIENT_OUTSTANDING: u32 = 8;
/// Length of every run (the seed's plots span about a minute).
pub const RUN_LENGTH: Nanos = 60 * NS_PER_SEC;
/// Case 2: the late workload starts after 30 s (§4.5).
pub const STEP_AT: Nanos = 30 * NS_PER_SEC;
/// Case 3: "one I/O workload repeats on for 5 seconds" ...
pub const PULSE_ON: Nanos = 5 * NS_PER_SEC;
/// ... "and off for 5 seconds" (§4.5).
pub const PULSE_OFF: Nanos = 5 * NS_PER_SEC;
/// Steady state starts here: from the demanded rate, the loop needs about 18 periods at
/// [`DEFAULT_POLE`] to hand an idle workload's surplus to the other (case 1), so
/// steady-state throughputs are taken over the windows after 20 s.
pub const SETTLE: Nanos = 20 * NS_PER_SEC;
/// The profiled curve runs from T = Σ IOPS_i upwards in steps of 5 % of T ...
pub const CURVE_STEP: f64 = 0.05;
/// ... over this many rates (T to 1.45·T: 60 to 87 IOPS, past the seed disk's knee).
pub const CURVE_POINTS: usize = 10;

/// The seed's disk: 7,200 RPM profile, FIFO queue.
pub fn device() -> DeviceSpec {
    DeviceSpec::Disk { profile: Some("desktop-7200".into()), queue: QueuePolicy::Fifo, depth: None, capacity: None }
}

/// The seed's back end: YFQ with weights 2:1, one request at a time.
pub fn backend() -> SchedulerSpec {
    SchedulerSpec::Yfq { weights: YFQ_WEIGHTS.to_vec(), batch: None, by: FlowKey::Tenant, cost: CostModel::Iops }
}

/// Profile the seed's disk behind the seed's back end.
pub fn profile_config() -> ProfileConfig {
    ProfileConfig::new(device(), backend(), SEED_DISK_CAPACITY_BYTES)
}

/// W1 and W2 as admission candidates.
pub fn candidates() -> Vec<Candidate> {
    vec![
        Candidate { name: "W1".into(), iops: W1_IOPS, rt_ns: W1_RT, bytes: REQUEST_BYTES },
        Candidate { name: "W2".into(), iops: W2_IOPS, rt_ns: W2_RT, bytes: REQUEST_BYTES },
    ]
}

/// One of the four cases of §4.5. `0` is W1, `1` is W2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Case {
    /// Case 1: only workload `active` runs.
    OneInactive {
        /// The workload that runs.
        active: usize,
    },
    /// Case 2: workload `late` starts at [`STEP_AT`], the other runs throughout.
    Step {
        /// The workload that starts late.
        late: usize,
    },
    /// Case 3: workload `pulsed` is on/off 5 s/5 s, the other runs throughout.
    Pulse {
        /// The pulsing workload.
        pulsed: usize,
    },
    /// Case 4: both run throughout.
    BothActive,
}

impl Case {
    /// All seven runs: cases 1–3 with each workload in the special role, and case 4.
    pub const ALL: [Case; 7] = [
        Case::OneInactive { active: 0 },
        Case::OneInactive { active: 1 },
        Case::Step { late: 1 },
        Case::Step { late: 0 },
        Case::Pulse { pulsed: 1 },
        Case::Pulse { pulsed: 0 },
        Case::BothActive,
    ];

    /// Short name, e.g. `"inactive-w2"`, `"step-w1"`, `"pulse-w2"`, `"both"`.
    pub fn name(&self) -> String {
        let w = |i: &usize| format!("w{}", i + 1);
        match self {
            Case::OneInactive { active } => format!("inactive-{}", w(&(1 - active))),
            Case::Step { late } => format!("step-{}", w(late)),
            Case::Pulse { pulsed } => format!("pulse-{}", w(pulsed)),
            Case::BothActive => "both".into(),
        }
    }

    /// Parse a [`Case::name`].
    pub fn parse(s: &str) -> Result<Case> {
        Case::ALL.into_iter().find(|c| c.name() == s).map_or_else(
            || config(format!("unknown case {s:?} (known: {})", Case::ALL.map(|c| c.name()).join(", "))),
            Ok,
        )
    }

    /// The closed-loop clients of the case (tenant i = workload i).
    pub fn clients(&self) -> Vec<ClosedClient> {
        let base = |tenant: u32| ClosedClient {
            tenant,
            outstanding: CLIENT_OUTSTANDING,
            bytes: REQUEST_BYTES,
            span_bytes: SEED_DISK_CAPACITY_BYTES,
            stop: RUN_LENGTH,
            ..ClosedClient::default()
        };
        match *self {
            Case::OneInactive { active } => vec![base(active as u32)],
            Case::Step { late } => {
                let mut c = vec![base(0), base(1)];
                c[late].start = STEP_AT;
                c
            }
            Case::Pulse { pulsed } => {
                let mut c = vec![base(0), base(1)];
                c[pulsed].on_off = Some((PULSE_ON, PULSE_OFF));
                c
            }
            Case::BothActive => vec![base(0), base(1)],
        }
    }
}

/// Which policy a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// FCLB over YFQ.
    Fclb,
    /// A fixed leaky bucket (rates = demanded IOPS) over YFQ.
    FixedBucket,
    /// YFQ alone.
    PlainYfq,
}

impl Policy {
    /// All three, FCLB first.
    pub const ALL: [Policy; 3] = [Policy::Fclb, Policy::FixedBucket, Policy::PlainYfq];

    /// Short name: `fclb`, `fixed-bucket`, `yfq`.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Fclb => "fclb",
            Policy::FixedBucket => "fixed-bucket",
            Policy::PlainYfq => "yfq",
        }
    }

    /// Parse a [`Policy::name`].
    pub fn parse(s: &str) -> Result<Policy> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .map_or_else(|| config(format!("unknown policy {s:?} (known: fclb, fixed-bucket, yfq)")), Ok)
    }

    fn mode(&self) -> Mode {
        match self {
            Policy::Fclb => Mode::Feedback,
            Policy::FixedBucket => Mode::Fixed,
            Policy::PlainYfq => Mode::Off,
        }
    }
}

/// The controller's configuration for the runs: workloads with their references, K.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    /// W1, W2 (with references RT_ref,i and buckets).
    pub workloads: Vec<WorkloadSpec>,
    /// Controller gain K (IOPS/ms).
    pub gain_iops_per_ms: f64,
    /// Seed of the runs.
    pub seed: u64,
}

/// How the setup was derived (for reports).
#[derive(Clone, Debug, PartialEq)]
pub struct Derivation {
    /// Admission control of W1 + W2 (Table 3).
    pub admission: AdmissionReport,
    /// Pole placement.
    pub tuning: Tuning,
    /// The plant-gain probes.
    pub gain: GainEstimate,
}

impl Setup {
    /// The paper's pipeline: admission control of W1 + W2 on the disk (§4.3) with the
    /// IOPS → p95 curve from T upwards, references from it
    /// ([`AdmissionRow::reference_ns`](crate::fclb::AdmissionRow::reference_ns)), G
    /// profiled around the operating point where the curve reaches the lowest
    /// reference (§3.2: the plant is linearised around its equilibrium), K from `pole`.
    pub fn derive(pole: f64) -> Result<(Setup, Derivation)> {
        let cfg = profile_config();
        let cands = candidates();
        let target: f64 = cands.iter().map(|c| c.iops).sum();
        let rates: Vec<f64> = (0..CURVE_POINTS).map(|k| target * (1.0 + CURVE_STEP * k as f64)).collect();
        let admission = admit(&cfg, &cands, &rates)?;
        if !admission.admitted {
            return config("seed 003 workloads were not admitted on the simulated disk");
        }
        let workloads = admission.workload_specs(&[Some(W1_BUCKET), Some(W2_BUCKET)]);
        let lowest_ref = workloads.iter().filter_map(|w| w.ref_ns).min().expect("two workloads");
        let op = operating_point(&admission.curve, lowest_ref).or(admission.stable_limit_iops).unwrap_or(target);
        let mix: Vec<MixEntry> = cands.iter().map(|c| MixEntry { iops: c.iops, bytes: c.bytes }).collect();
        let (tuning, gain) = tune(&cfg, &mix, op, pole)?;
        Ok((
            Setup { workloads, gain_iops_per_ms: tuning.gain_iops_per_ms, seed: 1 },
            Derivation { admission, tuning, gain },
        ))
    }

    /// [`Setup::derive`] with [`DEFAULT_POLE`].
    pub fn derive_default() -> Result<(Setup, Derivation)> {
        Setup::derive(DEFAULT_POLE)
    }

    fn params(&self, policy: Policy) -> FclbParams {
        FclbParams {
            workloads: self.workloads.clone(),
            gain_iops_per_ms: Some(crate::fclb::Gain::IopsPerMs(self.gain_iops_per_ms)),
            mode: policy.mode(),
            ..FclbParams::default()
        }
    }

    /// The policy spec of a run (JSON-able).
    pub fn scheduler_spec(&self, policy: Policy) -> SchedulerSpec {
        let p = self.params(policy);
        SchedulerSpec::Fclb {
            workloads: p.workloads,
            gain_iops_per_ms: p.gain_iops_per_ms,
            plant_gain_ms_per_iops: None,
            pole: None,
            mode: p.mode,
            period_ns: None,
            then: Box::new(backend()),
        }
    }
}

/// One workload's outcome in a run.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadOutcome {
    /// Completions.
    pub completed: u64,
    /// Mean throughput over the 1 s windows in which the workload is active (IOPS).
    pub throughput_iops: f64,
    /// The same over the active windows after [`SETTLE`] (IOPS).
    pub steady_iops: f64,
    /// Percentage of completions with response time (from the bucket) above RT_i.
    pub violation_pct: f64,
    /// Whole-run p95 of that response time (ms).
    pub p95_ms: f64,
    /// Replenish rate at the end of the run (IOPS).
    pub final_rate_iops: f64,
}

/// A run's outcome and time series.
#[derive(Debug)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// The policy.
    pub policy: Policy,
    /// Per workload (index = workload); `None` for a workload that never ran.
    pub workloads: Vec<Option<WorkloadOutcome>>,
    /// Completions per second over the run, all workloads.
    pub total_iops: f64,
    /// W1 : W2 throughput ratio when both ran.
    pub throughput_ratio: Option<f64>,
    /// Per-window, per-tenant series (arrivals, completions, end-to-end response).
    pub windows: WindowSeries,
    /// Per-window gauges (rates, bucket levels, p95 from the bucket, counters).
    pub gauges: GaugeSeries,
}

/// Run one case under one policy.
pub fn run_case(case: Case, policy: Policy, setup: &Setup) -> Result<CaseResult> {
    let clients = case.clients();
    let spec = setup.scheduler_spec(policy);
    let SchedulerSpec::Fclb { then, .. } = &spec else { unreachable!("setup builds an fclb spec") };
    let mut sched = setup.params(policy).build(then.build()?)?;
    let mut dev = device().build()?;
    let cfg = SimConfig { seed: setup.seed, window: NS_PER_SEC, keep_requests: false, until: Some(RUN_LENGTH) };
    let res = simulate(Vec::new(), &clients, &mut sched, &mut dev, &cfg)?;
    let n_windows = (RUN_LENGTH / NS_PER_SEC) as usize;
    let mut outcomes = vec![None; setup.workloads.len()];
    for c in &clients {
        let i = c.tenant as usize;
        // Windows fully inside an active period of the client.
        let active: Vec<Nanos> = (0..n_windows as u64)
            .map(|k| k * NS_PER_SEC)
            .filter(|&t| c.next_active(t) == Some(t) && c.next_active(t + NS_PER_SEC - 1) == Some(t + NS_PER_SEC - 1))
            .collect();
        let done_in = |from: Nanos| -> (u64, usize) {
            let wins: Vec<Nanos> = active.iter().copied().filter(|&t| t >= from).collect();
            let n = res
                .windows
                .start
                .iter()
                .zip(&res.windows.tenant)
                .zip(&res.windows.completed)
                .filter(|((s, t), _)| **t as usize == i && wins.contains(s))
                .map(|(_, n)| *n)
                .sum();
            (n, wins.len())
        };
        let rate = |(n, w): (u64, usize)| if w == 0 { 0.0 } else { n as f64 / w as f64 };
        let m = sched.monitor(i);
        outcomes[i] = Some(WorkloadOutcome {
            completed: m.completed(),
            throughput_iops: rate(done_in(0)),
            steady_iops: rate(done_in(SETTLE)),
            violation_pct: 100.0 * m.violation_fraction(),
            p95_ms: m.summary().quantile(0.95) as f64 / NS_PER_MS as f64,
            final_rate_iops: sched.rate_iops(i),
        });
    }
    let throughput_ratio = match (&outcomes[0], outcomes.get(1).and_then(|o| o.as_ref())) {
        (Some(a), Some(b)) if b.completed > 0 => Some(a.completed as f64 / b.completed as f64),
        _ => None,
    };
    Ok(CaseResult {
        case,
        policy,
        workloads: outcomes,
        total_iops: res.total.completed as f64 * NS_PER_SEC as f64 / RUN_LENGTH as f64,
        throughput_ratio,
        windows: res.windows,
        gauges: res.gauges,
    })
}
