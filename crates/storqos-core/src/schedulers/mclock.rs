//! mClock: proportional-share I/O scheduling with reservations and limits (Gulati,
//! Merchant & Varman, "mClock: Handling Throughput Variability for Hypervisor IO
//! Scheduling", OSDI 2010, §3 "mClock Algorithm", Algorithm 1; the policy behind Ceph's
//! `dmclock`). Not one of the seeds: the peer baseline the spec asks for.
//!
//! Each tenant `i` has a **reservation** `r_i` (IOPS it is guaranteed under contention),
//! a **weight** `w_i` (its share of the capacity left after reservations) and a
//! **limit** `l_i` (IOPS it never exceeds). A request of cost `c` (1 by default, see
//! [`MclockCost`]) carries three tags:
//!
//! ```text
//! R = max(R_prev + c / r_i, t)      reservation tag (real time, ns)
//! L = max(L_prev + c / l_i, t)      limit tag       (real time, ns)
//! P = max(P_prev + c / w_i, V)      weight tag      (virtual time, see §2 below)
//! ```
//! with `t` the request's arrival time. At each dispatch (Algorithm 1, `ScheduleRequest`):
//!
//! 1. **Constraint-based phase**: if some head has `R ≤ now`, serve the smallest `R`.
//! 2. **Weight-based phase**: otherwise, among heads with `L ≤ now`, serve the smallest
//!    `P`, and subtract `c / r_k` from the served tenant's `R` tags (the paper's
//!    "reservation-tag adjustment": service given by weight does not count against the
//!    reservation, so the tenant is not pushed back in the constraint phase).
//! 3. **Limit break** (optional, [`Mclock::with_limit_break`], dmclock's
//!    `AtLimit::Allow`): if nothing is eligible *and the device is idle*, serve the
//!    smallest `P` even though its `L` lies in the future. Off by default (limits are
//!    hard caps, the paper's behaviour); on, mClock is work conserving.
//!    **Reject at the limit** (optional, [`AtLimit::Reject`], dmclock's
//!    `AtLimit::Reject` with its `RejectThreshold`): a request whose limit tag, chained
//!    at arrival as dmclock tags it (`L = max(L_prev + c / l_i, t)`), lies more than the
//!    threshold beyond its arrival is refused at once ([`Scheduler::admit`]) instead of
//!    waiting: the client gets an error it can retry (`EAGAIN` in dmclock, an NBD
//!    error in the gateway) and the rejected request leaves no tag behind.
//! 4. Otherwise dispatch nothing and ask for a timer at the earliest `R` or `L` tag
//!    ([`Scheduler::next_timer`]).
//!
//! ## Choices (where we depart from, or pin down, the paper)
//!
//! 1. **Tags on the head only.** A tenant's requests wait in a FIFO; only its head
//!    carries tags, computed when it becomes head from the previous head's tags and its
//!    own arrival time. For a backlogged tenant this is exactly the paper's chain of
//!    tags; it is what makes every operation independent of the backlog depth (the
//!    paper's adjustments rewrite the tags of *every* queued request; dmclock's
//!    `reduce_reservation_tags` loops over the queue). As in dmclock, the reservation
//!    adjustment also lowers the tenant's "previous" tag, so a tenant served by weight
//!    never builds reservation debt.
//! 2. **Idle-tenant adjustment in virtual time (§3.2).** The paper, when an idle tenant
//!    becomes active at `t`, shifts the `P` tags of *all* active tenants so that the
//!    smallest equals `t`, then tags the newcomer `max(P_prev + 1/w, t)`: the newcomer
//!    starts level with the least-served active tenant, neither with hoarded credit nor
//!    behind. Shifting every tenant is `O(tenants)`; we get the same relative order in
//!    `O(1)` by keeping `P` tags in a virtual frame that never shifts and comparing a
//!    new head with the **system virtual time** `V` instead of `t`: `V` is the largest
//!    `P` tag served in the weight phase (SFQ's `v(t)`: the tag of the least-advanced
//!    tenant being served). A tenant returning from idle gets `P = max(P_prev + c/w, V)`;
//!    an active tenant's next head is `max(P_prev + c/w, V)` too, which only matters for
//!    a tenant held back by its limit: it competes level with the others when its limit
//!    frees it, instead of jumping the queue with stale small tags.
//! 3. **`R` and `L` stay in real time** (ns, `f64` to carry the fractional spacing of
//!    `1e9 / r`), exactly as in the paper: `max(…, t)` forbids idle tenants to bank
//!    reservation or limit credit.
//! 4. **Reservation phase ignores limits** (as the paper); a reservation above the
//!    tenant's limit is therefore rejected as a configuration error.
//! 5. **Ties** go to the smaller tenant index (deterministic runs).
//!
//! ## Cost
//! Three indexed binary heaps over *tenants* (never over requests): `resv` (backlogged
//! tenants with a reservation, keyed by head `R`), `prop` (every backlogged tenant,
//! keyed by (limited?, head `P`) as in dmclock's ready heap) and `lim` (tenants whose
//! head `L` was in the future, keyed by `L`). A dispatch re-keys one tenant in at most
//! three heaps; an arrival to a backlogged tenant is a `push_back`. Every operation is
//! `O(log tenants)`, whatever the number of queued requests (see
//! `examples/mclock_rate.rs`: the same rate at 10 and 100 000 requests per tenant).

use std::collections::VecDeque;
use std::sync::Arc;

use serde::Deserialize;

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::request::Request;
use crate::scheduler::Scheduler;
use crate::schedulers::dmclock::{DistCharge, DistParams, ReportLedger, ServedBy};
use crate::schedulers::indexed_heap::IndexedHeap;
use crate::schedulers::prefetch::prefetch_ahead;
use crate::schedulers::tags::{check_weight, FlowKey, DEFAULT_WEIGHT};
use crate::time::{Nanos, NS_PER_SEC};

/// Policy name used in errors and reports.
const NAME: &str = "mclock";

/// Reservation of a tenant the configuration does not list: none (0 IOPS).
pub const DEFAULT_RESERVATION: f64 = 0.0;

/// What one request costs in the tag spacing (the paper's §3.3 "IO size": a larger
/// request advances its tenant's tags further).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MclockCost {
    /// Every request costs 1: reservations, weights and limits count operations (IOPS).
    #[default]
    Iops,
    /// `{"size": S}`: a request of `b` bytes costs `1 + b / S`, the paper's
    /// `1 + size / (T_m · B_peak)` with `S = T_m · B_peak` the size whose transfer takes
    /// as long as one positioning (e.g. 5 ms × 100 MB/s ≈ 500 KB for a disk).
    Size(u32),
}

impl MclockCost {
    /// The cost of `req` (≥ 1).
    #[inline]
    pub fn of(self, req: &Request) -> f64 {
        match self {
            MclockCost::Iops => 1.0,
            MclockCost::Size(s) => 1.0 + req.bytes as f64 / s as f64,
        }
    }
}

/// The backlogged tenants by `(class, tag)`, then tenant index: mClock's reservation,
/// weight and limit heaps (tags are finite, so every key compares).
type TenantHeap = IndexedHeap<(u8, f64)>;

/// One tenant: its FIFO, its parameters as tag spacings, its head's (or last) tags.
#[derive(Clone, Debug)]
struct Tenant {
    queue: VecDeque<Request>,
    /// dmClock, charged at arrival: the reports received and what was charged for them.
    ledger: ReportLedger,
    /// ns of reservation tag per unit of cost (1e9 / r), 0 = no reservation.
    r_spacing: f64,
    /// ns of limit tag per unit of cost (1e9 / l), 0 = no limit.
    l_spacing: f64,
    /// Virtual weight tag per unit of cost (1 / w).
    p_spacing: f64,
    /// Tags of the head while backlogged; of the last head once idle (−∞ before any).
    r: f64,
    l: f64,
    p: f64,
    /// The head's limit tag was in the future when last checked (tenant sits in `lim`).
    limited: bool,
}

/// What mClock does with a tenant's request beyond its limit (dmclock's `AtLimit`).
#[derive(Clone, Copy, Debug, Default, Deserialize, serde::Serialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum AtLimit {
    /// Queue it until its limit tag comes due (the paper's behaviour).
    #[default]
    Wait,
    /// Serve it past the limit when nothing else is eligible and the device is idle.
    Allow,
    /// Refuse it at arrival if its limit tag lies beyond the threshold.
    Reject,
}

/// How a request was chosen (counted for the gauges).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Reservation,
    Weight,
    LimitBreak,
}

impl Phase {
    fn served_by(self) -> ServedBy {
        if self == Phase::Reservation {
            ServedBy::Reservation
        } else {
            ServedBy::Weight
        }
    }
}

/// mClock between tenants (or classes): reservations, weights, limits.
#[derive(Clone, Debug)]
pub struct Mclock {
    by: FlowKey,
    cost: MclockCost,
    limit_break: bool,
    /// With [`AtLimit::Reject`]: how far (ns) beyond its arrival a request's limit tag
    /// may lie before it is rejected.
    reject_after: Option<f64>,
    /// Per tenant: the limit tag of the last admitted request, chained at arrival.
    arrival_l: Vec<f64>,
    /// Requests rejected at their tenant's limit.
    rejected: u64,
    /// The configured parameters (shared by the clones of one mClock, as the servers
    /// of a cluster are, until one changes them).
    reservations: Arc<Vec<f64>>,
    weights: Arc<Vec<f64>>,
    limits: Arc<Vec<Option<f64>>>,
    tenants: Vec<Tenant>,
    resv: TenantHeap,
    prop: TenantHeap,
    lim: TenantHeap,
    /// System virtual time V: the largest P tag served in the weight phase.
    vtime: f64,
    queued: usize,
    timer: Option<Nanos>,
    /// Dispatches per phase: reservation, weight, limit break.
    served: [u64; 3],
    /// The phase of the last dispatch (dmClock's client counts it).
    last: Option<Phase>,
    /// Some request came with [`DistParams`] (dmClock): tags are charged from the
    /// tenants' ledgers, or, charged by request, from the parameters beside each request.
    reports: bool,
    /// How dmClock's reports are charged.
    charge: DistCharge,
    /// Give a tenant's queue storage back when it empties ([`Mclock::set_compact`]).
    compact: bool,
    /// dmClock, charged by request: the [`DistParams`] of each tenant's queued requests,
    /// in queue order (empty unless requests come through [`Mclock::enqueue_dist`] with
    /// [`DistCharge::Request`]; kept apart from [`Tenant`] so that the servers of a large
    /// cluster, which hold every tenant, do not carry an empty queue for each).
    dists: Vec<VecDeque<DistParams>>,
}

fn check_iops(what: String, v: f64, allow_zero: bool) -> Result<()> {
    let ok = v.is_finite() && if allow_zero { v >= 0.0 } else { v > 0.0 };
    if ok {
        Ok(())
    } else {
        config(format!("{what} must be a finite number {} IOPS, got {v}", if allow_zero { ">= 0" } else { "> 0" }))
    }
}

impl Mclock {
    /// mClock between tenants: `reservations[i]` IOPS (≥ 0), `weights[i]` (> 0) and
    /// `limits[i]` IOPS (> 0, `None` = no limit) for tenant `i`; tenants beyond a list
    /// have no reservation, weight 1 and no limit. A reservation above the tenant's
    /// limit is an error.
    pub fn new(reservations: Vec<f64>, weights: Vec<f64>, limits: Vec<Option<f64>>) -> Result<Self> {
        for (i, &r) in reservations.iter().enumerate() {
            check_iops(format!("{NAME}: reservations[{i}]"), r, true)?;
        }
        for (i, &w) in weights.iter().enumerate() {
            check_weight(&format!("{NAME}: weights[{i}]"), w)?;
        }
        for (i, l) in limits.iter().enumerate() {
            if let Some(l) = *l {
                check_iops(format!("{NAME}: limits[{i}]"), l, false)?;
                let r = reservations.get(i).copied().unwrap_or(DEFAULT_RESERVATION);
                if r > l {
                    return config(format!("{NAME}: reservations[{i}] ({r} IOPS) exceeds limits[{i}] ({l} IOPS)"));
                }
            }
        }
        Ok(Mclock {
            by: FlowKey::Tenant,
            cost: MclockCost::Iops,
            limit_break: false,
            reject_after: None,
            arrival_l: Vec::new(),
            rejected: 0,
            reservations: Arc::new(reservations),
            weights: Arc::new(weights),
            limits: Arc::new(limits),
            tenants: Vec::new(),
            resv: TenantHeap::default(),
            prop: TenantHeap::default(),
            lim: TenantHeap::default(),
            vtime: 0.0,
            queued: 0,
            timer: None,
            served: [0; 3],
            last: None,
            reports: false,
            charge: DistCharge::default(),
            compact: false,
            dists: Vec::new(),
        })
    }

    /// Share between the flows named by `by` (tenant or class). Set before use.
    pub fn with_key(mut self, by: FlowKey) -> Self {
        debug_assert_eq!(self.queued, 0, "change the flow key before enqueueing");
        self.by = by;
        self
    }

    /// Charge requests by `cost`. Set before use.
    pub fn with_cost(mut self, cost: MclockCost) -> Result<Self> {
        if cost == MclockCost::Size(0) {
            return config(format!("{NAME}: cost size must be > 0 bytes"));
        }
        debug_assert_eq!(self.queued, 0, "change the cost model before enqueueing");
        self.cost = cost;
        Ok(self)
    }

    /// Let a limited tenant exceed its limit when nothing else is eligible and the
    /// device is idle (work conserving; dmclock's `AtLimit::Allow`).
    pub fn with_limit_break(mut self, on: bool) -> Self {
        self.limit_break = on;
        self
    }

    /// What to do beyond a limit: wait (default), allow (= [`Mclock::with_limit_break`])
    /// or reject a request whose limit tag lies more than `threshold_ns` beyond its
    /// arrival (dmclock's `RejectThreshold`; 0 rejects whatever would have to wait).
    pub fn with_at_limit(mut self, at_limit: AtLimit, threshold_ns: Nanos) -> Self {
        self.limit_break = at_limit == AtLimit::Allow;
        self.reject_after = (at_limit == AtLimit::Reject).then_some(threshold_ns as f64);
        self
    }

    /// Requests rejected so far at their tenant's limit ([`AtLimit::Reject`]).
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Requests dispatched so far in the reservation phase, the weight phase and by
    /// breaking a limit.
    pub fn served_by_phase(&self) -> [u64; 3] {
        self.served
    }

    /// Requests queued for `flow`.
    pub fn queued_in(&self, flow: u32) -> usize {
        self.tenants.get(flow as usize).map_or(0, |t| t.queue.len())
    }

    /// How the request the last [`Scheduler::dispatch`] returned was chosen (dmClock's
    /// client counts reservation-phase service); `None` before any dispatch.
    pub fn last_served_by(&self) -> Option<ServedBy> {
        self.last.map(Phase::served_by)
    }

    /// dmClock's server side ([`crate::schedulers::dmclock`]): queue `req`, whose
    /// tenant's client received `dist` elsewhere since its previous request here: its
    /// tags advance by `(δ + c) / w`, `(δ + c) / l` and `(ρ + c) / r`, the report charged
    /// to the next head tagged with what is expected beside it
    /// ([`crate::schedulers::dmclock::ReportLedger`]), or, with [`DistCharge::Request`],
    /// to its own request's tags. With zeros this is [`Scheduler::enqueue`].
    pub fn enqueue_dist(&mut self, req: Request, now: Nanos, dist: DistParams) {
        let by_request = self.charge == DistCharge::Request;
        if !self.reports && by_request {
            // From now on every queued request has its parameters beside it.
            self.dists = self.tenants.iter().map(|t| t.queue.iter().map(|_| DistParams::default()).collect()).collect();
        }
        self.reports = true;
        if by_request {
            self.push(req, now, Some(dist));
        } else {
            let k = self.by.of(&req);
            self.tenant_mut(k).ledger.report(dist);
            self.push(req, now, None);
        }
    }

    /// Queue `req` (with its dmClock parameters once any request has had some).
    #[inline]
    fn push(&mut self, req: Request, now: Nanos, dist: Option<DistParams>) {
        let k = self.by.of(&req);
        let by_request = self.reports && self.charge == DistCharge::Request;
        let t = self.tenant_mut(k);
        t.queue.push_back(req);
        let activated = t.queue.len() == 1;
        if by_request {
            let i = k as usize;
            if i >= self.dists.len() {
                self.dists.resize_with(i + 1, VecDeque::new);
            }
            self.dists[i].push_back(dist.unwrap_or_default());
        }
        self.queued += 1;
        if activated {
            self.tag_head(k, now as f64);
        }
    }

    /// Give each tenant's queue storage back when its queue empties: for the servers of a
    /// cluster, which hold every tenant while each sees a few of its requests at a time
    /// (an allocation per busy spell instead of some 200 bytes per tenant and server).
    pub fn set_compact(&mut self, on: bool) {
        self.compact = on;
    }

    /// How dmClock's reports are charged ([`DistCharge`]; default: at arrival). Set
    /// before use.
    pub fn set_dist_charge(&mut self, charge: DistCharge) {
        debug_assert_eq!(self.queued, 0, "change the charge before enqueueing");
        self.charge = charge;
    }

    /// Change flow `flow`'s reservation (IOPS, ≥ 0) and limit (IOPS, > 0 or `None`) at
    /// `now` (a periodic allocator splitting global promises across servers). A
    /// backlogged flow's head keeps its place in time but its distance from `now` is
    /// rescaled to the new spacing, so a head tagged under a tiny share does not wait
    /// out that share once a larger one is given. The same rules as [`Mclock::new`].
    pub fn set_reservation_limit(&mut self, flow: u32, reservation: f64, limit: Option<f64>, now: Nanos) -> Result<()> {
        check_iops(format!("{NAME}: reservation of flow {flow}"), reservation, true)?;
        if let Some(l) = limit {
            check_iops(format!("{NAME}: limit of flow {flow}"), l, false)?;
            if reservation > l {
                return config(format!(
                    "{NAME}: flow {flow}'s reservation ({reservation} IOPS) exceeds its limit ({l} IOPS)"
                ));
            }
        }
        let i = flow as usize;
        let (rs, ls) = (Arc::make_mut(&mut self.reservations), Arc::make_mut(&mut self.limits));
        if rs.len() <= i {
            rs.resize(i + 1, DEFAULT_RESERVATION);
        }
        if ls.len() <= i {
            ls.resize(i + 1, None);
        }
        rs[i] = reservation;
        ls[i] = limit;
        let nowf = now as f64;
        let t = self.tenant_mut(flow);
        let r_spacing = if reservation > 0.0 { NS_PER_SEC as f64 / reservation } else { 0.0 };
        let l_spacing = limit.map_or(0.0, |l| NS_PER_SEC as f64 / l);
        let rescale = |tag: f64, old: f64, new: f64| {
            if tag > nowf && old > 0.0 && new > 0.0 {
                nowf + (tag - nowf) * new / old
            } else {
                tag
            }
        };
        let backlogged = !t.queue.is_empty();
        if backlogged {
            t.r = if r_spacing > 0.0 && t.r_spacing == 0.0 { nowf } else { rescale(t.r, t.r_spacing, r_spacing) };
            t.l = rescale(t.l, t.l_spacing, l_spacing);
        }
        t.r_spacing = r_spacing;
        t.l_spacing = l_spacing;
        if backlogged {
            t.limited = t.l_spacing > 0.0 && t.l > nowf;
            let (r, l, p, limited) = (t.r, t.l, t.p, t.limited);
            if r_spacing > 0.0 {
                self.resv.set(flow, (0, r));
            } else {
                self.resv.remove(flow);
            }
            if limited {
                self.lim.set(flow, (0, l));
            } else {
                self.lim.remove(flow);
            }
            self.prop.set(flow, (limited as u8, p));
        }
        Ok(())
    }

    /// Change flow `flow`'s weight (> 0) at `now` (a periodic allocator splitting a
    /// tenant's weight across servers by its demand). A backlogged flow's head keeps its
    /// place in virtual time, its distance ahead of the virtual clock rescaled to the new
    /// spacing, as [`Mclock::set_reservation_limit`] does for the other two tags.
    pub fn set_weight(&mut self, flow: u32, weight: f64, _now: Nanos) -> Result<()> {
        check_weight(&format!("{NAME}: weight of flow {flow}"), weight)?;
        let i = flow as usize;
        let ws = Arc::make_mut(&mut self.weights);
        if ws.len() <= i {
            ws.resize(i + 1, DEFAULT_WEIGHT);
        }
        ws[i] = weight;
        let vtime = self.vtime;
        let t = self.tenant_mut(flow);
        let spacing = 1.0 / weight;
        if !t.queue.is_empty() && t.p > vtime {
            t.p = vtime + (t.p - vtime) * spacing / t.p_spacing;
        }
        t.p_spacing = spacing;
        if !t.queue.is_empty() {
            let (limited, p) = (t.limited, t.p);
            self.prop.set(flow, (limited as u8, p));
        }
        Ok(())
    }

    fn tenant_mut(&mut self, k: u32) -> &mut Tenant {
        let i = k as usize;
        if i >= self.tenants.len() {
            for j in self.tenants.len()..=i {
                let r = self.reservations.get(j).copied().unwrap_or(DEFAULT_RESERVATION);
                let w = self.weights.get(j).copied().unwrap_or(DEFAULT_WEIGHT);
                let l = self.limits.get(j).copied().flatten();
                self.tenants.push(Tenant {
                    queue: VecDeque::new(),
                    ledger: ReportLedger::default(),
                    r_spacing: if r > 0.0 { NS_PER_SEC as f64 / r } else { 0.0 },
                    l_spacing: l.map_or(0.0, |l| NS_PER_SEC as f64 / l),
                    p_spacing: 1.0 / w,
                    r: f64::NEG_INFINITY,
                    l: f64::NEG_INFINITY,
                    p: f64::NEG_INFINITY,
                    limited: false,
                });
            }
        }
        &mut self.tenants[i]
    }

    /// Tag the new head of tenant `k` (from its previous tags) and place it in the heaps.
    #[inline]
    fn tag_head(&mut self, k: u32, now: f64) {
        let cost = self.cost;
        let vtime = self.vtime;
        let distributed_arrival = self.reports && self.charge == DistCharge::Arrival;
        let t = &mut self.tenants[k as usize];
        let head = t.queue.front().expect("tagging a backlogged tenant");
        let c = cost.of(head);
        let arrival = head.arrival as f64;
        // dmClock: service elsewhere advances the tags as if it had been given here.
        let (cd, cr) = match self.dists.get(k as usize).and_then(VecDeque::front) {
            Some(d) => (c + d.delta as f64, c + d.rho as f64),
            None if distributed_arrival => t.ledger.charge(c),
            None => (c, c),
        };
        if t.r_spacing > 0.0 {
            t.r = (t.r + cr * t.r_spacing).max(arrival);
        }
        if t.l_spacing > 0.0 {
            t.l = (t.l + cd * t.l_spacing).max(arrival);
        }
        t.p = (t.p + cd * t.p_spacing).max(vtime);
        t.limited = t.l_spacing > 0.0 && t.l > now;
        let (r, l, p, limited, has_r) = (t.r, t.l, t.p, t.limited, t.r_spacing > 0.0);
        if has_r {
            self.resv.set(k, (0, r));
        } else {
            // (A reservation taken away by `set_reservation_limit`.)
            self.resv.remove(k);
        }
        if limited {
            self.lim.set(k, (0, l));
        }
        self.prop.set(k, (limited as u8, p));
    }

    /// Hand out the head of tenant `k`, chosen in `phase`.
    #[inline]
    fn serve(&mut self, k: u32, phase: Phase, now: f64) -> Request {
        let cost = self.cost;
        let t = &mut self.tenants[k as usize];
        let req = t.queue.pop_front().expect("served tenant is backlogged");
        if let Some(d) = self.dists.get_mut(k as usize) {
            d.pop_front();
        }
        prefetch_ahead(&t.queue);
        self.queued -= 1;
        if phase != Phase::Reservation {
            // The paper's reservation-tag adjustment: weight-phase service does not
            // count against the reservation (applied to the previous tag too, as dmclock).
            t.r -= cost.of(&req) * t.r_spacing;
            self.vtime = self.vtime.max(t.p);
        }
        if t.limited {
            self.lim.remove(k);
        }
        self.served[phase as usize] += 1;
        self.last = Some(phase);
        if self.tenants[k as usize].queue.is_empty() {
            self.resv.remove(k);
            self.prop.remove(k);
            let t = &mut self.tenants[k as usize];
            t.limited = false;
            if self.compact {
                t.queue = VecDeque::new();
                if let Some(d) = self.dists.get_mut(k as usize) {
                    *d = VecDeque::new();
                }
            }
        } else {
            self.tag_head(k, now);
        }
        debug_assert!(self.prop.len() <= self.queued, "every backlogged tenant has a queued request");
        req
    }
}

impl Scheduler for Mclock {
    fn name(&self) -> String {
        if self.limit_break {
            "mclock(limit break)".into()
        } else if self.reject_after.is_some() {
            "mclock(reject at limit)".into()
        } else {
            "mclock".into()
        }
    }

    #[inline]
    fn admit(&mut self, req: &Request, now: Nanos) -> bool {
        let Some(after) = self.reject_after else { return true };
        let k = self.by.of(req) as usize;
        let spacing = self.limits.get(k).copied().flatten().map_or(0.0, |l| NS_PER_SEC as f64 / l);
        if spacing == 0.0 {
            return true;
        }
        if k >= self.arrival_l.len() {
            self.arrival_l.resize(k + 1, f64::NEG_INFINITY);
        }
        let t = now as f64;
        let tag = (self.arrival_l[k] + self.cost.of(req) * spacing).max(t);
        if tag > t + after {
            self.rejected += 1;
            return false;
        }
        self.arrival_l[k] = tag;
        true
    }

    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.push(req, now, None);
    }

    fn dispatch(&mut self, now: Nanos, dev: &DeviceState) -> Option<Request> {
        self.timer = None;
        if self.queued == 0 {
            return None;
        }
        let nowf = now as f64;
        // 1. Constraint-based phase: the smallest reservation tag that is due.
        if let Some(((_, r), k)) = self.resv.top() {
            if r <= nowf {
                return Some(self.serve(k, Phase::Reservation, nowf));
            }
        }
        // Heads whose limit tag has come due compete in the weight phase again.
        while let Some(((_, l), k)) = self.lim.top() {
            if l > nowf {
                break;
            }
            self.lim.remove(k);
            let t = &mut self.tenants[k as usize];
            t.limited = false;
            let p = t.p;
            self.prop.set(k, (0, p));
        }
        // 2. Weight-based phase (3. limit break: a limited head, if the device is idle).
        if let Some(((limited, _), k)) = self.prop.top() {
            if limited == 0 {
                return Some(self.serve(k, Phase::Weight, nowf));
            }
            if self.limit_break && dev.outstanding == 0 {
                return Some(self.serve(k, Phase::LimitBreak, nowf));
            }
        }
        // 4. Nothing eligible: wake up when the first R or L tag comes due.
        let due = [self.resv.top(), self.lim.top()]
            .into_iter()
            .flatten()
            .map(|((_, tag), _)| tag)
            .fold(f64::INFINITY, f64::min);
        debug_assert!(due.is_finite() && due > nowf, "{NAME}: backlogged but nothing due ({due} vs {nowf})");
        self.timer = Some((due.ceil() as Nanos).max(now + 1));
        None
    }

    #[inline]
    fn next_timer(&self) -> Option<Nanos> {
        self.timer
    }

    fn on_timer(&mut self, _now: Nanos) {
        self.timer = None;
    }

    #[inline]
    fn queued(&self) -> usize {
        self.queued
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("mclock_reservation_dispatches", self.served[0] as f64);
        sink("mclock_weight_dispatches", self.served[1] as f64);
        sink("mclock_limit_break_dispatches", self.served[2] as f64);
        if self.reject_after.is_some() {
            sink("mclock_rejected", self.rejected as f64);
        }
        sink("mclock_backlogged_tenants", self.prop.len() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FREE: DeviceState = DeviceState { outstanding: 0, free_slots: 1 };
    const BUSY: DeviceState = DeviceState { outstanding: 1, free_slots: 1 };
    const MS: Nanos = 1_000_000;

    fn fill(s: &mut Mclock, tenant: u32, n: u64, at: Nanos) {
        for i in 0..n {
            s.enqueue(Request::new(tenant as u64 * 1_000_000 + i, tenant, at, 4096), at);
        }
    }

    #[test]
    fn weights_alone_interleave_by_weight() {
        let mut s = Mclock::new(vec![], vec![3.0, 1.0], vec![]).unwrap();
        fill(&mut s, 0, 40, 0);
        fill(&mut s, 1, 40, 0);
        let order: Vec<u32> = (0..40).map(|_| s.dispatch(0, &FREE).unwrap().tenant).collect();
        assert_eq!(order.iter().filter(|&&t| t == 0).count(), 30, "{order:?}");
        assert_eq!(s.served_by_phase(), [0, 40, 0]);
    }

    #[test]
    fn reservation_phase_serves_due_tags_first() {
        // Tenant 1 reserves 100 IOPS (one per 10 ms); tenant 0 weighs 100x more.
        let mut s = Mclock::new(vec![0.0, 100.0], vec![100.0, 1.0], vec![]).unwrap();
        fill(&mut s, 0, 100, 0);
        fill(&mut s, 1, 100, 0);
        // At t = 0 tenant 1's first R tag (0) is due: reservation phase.
        assert_eq!(s.dispatch(0, &FREE).unwrap().tenant, 1);
        // Its next R tag is 10 ms: until then tenant 0 wins by weight.
        for _ in 0..5 {
            assert_eq!(s.dispatch(5 * MS, &FREE).unwrap().tenant, 0);
        }
        assert_eq!(s.dispatch(10 * MS, &FREE).unwrap().tenant, 1);
        assert_eq!(s.served_by_phase(), [2, 5, 0]);
    }

    #[test]
    fn weight_service_does_not_consume_reservation() {
        // Tenant 0 alone, reservation 100 IOPS: served by weight at t = 1 ms many times,
        // its R tag must not run ahead of real time (adjustment applied).
        let mut s = Mclock::new(vec![100.0], vec![], vec![]).unwrap();
        fill(&mut s, 0, 50, 0);
        assert_eq!(s.dispatch(0, &FREE).unwrap().tenant, 0); // reservation, R = 0
        for _ in 0..20 {
            s.dispatch(MS, &FREE).unwrap(); // by weight (next R = 10 ms)
        }
        // Still due for reservation at 10 ms.
        s.dispatch(10 * MS, &FREE).unwrap();
        assert_eq!(s.served_by_phase(), [2, 20, 0]);
    }

    #[test]
    fn limit_holds_back_and_sets_timer() {
        let mut s = Mclock::new(vec![], vec![], vec![Some(100.0)]).unwrap();
        fill(&mut s, 0, 3, 0);
        assert!(s.dispatch(0, &FREE).is_some());
        assert!(s.dispatch(0, &FREE).is_none());
        assert_eq!(s.next_timer(), Some(10 * MS));
        s.on_timer(10 * MS);
        assert!(s.dispatch(10 * MS, &FREE).is_some());
        assert!(s.dispatch(10 * MS, &FREE).is_none());
        assert_eq!(s.next_timer(), Some(20 * MS));
        // With limit break, an idle device takes the limited request; a busy one does not.
        let mut s = Mclock::new(vec![], vec![], vec![Some(100.0)]).unwrap().with_limit_break(true);
        fill(&mut s, 0, 3, 0);
        assert!(s.dispatch(0, &FREE).is_some());
        assert!(s.dispatch(0, &BUSY).is_none());
        assert!(s.dispatch(0, &FREE).is_some());
        assert_eq!(s.served_by_phase(), [0, 1, 1]);
    }

    #[test]
    fn returning_tenant_starts_level() {
        let mut s = Mclock::new(vec![], vec![], vec![]).unwrap();
        fill(&mut s, 0, 100, 0);
        for _ in 0..50 {
            assert_eq!(s.dispatch(0, &FREE).unwrap().tenant, 0);
        }
        fill(&mut s, 1, 20, MS);
        let order: Vec<u32> = (0..20).map(|_| s.dispatch(MS, &FREE).unwrap().tenant).collect();
        let ones = order.iter().filter(|&&t| t == 1).count();
        assert!((9..=11).contains(&ones), "{order:?}");
    }

    #[test]
    fn size_cost_spaces_tags() {
        // Equal weights, cost 1 + bytes/4096: 12 KiB requests cost 4, 4 KiB cost 2.
        let mut s = Mclock::new(vec![], vec![], vec![]).unwrap().with_cost(MclockCost::Size(4096)).unwrap();
        for i in 0..40 {
            let mut r = Request::new(i, (i % 2) as u32, 0, if i % 2 == 0 { 4096 } else { 12288 });
            r.class = r.tenant;
            s.enqueue(r, 0);
        }
        let order: Vec<u32> = (0..15).map(|_| s.dispatch(0, &FREE).unwrap().tenant).collect();
        assert_eq!(order.iter().filter(|&&t| t == 0).count(), 10, "{order:?}");
        assert!(Mclock::new(vec![], vec![], vec![]).unwrap().with_cost(MclockCost::Size(0)).is_err());
    }

    #[test]
    fn bad_parameters_name_themselves() {
        let e = Mclock::new(vec![-1.0], vec![], vec![]).unwrap_err().to_string();
        assert!(e.contains("mclock: reservations[0]"), "{e}");
        let e = Mclock::new(vec![], vec![1.0, 0.0], vec![]).unwrap_err().to_string();
        assert!(e.contains("mclock: weights[1]"), "{e}");
        let e = Mclock::new(vec![], vec![], vec![None, Some(0.0)]).unwrap_err().to_string();
        assert!(e.contains("mclock: limits[1]"), "{e}");
        let e = Mclock::new(vec![500.0], vec![], vec![Some(100.0)]).unwrap_err().to_string();
        assert!(e.contains("reservations[0] (500 IOPS) exceeds limits[0] (100 IOPS)"), "{e}");
    }
}
