//! SFQ(D): start-time fair queuing with dispatch depth D (Jin, Chase & Kaur,
//! "Interposed proportional sharing for a storage service utility", SIGMETRICS 2004, §3;
//! SFQ itself: Goyal, Vin & Cheng, IEEE/ACM ToN 5(5), 1997).
//!
//! An *interposed* scheduler in front of a device that serves up to D requests
//! concurrently (a disk or array with its own queue). It shares the device between flows
//! (tenants by default, or classes) in proportion to weights `w_i` (unlisted flows weigh
//! [`DEFAULT_WEIGHT`](crate::schedulers::tags::DEFAULT_WEIGHT)); a request costs 1 (IOPS
//! fairness, default) or its size in bytes. Seed 001 cites it among the GPS-based
//! proportional-share schemes; seed 003's YFQ back end is of the same family.
//!
//! ## The algorithm
//! 1. **Tags at arrival** of request `p` of flow `f` with cost `c`:
//!    `S(p) = max(v(A(p)), F(p_prev))`, `F(p) = S(p) + c/w_f`, where `p_prev` is the
//!    flow's previous request and `v` the virtual time at the arrival. A flow that has
//!    been idle restarts at `v`: it gets no credit for the time it was away.
//! 2. **Dispatch** the queued request with the smallest start tag (ties: earlier arrival,
//!    then smaller flow index) whenever fewer than `D` requests are outstanding at the
//!    device. `D` caps the dispatching even when the device would accept more: it trades
//!    device efficiency (deeper queues, better seek ordering) for tighter fairness (the
//!    paper's bound grows with D).
//! 3. **Virtual time** `v(t)` is the start tag of the request last dispatched. At the end
//!    of a busy period (nothing queued and nothing outstanding) `v` becomes the largest
//!    finish tag handed out, as in SFQ.
//!
//! "Outstanding" is the device's count (`DeviceState::outstanding` passed to
//! [`Scheduler::dispatch`]); the scheduler also counts its own in-flight requests through
//! [`Scheduler::complete`] to detect the end of a busy period, so a wrapping policy must
//! forward completions.
//!
//! ## Cost
//! Per-flow FIFO queues of tagged requests (a flow's start tags only grow) and one heap
//! of backlogged flows keyed by their head's start tag: `O(log #flows)` per enqueue and
//! dispatch, independent of the backlog depth.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::request::{Completion, Request};
use crate::scheduler::Scheduler;
use crate::schedulers::tags::{tags, FairQueue, FlowState, Sharing, VTime};
use crate::time::Nanos;

/// Policy name used in errors and reports.
const NAME: &str = "sfq";

/// A queued request with its tags.
#[derive(Clone, Copy, Debug)]
struct Tagged {
    req: Request,
    start: f64,
}

/// One flow: its tagged FIFO queue and the finish tag of its last arrival.
#[derive(Clone, Debug, Default)]
struct Flow {
    queue: VecDeque<Tagged>,
    weight: f64,
    last_finish: f64,
}

impl FlowState for Flow {
    fn with_weight(weight: f64) -> Self {
        Flow { weight, ..Flow::default() }
    }
    fn weight(&self) -> f64 {
        self.weight
    }
}

/// SFQ(D): start-time fair queuing with at most `depth` requests outstanding.
#[derive(Clone, Debug)]
pub struct Sfq {
    share: Sharing,
    depth: usize,
    flows: Vec<Flow>,
    /// Virtual time v: start tag of the request last dispatched.
    vtime: f64,
    /// Largest finish tag handed out (the busy-period reset target).
    max_finish: f64,
    /// Backlogged flows keyed by their head: (S, head arrival, flow).
    heads: BinaryHeap<Reverse<(VTime, Nanos, u32)>>,
    queued: usize,
    in_flight: usize,
}

impl Sfq {
    /// SFQ(`depth`) between tenants with `weights[i]` for tenant `i` (others weight 1),
    /// unit cost per request. `depth` ≥ 1; weights finite and > 0.
    pub fn new(weights: Vec<f64>, depth: usize) -> Result<Self> {
        if depth == 0 {
            return config("sfq: depth must be >= 1");
        }
        Ok(Sfq {
            share: Sharing::new(NAME, weights)?,
            depth,
            flows: Vec::new(),
            vtime: 0.0,
            max_finish: 0.0,
            heads: BinaryHeap::new(),
            queued: 0,
            in_flight: 0,
        })
    }

    /// The dispatch depth D.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The current weight of `flow`.
    pub fn weight(&self, flow: u32) -> f64 {
        self.share.weight(&self.flows, flow)
    }

    /// Change the weight of `flow` (finite, > 0); requests arriving from now on are
    /// tagged with it.
    pub fn set_weight(&mut self, flow: u32, w: f64) -> Result<()> {
        self.share.weights.set(NAME, flow, w)?;
        if let Some(f) = self.flows.get_mut(flow as usize) {
            f.weight = w;
        }
        Ok(())
    }

    /// The virtual time v.
    pub fn virtual_time(&self) -> f64 {
        self.vtime
    }

    /// Requests this scheduler dispatched that have not completed.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    #[inline]
    fn end_busy_period_if_idle(&mut self) {
        if self.queued == 0 && self.in_flight == 0 {
            self.vtime = self.vtime.max(self.max_finish);
        }
    }
}

impl FairQueue for Sfq {
    fn sharing_mut(&mut self) -> &mut Sharing {
        &mut self.share
    }
    fn waiting(&self) -> usize {
        self.queued
    }
}

impl Scheduler for Sfq {
    fn name(&self) -> String {
        format!("sfq(d={})", self.depth)
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        let k = self.share.by.of(&req);
        let cost = self.share.cost.of(&req);
        let vtime = self.vtime;
        let f = self.share.flow(&mut self.flows, k);
        let (start, finish) = tags(vtime, f.last_finish, cost, f.weight);
        f.last_finish = finish;
        debug_assert!(finish > start);
        let was_idle = f.queue.is_empty();
        f.queue.push_back(Tagged { req, start });
        self.max_finish = self.max_finish.max(finish);
        self.queued += 1;
        if was_idle {
            self.heads.push(Reverse((VTime::new(start), req.arrival, k)));
        }
    }

    fn dispatch(&mut self, _now: Nanos, dev: &DeviceState) -> Option<Request> {
        if dev.outstanding >= self.depth {
            return None;
        }
        let Reverse((s, _, k)) = self.heads.pop()?;
        let f = &mut self.flows[k as usize];
        let t = f.queue.pop_front().expect("a flow in the heap has a head");
        debug_assert_eq!(t.start, s.0);
        debug_assert!(t.start >= self.vtime, "v never runs ahead of a queued start tag");
        if let Some(next) = f.queue.front() {
            debug_assert!(next.start >= t.start, "start tags grow within a flow");
            self.heads.push(Reverse((VTime::new(next.start), next.req.arrival, k)));
        }
        self.queued -= 1;
        self.in_flight += 1;
        self.vtime = t.start;
        Some(t.req)
    }

    fn complete(&mut self, _done: &Completion, _now: Nanos) {
        debug_assert!(self.in_flight > 0, "completion of a request sfq did not dispatch");
        self.in_flight = self.in_flight.saturating_sub(1);
        self.end_busy_period_if_idle();
    }

    #[inline]
    fn queued(&self) -> usize {
        self.queued
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("sfq_virtual_time", self.vtime);
        sink("sfq_in_flight", self.in_flight as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::tags::{CostModel, FlowKey};

    fn dev(outstanding: usize) -> DeviceState {
        DeviceState { outstanding, free_slots: 8 }
    }

    fn fill(s: &mut Sfq, tenant: u32, n: u64, id0: u64, at: Nanos) {
        for i in 0..n {
            s.enqueue(Request::new(id0 + i, tenant, at, 4096), at);
        }
    }

    fn done(r: Request, t: Nanos) -> Completion {
        Completion { req: r, dispatch: t, finish: t }
    }

    /// Serve one request at a time (D = 1 device), completing each before the next.
    fn serve(s: &mut Sfq, n: usize, t: Nanos) -> Vec<u32> {
        let mut out = Vec::new();
        for _ in 0..n {
            let Some(r) = s.dispatch(t, &dev(0)) else { break };
            out.push(r.tenant);
            s.complete(&done(r, t), t);
        }
        out
    }

    #[test]
    fn weights_two_to_one() {
        let mut s = Sfq::new(vec![2.0, 1.0], 1).unwrap();
        fill(&mut s, 0, 40, 0, 0);
        fill(&mut s, 1, 40, 100, 0);
        let order = serve(&mut s, 30, 1);
        for n in 1..=order.len() {
            let a = order[..n].iter().filter(|&&t| t == 0).count() as f64;
            assert!((a - 2.0 * n as f64 / 3.0).abs() <= 1.0, "prefix {n}: {order:?}");
        }
        assert_eq!(order.iter().filter(|&&t| t == 0).count(), 20);
    }

    #[test]
    fn depth_caps_dispatch() {
        let mut s = Sfq::new(vec![], 2).unwrap();
        fill(&mut s, 0, 5, 0, 0);
        assert!(s.dispatch(0, &dev(0)).is_some());
        assert!(s.dispatch(0, &dev(1)).is_some());
        // The device has 8 free slots but 2 are outstanding: D = 2 holds the rest.
        assert_eq!(s.dispatch(0, &dev(2)), None);
        assert_eq!(s.in_flight(), 2);
        assert_eq!(s.queued(), 3);
        assert_eq!(s.depth(), 2);
        assert!(Sfq::new(vec![], 0).unwrap_err().to_string().contains("depth"));
    }

    #[test]
    fn virtual_time_is_last_dispatched_start_tag() {
        let mut s = Sfq::new(vec![1.0, 1.0], 4).unwrap();
        fill(&mut s, 0, 3, 0, 0); // S = 0, 1, 2
        let r = s.dispatch(0, &dev(0)).unwrap();
        let r2 = s.dispatch(0, &dev(1)).unwrap();
        assert_eq!(s.virtual_time(), 1.0);
        // A newcomer starts at v = 1, ahead of tenant 0's next start tag 2.
        fill(&mut s, 1, 1, 10, 5);
        assert_eq!(s.dispatch(5, &dev(2)).unwrap().tenant, 1);
        assert_eq!(s.virtual_time(), 1.0);
        // Busy period ends when everything queued and in flight is done: v jumps to max F.
        let r3 = s.dispatch(5, &dev(3)).unwrap();
        for x in [r, r2, r3] {
            s.complete(&done(x, 6), 6);
        }
        assert_eq!(s.virtual_time(), 2.0);
        assert_eq!(s.in_flight(), 1);
        s.complete(&done(Request::new(10, 1, 5, 4096), 7), 7);
        assert_eq!(s.virtual_time(), 3.0);
    }

    #[test]
    fn idle_flow_gets_no_credit() {
        let mut s = Sfq::new(vec![1.0, 1.0], 1).unwrap();
        fill(&mut s, 0, 50, 0, 0);
        assert_eq!(serve(&mut s, 20, 1), vec![0; 20]);
        fill(&mut s, 1, 20, 100, 10);
        let order = serve(&mut s, 20, 11);
        assert_eq!(order.iter().filter(|&&t| t == 1).count(), 10, "{order:?}");
        for w in order.windows(3) {
            assert!(w.iter().filter(|&&t| t == 1).count() <= 2, "{order:?}");
        }
    }

    #[test]
    fn class_key_byte_cost_and_weight_change() {
        let mut s = Sfq::new(vec![], 1).unwrap().with_key(FlowKey::Class).with_cost(CostModel::Bytes);
        for i in 0..40 {
            let mut r = Request::new(i, 9, 0, if i % 2 == 0 { 4096 } else { 16384 });
            r.class = (i % 2) as u32;
            s.enqueue(r, 0);
        }
        let mut classes = Vec::new();
        for _ in 0..25 {
            let r = s.dispatch(0, &dev(0)).unwrap();
            classes.push(r.class);
            s.complete(&done(r, 0), 0);
        }
        let zeros = classes.iter().filter(|&&c| c == 0).count();
        assert!((19..=21).contains(&zeros), "{classes:?}");
        s.set_weight(1, 4.0).unwrap();
        assert_eq!(s.weight(1), 4.0);
        assert!(s.set_weight(1, f64::NAN).is_err());
    }
}
