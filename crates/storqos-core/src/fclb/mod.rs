//! FCLB: the feedback-controlled leaky bucket over YFQ proportional share (seed 003,
//! `seeds/003_7fda7344ad8e71aa.txt`: "a feedback-controlled leaky bucket with a fair
//! queuing algorithm" for shared storage).
//!
//! ## 1. The problem (§1–2)
//! Workloads `W_i` share one storage device, each demanding `(size_i, IOPS_i, RT_i)`:
//! requests of `size_i`, at `IOPS_i`, answered within `RT_i` at the 95th percentile. A
//! fair queue alone (YFQ) splits the bandwidth by weight but cannot bound response times
//! once a workload sends more than it asked for; a fixed rate limit bounds them but wastes
//! the bandwidth an idle workload leaves behind.
//!
//! ## 2. The mechanism (§3.1, Fig. 2) — [`gate::Fclb`]
//! Per workload a token bucket ([`bucket`]): tokens arrive every 1 ms at the replenish
//! rate `r_i`, up to `b_i`; a request passes to the back end when it gets a token. The
//! back end is YFQ ([`crate::schedulers::yfq`]) with weights `φ_i`. A monitor
//! ([`monitor`]) measures each workload's p95 response time per 1 s control period, and
//! an integral controller ([`controller`]) moves `r_i` towards the rate that makes that
//! p95 equal the reference: `e_i(k) = RT_ref,i − RT_i(k)` (Eq. 1),
//! `r_i(k) = r_i(k−1) + K·e_i(k)` (Eq. 2), never below `IOPS_i`. A workload whose
//! response times are low (because the other is idle) gets a higher rate: the surplus
//! is used; when contention returns, its response time rises and its rate comes back
//! down, and YFQ splits the disk by weight meanwhile.
//!
//! ## 3. The control loop (§3.2, Eqs. 3–8) — [`controller`], [`tuning`]
//! Linearised plant `RT(k+1) = G·r(k)`; closed-loop pole `p = 1 − K·G`; stable iff
//! `0 < K < 2/G`. `G` is estimated by profiling the storage around the operating point
//! and `K = (1 − p)/G` placed for a desired pole; an unstable K is rejected with the
//! bound in the message. Or (ours, [`estimator`]) `G` is measured online from the
//! loop's own rate steps and p95 changes (recursive least squares with forgetting,
//! bounded, from a start value) and the pole placed on the estimate every period.
//!
//! ## 4. Admission (§2, Fig. 1, Table 3) — [`admission`]
//! Drive the mix at `T = Σ IOPS_i`, take each workload's p95 `RT′_i`, add 20 %:
//! `RT″_i = 1.2·RT′_i`; admit iff `RT_i ≥ RT″_i` for all i. `RT″_i` becomes the reference.
//!
//! ## 5. Experiments (§4) — [`experiment`]
//! W1 (40 IOPS, 35 ms, b = 8) and W2 (20 IOPS, 38 ms, b = 4), YFQ 2:1, one 7,200 RPM
//! disk, closed-loop clients; the four cases of §4.5, each also run with plain YFQ and
//! a fixed leaky bucket. Results: `docs/results/fclb.md`.
//!
//! ## Worked example
//! W1 alone on the disk (case 1), reference 35 ms, K = 1 IOPS/ms. Period 1: r = 40 IOPS,
//! the disk is 48 % busy, p95 ≈ 22 ms: e = +13 ms, r → 53 IOPS. Period 2: p95 ≈ 25 ms,
//! r → 63 IOPS ... the rate climbs until the p95 sits at 35 ms, near 75 IOPS, the end of
//! the disk's stable area. W2 starts: YFQ gives it a third of the disk, W1's queue grows,
//! its p95 jumps above 35 ms, and its rate falls back within a few periods.
//!
//! ## Reading of the seed
//! The response time the controller regulates is measured from the moment a request
//! passes its bucket (YFQ's "reservation queue" and the disk), not from its arrival at
//! the bucket: with closed-loop workloads that always wait for tokens, the bucket wait
//! is the throttling itself (see [`monitor`]). Our additions, each documented where it
//! lives: lazy integer refill ([`bucket`]), anti-windup and a hold during idle periods
//! ([`gate`]), a plain-YFQ and a fixed-bucket mode for comparisons ([`gate::Mode`]).

pub mod admission;
pub mod bucket;
pub mod controller;
pub mod estimator;
pub mod experiment;
pub mod gate;
pub mod monitor;
pub mod tuning;

pub use admission::{admit, AdmissionReport, AdmissionRow, Candidate, ADMISSION_MARGIN};
pub use bucket::{TokenBucket, REFILL_INTERVAL};
pub use controller::{
    check_gain, closed_loop_pole, periods_to_settle, Gain, IntegralController, LinearPlant, RateLimits, CONTROL_PERIOD,
};
pub use estimator::{EstimatorConfig, GainEstimator, OnlineGain};
pub use gate::{Fclb, FclbParams, Mode, References, WorkloadSpec};
pub use monitor::{Monitor, Monitors};
pub use tuning::{
    estimate_gain, pole_placement, profile_curve, profile_point, stable_limit, tune, MixEntry, ProfileConfig,
    ProfilePoint, Tuning,
};
