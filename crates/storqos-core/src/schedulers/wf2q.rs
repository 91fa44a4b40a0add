//! WF2Q+: worst-case fair weighted fair queuing (Bennett & Zhang, "Hierarchical packet
//! fair queueing algorithms", IEEE/ACM ToN 5(5), 1997, §IV "WF2Q+").
//!
//! Proportional sharing between *flows* (tenants by default, or classes: seed 000's
//! "Fair Queuing" recombiner runs WF2Q+ between RTT's primary and secondary class with
//! weights Cmin : ΔC), each with a weight `w_i` (unlisted flows weigh
//! [`DEFAULT_WEIGHT`](crate::schedulers::tags::DEFAULT_WEIGHT)). A request costs 1 (IOPS
//! fairness, default) or its size in bytes.
//!
//! ## The algorithm
//! Each backlogged flow `i` carries the tags of its *head* request only:
//!
//! 1. **Arrival to an empty flow** (the flow becomes backlogged): `S_i = max(V, F_i)`,
//!    `F_i = S_i + L/w_i`, where `F_i` is the finish tag of the flow's previous head.
//!    Taking `max` with `V` is what stops an idle flow from hoarding credit: a flow that
//!    was away restarts at the current virtual time, not where it left off.
//! 2. **Dispatch**: among *eligible* flows (`S_i ≤ V`), serve the head with the smallest
//!    `F_i` (ties: earlier arrival, then smaller flow index). Eligibility is what makes
//!    WF2Q+ *worst-case* fair: no flow runs ahead of its fluid (GPS) service by more than
//!    one request.
//! 3. **Virtual time** after a dispatch of cost `L`:
//!    `V ← max(V + L/Σ_{j∈B} w_j, min_{j∈B} S_j)` with `B` the backlogged flows (the
//!    paper's `V(t+τ) = max(V(t) + W(t, t+τ), min S)` with weights not normalised to the
//!    link rate). The second term keeps at least one flow eligible.
//! 4. **Flow tags after its head leaves**: if more requests wait, `S_i = F_i`,
//!    `F_i = S_i + L_next/w_i`; otherwise the flow leaves `B` keeping `F_i`.
//! 5. **End of a busy period** (our reading, as in SFQ): when the scheduler runs empty,
//!    `V` jumps to the largest finish tag handed out, so history from one busy period
//!    gives no flow credit in the next.
//!
//! ## Cost
//! Backlogged flows sit in exactly one of two heaps: *eligible*, keyed by `F`, or
//! *waiting*, keyed by `S`. A flow's tags change only while it is out of both heaps, so no
//! lazy deletion is needed: enqueue and dispatch are `O(log #flows)` amortised, never
//! proportional to the backlog depth. Requests wait in per-flow FIFO queues.
//!
//! Weights can change at run time ([`Wf2q::set_weight`], e.g. BAA recomputing shares
//! periodically); a change applies to tags computed afterwards.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::device::DeviceState;
use crate::error::Result;
use crate::request::Request;
use crate::scheduler::Scheduler;
use crate::schedulers::tags::{tags, FairQueue, FlowState, Sharing, VTime};
use crate::time::Nanos;

/// Relative slack of the eligibility test `S ≤ V`: tags and `V` are sums of `f64`
/// fractions (e.g. thirds with weights 2:1), so a start tag that is equal to `V` in exact
/// arithmetic may exceed it by a few ulps. Far below any real tag difference.
pub const ELIGIBILITY_EPS: f64 = 1e-9;

/// Policy name used in errors and reports.
const NAME: &str = "wf2q";

/// One flow: its FIFO queue and the tags of its head request.
#[derive(Clone, Debug, Default)]
struct Flow {
    queue: VecDeque<Request>,
    weight: f64,
    /// Start tag of the head (meaningful while backlogged).
    start: f64,
    /// Finish tag of the head while backlogged; of the last head once idle.
    finish: f64,
}

impl FlowState for Flow {
    fn with_weight(weight: f64) -> Self {
        Flow { weight, ..Flow::default() }
    }
    fn weight(&self) -> f64 {
        self.weight
    }
}

/// WF2Q+ weighted fair queuing between tenants or classes.
#[derive(Clone, Debug)]
pub struct Wf2q {
    share: Sharing,
    flows: Vec<Flow>,
    /// System virtual time V.
    vtime: f64,
    /// Σ w over backlogged flows.
    active_weight: f64,
    /// Number of backlogged flows.
    backlogged: usize,
    /// Largest finish tag handed out (the busy-period reset target).
    max_finish: f64,
    /// Backlogged flows with S ≤ V: (F, head arrival, flow).
    eligible: BinaryHeap<Reverse<(VTime, Nanos, u32)>>,
    /// Backlogged flows with S > V: (S, flow).
    waiting: BinaryHeap<Reverse<(VTime, u32)>>,
    queued: usize,
}

impl Wf2q {
    /// WF2Q+ between tenants with `weights[i]` for tenant `i` (others
    /// [`DEFAULT_WEIGHT`](crate::schedulers::tags::DEFAULT_WEIGHT)),
    /// unit cost per request. Weights must be finite and > 0.
    pub fn new(weights: Vec<f64>) -> Result<Self> {
        Ok(Wf2q {
            share: Sharing::new(NAME, weights)?,
            flows: Vec::new(),
            vtime: 0.0,
            active_weight: 0.0,
            backlogged: 0,
            max_finish: 0.0,
            eligible: BinaryHeap::new(),
            waiting: BinaryHeap::new(),
            queued: 0,
        })
    }

    /// The current weight of `flow`.
    pub fn weight(&self, flow: u32) -> f64 {
        self.share.weight(&self.flows, flow)
    }

    /// Change the weight of `flow` (finite, > 0); tags computed from now on use it.
    pub fn set_weight(&mut self, flow: u32, w: f64) -> Result<()> {
        self.share.weights.set(NAME, flow, w)?;
        if let Some(f) = self.flows.get_mut(flow as usize) {
            if !f.queue.is_empty() {
                self.active_weight += w - f.weight;
            }
            f.weight = w;
        }
        Ok(())
    }

    /// The system virtual time V.
    pub fn virtual_time(&self) -> f64 {
        self.vtime
    }

    /// Flows with queued requests.
    pub fn backlogged_flows(&self) -> usize {
        self.backlogged
    }

    /// Requests queued in `flow`.
    pub fn queued_in(&self, flow: u32) -> usize {
        self.flows.get(flow as usize).map_or(0, |f| f.queue.len())
    }

    #[inline]
    fn is_eligible(&self, start: f64) -> bool {
        start <= self.vtime + ELIGIBILITY_EPS * self.vtime.max(1.0)
    }

    /// Put backlogged flow `k` into the heap matching its head's eligibility.
    #[inline]
    fn place(&mut self, k: u32) {
        let f = &self.flows[k as usize];
        debug_assert!(!f.queue.is_empty() && f.finish > f.start);
        if self.is_eligible(f.start) {
            let arrival = f.queue.front().map_or(0, |r| r.arrival);
            self.eligible.push(Reverse((VTime::new(f.finish), arrival, k)));
        } else {
            self.waiting.push(Reverse((VTime::new(f.start), k)));
        }
    }

    /// Move every waiting flow whose start tag V has reached into the eligible heap.
    #[inline]
    fn promote(&mut self) {
        while let Some(&Reverse((s, k))) = self.waiting.peek() {
            if !self.is_eligible(s.0) {
                break;
            }
            self.waiting.pop();
            self.place(k);
        }
    }
}

impl FairQueue for Wf2q {
    fn sharing_mut(&mut self) -> &mut Sharing {
        &mut self.share
    }
    fn waiting(&self) -> usize {
        self.queued
    }
}

impl Scheduler for Wf2q {
    fn name(&self) -> String {
        "wf2q+".into()
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        let k = self.share.by.of(&req);
        let cost = self.share.cost.of(&req);
        let vtime = self.vtime;
        let f = self.share.flow(&mut self.flows, k);
        f.queue.push_back(req);
        let became_backlogged = f.queue.len() == 1;
        if became_backlogged {
            // The flow becomes backlogged: its start tag jumps to V (no hoarded credit).
            (f.start, f.finish) = tags(vtime, f.finish, cost, f.weight);
        }
        let (w, fin) = (f.weight, f.finish);
        self.queued += 1;
        if became_backlogged {
            self.max_finish = self.max_finish.max(fin);
            self.backlogged += 1;
            self.active_weight += w;
            self.place(k);
        }
        debug_assert_eq!(self.eligible.len() + self.waiting.len(), self.backlogged);
    }

    fn dispatch(&mut self, _now: Nanos, _dev: &DeviceState) -> Option<Request> {
        if self.queued == 0 {
            return None;
        }
        self.promote();
        if self.eligible.is_empty() {
            // Every backlogged flow starts in the future: V = min S (step 3's max).
            let Reverse((s, _)) = *self.waiting.peek().expect("queued requests imply a backlogged flow");
            self.vtime = self.vtime.max(s.0);
            self.promote();
        }
        let Reverse((_, _, k)) = self.eligible.pop().expect("min-S flow is eligible");
        debug_assert!(self.active_weight > 0.0);
        let f = &mut self.flows[k as usize];
        let req = f.queue.pop_front().expect("backlogged flow has a head");
        self.queued -= 1;
        let cost = self.share.cost.of(&req);
        // V advances by the dispatched work over the backlogged weight (B includes k).
        self.vtime += cost / self.active_weight;
        if let Some(next) = f.queue.front() {
            // The next request starts where this one finished (f.finish >= V here).
            (f.start, f.finish) = tags(f.finish, f.finish, self.share.cost.of(next), f.weight);
            self.max_finish = self.max_finish.max(f.finish);
            self.place(k);
        } else {
            self.backlogged -= 1;
            self.active_weight -= f.weight;
            if self.backlogged == 0 {
                self.active_weight = 0.0; // no drift from float sums across busy periods
            }
        }
        if self.eligible.is_empty() {
            if let Some(&Reverse((s, _))) = self.waiting.peek() {
                self.vtime = self.vtime.max(s.0);
            }
        }
        if self.queued == 0 {
            // End of a busy period: forget relative credit (step 5).
            self.vtime = self.vtime.max(self.max_finish);
        }
        debug_assert_eq!(self.eligible.len() + self.waiting.len(), self.backlogged);
        debug_assert!(self.backlogged <= self.queued);
        Some(req)
    }

    #[inline]
    fn queued(&self) -> usize {
        self.queued
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("wf2q_virtual_time", self.vtime);
        sink("wf2q_backlogged_flows", self.backlogged as f64);
    }
}

impl Default for Wf2q {
    /// Equal weights between tenants, unit cost.
    fn default() -> Self {
        Wf2q::new(Vec::new()).expect("no weights to reject")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::tags::{CostModel, FlowKey};

    const FREE: DeviceState = DeviceState { outstanding: 0, free_slots: 1 };

    fn tenants_of(s: &mut Wf2q, n: usize) -> Vec<u32> {
        (0..n).map_while(|_| s.dispatch(0, &FREE)).map(|r| r.tenant).collect()
    }

    fn fill(s: &mut Wf2q, tenant: u32, n: u64, id0: u64, at: Nanos) {
        for i in 0..n {
            s.enqueue(Request::new(id0 + i, tenant, at, 4096), at);
        }
    }

    #[test]
    fn weights_two_to_one_interleave() {
        let mut s = Wf2q::new(vec![2.0, 1.0]).unwrap();
        fill(&mut s, 0, 30, 0, 0);
        fill(&mut s, 1, 30, 100, 0);
        let order = tenants_of(&mut s, 30);
        // Every prefix of length n gives tenant 0 within one request of 2n/3.
        for n in 1..=order.len() {
            let a = order[..n].iter().filter(|&&t| t == 0).count() as f64;
            assert!((a - 2.0 * n as f64 / 3.0).abs() <= 1.0, "prefix {n}: {order:?}");
        }
        assert_eq!(order.iter().filter(|&&t| t == 0).count(), 20);
        assert_eq!(s.queued(), 30);
    }

    #[test]
    fn idle_flow_gets_no_credit() {
        let mut s = Wf2q::new(vec![1.0, 1.0]).unwrap();
        fill(&mut s, 0, 50, 0, 0);
        // Tenant 0 alone for 20 dispatches: V follows its tags.
        assert_eq!(tenants_of(&mut s, 20), vec![0; 20]);
        // Tenant 1 returns with a burst of 20: it must alternate, not take 20 in a row.
        fill(&mut s, 1, 20, 100, 10);
        let order = tenants_of(&mut s, 20);
        let ones = order.iter().filter(|&&t| t == 1).count();
        assert!((9..=11).contains(&ones), "{order:?}");
        for w in order.windows(3) {
            assert!(w.iter().filter(|&&t| t == 1).count() <= 2, "{order:?}");
        }
    }

    #[test]
    fn eligibility_prevents_wfq_bursts() {
        // Bennett & Zhang's example: flow 0 has half the weight and 11 requests, ten flows
        // of weight 1 (1/20 each) one request each. WFQ (smallest F, no eligibility)
        // would send flow 0's first ten requests back to back (F = 0.1 … 1.0 ≤ 1); WF2Q+
        // interleaves them with the others.
        let mut s = Wf2q::new([10.0].into_iter().chain([1.0; 10]).collect()).unwrap();
        fill(&mut s, 0, 11, 0, 0);
        for t in 1..=10 {
            fill(&mut s, t, 1, 100 + t as u64, 0);
        }
        let order = tenants_of(&mut s, 21);
        assert_eq!(&order[..6], &[0, 1, 0, 2, 0, 3], "{order:?}");
        for n in 1..=order.len() {
            let a = order[..n].iter().filter(|&&t| t == 0).count();
            assert!(a <= n / 2 + 2, "flow 0 ran ahead in prefix {n}: {order:?}");
        }
        assert_eq!(order.len(), 21);
    }

    #[test]
    fn class_key_and_byte_cost() {
        // Flows by class; class 1 sends 4x larger requests; equal weights and byte cost
        // ⇒ class 0 gets 4 requests per class-1 request.
        let mut s = Wf2q::new(vec![]).unwrap().with_key(FlowKey::Class).with_cost(CostModel::Bytes);
        for i in 0..40 {
            let mut r = Request::new(i, 0, 0, if i % 2 == 0 { 4096 } else { 16384 });
            r.class = (i % 2) as u32;
            s.enqueue(r, 0);
        }
        let order: Vec<u32> = (0..25).map_while(|_| s.dispatch(0, &FREE)).map(|r| r.class).collect();
        assert_eq!(order.iter().filter(|&&c| c == 0).count(), 20, "{order:?}");
    }

    #[test]
    fn weight_change_applies_to_new_tags() {
        let mut s = Wf2q::new(vec![1.0, 1.0]).unwrap();
        fill(&mut s, 0, 100, 0, 0);
        fill(&mut s, 1, 100, 1000, 0);
        tenants_of(&mut s, 10);
        s.set_weight(0, 3.0).unwrap();
        assert_eq!(s.weight(0), 3.0);
        assert!(s.set_weight(1, -2.0).is_err());
        let order = tenants_of(&mut s, 40);
        let a = order.iter().filter(|&&t| t == 0).count();
        assert!((29..=31).contains(&a), "{order:?}");
    }

    #[test]
    fn busy_period_reset_and_work_conservation() {
        let mut s = Wf2q::default();
        assert_eq!(s.dispatch(0, &FREE), None);
        fill(&mut s, 3, 2, 0, 0);
        assert_eq!(s.backlogged_flows(), 1);
        assert_eq!(s.queued_in(3), 2);
        assert_eq!(tenants_of(&mut s, 5), vec![3, 3]);
        assert_eq!(s.virtual_time(), 2.0);
        // Both flows start level after the idle period.
        fill(&mut s, 0, 2, 10, 50);
        fill(&mut s, 3, 2, 20, 50);
        assert_eq!(tenants_of(&mut s, 4), vec![0, 3, 0, 3]);
        assert_eq!(s.queued(), 0);
        let mut g = Vec::new();
        s.gauges(&mut |n, v| g.push((n.to_string(), v)));
        assert_eq!(g.len(), 2);
    }
}
