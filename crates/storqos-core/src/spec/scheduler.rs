//! Scheduler specs: `{"kind": "...", ...}` → an [`AnyScheduler`],
//! the enum over the built-in policies that the simulator dispatches statically.
//!
//! Examples:
//! ```json
//! {"kind": "fcfs"}
//! {"kind": "edf", "deadlines_ns": [10000000, 50000000], "default_deadline_ns": 100000000}
//! {"kind": "wf2q", "weights": [2, 1]}
//! {"kind": "wf2q", "weights": [3, 1], "by": "class", "cost": "bytes"}
//! {"kind": "sfq", "weights": [2, 1], "depth": 4}
//! {"kind": "rtt", "capacity_iops": 417, "deadline_ns": 10000000,
//!  "then": {"kind": "wf2q", "weights": [417, 83], "by": "class"}}
//! {"kind": "miser", "capacity_iops": 417, "deadline_ns": 10000000}
//! {"kind": "mclock", "reservations": [300, 0], "weights": [1, 2], "limits": [null, 800]}
//! {"kind": "baa", "hdd_iops": 200, "ssd_iops": 1000, "allocator": "baa",
//!  "window_ns": 2000000000, "period_ns": 1000000000}
//! ```
//! `by` is `"tenant"` (default) or `"class"`; `cost` is `"iops"` (default) or `"bytes"`;
//! flows beyond the `weights` list weigh 1.

use serde::Deserialize;

use crate::error::Result;
use crate::schedulers::{CostModel, Edf, FairQueue, Fcfs, FlowKey, Sfq, Wf2q};
use crate::shaping::{Capacity, Miser, Rtt, RttStage};
use crate::spec::dispatch::{AnyScheduler, StackScheduler};
use crate::time::Nanos;
use crate::twolevel::{TwoLevelSpec, Upper};

/// A scheduling policy and its parameters.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SchedulerSpec {
    /// First-come first-served.
    Fcfs,
    /// Earliest deadline first: deadline = arrival + the relative deadline of the
    /// request's class.
    Edf {
        /// Relative deadline of class i (ns, > 0).
        #[serde(default)]
        deadlines_ns: Vec<Nanos>,
        /// Relative deadline of classes beyond the list (ns, > 0).
        default_deadline_ns: Nanos,
    },
    /// WF2Q+ weighted fair queuing.
    Wf2q {
        /// Weight of flow i (finite, > 0); unlisted flows weigh 1.
        #[serde(default)]
        weights: Vec<f64>,
        /// Flows are tenants (default) or classes.
        #[serde(default)]
        by: FlowKey,
        /// Cost of a request: one operation (default) or its bytes.
        #[serde(default)]
        cost: CostModel,
    },
    /// mClock (Gulati et al. OSDI'10): per-tenant reservation, weight and limit.
    Mclock {
        /// Reservation of flow i (IOPS, >= 0); unlisted flows reserve nothing.
        #[serde(default)]
        reservations: Vec<f64>,
        /// Weight of flow i (finite, > 0); unlisted flows weigh 1.
        #[serde(default)]
        weights: Vec<f64>,
        /// Limit of flow i (IOPS, > 0, or null for none); unlisted flows are unlimited.
        #[serde(default)]
        limits: Vec<Option<f64>>,
        /// Cost of a request: `"iops"` (1, default) or `{"size": S}` (1 + bytes / S).
        #[serde(default)]
        cost: crate::schedulers::MclockCost,
        /// Exceed a limit when nothing else is eligible and the device is idle (the
        /// same as `at_limit: "allow"`).
        #[serde(default)]
        limit_break: bool,
        /// Beyond a limit: `"wait"` (default), `"allow"` or `"reject"` (dmclock's
        /// `AtLimit`).
        #[serde(default)]
        at_limit: crate::schedulers::AtLimit,
        /// With `"reject"`: how far (ns) beyond its arrival a request's limit tag may
        /// lie before it is rejected (dmclock's `RejectThreshold`; default 0).
        #[serde(default)]
        reject_threshold_ns: Nanos,
        /// Flows are tenants (default) or classes.
        #[serde(default)]
        by: FlowKey,
    },
    /// SFQ(D): start-time fair queuing with at most `depth` requests outstanding.
    Sfq {
        /// Weight of flow i (finite, > 0); unlisted flows weigh 1.
        #[serde(default)]
        weights: Vec<f64>,
        /// Dispatch depth D (≥ 1).
        depth: usize,
        /// Flows are tenants (default) or classes.
        #[serde(default)]
        by: FlowKey,
        /// Cost of a request: one operation (default) or its bytes.
        #[serde(default)]
        cost: CostModel,
    },
    /// RTT decomposition (seed 000) in front of another policy: arrivals RTT admits at
    /// `capacity_iops` within `deadline_ns` get class 0 (primary), the rest class 1.
    Rtt {
        /// Primary capacity Cmin (IOPS, > 0; kept to 1/1000 IOPS).
        capacity_iops: f64,
        /// Response-time bound δ of the primary class (ns, > 0).
        deadline_ns: Nanos,
        /// Also set each request's device target to its class (Split's two servers).
        #[serde(default)]
        route_target: bool,
        /// The policy that queues the classified requests.
        then: Box<SchedulerSpec>,
    },
    /// Miser (seed 000, Algorithm 2): RTT at `capacity_iops` / `deadline_ns`, overflow
    /// served whenever every primary request has slack.
    Miser {
        /// Primary capacity Cmin (IOPS, > 0).
        capacity_iops: f64,
        /// Response-time bound δ of the primary class (ns, > 0).
        deadline_ns: Nanos,
    },
    /// Seed 001: SARC (credits, three replenishment triggers) over AVATAR (EDF + queue
    /// threshold controller). See [`crate::twolevel`].
    SarcAvatar(TwoLevelSpec),
    /// Seed 001's E1 baseline: SARC over Facade (EDF + AIMD device depth).
    SarcFacade(TwoLevelSpec),
    /// Seed 001's E2 baseline: FIXED (periodic credits only) over AVATAR.
    FixedAvatar(TwoLevelSpec),
    /// Seed 001's E2 baseline: ADAPTIVE (credit amounts adjusted every second, `p_rt`,
    /// `p_inc`, `p_dec`) over AVATAR.
    AdaptiveAvatar(TwoLevelSpec),
    /// YFQ proportional share in batches (Bruno et al. 1999; seed 003's back end).
    Yfq {
        /// Weight of flow i (finite, > 0); unlisted flows weigh 1.
        #[serde(default)]
        weights: Vec<f64>,
        /// Batch size (≥ 1; default [`crate::schedulers::yfq::DEFAULT_BATCH`]).
        #[serde(default)]
        batch: Option<usize>,
        /// Flows are tenants (default) or classes.
        #[serde(default)]
        by: FlowKey,
        /// Cost of a request: one operation (default) or its bytes.
        #[serde(default)]
        cost: CostModel,
    },
    /// Seed 004's two-level scheduler ([`crate::schedulers::baa_sched`]): allocations
    /// (BAA, or the DRF / FQ baselines) recomputed every `period_ns` from the hit ratios
    /// measured over `window_ns`, as the weights of a WF2Q+ queue in front of a tiered
    /// device (fast tier = SSD, slow tier = HDD).
    Baa {
        /// HDD (slow tier) capacity, IOPS (> 0).
        hdd_iops: f64,
        /// SSD (fast tier) capacity, IOPS (> 0).
        ssd_iops: f64,
        /// `baa` (default), `drf` or `fq`.
        #[serde(default = "default_allocator")]
        allocator: String,
        /// Hit-ratio monitor window (ns, ≥ 60).
        window_ns: Nanos,
        /// Re-allocation period (ns, > 0).
        period_ns: Nanos,
        /// Start from the allocation for these hit ratios (tenant order) instead of equal
        /// weights until the first period ends.
        #[serde(default)]
        hit_ratios: Option<Vec<f64>>,
    },
    /// Feedback-controlled leaky bucket (seed 003) in front of a back end (YFQ).
    Fclb {
        /// Workload i = tenant i: demanded IOPS and response time, bucket, reference.
        workloads: Vec<crate::fclb::WorkloadSpec>,
        /// Controller gain K (IOPS per ms of error), or `"online"`: the plant gain
        /// measured by the loop and `pole` placed on it every period
        /// ([`crate::fclb::estimator`]).
        #[serde(default)]
        gain_iops_per_ms: Option<crate::fclb::Gain>,
        /// Plant gain G (ms per IOPS): checks K (0 < K < 2/G) or, with `pole`, gives K;
        /// with an online gain, the estimate's start value.
        #[serde(default)]
        plant_gain_ms_per_iops: Option<f64>,
        /// Desired closed-loop pole p in (−1, 1): K = (1 − p)/G.
        #[serde(default)]
        pole: Option<f64>,
        /// `feedback` (default), `fixed` (rates stay at the demanded IOPS) or `off`.
        #[serde(default)]
        mode: crate::fclb::Mode,
        /// Control period (ns; default 1 s).
        #[serde(default)]
        period_ns: Option<Nanos>,
        /// The back end the buckets feed.
        then: Box<SchedulerSpec>,
    },
    /// QEMU's I/O throttling and throttle groups ([`crate::stacks::qemu`]).
    QemuThrottle(Box<crate::stacks::qemu::QemuThrottleSpec>),
    /// Linux blk-throttle ([`crate::stacks::blk_throttle`]).
    BlkThrottle(Box<crate::stacks::blk_throttle::BlkThrottleSpec>),
    /// SPDK's bdev QoS ([`crate::stacks::spdk`]).
    SpdkQos(Box<crate::stacks::spdk::SpdkQosSpec>),
    /// Linux BFQ with cgroup weights ([`crate::stacks::bfq`]).
    Bfq(Box<crate::stacks::bfq::BfqSpec>),
    /// nbdkit's rate filter ([`crate::stacks::nbdkit`]).
    NbdkitRate(Box<crate::stacks::nbdkit::NbdkitRateSpec>),
    /// Ceph's OSD mClock profiles ([`crate::stacks::ceph`]).
    CephMclock(Box<crate::stacks::ceph::CephMclockSpec>),
    /// librbd's image QoS ([`crate::stacks::librbd`]).
    RbdQos(Box<crate::stacks::librbd::RbdQosSpec>),
}

fn default_allocator() -> String {
    "baa".into()
}

impl SchedulerSpec {
    /// For an FCLB spec, its parameters and the spec of the scheduler it feeds (the
    /// simulator builds it from them, the gateway too, with its admission board).
    pub fn fclb_parts(&self) -> Option<(crate::fclb::FclbParams, &SchedulerSpec)> {
        let SchedulerSpec::Fclb { workloads, gain_iops_per_ms, plant_gain_ms_per_iops, pole, mode, period_ns, then } =
            self
        else {
            return None;
        };
        let params = crate::fclb::FclbParams {
            workloads: workloads.clone(),
            gain_iops_per_ms: *gain_iops_per_ms,
            plant_gain_ms_per_iops: *plant_gain_ms_per_iops,
            pole: *pole,
            mode: *mode,
            period_ns: *period_ns,
        };
        Some((params, then))
    }

    /// Check the parameters without building (the error names the bad parameter).
    pub fn validate(&self) -> Result<()> {
        self.build().map(|_| ())
    }

    /// Build the policy value.
    pub fn build(&self) -> Result<AnyScheduler> {
        Ok(match self {
            SchedulerSpec::Fcfs => AnyScheduler::Fcfs(Fcfs::new()),
            SchedulerSpec::Edf { deadlines_ns, default_deadline_ns } => {
                AnyScheduler::Edf(Edf::new(deadlines_ns.clone(), *default_deadline_ns)?)
            }
            SchedulerSpec::Wf2q { weights, by, cost } => {
                AnyScheduler::Wf2q(Wf2q::new(weights.clone())?.with_key(*by).with_cost(*cost))
            }
            SchedulerSpec::Mclock {
                reservations,
                weights,
                limits,
                cost,
                limit_break,
                at_limit,
                reject_threshold_ns,
                by,
            } => {
                use crate::schedulers::AtLimit;
                let at_limit = match (*limit_break, *at_limit) {
                    (false, a) => a,
                    (true, AtLimit::Wait | AtLimit::Allow) => AtLimit::Allow,
                    (true, AtLimit::Reject) => {
                        return crate::error::config(
                            "mclock: limit_break and at_limit \"reject\" contradict each other",
                        )
                    }
                };
                if *reject_threshold_ns > 0 && at_limit != AtLimit::Reject {
                    return crate::error::config("mclock: reject_threshold_ns is for at_limit \"reject\"");
                }
                AnyScheduler::Mclock(
                    crate::schedulers::Mclock::new(reservations.clone(), weights.clone(), limits.clone())?
                        .with_cost(*cost)?
                        .with_at_limit(at_limit, *reject_threshold_ns)
                        .with_key(*by),
                )
            }
            SchedulerSpec::Sfq { weights, depth, by, cost } => {
                AnyScheduler::Sfq(Sfq::new(weights.clone(), *depth)?.with_key(*by).with_cost(*cost))
            }
            SchedulerSpec::Rtt { capacity_iops, deadline_ns, route_target, then } => {
                let rtt = Rtt::new(Capacity::from_iops(*capacity_iops)?, *deadline_ns)?;
                AnyScheduler::Rtt(Box::new(RttStage::new(rtt, then.build()?).routing_target(*route_target)))
            }
            SchedulerSpec::Miser { capacity_iops, deadline_ns } => {
                AnyScheduler::Miser(Miser::new(Rtt::new(Capacity::from_iops(*capacity_iops)?, *deadline_ns)?))
            }
            SchedulerSpec::SarcAvatar(p) => AnyScheduler::SarcAvatar(Box::new(p.build_avatar(Upper::Sarc)?)),
            SchedulerSpec::FixedAvatar(p) => AnyScheduler::SarcAvatar(Box::new(p.build_avatar(Upper::Fixed)?)),
            SchedulerSpec::AdaptiveAvatar(p) => AnyScheduler::SarcAvatar(Box::new(p.build_avatar(Upper::Adaptive)?)),
            SchedulerSpec::SarcFacade(p) => AnyScheduler::SarcFacade(Box::new(p.build_facade()?)),
            SchedulerSpec::Yfq { weights, batch, by, cost } => AnyScheduler::Boxed(Box::new(
                crate::schedulers::yfq::Yfq::new(
                    weights.clone(),
                    batch.unwrap_or(crate::schedulers::yfq::DEFAULT_BATCH),
                )?
                .with_key(*by)
                .with_cost(*cost),
            )),
            SchedulerSpec::Baa { hdd_iops, ssd_iops, allocator, window_ns, period_ns, hit_ratios } => {
                let policy = crate::alloc::Policy::parse(allocator)?;
                let mut b = crate::schedulers::baa_sched::BaaScheduler::new(
                    *hdd_iops, *ssd_iops, policy, *window_ns, *period_ns,
                )?;
                if let Some(h) = hit_ratios {
                    b = b.with_initial_hit_ratios(h)?;
                }
                AnyScheduler::Boxed(Box::new(b))
            }
            SchedulerSpec::QemuThrottle(p) => AnyScheduler::Stack(Box::new(StackScheduler::Qemu(p.build()?))),
            SchedulerSpec::BlkThrottle(p) => AnyScheduler::Stack(Box::new(StackScheduler::BlkThrottle(p.build()?))),
            SchedulerSpec::SpdkQos(p) => AnyScheduler::Stack(Box::new(StackScheduler::Spdk(p.build()?))),
            SchedulerSpec::Bfq(p) => AnyScheduler::Stack(Box::new(StackScheduler::Bfq(p.build()?))),
            SchedulerSpec::NbdkitRate(p) => AnyScheduler::Stack(Box::new(StackScheduler::Nbdkit(p.build()?))),
            SchedulerSpec::CephMclock(p) => AnyScheduler::Stack(Box::new(StackScheduler::Ceph(p.build()?))),
            SchedulerSpec::RbdQos(p) => AnyScheduler::Stack(Box::new(StackScheduler::Rbd(p.build()?))),
            SchedulerSpec::Fclb { .. } => {
                let (params, then) = self.fclb_parts().expect("an fclb spec");
                AnyScheduler::Boxed(Box::new(params.build(then.build()?)?))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::Scheduler;
    use crate::spec::from_json;

    fn parse(json: &str) -> Result<SchedulerSpec> {
        from_json("policy", json)
    }

    /// Parse and build; the error message on failure.
    fn err(json: &str) -> String {
        match parse(json).and_then(|s| s.build()) {
            Ok(s) => panic!("{json} should be rejected, built {}", s.name()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn good_specs_build() {
        let cases = [
            (r#"{"kind":"fcfs"}"#, "fcfs"),
            (r#"{"kind":"edf","deadlines_ns":[10000000,50000000],"default_deadline_ns":100000000}"#, "edf"),
            (r#"{"kind":"edf","default_deadline_ns":5}"#, "edf"),
            (r#"{"kind":"wf2q"}"#, "wf2q+"),
            (r#"{"kind":"mclock","reservations":[300,0],"weights":[1,2],"limits":[null,800]}"#, "mclock"),
            (r#"{"kind":"mclock","cost":{"size":32768},"limit_break":true}"#, "mclock(limit break)"),
            (r#"{"kind":"mclock","limits":[200],"at_limit":"allow"}"#, "mclock(limit break)"),
            (r#"{"kind":"mclock","limits":[200],"at_limit":"reject"}"#, "mclock(reject at limit)"),
            (
                r#"{"kind":"mclock","limits":[200],"at_limit":"reject","reject_threshold_ns":5000000}"#,
                "mclock(reject at limit)",
            ),
            (r#"{"kind":"mclock","limits":[200],"at_limit":"wait"}"#, "mclock"),
            (r#"{"kind":"wf2q","weights":[2,1],"by":"class","cost":"bytes"}"#, "wf2q+"),
            (r#"{"kind":"sfq","weights":[2.5,1],"depth":4,"by":"tenant","cost":"iops"}"#, "sfq(d=4)"),
            (r#"{"kind":"miser","capacity_iops":500,"deadline_ns":10000000}"#, "miser(500 IOPS, δ 10 ms)"),
            (
                r#"{"kind":"rtt","capacity_iops":500,"deadline_ns":10000000,"then":{"kind":"wf2q","weights":[5,1],"by":"class"}}"#,
                "rtt(500 IOPS, δ 10 ms) > wf2q+",
            ),
            (
                r#"{"kind":"baa","hdd_iops":200,"ssd_iops":1000,"window_ns":2000000000,"period_ns":1000000000}"#,
                "baa-weights over wf2q+",
            ),
            (
                r#"{"kind":"baa","hdd_iops":200,"ssd_iops":1000,"allocator":"FQ","window_ns":60,"period_ns":1,"hit_ratios":[0.5,0.9]}"#,
                "fq-weights over wf2q+",
            ),
        ];
        for (json, name) in cases {
            let spec = parse(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert!(spec.validate().is_ok());
            assert_eq!(spec.build().unwrap().name(), name, "{json}");
        }
        assert_eq!(
            parse(r#"{"kind":"sfq","depth":1}"#).unwrap(),
            SchedulerSpec::Sfq { weights: vec![], depth: 1, by: FlowKey::Tenant, cost: CostModel::Iops }
        );
    }

    #[test]
    fn bad_specs_name_the_problem() {
        let cases = [
            (r#"{"kind":"wfq"}"#, "unknown variant `wfq`"),
            (r#"{"kind":"mclock","at_limit":"drop"}"#, "unknown variant `drop`"),
            (r#"{"kind":"mclock","limit_break":true,"at_limit":"reject"}"#, "contradict each other"),
            (r#"{"kind":"mclock","reject_threshold_ns":5}"#, "reject_threshold_ns is for at_limit \"reject\""),
            (r#"{"weights":[1]}"#, "missing field `kind`"),
            (r#"{"kind":"wf2q","weights":[2,-1]}"#, "wf2q: weights[1] must be a finite number > 0, got -1"),
            (r#"{"kind":"wf2q","weights":[0]}"#, "wf2q: weights[0]"),
            (r#"{"kind":"mclock","reservations":[-5]}"#, "mclock: reservations[0]"),
            (r#"{"kind":"mclock","limits":[null,0]}"#, "mclock: limits[1]"),
            (r#"{"kind":"mclock","reservations":[900],"limits":[500]}"#, "exceeds limits[0]"),
            (r#"{"kind":"mclock","cost":{"size":0}}"#, "mclock: cost size must be > 0"),
            (r#"{"kind":"mclock","cost":"bytes"}"#, "unknown variant `bytes`"),
            (r#"{"kind":"wf2q","weight":[2,1]}"#, "unknown field `weight`"),
            (r#"{"kind":"wf2q","by":"host"}"#, "unknown variant `host`"),
            (r#"{"kind":"wf2q","cost":"time"}"#, "unknown variant `time`"),
            (r#"{"kind":"sfq","depth":0}"#, "sfq: depth must be >= 1"),
            (r#"{"kind":"sfq","depth":-2}"#, "invalid value: integer `-2`"),
            (r#"{"kind":"sfq"}"#, "missing field `depth`"),
            (r#"{"kind":"sfq","depth":2,"weights":[1,-0.5]}"#, "sfq: weights[1]"),
            (r#"{"kind":"edf","deadlines_ns":[5,0],"default_deadline_ns":9}"#, "edf: deadlines_ns[1] must be > 0"),
            (r#"{"kind":"edf","default_deadline_ns":0}"#, "edf: default_deadline_ns must be > 0"),
            (r#"{"kind":"edf","deadlines_ns":[5]}"#, "missing field `default_deadline_ns`"),
            (r#"{"kind":"edf","deadlines_ns":[-5],"default_deadline_ns":9}"#, "invalid value: integer `-5`"),
            (r#"{"kind":"miser","capacity_iops":0,"deadline_ns":5}"#, "capacity must be"),
            (r#"{"kind":"miser","capacity_iops":10,"deadline_ns":0}"#, "rtt: deadline must be > 0"),
            (r#"{"kind":"rtt","capacity_iops":10,"deadline_ns":5}"#, "missing field `then`"),
            (r#"{"kind":"rtt","capacity_iops":10,"deadline_ns":5,"then":{"kind":"nope"}}"#, "unknown variant `nope`"),
            (r#"{"kind":"baa","hdd_iops":0,"ssd_iops":1,"window_ns":60,"period_ns":1}"#, "capacities must be > 0"),
            (
                r#"{"kind":"baa","hdd_iops":1,"ssd_iops":1,"allocator":"max","window_ns":60,"period_ns":1}"#,
                "unknown \"max\"",
            ),
            (r#"{"kind":"baa","hdd_iops":1,"ssd_iops":1,"window_ns":60,"period_ns":1,"hit_ratios":[1.5]}"#, "1.5"),
        ];
        for (json, want) in cases {
            let e = err(json);
            assert!(e.contains(want), "{json}: got {e:?}, want it to mention {want:?}");
            assert!(!e.contains('\n'), "one line: {e:?}");
        }
    }
}
