//! Linux BFQ with cgroup weights, as Debian bookworm's kernel (6.1) runs it: `block/bfq-iosched.c`,
//! `block/bfq-wf2q.c`, `block/bfq-iosched.h` and `block/bfq-cgroup.c` (cgroup v1 `blkio.bfq.weight`,
//! v2 `io.bfq.weight`, both 1 to 1000, default 100), with every tunable at its default
//! (`slice_idle` 8 ms, `timeout_sync` 125 ms, `max_budget` 0 = automatic, `low_latency` 1,
//! `strict_guarantees` 0). The logic follows the 6.1 rules where they differ from older
//! kernels: more than one group with pending I/O makes the scenario asymmetric (the 6.1
//! "do not idle if only one group is activated"), a queue alone on the device keeps its
//! I/O plugged (5.12), think time is short below half of `slice_idle` (5.12), a new
//! request preempts an in-service queue that would not idle (5.12), I/O intensity is
//! measured from idle time (5.12) and waker detection counts a process's requests in
//! flight (5.19).
//!
//! One tenant is one cgroup directly under the root holding one process, so BFQ has one
//! synchronous `bfq_queue` per tenant inside that tenant's group. A group with a single
//! queue inherits that queue's budget and service, so the model keeps one record per
//! tenant with both the queue's fields and its group entity's timestamps, and runs
//! B-WF2Q+ between the group entities by cgroup weight.
//!
//! ## B-WF2Q+ between the groups (`bfq-wf2q.c`)
//! Service is counted in sectors (512 bytes, rounded up). An entity carries a start `S`
//! and a finish `F = S + budget / weight` in a fixed-point virtual time (service shifted
//! left by [`WFQ_SERVICE_SHIFT`] bits, divided by the weight, as `bfq_delta` does). The
//! root service tree keeps the active entities (ordered by `F`, with the minimum `S`
//! for the eligibility search), the idle ones (empty, with `F > V`, kept so that a
//! returning tenant does not restart ahead of its past service) and `wsum`, the weight
//! of every entity on the tree, idle ones included. Each dispatched request advances the
//! virtual time by `sectors / wsum` (`bfq_bfqq_served`); selection takes the eligible
//! entity (`S ≤ V`) with the smallest `F`, after moving `V` up to the smallest `S` when
//! none is eligible (`bfq_lookup_next_entity`, `bfq_calc_vtime_jump`). The choice is
//! cached in `next_in_service` and updated on the events, and by the shortcut, that
//! `bfq_update_next_in_service` uses, so the tenant served next is the kernel's even
//! where its cache lags the virtual time. Activation (`__bfq_activate_entity`) starts a
//! returning entity at `max(V, F)` (or back-shifted to its old `F` when it recovers a
//! service hole, then pushed up to `V` by `bfq_update_fin_time_enqueue`); requeueing an
//! expired entity advances `S` by the service it received and sets `F` from its new
//! budget; deactivation keeps an entity on the idle tree while `F > V`; `bfq_forget_idle`
//! drops idle entities once `V` passes them (with the kernel's own test, which moves `V`
//! back to the last idle finish when no entity is active).
//!
//! ## Budgets and expiration (`bfq-iosched.c`)
//! The in-service tenant dispatches while its next request fits in its budget. A queue
//! starts with 2/3 of [`BFQ_DEFAULT_MAX_BUDGET`]; the device maximum is that default until
//! [`BFQ_STATS_MIN_BUDGETS`] budgets have been assigned, then the sectors the estimated
//! peak rate serves in [`BFQ_TIMEOUT`] (`bfq_calc_max_budget`, fed by the peak-rate
//! estimator `bfq_update_peak_rate`/`bfq_update_rate_reset`), or the user's
//! `max_budget`. The queue expires (`bfq_bfqq_expire`) when its budget is exhausted, its
//! budget timeout passes ([`BFQ_TIMEOUT`], times the weight-raising factor, checked on
//! dispatch, completion, arrival and idle timer as the kernel does: there is no timer of
//! its own), it has no more requests and may not idle, the idle timer fires, or another
//! queue preempts it. `__bfq_bfqq_recalc_budget` then sets its next budget from the
//! reason ([`Expiration`]); a slow queue (seeky, or below half the maximum budget in a
//! slot longer than 20 ms: `bfq_bfqq_is_slow`) or one that timed out with a third of its
//! budget left is charged as if it had used the service the peak rate gives in that time
//! (`bfq_bfqq_charge_time`), which turns service fairness into time fairness for it. A
//! queue that emptied and gets a new request within three `slice_idle` of its last
//! completion resumes its old budget and timestamps and may preempt the in-service
//! queue (`bfq_bfqq_update_budg_for_activation`, `bfq_bfqq_handle_idle_busy_switch`); so
//! does a tenant of a higher cgroup weight, and any tenant while the in-service queue
//! would not idle.
//!
//! ## Idling and injection
//! When the in-service queue empties, BFQ keeps it and plugs the device for `slice_idle`
//! (`bfq_arm_slice_timer`: at most [`BFQ_MIN_TT`] for a seeky queue in a symmetric
//! scenario, at least 20 ms for a weight-raised one) if `bfq_better_to_idle` says so:
//! idling boosts throughput (`idling_boosts_thr_without_issues`: a rotational device
//! without command queueing, or a sequential, I/O-bound queue of short think time on a
//! rotational or non-queueing device, and no weight-raised queue busy) or it is needed
//! for service guarantees (`idling_needed_for_service_guarantees`: more than one group
//! with pending I/O, the queue alone on the device, or weight-raising rules). Queueing
//! is detected from the device's observed depth (`bfq_update_hw_tag`); seeky queues from
//! the distance between request positions (`BFQQ_SEEK_THR`, `BFQQ_SECT_THR_NONROT`, more
//! than 19 of the last 32). While plugged BFQ may still inject another tenant's request
//! into the gap: a detected waker's or woken queue's (`bfq_check_waker`), or, when idling
//! does not boost throughput, the first busy queue whose next request fits its budget
//! while the device holds fewer requests than the in-service queue's inject limit,
//! which `bfq_update_inject_limit` raises or lowers from the measured service time of
//! the queue's first request after an empty spell (`bfq_choose_bfqq_for_injection`).
//! Otherwise nothing is dispatched until the timer, a new request, or a completion.
//!
//! ## Low latency (`low_latency`, on by default)
//! A sync queue that becomes busy after [`BFQ_WR_MIN_IDLE_TIME`] without I/O (every queue
//! at its first request) is deemed interactive and weight-raised by [`BFQ_WR_COEFF`] for
//! `bfq_wr_duration` (the reference duration scaled by the estimated peak rate, 3 s to
//! 25 s) or until it has received [`MAX_SERVICE_FROM_WR`] sectors; a queue whose requests
//! arrive isochronously below [`BFQ_WR_MAX_SOFTRT_RATE`] is soft real-time and raised by
//! `BFQ_WR_COEFF * BFQ_SOFTRT_WEIGHT_FACTOR` for [`BFQ_WR_RT_MAX_TIME`]
//! (`bfq_bfqq_softrt_next_start`, `bfq_update_wr_data`). Raising multiplies the *queue's*
//! weight, which competes only inside its group: the group entities compete with their
//! cgroup weights (`__bfq_entity_update_weight_prio` multiplies `wr_coeff` into queue
//! weights only), so with one tenant per cgroup raising changes no tenant's share. What it
//! does change is modelled: a raised queue gets a budget of twice the minimum (so it is
//! served sooner, in smaller slices), a budget timeout multiplied by its factor, an idle
//! slice of at least 20 ms, no time charge, its own idling rules, and it turns off the
//! throughput-boosting idling of the others.
//!
//! ## Not modelled
//! - Request order inside a queue: FIFO, not `bfq_choose_req`'s elevator order with
//!   `fifo_expire`; back seeks, request merging (`bfq_bio_merge`).
//! - Async queues: every request is treated as sync (direct I/O, as a hypervisor or a
//!   database issues it), so no async charge factor and no async weight raising; writes
//!   and reads are alike.
//! - I/O priority classes (every queue is best effort with the default ioprio) and the
//!   idle class; queue merging (EQM and stable merging only join queues of one group,
//!   and every group has one queue); large bursts (every new queue is in another group,
//!   which ends a burst); deeper group hierarchies; weight changes at run time;
//!   `strict_guarantees`; request-tag limits (`bfq_limit_depth`, `bfqq_request_over_limit`).
//! - Jiffies: times are nanoseconds, so `timeout_sync` is 125 ms where `HZ/8` is 31
//!   jiffies (124 ms) at Debian's `CONFIG_HZ=250`; the extra 4 jiffies of
//!   `bfq_bfqq_softrt_next_start` use [`CONFIG_HZ`].
//! - The injection limit's "long idling" raise, whose kernel test adds nanoseconds to
//!   jiffies and cannot hold in practice.

use std::collections::VecDeque;

use serde::Deserialize;

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::request::{Completion, Request, MAX_TENANTS};
use crate::scheduler::Scheduler;
use crate::schedulers::prefetch::prefetch_ahead;
use crate::schedulers::sorted_set::SortedSet;
use crate::time::{Nanos, NS_PER_MS, NS_PER_SEC, NS_PER_US};

/// Bytes per sector, the unit BFQ counts service in (`SECTOR_SIZE`).
pub const SECTOR_BYTES: u64 = 512;
/// Smallest cgroup weight the kernel takes (`BFQ_MIN_WEIGHT`).
pub const BFQ_MIN_WEIGHT: u32 = 1;
/// Largest cgroup weight the kernel takes (`BFQ_MAX_WEIGHT`).
pub const BFQ_MAX_WEIGHT: u32 = 1000;
/// Weight of a cgroup nobody set (`BFQ_WEIGHT_LEGACY_DFL` for v1, `CGROUP_WEIGHT_DFL` for
/// v2; `BFQ_DEFAULT_GRP_WEIGHT` in older kernels).
pub const BFQ_DEFAULT_GRP_WEIGHT: u32 = 100;
/// Idling period after a sync queue empties (`bfq_slice_idle`, sysfs `slice_idle`).
pub const BFQ_SLICE_IDLE: Nanos = NS_PER_SEC / 125;
/// Budget timeout of a queue in service (`bfq_timeout = HZ / 8`, sysfs `timeout_sync`).
pub const BFQ_TIMEOUT: Nanos = NS_PER_SEC / 8;
/// Maximum budget, in sectors, before the peak rate is known (`bfq_default_max_budget`).
pub const BFQ_DEFAULT_MAX_BUDGET: u64 = 16 * 1024;
/// Budgets to assign before the estimated maximum budget replaces the default
/// (`bfq_stats_min_budgets`).
pub const BFQ_STATS_MIN_BUDGETS: u32 = 194;
/// Think time below which a queue is immediate, and the idle slice of a seeky queue in a
/// symmetric scenario (`BFQ_MIN_TT`).
pub const BFQ_MIN_TT: Nanos = 2 * NS_PER_MS;
/// Distance in sectors beyond which a request is a seek (`BFQQ_SEEK_THR`).
pub const BFQQ_SEEK_THR: u64 = 8 * 100;
/// On a non-rotational device only requests smaller than this many sectors count as seeks
/// (`BFQQ_SECT_THR_NONROT`).
pub const BFQQ_SECT_THR_NONROT: u64 = 2 * 32;
/// A queue is seeky when more of its last 32 requests than this were seeks (`BFQQ_SEEKY`:
/// `hweight32(seek_history) > 19`).
pub const BFQQ_SEEKY_HITS: u32 = 19;
/// Requests in flight above which the device shows command queueing
/// (`BFQ_HW_QUEUE_THRESHOLD`).
pub const BFQ_HW_QUEUE_THRESHOLD: u64 = 3;
/// Samples before the queueing verdict (`BFQ_HW_QUEUE_SAMPLES`).
pub const BFQ_HW_QUEUE_SAMPLES: u32 = 32;
/// Fixed-point shift of the virtual time (`WFQ_SERVICE_SHIFT`).
pub const WFQ_SERVICE_SHIFT: u32 = 22;
/// Fixed-point shift of the peak rate, in sectors per microsecond (`BFQ_RATE_SHIFT`).
pub const BFQ_RATE_SHIFT: u32 = 16;
/// Dispatches an observation interval needs before it updates the peak rate
/// (`BFQ_RATE_MIN_SAMPLES`).
pub const BFQ_RATE_MIN_SAMPLES: u32 = 32;
/// Shortest observation interval that updates the peak rate (`BFQ_RATE_MIN_INTERVAL`).
pub const BFQ_RATE_MIN_INTERVAL: Nanos = 300 * NS_PER_MS;
/// Target observation interval of the peak-rate estimator (`BFQ_RATE_REF_INTERVAL`).
pub const BFQ_RATE_REF_INTERVAL: Nanos = NS_PER_SEC;
/// Reference peak rates of a rotational and a non-rotational device, in sectors per
/// microsecond shifted by [`BFQ_RATE_SHIFT`] (`ref_rate`).
pub const REF_RATE: [u64; 2] = [14_000, 33_000];
/// Interactive weight-raising durations at [`REF_RATE`] (`ref_wr_duration`).
pub const REF_WR_DURATION: [Nanos; 2] = [7_000 * NS_PER_MS, 2_500 * NS_PER_MS];
/// Bounds of the interactive weight-raising duration (`bfq_wr_duration`'s clamp).
pub const BFQ_WR_DURATION_RANGE: (Nanos, Nanos) = (3 * NS_PER_SEC, 25 * NS_PER_SEC);
/// Weight-raising factor of interactive queues (`bfq_wr_coeff`).
pub const BFQ_WR_COEFF: u64 = 30;
/// Extra factor of soft real-time queues (`BFQ_SOFTRT_WEIGHT_FACTOR`).
pub const BFQ_SOFTRT_WEIGHT_FACTOR: u64 = 100;
/// Weight-raising duration of soft real-time queues (`bfq_wr_rt_max_time`).
pub const BFQ_WR_RT_MAX_TIME: Nanos = 300 * NS_PER_MS;
/// Idle time after which a queue that becomes busy is interactive (`bfq_wr_min_idle_time`).
pub const BFQ_WR_MIN_IDLE_TIME: Nanos = 2_000 * NS_PER_MS;
/// Highest rate, in sectors per second, of a soft real-time queue
/// (`bfq_wr_max_softrt_rate`).
pub const BFQ_WR_MAX_SOFTRT_RATE: u64 = 7_000;
/// Service, in sectors, after which interactive weight raising ends (`max_service_from_wr`).
pub const MAX_SERVICE_FROM_WR: u64 = 120_000;
/// Shortest idle slice of a weight-raised queue (`bfq_arm_slice_timer`).
pub const BFQ_WR_MIN_SLICE_IDLE: Nanos = 20 * NS_PER_MS;
/// Longest gap after another queue's completion within which a queue's new I/O counts
/// towards making that queue its waker (`bfq_check_waker`).
pub const BFQ_WAKER_WINDOW: Nanos = 4 * NS_PER_MS;
/// Detections that make a tentative waker a waker (`bfq_check_waker`).
pub const BFQ_WAKER_DETECTIONS: u32 = 3;
/// Period of the inject-limit reset (`bfq_add_request`).
pub const BFQ_INJECT_RESET_PERIOD: Nanos = 1_000 * NS_PER_MS;
/// Timer frequency of Debian's kernels (`CONFIG_HZ=250`), for the jiffies BFQ adds to
/// `soft_rt_next_start`.
pub const CONFIG_HZ: u64 = 250;

/// One jiffy at [`CONFIG_HZ`].
const JIFFY: Nanos = NS_PER_SEC / CONFIG_HZ;
/// Policy name used in errors and reports.
const NAME: &str = "bfq";

/// Why the in-service queue stopped being served (`enum bfqq_expiration`); the index of
/// each reason in [`Bfq::expirations`] is its kernel value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiration {
    /// The idle slice passed without a new request (`BFQQE_TOO_IDLE`).
    TooIdle = 0,
    /// The budget timeout passed (`BFQQE_BUDGET_TIMEOUT`).
    BudgetTimeout = 1,
    /// The next request does not fit in the budget left (`BFQQE_BUDGET_EXHAUSTED`).
    BudgetExhausted = 2,
    /// The queue emptied and may not idle (`BFQQE_NO_MORE_REQUESTS`).
    NoMoreRequests = 3,
    /// A newly busy queue took the device (`BFQQE_PREEMPTED`).
    Preempted = 4,
}

/// BFQ's configuration as the simulator reads it.
///
/// ```json
/// {"kind": "bfq", "weights": [200, 100], "slice_idle_ns": 8000000, "low_latency": true,
///  "rotational": false, "max_budget_sectors": 0}
/// ```
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct BfqSpec {
    /// cgroup weight of tenant i (`blkio.bfq.weight` / `io.bfq.weight`): a whole number 1 to
    /// 1000; tenants beyond the list weigh [`BFQ_DEFAULT_GRP_WEIGHT`].
    pub weights: Vec<f64>,
    /// `slice_idle` in ns (default [`BFQ_SLICE_IDLE`]; 0 disables idling).
    pub slice_idle_ns: Option<u64>,
    /// `low_latency` (default on).
    pub low_latency: Option<bool>,
    /// The device is rotational (`queue/rotational`; default false).
    pub rotational: Option<bool>,
    /// `max_budget` in sectors (0 or absent: automatic from the peak rate).
    pub max_budget_sectors: Option<u64>,
}

impl BfqSpec {
    /// The scheduler this spec describes. A weight outside 1 to 1000, or not a whole
    /// number, is refused as the kernel refuses it (`-ERANGE`).
    pub fn build(&self) -> Result<Bfq> {
        if self.weights.len() > MAX_TENANTS as usize {
            return config(format!("{NAME}: {} weights for at most {MAX_TENANTS} tenants", self.weights.len()));
        }
        let mut weights = Vec::with_capacity(self.weights.len());
        for (i, &w) in self.weights.iter().enumerate() {
            let in_range = w >= BFQ_MIN_WEIGHT as f64 && w <= BFQ_MAX_WEIGHT as f64;
            if !in_range {
                return config(format!(
                    "{NAME}: weight of tenant {i} is {w}; the kernel takes {BFQ_MIN_WEIGHT} to {BFQ_MAX_WEIGHT} \
                     (blkio.bfq.weight)"
                ));
            }
            if w.fract() != 0.0 {
                return config(format!(
                    "{NAME}: weight of tenant {i} is {w}; the kernel takes whole numbers {BFQ_MIN_WEIGHT} to \
                     {BFQ_MAX_WEIGHT} (blkio.bfq.weight)"
                ));
            }
            weights.push(w as u32);
        }
        let mut s = Bfq::new(weights)?
            .with_slice_idle(self.slice_idle_ns.unwrap_or(BFQ_SLICE_IDLE))
            .with_low_latency(self.low_latency.unwrap_or(true))
            .with_rotational(self.rotational.unwrap_or(false));
        if let Some(b) = self.max_budget_sectors.filter(|&b| b > 0) {
            s = s.with_max_budget(b);
        }
        Ok(s)
    }
}

/// Which tree of the root service tree a group entity is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tree {
    /// Neither (in service, or forgotten).
    None,
    /// Backlogged, waiting to be served.
    Active,
    /// Empty, finish still ahead of the virtual time.
    Idle,
}

/// The root service tree (`struct bfq_service_tree`) over the tenants' group entities.
#[derive(Clone, Debug)]
struct ServiceTree {
    /// Active entities by (finish, insertion order).
    active: SortedSet<(u64, u64, u32)>,
    /// Active entities by start: the minimum is `min_start` of the kernel's root node.
    starts: SortedSet<(u64, u32)>,
    /// Idle entities by (finish, insertion order): first and last are `first_idle` and
    /// `last_idle`.
    idle: SortedSet<(u64, u64, u32)>,
    /// Virtual time (`vtime`).
    vtime: u64,
    /// Weight of the entities on the tree, in service or idle included (`wsum`).
    wsum: u64,
}

/// An empty service tree (`BFQ_SERVICE_TREE_INIT`).
const BFQ_SERVICE_TREE_INIT: ServiceTree =
    ServiceTree { active: SortedSet::new(), starts: SortedSet::new(), idle: SortedSet::new(), vtime: 0, wsum: 0 };

/// One tenant: its `bfq_queue` and the entity of its group at the root.
#[derive(Clone, Debug)]
struct Queue {
    /// The tenant has issued a request (its queue exists).
    created: bool,
    /// Queued requests, served in arrival order.
    fifo: VecDeque<Request>,
    /// cgroup weight of the group entity.
    weight: u64,
    // --- the group entity at the root ---
    start: u64,
    finish: u64,
    tree: Tree,
    /// Insertion order on the tree (ties on finish go to the earlier).
    tree_seq: u64,
    /// On the tree or in service: counted in `wsum` (`on_st_or_in_serv`).
    on_st: bool,
    /// Budget of the group entity (its queue's, copied by `bfq_update_parent_budget`).
    gbudget: u64,
    /// Service of the group entity in its current slot.
    gservice: u64,
    // --- the queue entity ---
    budget: u64,
    service: u64,
    max_budget: u64,
    /// Order of the last insertion in the group's active tree (`active_list` position).
    list_seq: u64,
    on_list: bool,
    busy: bool,
    dispatched: u64,
    /// Requests of the process allocated and not completed (`bic->requests`).
    requests: u64,
    wait_request: bool,
    non_blocking_wait_rq: bool,
    has_short_ttime: bool,
    io_bound: bool,
    just_created: bool,
    softrt_update: bool,
    in_groups_with_pending: bool,
    /// Budget deadline while in service; when emptied, the time it emptied; `None` is the
    /// far past (`bfq_smallest_from_now`).
    budget_timeout: Option<Nanos>,
    last_end_request: Nanos,
    ttime_samples: u64,
    ttime_total: u64,
    ttime_mean: u64,
    seek_history: u32,
    last_request_pos: u64,
    io_start_time: Nanos,
    tot_idle_time: Nanos,
    wr_coeff: u64,
    wr_cur_max_time: Nanos,
    last_wr_start_finish: Nanos,
    wr_start_at_switch_to_srt: Option<Nanos>,
    service_from_wr: u64,
    soft_rt_next_start: Nanos,
    last_idle_bklogged: Nanos,
    service_from_backlogged: u64,
    inject_limit: u64,
    last_serv_time_ns: Nanos,
    decrease_time_jif: Nanos,
    waker: Option<u32>,
    tentative_waker: Option<u32>,
    num_waker_detections: u32,
    waker_detection_started: Nanos,
    /// Queues this one wakes, the most recent first (`woken_list`).
    woken: Vec<u32>,
}

impl Queue {
    fn new(weight: u32) -> Self {
        Queue {
            created: false,
            fifo: VecDeque::new(),
            weight: weight as u64,
            start: 0,
            finish: 0,
            tree: Tree::None,
            tree_seq: 0,
            on_st: false,
            gbudget: 0,
            gservice: 0,
            budget: 0,
            service: 0,
            max_budget: 0,
            list_seq: 0,
            on_list: false,
            busy: false,
            dispatched: 0,
            requests: 0,
            wait_request: false,
            non_blocking_wait_rq: false,
            has_short_ttime: true,
            io_bound: true,
            just_created: true,
            softrt_update: false,
            in_groups_with_pending: false,
            budget_timeout: None,
            last_end_request: 0,
            ttime_samples: 0,
            ttime_total: 0,
            ttime_mean: 0,
            seek_history: 1,
            last_request_pos: 0,
            io_start_time: 0,
            tot_idle_time: 0,
            wr_coeff: 1,
            wr_cur_max_time: 0,
            last_wr_start_finish: 0,
            wr_start_at_switch_to_srt: None,
            service_from_wr: 0,
            soft_rt_next_start: 0,
            last_idle_bklogged: 0,
            service_from_backlogged: 0,
            inject_limit: 0,
            last_serv_time_ns: 0,
            decrease_time_jif: 0,
            waker: None,
            tentative_waker: None,
            num_waker_detections: 0,
            waker_detection_started: 0,
            woken: Vec::new(),
        }
    }

    #[inline]
    fn budget_left(&self) -> i64 {
        self.budget as i64 - self.service as i64
    }

    /// `BFQQ_SEEKY`.
    #[inline]
    fn seeky(&self) -> bool {
        self.seek_history.count_ones() > BFQQ_SEEKY_HITS
    }

    #[inline]
    fn head_sectors(&self) -> Option<u64> {
        self.fifo.front().map(sectors)
    }

    /// `bfq_bfqq_budget_timeout`.
    #[inline]
    fn budget_timed_out(&self, now: Nanos) -> bool {
        self.budget_timeout.is_none_or(|t| t <= now)
    }
}

/// Sectors of a request (`blk_rq_sectors`, rounded up, at least one).
#[inline]
fn sectors(req: &Request) -> u64 {
    (req.bytes as u64).div_ceil(SECTOR_BYTES).max(1)
}

/// First sector of a request (`blk_rq_pos`).
#[inline]
fn position(req: &Request) -> u64 {
    req.offset / SECTOR_BYTES
}

/// Service mapped into virtual time (`bfq_delta`).
#[inline]
fn bfq_delta(service: u64, weight: u64) -> u64 {
    (service << WFQ_SERVICE_SHIFT) / weight.max(1)
}

/// Linux BFQ between tenants, one cgroup each (see the module documentation).
#[derive(Clone, Debug)]
pub struct Bfq {
    weights: Vec<u32>,
    slice_idle: Nanos,
    low_latency: bool,
    rotational: bool,
    /// `bfq_user_max_budget` (0: automatic).
    user_max_budget: u64,
    queues: Vec<Queue>,
    st: ServiceTree,
    seq: u64,
    next_in_service: Option<u32>,
    in_service_entity: Option<u32>,
    in_service: Option<u32>,
    /// Busy queues not in service, by list order (`active_list`, most recent first).
    active_list: SortedSet<(std::cmp::Reverse<u64>, u32)>,
    busy_queues: u64,
    wr_busy_queues: u64,
    queued: usize,
    rq_in_driver: u64,
    groups_with_pending: u64,
    budgets_assigned: u32,
    /// `bfqd->bfq_max_budget`.
    max_budget: u64,
    /// -1 unknown, 0 no command queueing, 1 command queueing (`hw_tag`).
    hw_tag: i8,
    max_rq_in_driver: u64,
    hw_tag_samples: u32,
    idle_timer: Option<Nanos>,
    last_budget_start: Nanos,
    last_idling_start: Nanos,
    waited_rq: Option<u64>,
    wait_dispatch: bool,
    rqs_injected: bool,
    last_empty_occupied_ns: Nanos,
    last_completion: Nanos,
    last_completed: Option<u32>,
    peak_rate: u64,
    rate_dur_prod: u64,
    peak_rate_samples: u32,
    sequential_samples: u32,
    tot_sectors_dispatched: u64,
    last_rq_max_size: u64,
    delta_from_first: Nanos,
    first_dispatch: Nanos,
    last_dispatch: Nanos,
    last_position: u64,
    expirations: [u64; 5],
}

impl Bfq {
    /// BFQ between tenants with cgroup weight `weights[i]` for tenant `i` (1 to 1000;
    /// tenants beyond the list weigh [`BFQ_DEFAULT_GRP_WEIGHT`]), every tunable at its
    /// default, on a non-rotational device.
    pub fn new(weights: Vec<u32>) -> Result<Self> {
        if weights.len() > MAX_TENANTS as usize {
            return config(format!("{NAME}: {} weights for at most {MAX_TENANTS} tenants", weights.len()));
        }
        for (i, &w) in weights.iter().enumerate() {
            if !(BFQ_MIN_WEIGHT..=BFQ_MAX_WEIGHT).contains(&w) {
                return config(format!(
                    "{NAME}: weight of tenant {i} is {w}; the kernel takes {BFQ_MIN_WEIGHT} to {BFQ_MAX_WEIGHT} \
                     (blkio.bfq.weight)"
                ));
            }
        }
        Ok(Bfq {
            weights,
            slice_idle: BFQ_SLICE_IDLE,
            low_latency: true,
            rotational: false,
            user_max_budget: 0,
            queues: Vec::new(),
            st: BFQ_SERVICE_TREE_INIT,
            seq: 0,
            next_in_service: None,
            in_service_entity: None,
            in_service: None,
            active_list: SortedSet::new(),
            busy_queues: 0,
            wr_busy_queues: 0,
            queued: 0,
            rq_in_driver: 0,
            groups_with_pending: 0,
            budgets_assigned: 0,
            max_budget: BFQ_DEFAULT_MAX_BUDGET,
            hw_tag: -1,
            max_rq_in_driver: 0,
            hw_tag_samples: 0,
            idle_timer: None,
            last_budget_start: 0,
            last_idling_start: 0,
            waited_rq: None,
            wait_dispatch: false,
            rqs_injected: false,
            last_empty_occupied_ns: 0,
            last_completion: 0,
            last_completed: None,
            peak_rate: REF_RATE[1] * 2 / 3,
            rate_dur_prod: REF_RATE[1] * REF_WR_DURATION[1],
            peak_rate_samples: 0,
            sequential_samples: 0,
            tot_sectors_dispatched: 0,
            last_rq_max_size: 0,
            delta_from_first: 0,
            first_dispatch: 0,
            last_dispatch: 0,
            last_position: 0,
            expirations: [0; 5],
        })
    }

    /// Set `slice_idle` (0 disables idling). Set before use.
    pub fn with_slice_idle(mut self, slice_idle: Nanos) -> Self {
        self.slice_idle = slice_idle;
        self
    }

    /// Set `low_latency` (weight raising). Set before use.
    pub fn with_low_latency(mut self, on: bool) -> Self {
        self.low_latency = on;
        self
    }

    /// Declare the device rotational or not (`queue/rotational`), which picks the
    /// reference peak rate and weight-raising duration and the seek rules. Set before use.
    pub fn with_rotational(mut self, rotational: bool) -> Self {
        self.rotational = rotational;
        let k = usize::from(!rotational);
        self.peak_rate = REF_RATE[k] * 2 / 3;
        self.rate_dur_prod = REF_RATE[k] * REF_WR_DURATION[k];
        self
    }

    /// Set `max_budget` in sectors (capped at `INT_MAX` as the kernel does; 0 returns to
    /// the automatic value). Set before use.
    pub fn with_max_budget(mut self, sectors: u64) -> Self {
        let b = sectors.min(i32::MAX as u64);
        self.user_max_budget = b;
        self.max_budget = if b == 0 { self.calc_max_budget() } else { b };
        self
    }

    /// The cgroup weight of `tenant`.
    pub fn weight(&self, tenant: u32) -> u32 {
        self.weights.get(tenant as usize).copied().unwrap_or(BFQ_DEFAULT_GRP_WEIGHT)
    }

    /// The tenant whose queue is in service, if any.
    pub fn in_service(&self) -> Option<u32> {
        self.in_service
    }

    /// The device is plugged: the in-service queue is empty and waiting for its next
    /// request until the idle timer ([`Scheduler::next_timer`]).
    pub fn is_idling(&self) -> bool {
        self.idle_timer.is_some()
    }

    /// Weight-raising factor of `tenant`'s queue (1: not raised).
    pub fn wr_coeff(&self, tenant: u32) -> u64 {
        self.queues.get(tenant as usize).map_or(1, |q| q.wr_coeff)
    }

    /// Budget of `tenant`'s queue, in sectors.
    pub fn budget(&self, tenant: u32) -> u64 {
        self.queues.get(tenant as usize).map_or(0, |q| q.budget)
    }

    /// Requests queued for `tenant`.
    pub fn queued_in(&self, tenant: u32) -> usize {
        self.queues.get(tenant as usize).map_or(0, |q| q.fifo.len())
    }

    /// The maximum budget in effect, in sectors (`bfq_max_budget`).
    pub fn max_budget(&self) -> u64 {
        if self.budgets_assigned < BFQ_STATS_MIN_BUDGETS {
            BFQ_DEFAULT_MAX_BUDGET
        } else {
            self.max_budget
        }
    }

    /// The estimated peak rate of the device, in sectors per second.
    pub fn peak_rate(&self) -> f64 {
        self.peak_rate as f64 * 1e6 / (1u64 << BFQ_RATE_SHIFT) as f64
    }

    /// Duration of an interactive weight raising at the current peak rate
    /// (`bfq_wr_duration`).
    pub fn wr_duration(&self) -> Nanos {
        let (lo, hi) = BFQ_WR_DURATION_RANGE;
        (self.rate_dur_prod / self.peak_rate.max(1)).clamp(lo, hi)
    }

    /// Expirations so far, indexed by [`Expiration`] (`as usize`).
    pub fn expirations(&self) -> [u64; 5] {
        self.expirations
    }

    /// `bfq_min_budget`.
    fn min_budget(&self) -> u64 {
        self.max_budget() / 32
    }

    /// `bfq_calc_max_budget`: sectors served in a budget timeout at the peak rate.
    fn calc_max_budget(&self) -> u64 {
        (self.peak_rate * 1_000 * (BFQ_TIMEOUT / NS_PER_MS)) >> BFQ_RATE_SHIFT
    }

    #[inline]
    fn q(&self, i: u32) -> &Queue {
        &self.queues[i as usize]
    }

    #[inline]
    fn qm(&mut self, i: u32) -> &mut Queue {
        &mut self.queues[i as usize]
    }

    /// The queue of `tenant`, created (`bfq_init_bfqq`) at its first request.
    fn queue_for(&mut self, tenant: u32, now: Nanos) {
        let i = tenant as usize;
        if i >= self.queues.len() {
            let base = self.queues.len();
            let ws: Vec<u32> = (base..=i).map(|j| self.weight(j as u32)).collect();
            self.queues.extend(ws.into_iter().map(Queue::new));
        }
        if !self.queues[i].created {
            let max_budget = 2 * self.max_budget() / 3;
            let q = &mut self.queues[i];
            q.created = true;
            q.last_end_request = now;
            q.io_start_time = now;
            q.max_budget = max_budget;
            q.last_wr_start_finish = now;
            q.soft_rt_next_start = now;
            q.decrease_time_jif = now;
        }
    }

    // ----- the root service tree (bfq-wf2q.c) -----

    fn active_insert(&mut self, i: u32) {
        self.seq += 1;
        let seq = self.seq;
        let q = &mut self.queues[i as usize];
        q.tree = Tree::Active;
        q.tree_seq = seq;
        self.st.active.insert((q.finish, seq, i));
        self.st.starts.insert((q.start, i));
    }

    fn active_extract(&mut self, i: u32) {
        let q = &mut self.queues[i as usize];
        debug_assert_eq!(q.tree, Tree::Active);
        self.st.active.remove(&(q.finish, q.tree_seq, i));
        self.st.starts.remove(&(q.start, i));
        q.tree = Tree::None;
    }

    fn idle_insert(&mut self, i: u32) {
        self.seq += 1;
        let seq = self.seq;
        let q = &mut self.queues[i as usize];
        q.tree = Tree::Idle;
        q.tree_seq = seq;
        self.st.idle.insert((q.finish, seq, i));
    }

    fn idle_extract(&mut self, i: u32) {
        let q = &mut self.queues[i as usize];
        debug_assert_eq!(q.tree, Tree::Idle);
        self.st.idle.remove(&(q.finish, q.tree_seq, i));
        q.tree = Tree::None;
    }

    /// `bfq_forget_entity`.
    fn forget(&mut self, i: u32) {
        let q = &mut self.queues[i as usize];
        q.on_st = false;
        self.st.wsum -= q.weight;
    }

    /// `bfq_forget_idle`.
    fn forget_idle(&mut self) {
        if self.st.active.is_empty() {
            if let Some(&(last, _, _)) = self.st.idle.last() {
                if last <= self.st.vtime {
                    self.st.vtime = last;
                }
            }
        }
        if let Some(&(first, _, i)) = self.st.idle.first() {
            if first <= self.st.vtime {
                self.idle_extract(i);
                self.forget(i);
            }
        }
    }

    /// `bfq_update_vtime`.
    fn update_vtime(&mut self, v: u64) {
        if v > self.st.vtime {
            self.st.vtime = v;
            self.forget_idle();
        }
    }

    /// `__bfq_lookup_next_entity`: the eligible active entity of smallest finish, after the
    /// virtual-time jump that makes one eligible (applied when nothing is in service).
    fn lookup_next(&mut self, in_service: bool) -> Option<u32> {
        let &(min_start, _) = self.st.starts.first()?;
        let v = self.st.vtime.max(min_start);
        if !in_service {
            self.update_vtime(v);
        }
        let queues = &self.queues;
        self.st.active.iter().find(|&&(_, _, i)| queues[i as usize].start <= v).map(|&(_, _, i)| i)
    }

    /// `bfq_update_next_in_service` at the root.
    fn update_next_in_service(&mut self, new: Option<u32>, expiration: bool) {
        let mut next = self.next_in_service;
        let mut change_without_lookup = false;
        if let Some(n) = new.filter(|&n| Some(n) != self.next_in_service) {
            change_without_lookup = match self.next_in_service {
                None => true,
                Some(cur) => self.q(n).start <= self.st.vtime && self.q(cur).finish > self.q(n).finish,
            };
            if change_without_lookup {
                next = Some(n);
            }
        }
        if !change_without_lookup {
            next = self.lookup_next(self.in_service_entity.is_some() && !expiration);
        }
        self.next_in_service = next;
    }

    /// `bfq_update_fin_time_enqueue` for a group entity.
    fn fin_time_enqueue(&mut self, i: u32, backshifted: bool) {
        let vtime = self.st.vtime;
        let q = &mut self.queues[i as usize];
        q.finish = q.start + bfq_delta(q.gbudget, q.weight);
        if backshifted && vtime > q.finish {
            let d = vtime - q.finish;
            q.start += d;
            q.finish += d;
        }
        self.active_insert(i);
    }

    /// `__bfq_activate_entity` for a group entity.
    fn activate_entity(&mut self, i: u32, non_blocking_wait_rq: bool) {
        let vtime = self.st.vtime;
        let (finish, tree) = (self.q(i).finish, self.q(i).tree);
        let backshifted = non_blocking_wait_rq && vtime > finish;
        let min_vstart = if backshifted { finish } else { vtime };
        if tree == Tree::Idle {
            self.idle_extract(i);
            self.qm(i).start = min_vstart.max(finish);
        } else {
            debug_assert!(!self.q(i).on_st);
            let q = &mut self.queues[i as usize];
            q.start = min_vstart;
            q.on_st = true;
            self.st.wsum += q.weight;
        }
        self.fin_time_enqueue(i, backshifted);
    }

    /// `__bfq_requeue_entity` for a group entity.
    fn requeue_entity(&mut self, i: u32) {
        if self.in_service_entity == Some(i) {
            let q = &mut self.queues[i as usize];
            q.finish = q.start + bfq_delta(q.gservice, q.weight);
            q.start = q.finish;
            if q.tree == Tree::Active {
                self.active_extract(i);
            }
        } else {
            self.active_extract(i);
        }
        self.fin_time_enqueue(i, false);
    }

    /// `bfq_deactivate_entity` for a group whose only queue leaves the busy set.
    fn deactivate_entity(&mut self, i: u32, expiration: bool) {
        if !self.q(i).on_st {
            return;
        }
        let in_service = self.in_service_entity == Some(i);
        if in_service {
            let q = &mut self.queues[i as usize];
            q.finish = q.start + bfq_delta(q.gservice, q.weight);
            self.in_service_entity = None;
        }
        match self.q(i).tree {
            Tree::Active => self.active_extract(i),
            Tree::Idle if !in_service => self.idle_extract(i),
            _ => {}
        }
        if self.q(i).finish <= self.st.vtime {
            self.forget(i);
        } else {
            self.idle_insert(i);
        }
        if self.next_in_service == Some(i) {
            self.update_next_in_service(None, expiration);
        }
    }

    /// The queue entity enters its group's active tree: head of `active_list`.
    fn list_touch(&mut self, i: u32) {
        self.list_remove(i);
        self.seq += 1;
        let seq = self.seq;
        let q = &mut self.queues[i as usize];
        q.list_seq = seq;
        q.on_list = true;
        self.active_list.insert((std::cmp::Reverse(seq), i));
    }

    fn list_remove(&mut self, i: u32) {
        let q = &mut self.queues[i as usize];
        if q.on_list {
            q.on_list = false;
            self.active_list.remove(&(std::cmp::Reverse(q.list_seq), i));
        }
    }

    /// `bfq_bfqq_served`: charge `served` sectors to the queue and its group.
    fn served(&mut self, i: u32, served: u64) {
        let q = &mut self.queues[i as usize];
        if q.wr_coeff > 1 {
            q.service_from_wr += served;
        }
        q.service_from_backlogged += served;
        q.service += served;
        q.gservice += served;
        let wsum = self.st.wsum;
        self.st.vtime += bfq_delta(served, wsum);
        self.forget_idle();
    }

    // ----- busy set, activation, requeue (bfq-wf2q.c) -----

    /// `bfq_activate_bfqq`.
    fn activate_bfqq(&mut self, i: u32) {
        self.list_touch(i);
        let q = &mut self.queues[i as usize];
        q.gbudget = q.budget;
        let nbwr = q.non_blocking_wait_rq;
        self.activate_entity(i, nbwr);
        self.update_next_in_service(Some(i), false);
        self.qm(i).non_blocking_wait_rq = false;
    }

    /// `bfq_requeue_bfqq`: reposition a queue whose budget changed, or requeue the
    /// expiring in-service queue.
    fn requeue_bfqq(&mut self, i: u32, expiration: bool) {
        let in_service = self.in_service == Some(i);
        self.list_touch(i);
        let q = &mut self.queues[i as usize];
        let decreased = q.gbudget > q.budget;
        q.gbudget = q.budget;
        if !in_service && !decreased {
            return;
        }
        self.requeue_entity(i);
        self.update_next_in_service(Some(i), expiration);
    }

    fn add_pending(&mut self, i: u32) {
        let q = &mut self.queues[i as usize];
        if !q.in_groups_with_pending {
            q.in_groups_with_pending = true;
            self.groups_with_pending += 1;
        }
    }

    fn del_pending(&mut self, i: u32) {
        let q = &mut self.queues[i as usize];
        if q.in_groups_with_pending {
            q.in_groups_with_pending = false;
            self.groups_with_pending -= 1;
        }
    }

    /// `bfq_add_bfqq_busy`.
    fn add_bfqq_busy(&mut self, i: u32) {
        self.activate_bfqq(i);
        let q = &mut self.queues[i as usize];
        q.busy = true;
        let (dispatched, wr, waker) = (q.dispatched, q.wr_coeff, q.waker);
        self.busy_queues += 1;
        if dispatched == 0 {
            self.add_pending(i);
        }
        if wr > 1 {
            self.wr_busy_queues += 1;
        }
        if let Some(w) = waker {
            let woken = &mut self.queues[w as usize].woken;
            if let Some(pos) = woken.iter().position(|&x| x == i) {
                woken.remove(pos);
                woken.insert(0, i);
            }
        }
    }

    /// `bfq_del_bfqq_busy`.
    fn del_bfqq_busy(&mut self, i: u32, expiration: bool) {
        let q = &mut self.queues[i as usize];
        q.busy = false;
        let (dispatched, wr) = (q.dispatched, q.wr_coeff);
        self.busy_queues -= 1;
        if wr > 1 {
            self.wr_busy_queues -= 1;
        }
        self.list_remove(i);
        self.deactivate_entity(i, expiration);
        if dispatched == 0 {
            self.del_pending(i);
        }
    }

    /// `bfq_get_next_queue` + `__bfq_set_in_service_queue`.
    fn set_in_service(&mut self, now: Nanos) -> Option<u32> {
        if self.busy_queues == 0 {
            return None;
        }
        let i = match self.next_in_service {
            Some(i) => i,
            None => self.lookup_next(false)?,
        };
        self.in_service_entity = Some(i);
        self.active_extract(i);
        self.list_remove(i);
        self.next_in_service = Some(i);
        self.budgets_assigned = (self.budgets_assigned * 7 + 256) / 8;
        let q = &mut self.queues[i as usize];
        q.gservice = 0;
        q.service = 0;
        if now > q.last_wr_start_finish
            && q.wr_coeff > 1
            && q.wr_cur_max_time == BFQ_WR_RT_MAX_TIME
            && q.budget_timeout.is_none_or(|t| t < now)
        {
            // A soft real-time queue's raising period is moved on by the time it waited.
            match q.budget_timeout {
                Some(t) if t > q.last_wr_start_finish => q.last_wr_start_finish += now - t,
                _ => q.last_wr_start_finish = now,
            }
        }
        // bfq_set_budget_timeout
        let coeff = if q.wr_cur_max_time == BFQ_WR_RT_MAX_TIME { 1 } else { q.wr_coeff };
        q.budget_timeout = Some(now + BFQ_TIMEOUT * coeff);
        self.last_budget_start = now;
        self.in_service = Some(i);
        Some(i)
    }

    /// `__bfq_bfqd_reset_in_service`.
    fn reset_in_service(&mut self) {
        if let Some(i) = self.in_service.take() {
            self.qm(i).wait_request = false;
        }
        self.idle_timer = None;
        self.in_service_entity = None;
    }

    // ----- idling decisions (bfq-iosched.c) -----

    /// `bfq_asymmetric_scenario`: queue weights are all the default and every queue is
    /// best effort, so only the groups count.
    fn asymmetric_scenario(&self) -> bool {
        self.groups_with_pending > 1
    }

    /// `idling_boosts_thr_without_issues`.
    fn idling_boosts_thr_without_issues(&self, i: u32) -> bool {
        let q = self.q(i);
        let rot_without_queueing = self.rotational && self.hw_tag == 0;
        let seq_io_bound = !q.seeky() && q.io_bound && q.has_short_ttime;
        let boosts = rot_without_queueing || ((self.rotational || self.hw_tag == 0) && seq_io_bound);
        boosts && self.wr_busy_queues == 0
    }

    /// `idling_needed_for_service_guarantees`.
    fn idling_needed_for_service_guarantees(&self, i: u32) -> bool {
        let q = self.q(i);
        (q.wr_coeff > 1 && (self.wr_busy_queues < self.busy_queues || self.rq_in_driver >= q.dispatched + 4))
            || self.asymmetric_scenario()
            || self.busy_queues == 1
    }

    /// `bfq_better_to_idle`.
    fn better_to_idle(&self, i: u32) -> bool {
        self.slice_idle != 0
            && (self.idling_boosts_thr_without_issues(i) || self.idling_needed_for_service_guarantees(i))
    }

    /// `bfq_bfqq_must_idle`.
    fn must_idle(&self, i: u32) -> bool {
        self.q(i).fifo.is_empty() && self.better_to_idle(i)
    }

    /// `bfq_may_expire_for_budg_timeout`.
    fn may_expire_for_budg_timeout(&self, i: u32, now: Nanos) -> bool {
        let q = self.q(i);
        (!q.wait_request || q.budget_left() >= q.budget as i64 / 3) && q.budget_timed_out(now)
    }

    /// `bfq_arm_slice_timer`.
    fn arm_slice_timer(&mut self, now: Nanos) {
        let Some(i) = self.in_service else { return };
        let asymmetric = self.asymmetric_scenario();
        let q = &mut self.queues[i as usize];
        q.wait_request = true;
        let mut sl = self.slice_idle;
        if q.seeky() && q.wr_coeff == 1 && !asymmetric {
            sl = sl.min(BFQ_MIN_TT);
        } else if q.wr_coeff > 1 {
            sl = sl.max(BFQ_WR_MIN_SLICE_IDLE);
        }
        self.last_idling_start = now;
        self.idle_timer = Some(now + sl);
    }

    // ----- expiration (bfq-iosched.c) -----

    /// `bfq_bfqq_is_slow`: whether the queue is slow, and the time it was in service (ms).
    fn is_slow(&self, i: u32, compensate: bool, now: Nanos) -> (bool, u64) {
        let q = self.q(i);
        let mut slow = q.seeky();
        let end = if compensate { self.last_idling_start } else { now };
        let delta_us = end.saturating_sub(self.last_budget_start) / NS_PER_US;
        if delta_us < 1_000 {
            let ms = if self.rotational { BFQ_SLICE_IDLE / NS_PER_MS } else { BFQ_MIN_TT / NS_PER_MS };
            return (slow, ms);
        }
        if delta_us > 20_000 {
            slow = q.service < self.max_budget / 2;
        }
        (slow, delta_us / 1_000)
    }

    /// `bfq_bfqq_charge_time`.
    fn charge_time(&mut self, i: u32, time_ms: u64) {
        let timeout_ms = BFQ_TIMEOUT / NS_PER_MS;
        let for_time = self.max_budget * time_ms.min(timeout_ms) / timeout_ms;
        let q = &mut self.queues[i as usize];
        let total = for_time.max(q.service);
        if total > q.budget {
            q.budget = total;
        }
        let extra = total - q.service;
        self.served(i, extra);
    }

    /// `bfq_bfqq_softrt_next_start`.
    fn softrt_next_start(&self, i: u32, now: Nanos) -> Nanos {
        let q = self.q(i);
        let by_rate = q.last_idle_bklogged + q.service_from_backlogged * NS_PER_SEC / BFQ_WR_MAX_SOFTRT_RATE;
        q.soft_rt_next_start.max(by_rate).max(now + self.slice_idle + 4 * JIFFY)
    }

    /// `__bfq_bfqq_recalc_budget`.
    fn recalc_budget(&mut self, i: u32, reason: Expiration) {
        let min_budget = self.min_budget();
        let dev_max = self.max_budget;
        let q = &self.queues[i as usize];
        let mut budget = if q.wr_coeff == 1 { q.max_budget } else { 2 * min_budget };
        if q.wr_coeff == 1 {
            budget = match reason {
                Expiration::TooIdle if q.dispatched > 0 => (budget * 2).min(dev_max),
                Expiration::TooIdle if budget > 5 * min_budget => budget - 4 * min_budget,
                Expiration::TooIdle => min_budget,
                Expiration::BudgetTimeout => (budget * 2).min(dev_max),
                Expiration::BudgetExhausted => (budget * 4).min(dev_max),
                Expiration::NoMoreRequests => q.service.max(min_budget),
                Expiration::Preempted => return,
            };
        }
        let cap = self.budgets_assigned >= BFQ_STATS_MIN_BUDGETS && self.user_max_budget == 0;
        let q = &mut self.queues[i as usize];
        q.max_budget = if cap { budget.min(dev_max) } else { budget };
        if let Some(s) = q.head_sectors() {
            q.budget = q.max_budget.max(s);
        }
    }

    /// `__bfq_bfqq_expire`.
    fn expire_queue(&mut self, i: u32, now: Nanos, reason: Expiration) {
        let keep = reason == Expiration::Preempted && self.idling_needed_for_service_guarantees(i);
        if self.q(i).fifo.is_empty() && !keep {
            if self.q(i).dispatched == 0 {
                self.qm(i).budget_timeout = Some(now);
            }
            self.del_bfqq_busy(i, true);
        } else {
            self.requeue_bfqq(i, true);
        }
        self.reset_in_service();
    }

    /// `bfq_bfqq_expire`.
    fn expire(&mut self, i: u32, now: Nanos, compensate: bool, reason: Expiration) {
        self.expirations[reason as usize] += 1;
        let (slow, delta_ms) = self.is_slow(i, compensate, now);
        let q = self.q(i);
        if q.wr_coeff == 1 && (slow || (reason == Expiration::BudgetTimeout && q.budget_left() >= q.budget as i64 / 3))
        {
            self.charge_time(i, delta_ms);
        }
        if self.low_latency && self.q(i).wr_coeff == 1 {
            self.qm(i).last_wr_start_finish = now;
        }
        if self.low_latency && self.q(i).fifo.is_empty() {
            if self.q(i).dispatched == 0 {
                let t = self.softrt_next_start(i, now);
                self.qm(i).soft_rt_next_start = t;
            } else {
                self.qm(i).softrt_update = true;
            }
        }
        self.rqs_injected = false;
        self.wait_dispatch = false;
        self.waited_rq = None;
        self.recalc_budget(i, reason);
        self.expire_queue(i, now, reason);
        let q = &mut self.queues[i as usize];
        if !q.busy && reason != Expiration::BudgetTimeout && reason != Expiration::BudgetExhausted {
            q.non_blocking_wait_rq = true;
        } else {
            q.service = 0;
        }
        q.gservice = 0;
    }

    // ----- weight raising (bfq-iosched.c) -----

    /// `bfq_bfqq_end_wr`.
    fn end_wr(&mut self, i: u32, now: Nanos) {
        let q = &mut self.queues[i as usize];
        if q.wr_cur_max_time != BFQ_WR_RT_MAX_TIME {
            q.soft_rt_next_start = now;
        }
        if q.busy {
            self.wr_busy_queues -= 1;
        }
        q.wr_coeff = 1;
        q.wr_cur_max_time = 0;
        q.last_wr_start_finish = now;
    }

    /// `switch_back_to_interactive_wr`, when the soft real-time period began inside an
    /// interactive one that is not over; else the raising ends.
    fn end_softrt_wr(&mut self, i: u32, now: Nanos) {
        let dur = self.wr_duration();
        match self.q(i).wr_start_at_switch_to_srt {
            Some(t) if now <= t + dur => {
                let q = &mut self.queues[i as usize];
                q.wr_coeff = BFQ_WR_COEFF;
                q.wr_cur_max_time = dur;
                q.last_wr_start_finish = t;
            }
            _ => self.end_wr(i, now),
        }
    }

    /// `bfq_update_wr_data`, after the in-service queue dispatched.
    fn update_wr_data(&mut self, i: u32, now: Nanos) {
        let q = self.q(i);
        if q.wr_coeff == 1 {
            return;
        }
        if now > q.last_wr_start_finish + q.wr_cur_max_time {
            if q.wr_cur_max_time != BFQ_WR_RT_MAX_TIME {
                self.end_wr(i, now);
            } else {
                self.end_softrt_wr(i, now);
            }
        }
        let q = self.q(i);
        if q.wr_coeff > 1 && q.wr_cur_max_time != BFQ_WR_RT_MAX_TIME && q.service_from_wr > MAX_SERVICE_FROM_WR {
            self.end_wr(i, now);
        }
    }

    /// `bfq_update_bfqq_wr_on_rq_arrival` (no large bursts: every group has one queue).
    fn update_wr_on_arrival(
        &mut self,
        i: u32,
        old_wr: u64,
        deserves: bool,
        interactive: bool,
        soft_rt: bool,
        now: Nanos,
    ) {
        let dur = self.wr_duration();
        let two_min = 2 * self.min_budget();
        let q = &mut self.queues[i as usize];
        if old_wr == 1 && deserves {
            if interactive {
                q.service_from_wr = 0;
                q.wr_coeff = BFQ_WR_COEFF;
                q.wr_cur_max_time = dur;
            } else {
                q.wr_start_at_switch_to_srt = None;
                q.wr_coeff = BFQ_WR_COEFF * BFQ_SOFTRT_WEIGHT_FACTOR;
                q.wr_cur_max_time = BFQ_WR_RT_MAX_TIME;
            }
            q.budget = q.budget.min(two_min);
        } else if old_wr > 1 {
            if interactive {
                q.wr_coeff = BFQ_WR_COEFF;
                q.wr_cur_max_time = dur;
            } else if soft_rt {
                if q.wr_cur_max_time != BFQ_WR_RT_MAX_TIME {
                    q.wr_start_at_switch_to_srt = Some(q.last_wr_start_finish);
                    q.wr_cur_max_time = BFQ_WR_RT_MAX_TIME;
                    q.wr_coeff = BFQ_WR_COEFF * BFQ_SOFTRT_WEIGHT_FACTOR;
                }
                q.last_wr_start_finish = now;
            }
        }
    }

    /// `bfq_bfqq_handle_idle_busy_switch`; returns whether the queue is interactive.
    fn handle_idle_busy_switch(&mut self, i: u32, old_wr: u64, now: Nanos) -> bool {
        let slice_idle = self.slice_idle;
        let q = self.q(i);
        let idle_for_long_time = q.dispatched == 0 && q.budget_timeout.is_none_or(|t| t + BFQ_WR_MIN_IDLE_TIME < now);
        let arrived_in_time = now <= q.last_end_request + 3 * slice_idle;
        let soft_rt = q.seek_history != u32::MAX && q.soft_rt_next_start < now && q.dispatched == 0;
        let interactive = idle_for_long_time;
        let deserves = self.low_latency && (q.wr_coeff > 1 || interactive || soft_rt);
        // bfq_bfqq_update_budg_for_activation
        let max_budget = q.max_budget;
        let head = q.head_sectors().unwrap_or(1);
        let q = &mut self.queues[i as usize];
        let wants_to_preempt = q.non_blocking_wait_rq && arrived_in_time && q.budget_left() > 0;
        if wants_to_preempt {
            q.budget = (q.budget_left() as u64).min(max_budget);
        } else {
            q.budget = max_budget.max(head);
            q.non_blocking_wait_rq = false;
        }
        q.service = 0;
        q.just_created = false;
        if self.low_latency {
            self.update_wr_on_arrival(i, old_wr, deserves, interactive, soft_rt, now);
        }
        let q = &mut self.queues[i as usize];
        q.last_idle_bklogged = now;
        q.service_from_backlogged = 0;
        q.softrt_update = false;
        self.add_bfqq_busy(i);
        if let Some(s) = self.in_service {
            let preempt = (wants_to_preempt && self.q(i).wr_coeff >= self.q(s).wr_coeff)
                || self.weight(i) > self.weight(s)
                || !self.better_to_idle(s);
            if preempt && self.next_in_service != self.in_service_entity {
                self.expire(s, now, false, Expiration::Preempted);
            }
        }
        interactive
    }

    // ----- think time, seeks, I/O intensity, injection (bfq-iosched.c) -----

    /// `bfq_update_io_thinktime`.
    fn update_io_thinktime(&mut self, i: u32, now: Nanos) {
        let cap = 2 * self.slice_idle;
        let q = &mut self.queues[i as usize];
        if q.dispatched > 0 || q.busy {
            return;
        }
        let elapsed = now.saturating_sub(q.last_end_request).min(cap);
        q.ttime_samples = (7 * q.ttime_samples + 256) / 8;
        q.ttime_total = (7 * q.ttime_total + 256 * elapsed) / 8;
        q.ttime_mean = (q.ttime_total + 128) / q.ttime_samples;
    }

    /// `bfq_reset_inject_limit`.
    fn reset_inject_limit(&mut self, i: u32, now: Nanos) {
        self.waited_rq = None;
        let q = &mut self.queues[i as usize];
        q.last_serv_time_ns = 0;
        q.inject_limit = if q.has_short_ttime { 0 } else { 1 };
        q.decrease_time_jif = now;
    }

    /// `bfq_update_has_short_ttime`.
    fn update_has_short_ttime(&mut self, i: u32, now: Nanos) {
        if self.slice_idle == 0 {
            return;
        }
        let half = self.slice_idle >> 1;
        let q = &mut self.queues[i as usize];
        let short = !(q.ttime_samples > 80 && q.ttime_mean > half);
        let changed = short != q.has_short_ttime;
        q.has_short_ttime = short;
        if changed && q.last_serv_time_ns == 0 && (now >= q.decrease_time_jif + 100 * NS_PER_MS || !short) {
            self.reset_inject_limit(i, now);
        }
    }

    /// `BFQ_RQ_SEEKY`.
    fn rq_seeky(&self, last_pos: u64, pos: u64, sectors: u64) -> bool {
        let sdist = if last_pos != 0 { pos.abs_diff(last_pos) } else { 0 };
        sdist > BFQQ_SEEK_THR && (self.rotational || sectors < BFQQ_SECT_THR_NONROT)
    }

    /// `bfq_update_io_seektime`.
    fn update_io_seektime(&mut self, i: u32, pos: u64, sectors: u64, now: Nanos) {
        let seek = self.rq_seeky(self.q(i).last_request_pos, pos, sectors);
        let q = &mut self.queues[i as usize];
        q.seek_history = (q.seek_history << 1) | u32::from(seek);
        if q.wr_coeff > 1 && q.wr_cur_max_time == BFQ_WR_RT_MAX_TIME && q.seek_history == u32::MAX {
            self.end_softrt_wr(i, now);
        }
    }

    /// `bfq_update_io_intensity`.
    fn update_io_intensity(&mut self, i: u32, now: Nanos) {
        let q = &mut self.queues[i as usize];
        let tot_io_time = now.saturating_sub(q.io_start_time);
        if q.fifo.is_empty() && q.dispatched == 0 {
            q.tot_idle_time += now.saturating_sub(q.last_end_request);
        }
        if q.just_created {
            return;
        }
        q.io_bound = q.tot_idle_time.saturating_mul(5) <= tot_io_time;
        if tot_io_time > 200 * NS_PER_MS {
            q.io_start_time = now - tot_io_time / 2;
            q.tot_idle_time /= 2;
        }
    }

    /// `bfq_check_waker`.
    fn check_waker(&mut self, i: u32, now: Nanos) {
        let Some(lc) = self.last_completed else { return };
        let window = 128 * self.slice_idle;
        let q = self.q(i);
        if lc == i || q.has_short_ttime || now - self.last_completion >= BFQ_WAKER_WINDOW || Some(lc) == q.waker {
            return;
        }
        let q = &mut self.queues[i as usize];
        if Some(lc) != q.tentative_waker || now > q.waker_detection_started + window {
            q.tentative_waker = Some(lc);
            q.num_waker_detections = 1;
            q.waker_detection_started = now;
        } else {
            q.num_waker_detections += 1;
        }
        if q.num_waker_detections == BFQ_WAKER_DETECTIONS {
            let old = q.waker.replace(lc);
            q.tentative_waker = None;
            if let Some(o) = old {
                self.queues[o as usize].woken.retain(|&x| x != i);
            }
            self.queues[lc as usize].woken.retain(|&x| x != i);
            self.queues[lc as usize].woken.insert(0, i);
        }
    }

    /// `bfq_update_inject_limit`, at the completion of the sampled request.
    fn update_inject_limit(&mut self, i: u32, now: Nanos) {
        let tot = now.saturating_sub(self.last_empty_occupied_ns);
        let (rqs_injected, max_in_driver, in_driver) = (self.rqs_injected, self.max_rq_in_driver, self.rq_in_driver);
        let q = &mut self.queues[i as usize];
        let old = q.inject_limit;
        if q.last_serv_time_ns > 0 && rqs_injected {
            let threshold = (q.last_serv_time_ns * 3) >> 1;
            if tot >= threshold && old > 0 {
                q.inject_limit -= 1;
                q.decrease_time_jif = now;
            } else if tot < threshold && old <= max_in_driver {
                q.inject_limit += 1;
            }
        }
        if (q.last_serv_time_ns == 0 && in_driver == 1) || tot < q.last_serv_time_ns {
            if q.last_serv_time_ns == 0 {
                q.inject_limit = old.max(1);
            }
            q.last_serv_time_ns = tot;
        } else if !rqs_injected && in_driver == 1 {
            q.last_serv_time_ns = tot;
        }
        self.waited_rq = None;
        self.rqs_injected = false;
    }

    /// Whether busy queue `j` can give a request that fits its budget.
    fn can_give(&self, j: u32) -> bool {
        let q = self.q(j);
        q.busy && q.head_sectors().is_some_and(|s| s as i64 <= q.budget_left())
    }

    /// `bfq_choose_bfqq_for_injection`.
    fn choose_for_injection(&mut self) -> Option<u32> {
        let s = self.q(self.in_service?);
        let always_inject = s.wr_coeff == 1 || !s.has_short_ttime;
        if self.rq_in_driver >= s.inject_limit {
            return None;
        }
        let pick = self.active_list.iter().map(|&(_, j)| j).find(|&j| {
            let q = self.q(j);
            let fits = q.head_sectors().is_some_and(|s| s as i64 <= q.budget_left());
            let large = q.head_sectors().is_some_and(|s| s >= BFQQ_SECT_THR_NONROT);
            fits && (always_inject || q.wr_coeff > 1) && !(!self.rotational && large && self.rq_in_driver >= 1)
        });
        if pick.is_some() {
            self.rqs_injected = true;
        }
        pick
    }

    // ----- dispatch (bfq-iosched.c) -----

    /// `bfq_select_queue`: the queue to dispatch from, in service or injected.
    fn select_queue(&mut self, now: Nanos) -> Option<u32> {
        let mut cur = self.in_service;
        if let Some(i) = cur {
            if self.may_expire_for_budg_timeout(i, now) && !self.must_idle(i) {
                self.expire(i, now, false, Expiration::BudgetTimeout);
                cur = None;
            }
        }
        loop {
            let i = match cur {
                Some(i) => i,
                None => self.set_in_service(now)?,
            };
            let q = self.q(i);
            if let Some(s) = q.head_sectors() {
                if s as i64 > q.budget_left() {
                    self.expire(i, now, false, Expiration::BudgetExhausted);
                    cur = None;
                    continue;
                }
                if q.wait_request {
                    self.qm(i).wait_request = false;
                    self.idle_timer = None;
                }
                return Some(i);
            }
            if q.wait_request || (q.dispatched != 0 && self.better_to_idle(i)) {
                if let Some(w) = q.waker.filter(|&w| self.can_give(w)) {
                    return Some(w);
                }
                if let Some(b) = q.woken.first().copied().filter(|&b| self.can_give(b)) {
                    return Some(b);
                }
                let q = self.q(i);
                if !self.idling_boosts_thr_without_issues(i)
                    && (q.wr_coeff == 1 || self.wr_busy_queues > 1 || !q.has_short_ttime)
                {
                    return self.choose_for_injection();
                }
                return None;
            }
            self.expire(i, now, false, Expiration::NoMoreRequests);
            cur = None;
        }
    }

    /// `bfq_reset_rate_computation`.
    fn reset_rate_computation(&mut self, rq_sectors: Option<u64>, now: Nanos) {
        match rq_sectors {
            Some(s) => {
                self.last_dispatch = now;
                self.first_dispatch = now;
                self.peak_rate_samples = 1;
                self.sequential_samples = 0;
                self.tot_sectors_dispatched = s;
                self.last_rq_max_size = s;
            }
            None => self.peak_rate_samples = 0,
        }
    }

    /// `bfq_update_rate_reset`.
    fn update_rate_reset(&mut self, rq_sectors: Option<u64>, now: Nanos) {
        if self.peak_rate_samples >= BFQ_RATE_MIN_SAMPLES && self.delta_from_first >= BFQ_RATE_MIN_INTERVAL {
            self.delta_from_first = self.delta_from_first.max(self.last_completion.saturating_sub(self.first_dispatch));
            let us = (self.delta_from_first / NS_PER_US).max(1);
            let rate = ((self.tot_sectors_dispatched << BFQ_RATE_SHIFT) / us) as u32 as u64;
            let (samples, seq) = (self.peak_rate_samples as u64, self.sequential_samples as u64);
            let skip = (seq < (3 * samples) >> 2 && rate <= self.peak_rate) || rate > 20 << BFQ_RATE_SHIFT;
            if !skip {
                let weight = (9 * seq / samples).min(8);
                let weight = (weight * self.delta_from_first / BFQ_RATE_REF_INTERVAL).min(8);
                let divisor = 10 - weight;
                self.peak_rate = (self.peak_rate * (divisor - 1) / divisor + rate / divisor).max(1);
                if self.user_max_budget == 0 {
                    self.max_budget = self.calc_max_budget();
                }
            }
        }
        self.reset_rate_computation(rq_sectors, now);
    }

    /// `bfq_update_peak_rate`, at each dispatch.
    fn update_peak_rate(&mut self, pos: u64, sectors: u64, now: Nanos) {
        if self.peak_rate_samples == 0 {
            self.reset_rate_computation(Some(sectors), now);
        } else if now - self.last_dispatch > 100 * NS_PER_MS && self.rq_in_driver == 0 {
            self.update_rate_reset(Some(sectors), now);
        } else {
            self.peak_rate_samples += 1;
            let recent = self.rq_in_driver > 0 || now - self.last_completion < BFQ_MIN_TT;
            if recent && !self.rq_seeky(self.last_position, pos, sectors) {
                self.sequential_samples += 1;
            }
            self.tot_sectors_dispatched += sectors;
            if !self.peak_rate_samples.is_multiple_of(32) {
                self.last_rq_max_size = self.last_rq_max_size.max(sectors);
            } else {
                self.last_rq_max_size = sectors;
            }
            self.delta_from_first = now - self.first_dispatch;
            if self.delta_from_first >= BFQ_RATE_REF_INTERVAL {
                self.update_rate_reset(Some(sectors), now);
            }
        }
        self.last_position = pos + sectors;
        self.last_dispatch = now;
    }

    /// `bfq_updated_next_req`, for a queue not in service whose head changed.
    fn updated_next_req(&mut self, i: u32) {
        if self.in_service == Some(i) {
            return;
        }
        let q = self.q(i);
        let Some(s) = q.head_sectors() else { return };
        let new_budget = q.max_budget.max(s).max(q.service);
        if q.budget != new_budget {
            self.qm(i).budget = new_budget;
            self.requeue_bfqq(i, false);
        }
    }

    /// `bfq_dispatch_rq_from_bfqq`.
    fn dispatch_from(&mut self, i: u32, now: Nanos) -> Request {
        let req = self.qm(i).fifo.pop_front().expect("the selected queue has a request");
        prefetch_ahead(&self.q(i).fifo);
        let (pos, secs) = (position(&req), sectors(&req));
        self.served(i, secs);
        if self.in_service == Some(i) && self.wait_dispatch {
            self.wait_dispatch = false;
            self.waited_rq = Some(req.id);
        }
        self.qm(i).dispatched += 1;
        self.update_peak_rate(pos, secs, now);
        self.queued -= 1;
        if !self.q(i).fifo.is_empty() {
            self.updated_next_req(i);
        } else if self.q(i).busy && self.in_service != Some(i) {
            self.del_bfqq_busy(i, false);
            let q = self.qm(i);
            q.budget = 0;
            q.service = 0;
        }
        if self.in_service == Some(i) {
            self.update_wr_data(i, now);
        }
        self.rq_in_driver += 1;
        req
    }

    /// `bfq_update_hw_tag`, at each completion.
    fn update_hw_tag(&mut self) {
        self.max_rq_in_driver = self.max_rq_in_driver.max(self.rq_in_driver);
        if self.hw_tag == 1 || self.rq_in_driver + self.queued as u64 <= BFQ_HW_QUEUE_THRESHOLD {
            return;
        }
        if let Some(s) = self.in_service {
            let q = self.q(s);
            if q.has_short_ttime
                && q.dispatched + (q.fifo.len() as u64) < BFQ_HW_QUEUE_THRESHOLD
                && self.rq_in_driver < BFQ_HW_QUEUE_THRESHOLD
            {
                return;
            }
        }
        self.hw_tag_samples += 1;
        if self.hw_tag_samples <= BFQ_HW_QUEUE_SAMPLES {
            return;
        }
        self.hw_tag = i8::from(self.max_rq_in_driver > BFQ_HW_QUEUE_THRESHOLD);
        self.max_rq_in_driver = 0;
        self.hw_tag_samples = 0;
    }
}

impl Scheduler for Bfq {
    fn name(&self) -> String {
        NAME.into()
    }

    /// `bfq_insert_request` → `__bfq_insert_request` → `bfq_add_request`, `bfq_rq_enqueued`.
    fn enqueue(&mut self, req: Request, now: Nanos) {
        let i = req.tenant;
        self.queue_for(i, now);
        self.qm(i).requests += 1;
        let (pos, secs) = (position(&req), sectors(&req));
        self.update_io_thinktime(i, now);
        self.update_has_short_ttime(i, now);
        self.update_io_seektime(i, pos, secs, now);
        // bfq_add_request
        let old_wr = self.q(i).wr_coeff;
        self.queued += 1;
        if self.q(i).requests <= 1 {
            self.check_waker(i, now);
            if now >= self.q(i).decrease_time_jif + BFQ_INJECT_RESET_PERIOD {
                self.reset_inject_limit(i, now);
            }
            let q = self.q(i);
            let sample = self.rq_in_driver == 0 || (q.last_serv_time_ns > 0 && self.rqs_injected);
            if self.in_service == Some(i) && sample && now >= q.decrease_time_jif + 10 * NS_PER_MS {
                self.last_empty_occupied_ns = now;
                self.wait_dispatch = true;
                if self.rq_in_driver == 0 {
                    self.rqs_injected = false;
                }
            }
        }
        self.update_io_intensity(i, now);
        self.qm(i).fifo.push_back(req);
        let interactive = if self.q(i).busy { false } else { self.handle_idle_busy_switch(i, old_wr, now) };
        let low_latency = self.low_latency;
        let q = self.qm(i);
        if low_latency && (old_wr == 1 || q.wr_coeff == 1 || interactive) {
            q.last_wr_start_finish = now;
        }
        // bfq_rq_enqueued
        q.last_request_pos = pos + secs;
        if self.in_service == Some(i) && self.q(i).wait_request {
            let small = self.q(i).fifo.len() == 1 && secs < 32;
            let timed_out = self.q(i).budget_timed_out(now);
            if small && self.idling_boosts_thr_without_issues(i) && !timed_out {
                return;
            }
            self.qm(i).wait_request = false;
            self.idle_timer = None;
            if timed_out {
                self.expire(i, now, false, Expiration::BudgetTimeout);
            }
        }
    }

    /// `__bfq_dispatch_request`.
    fn dispatch(&mut self, now: Nanos, _dev: &DeviceState) -> Option<Request> {
        if self.busy_queues == 0 {
            return None;
        }
        let i = self.select_queue(now)?;
        Some(self.dispatch_from(i, now))
    }

    /// `bfq_finish_requeue_request` → `bfq_update_inject_limit`, `bfq_completed_request`.
    fn complete(&mut self, done: &Completion, now: Nanos) {
        let i = done.req.tenant;
        if self.queues.get(i as usize).is_none_or(|q| q.dispatched == 0) {
            debug_assert!(false, "bfq: completion of a request it did not dispatch");
            return;
        }
        if self.waited_rq == Some(done.req.id) {
            self.update_inject_limit(i, now);
        }
        self.update_hw_tag();
        self.rq_in_driver -= 1;
        self.qm(i).dispatched -= 1;
        if self.q(i).dispatched == 0 && !self.q(i).busy {
            self.qm(i).budget_timeout = Some(now);
            self.del_pending(i);
        }
        self.qm(i).last_end_request = now;
        let delta_us = now.saturating_sub(self.last_completion) / NS_PER_US;
        if delta_us > BFQ_MIN_TT / NS_PER_US && (self.last_rq_max_size << BFQ_RATE_SHIFT) / delta_us < 1 << 6 {
            self.update_rate_reset(None, now);
        }
        self.last_completion = now;
        self.last_completed = Some(i);
        let q = self.q(i);
        if q.softrt_update && q.dispatched == 0 && q.fifo.is_empty() && q.wr_coeff != BFQ_WR_COEFF {
            let t = self.softrt_next_start(i, now);
            self.qm(i).soft_rt_next_start = t;
        }
        if self.in_service == Some(i) {
            if self.must_idle(i) {
                if self.q(i).dispatched == 0 {
                    self.arm_slice_timer(now);
                }
            } else if self.may_expire_for_budg_timeout(i, now) {
                self.expire(i, now, false, Expiration::BudgetTimeout);
            } else if self.q(i).fifo.is_empty() && (self.q(i).dispatched == 0 || !self.better_to_idle(i)) {
                self.expire(i, now, false, Expiration::NoMoreRequests);
            }
        }
        self.qm(i).requests -= 1;
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.idle_timer
    }

    /// `bfq_idle_slice_timer_body`.
    fn on_timer(&mut self, now: Nanos) {
        if self.idle_timer.is_none_or(|t| t > now) {
            return;
        }
        self.idle_timer = None;
        let Some(i) = self.in_service else { return };
        self.qm(i).wait_request = false;
        let reason = if self.q(i).budget_timed_out(now) {
            Expiration::BudgetTimeout
        } else if self.q(i).fifo.is_empty() {
            Expiration::TooIdle
        } else {
            return;
        };
        self.expire(i, now, true, reason);
    }

    #[inline]
    fn queued(&self) -> usize {
        self.queued
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("bfq_in_service", self.in_service.map_or(-1.0, f64::from));
        sink("bfq_idling", f64::from(u8::from(self.is_idling())));
        sink("bfq_busy_queues", self.busy_queues as f64);
        sink("bfq_wr_busy_queues", self.wr_busy_queues as f64);
        sink("bfq_max_budget_sectors", self.max_budget() as f64);
        sink("bfq_peak_rate_sectors_per_s", self.peak_rate());
        sink("bfq_hw_tag", f64::from(self.hw_tag));
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    use super::*;

    const MS: Nanos = NS_PER_MS;
    const KIB4: u32 = 4096;

    /// How a test client issues its I/O.
    #[derive(Clone, Copy)]
    enum Load {
        /// Always `depth` requests outstanding (a new one at each completion).
        Greedy { depth: u32 },
        /// One request at a time, the next `think` after the previous completes.
        Sync { think: Nanos },
    }

    /// A client: one tenant, 4 KiB requests from its own region of the disk, sequential
    /// or (`seeky`) scattered.
    #[derive(Clone, Copy)]
    struct Client {
        tenant: u32,
        load: Load,
        start: Nanos,
        seeky: bool,
    }

    /// What a run produced: bytes completed and dispatches (time, tenant), in order.
    struct Run {
        bytes: Vec<u64>,
        dispatches: Vec<(Nanos, u32)>,
    }

    impl Run {
        fn dispatched(&self, tenant: u32, from: Nanos, to: Nanos) -> usize {
            self.dispatches.iter().filter(|&&(t, k)| k == tenant && t >= from && t < to).count()
        }
    }

    /// A device of `slots` servers with a fixed `service` time, driven until `until`:
    /// completions, then the idle timer, then arrivals, then every free slot is offered.
    fn run(s: &mut Bfq, clients: &[Client], service: Nanos, slots: usize, until: Nanos) -> Run {
        let mut arrivals: BinaryHeap<Reverse<(Nanos, u64, usize)>> = BinaryHeap::new();
        let mut seq = 0u64;
        let mut push = |h: &mut BinaryHeap<_>, t: Nanos, c: usize| {
            seq += 1;
            h.push(Reverse((t, seq, c)));
        };
        for (c, cl) in clients.iter().enumerate() {
            let n = match cl.load {
                Load::Greedy { depth } => depth,
                Load::Sync { .. } => 1,
            };
            for _ in 0..n {
                push(&mut arrivals, cl.start, c);
            }
        }
        let mut offsets: Vec<u64> = clients.iter().map(|c| (c.tenant as u64 + 1) << 40).collect();
        let mut device: Vec<(Nanos, Request, Nanos, usize)> = Vec::new();
        let mut out = Run { bytes: Vec::new(), dispatches: Vec::new() };
        let mut id = 0u64;
        loop {
            let t_done = device.iter().map(|d| d.0).min();
            let t_arr = arrivals.peek().map(|r| r.0 .0);
            let t = [t_done, t_arr, s.next_timer()].into_iter().flatten().min();
            let Some(now) = t.filter(|&t| t < until) else { break };
            while let Some(k) = device.iter().position(|d| d.0 == now) {
                let (finish, req, dispatch, c) = device.swap_remove(k);
                s.complete(&Completion { req, dispatch, finish }, now);
                let tn = req.tenant as usize;
                if out.bytes.len() <= tn {
                    out.bytes.resize(tn + 1, 0);
                }
                out.bytes[tn] += req.bytes as u64;
                match clients[c].load {
                    Load::Greedy { .. } => push(&mut arrivals, now, c),
                    Load::Sync { think } => push(&mut arrivals, now + think, c),
                }
            }
            if s.next_timer().is_some_and(|t| t <= now) {
                s.on_timer(now);
            }
            while let Some(&Reverse((t, _, c))) = arrivals.peek() {
                if t != now {
                    break;
                }
                arrivals.pop();
                let mut r = Request::new(id, clients[c].tenant, now, KIB4);
                r.offset = offsets[c];
                offsets[c] += KIB4 as u64;
                if clients[c].seeky {
                    // A multiplicative hop of whole 4 KiB blocks within the tenant's region.
                    let block = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % (1 << 24);
                    r.offset = ((clients[c].tenant as u64 + 1) << 40) + block * KIB4 as u64;
                }
                id += 1;
                s.enqueue(r, now);
            }
            while device.len() < slots {
                let st = DeviceState { outstanding: device.len(), free_slots: slots - device.len() };
                let Some(r) = s.dispatch(now, &st) else { break };
                out.dispatches.push((now, r.tenant));
                let c = clients.iter().position(|cl| cl.tenant == r.tenant).expect("a client's request");
                device.push((now + service, r, now, c));
            }
        }
        out
    }

    fn greedy(tenant: u32) -> Client {
        Client { tenant, load: Load::Greedy { depth: 4 }, start: 0, seeky: false }
    }

    fn ratio(r: &Run, a: u32, b: u32) -> f64 {
        r.bytes[a as usize] as f64 / r.bytes[b as usize] as f64
    }

    #[test]
    fn weights_200_100_share_two_to_one() {
        // Documentation/block/bfq-iosched.rst: a backlogged process gets its weight's share
        // of the throughput. Two greedy tenants, 100 us per request, 20 s.
        let mut s = BfqSpec { weights: vec![200.0, 100.0], ..BfqSpec::default() }.build().unwrap();
        let r = run(&mut s, &[greedy(0), greedy(1)], 100 * NS_PER_US, 1, 20 * NS_PER_SEC);
        let x = ratio(&r, 0, 1);
        assert!((x - 2.0).abs() < 0.1, "bytes {:?}, ratio {x}", r.bytes);
        // Work conserving: the device never waited (20 s at 10 000 requests per second).
        assert!(r.dispatches.len() >= 199_990, "{}", r.dispatches.len());
    }

    #[test]
    fn equal_weights_share_equally() {
        let mut s = Bfq::new(vec![]).unwrap();
        let r = run(&mut s, &[greedy(0), greedy(1), greedy(2)], 100 * NS_PER_US, 1, 20 * NS_PER_SEC);
        for k in 1..3 {
            let x = ratio(&r, 0, k);
            assert!((x - 1.0).abs() < 0.05, "bytes {:?}", r.bytes);
        }
    }

    #[test]
    fn a_tenant_alone_gets_the_whole_device() {
        let mut s = Bfq::new(vec![300]).unwrap();
        let r = run(&mut s, &[greedy(0)], MS, 1, 2 * NS_PER_SEC);
        // One request per millisecond from t = 0: 2000 dispatches, the last at 1999 ms.
        assert_eq!(r.dispatches.len(), 2000);
        assert_eq!(r.bytes[0], 1999 * KIB4 as u64);
        assert!(!s.is_idling());
    }

    #[test]
    fn idling_keeps_the_device_for_a_sync_tenant() {
        // Tenant 0 issues one 4 KiB request at a time, 200 us after the previous completes
        // (think time below slice_idle); tenant 1 is greedy. Two groups have pending I/O,
        // so the scenario is asymmetric and BFQ plugs the device while tenant 0 thinks. On
        // a rotational disk, with low_latency off, idling also boosts the throughput of the
        // sequential, I/O-bound tenant 0, so nothing is injected: tenant 1 waits until
        // tenant 0's budget timeout (125 ms).
        let spec = BfqSpec {
            weights: vec![200.0, 100.0],
            low_latency: Some(false),
            rotational: Some(true),
            ..BfqSpec::default()
        };
        let sync = Client { tenant: 0, load: Load::Sync { think: 200 * NS_PER_US }, start: 0, seeky: false };
        let mut s = spec.clone().build().unwrap();
        let r = run(&mut s, &[sync, greedy(1)], MS, 1, 300 * MS);
        assert_eq!(r.dispatched(1, 0, 120 * MS), 0, "{:?}", &r.dispatches[..80]);
        // Tenant 0 is served every 1.2 ms (1 ms service + 0.2 ms think): 100 in 120 ms.
        assert_eq!(r.dispatched(0, 0, 120 * MS), 100);
        // At its budget timeout it expires and tenant 1 gets the device.
        assert!(r.dispatched(1, 120 * MS, 300 * MS) > 0);
        assert!(s.expirations()[Expiration::BudgetTimeout as usize] >= 1);
        assert_eq!(s.expirations()[Expiration::TooIdle as usize], 0);

        // Without idling tenant 0 expires whenever it empties; it preempts tenant 1 at its
        // next request (tenant 1 would not idle), so they interleave one request each.
        let mut s = BfqSpec { slice_idle_ns: Some(0), ..spec.clone() }.build().unwrap();
        let r = run(&mut s, &[sync, greedy(1)], MS, 1, 300 * MS);
        let (a, b) = (r.dispatched(0, 0, 120 * MS), r.dispatched(1, 0, 120 * MS));
        assert!(a >= 55 && b >= 55, "tenant 0: {a}, tenant 1: {b}");
        assert!(s.expirations()[Expiration::NoMoreRequests as usize] >= 50);
        assert!(s.expirations()[Expiration::Preempted as usize] >= 50);
    }

    #[test]
    fn injection_fills_the_gaps_of_a_thinking_tenant() {
        // Tenant 0 now thinks 1 ms per 1 ms request: idle half the time, it is not I/O
        // bound (bfq_update_io_intensity), so idling does not boost throughput and, once
        // its first request after an empty spell has been timed (10 ms in), its inject
        // limit is 1: tenant 1's requests fill the device while tenant 0 thinks, and they
        // do not delay tenant 0, which keeps the device (no expiration) and its rate.
        let spec = BfqSpec {
            weights: vec![200.0, 100.0],
            low_latency: Some(false),
            rotational: Some(true),
            ..BfqSpec::default()
        };
        let sync = Client { tenant: 0, load: Load::Sync { think: MS }, start: 0, seeky: false };
        let mut s = spec.build().unwrap();
        let r = run(&mut s, &[sync, greedy(1)], MS, 1, 120 * MS);
        assert_eq!(r.dispatched(1, 0, 10 * MS), 0);
        assert_eq!(r.dispatched(0, 0, 120 * MS), 60);
        assert!(r.dispatched(1, 10 * MS, 120 * MS) >= 50, "{:?}", &r.dispatches[..40]);
        assert_eq!(s.in_service(), Some(0));
        assert_eq!(s.expirations(), [0; 5]);
    }

    #[test]
    fn budget_timeout_expires_a_slow_queue_after_125_ms() {
        // 10 ms per request: tenant 0's first budget (2/3 of 16384 sectors, 1365 requests)
        // would take 13.6 s, so the 125 ms budget timeout ends its slot at the first
        // completion after it, 130 ms.
        let mut s = Bfq::new(vec![100, 100]).unwrap().with_low_latency(false);
        let r = run(&mut s, &[greedy(0), greedy(1)], 10 * MS, 1, 131 * MS);
        assert_eq!(r.dispatched(0, 0, 131 * MS), 13);
        assert_eq!(r.dispatches.last(), Some(&(130 * MS, 1)));
        assert_eq!(s.expirations()[Expiration::BudgetTimeout as usize], 1);
        assert_eq!(s.in_service(), Some(1));
    }

    #[test]
    fn weight_raising_starts_for_a_queue_idle_for_long() {
        // Every new queue has been idle "forever": it is raised by 30 at its first request.
        let mut s = Bfq::new(vec![]).unwrap();
        s.enqueue(Request::new(0, 3, 0, KIB4), 0);
        assert_eq!(s.wr_coeff(3), BFQ_WR_COEFF);
        // Its budget is twice the minimum (16384 / 32 * 2 sectors).
        assert_eq!(s.budget(3), 2 * BFQ_DEFAULT_MAX_BUDGET / 32);
        assert!((3 * NS_PER_SEC..=25 * NS_PER_SEC).contains(&s.wr_duration()));
        // A greedy tenant loses the raising once it has received 120000 sectors
        // (15000 requests of 8 sectors), well before the 3.75 s duration at 50 us each.
        let mut s = Bfq::new(vec![]).unwrap();
        let r = run(&mut s, &[greedy(0)], 50 * NS_PER_US, 1, 760 * MS);
        assert!(r.dispatches.len() > 15_000);
        assert_eq!(s.wr_coeff(0), 1);
        // With low_latency off nothing is raised.
        let mut s = Bfq::new(vec![]).unwrap().with_low_latency(false);
        s.enqueue(Request::new(0, 0, 0, KIB4), 0);
        assert_eq!(s.wr_coeff(0), 1);
    }

    #[test]
    fn weights_outside_the_kernel_range_are_refused() {
        let e = BfqSpec { weights: vec![100.0, 100.0, 1500.0], ..BfqSpec::default() }.build().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid configuration: bfq: weight of tenant 2 is 1500; the kernel takes 1 to 1000 (blkio.bfq.weight)"
        );
        for w in [0.0, -1.0, 1000.5, f64::NAN, f64::INFINITY] {
            assert!(BfqSpec { weights: vec![w], ..BfqSpec::default() }.build().is_err(), "{w}");
        }
        let e = BfqSpec { weights: vec![2.5], ..BfqSpec::default() }.build().unwrap_err().to_string();
        assert!(e.contains("whole numbers 1 to 1000"), "{e}");
        assert!(Bfq::new(vec![1, 1000]).is_ok());
        assert!(Bfq::new(vec![1001]).is_err());
        let s = BfqSpec { weights: vec![1.0, 1000.0], ..BfqSpec::default() }.build().unwrap();
        assert_eq!((s.weight(0), s.weight(1), s.weight(7)), (1, 1000, BFQ_DEFAULT_GRP_WEIGHT));
    }

    #[test]
    fn spec_reads_json_and_refuses_unknown_fields() {
        let s: BfqSpec = serde_json::from_str(
            r#"{"weights": [200, 100], "slice_idle_ns": 0, "low_latency": false,
                "rotational": true, "max_budget_sectors": 4096}"#,
        )
        .unwrap();
        assert_eq!(s.weights, vec![200.0, 100.0]);
        let b = s.build().unwrap();
        assert_eq!((b.slice_idle, b.low_latency, b.rotational, b.max_budget), (0, false, true, 4096));
        let d: BfqSpec = serde_json::from_str("{}").unwrap();
        let b = d.build().unwrap();
        assert_eq!((b.slice_idle, b.low_latency, b.rotational), (BFQ_SLICE_IDLE, true, false));
        assert_eq!(b.max_budget(), BFQ_DEFAULT_MAX_BUDGET);
        assert!(serde_json::from_str::<BfqSpec>(r#"{"weight": [1]}"#).is_err());
    }

    #[test]
    fn mixed_load_on_a_queueing_device_conserves_requests() {
        // Seeky and sequential, greedy and thinking tenants arriving at different times on
        // a device of 8 slots: every request is dispatched once and the scheduler drains.
        let mut clients = Vec::new();
        for t in 0..6u32 {
            let load = if t % 2 == 0 { Load::Greedy { depth: 1 + t } } else { Load::Sync { think: (t as u64) * MS } };
            clients.push(Client { tenant: t, load, start: t as u64 * 300 * MS, seeky: t % 3 == 0 });
        }
        for rotational in [false, true] {
            let mut s = Bfq::new(vec![100, 300, 50, 1000, 1, 100]).unwrap().with_rotational(rotational);
            let r = run(&mut s, &clients, 700 * NS_PER_US, 8, 5 * NS_PER_SEC);
            let done: u64 = r.bytes.iter().sum::<u64>() / KIB4 as u64;
            assert_eq!(r.dispatches.len() as u64, done + s.rq_in_driver);
            assert!(r.bytes.iter().all(|&b| b > 0), "{:?}", r.bytes);
            assert!(s.rq_in_driver <= 8);
            assert_eq!(s.queued(), s.queues.iter().map(|q| q.fifo.len()).sum::<usize>());
        }
    }

    #[test]
    fn gauges_and_empty_scheduler() {
        let mut s = Bfq::new(vec![]).unwrap();
        assert_eq!(s.dispatch(0, &DeviceState { outstanding: 0, free_slots: 1 }), None);
        assert_eq!((s.queued(), s.next_timer(), s.in_service()), (0, None, None));
        let mut g = Vec::new();
        s.gauges(&mut |n, v| g.push((n.to_string(), v)));
        assert_eq!(g.len(), 7);
        assert_eq!(s.name(), "bfq");
    }
}
