//! Miser: slack-based recombination of RTT's two classes on one server (seed 000,
//! §3.3.2, Algorithm 2; SPEC "Algorithm notes → Recombiners").
//!
//! On arrival RTT classifies the request ([`Rtt::admit`] at the primary capacity Cmin).
//! A primary request carries a *slack*: the free places left in Q1 when it joined
//! (`maxQ1 − lenQ1`, [`Rtt::free_places`]), i.e. how many extra services it can sit
//! behind and still meet δ. On every dispatch:
//!
//! - if Q2 has work and the minimum slack over Q1 is ≥ 1 (or Q1 is empty), serve Q2
//!   and decrement every Q1 slack (one more service now stands in front of each);
//! - otherwise serve Q1's head (FIFO);
//! - never idle while either queue has work (work conserving).
//!
//! **Cost.** "Decrement all slacks" is a global counter: a request stores
//! `slack + served_q2_at_arrival` and its current slack is that minus `served_q2`.
//! The minimum over Q1 (which only pops from the front) is a monotone deque of those
//! keys, so arrival and dispatch are O(1) amortised.
//!
//! With ΔC = Cmin the composite RTT + Miser never delays a primary request past δ
//! (§3.3.2); with a small ΔC a few may be, which the recombiner comparison measures.

use std::collections::VecDeque;

use crate::device::DeviceState;
use crate::request::Request;
use crate::scheduler::Scheduler;
use crate::shaping::recombine::{PRIMARY, SECONDARY};
use crate::shaping::rtt::Rtt;
use crate::time::Nanos;

/// Miser: RTT decomposition + slack scheduling.
#[derive(Clone, Debug)]
pub struct Miser {
    rtt: Rtt,
    /// Primary queue: (request, slack key = slack at arrival + q2_served then).
    q1: VecDeque<(Request, u64)>,
    /// Overflow queue.
    q2: VecDeque<Request>,
    /// Monotone deque of (sequence, key) giving min key over Q1.
    min_keys: VecDeque<(u64, u64)>,
    /// Sequence number of the next primary arrival / of Q1's head.
    next_seq: u64,
    head_seq: u64,
    /// Q2 services dispatched while Q1 held requests (each decremented every slack).
    q2_served: u64,
}

impl Miser {
    /// Miser over the RTT classifier `rtt` (its capacity is Cmin, its deadline δ).
    pub fn new(rtt: Rtt) -> Self {
        Miser {
            rtt,
            q1: VecDeque::new(),
            q2: VecDeque::new(),
            min_keys: VecDeque::new(),
            next_seq: 0,
            head_seq: 0,
            q2_served: 0,
        }
    }

    /// The RTT classifier.
    pub fn rtt(&self) -> &Rtt {
        &self.rtt
    }

    /// The minimum slack over Q1, `None` when Q1 is empty.
    pub fn min_slack(&self) -> Option<u64> {
        self.min_keys.front().map(|&(_, k)| k - self.q2_served)
    }

    /// Requests waiting in Q1 and in Q2.
    pub fn queue_lengths(&self) -> (usize, usize) {
        (self.q1.len(), self.q2.len())
    }
}

impl Scheduler for Miser {
    fn name(&self) -> String {
        format!("miser({} IOPS, {} ns)", self.rtt.capacity().iops(), self.rtt.deadline())
    }

    fn enqueue(&mut self, mut req: Request, now: Nanos) {
        if self.rtt.admit(now) {
            req.class = PRIMARY;
            let key = self.rtt.free_places() + self.q2_served;
            while self.min_keys.back().is_some_and(|&(_, k)| k >= key) {
                self.min_keys.pop_back();
            }
            self.min_keys.push_back((self.next_seq, key));
            self.next_seq += 1;
            self.q1.push_back((req, key));
        } else {
            req.class = SECONDARY;
            self.q2.push_back(req);
        }
    }

    fn dispatch(&mut self, _now: Nanos, _dev: &DeviceState) -> Option<Request> {
        let slack_ok = self.min_slack().is_none_or(|s| s >= 1);
        if !self.q2.is_empty() && slack_ok {
            if !self.q1.is_empty() {
                // Every queued primary request now waits one service longer.
                self.q2_served += 1;
            }
            return self.q2.pop_front();
        }
        let (req, key) = self.q1.pop_front()?;
        debug_assert!(key >= self.q2_served, "a primary slack went negative");
        if self.min_keys.front().is_some_and(|&(s, _)| s == self.head_seq) {
            self.min_keys.pop_front();
        }
        self.head_seq += 1;
        debug_assert_eq!(self.q1.is_empty(), self.min_keys.is_empty());
        Some(req)
    }

    fn queued(&self) -> usize {
        self.q1.len() + self.q2.len()
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("miser_q1", self.q1.len() as f64);
        sink("miser_q2", self.q2.len() as f64);
        sink("miser_min_slack", self.min_slack().map_or(f64::NAN, |s| s as f64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shaping::rtt::Capacity;
    use crate::time::NS_PER_MS;

    const FREE: DeviceState = DeviceState { outstanding: 0, free_slots: 1 };

    #[test]
    fn serves_overflow_only_while_every_primary_has_slack() {
        // Cmin = 1000 IOPS, δ = 4 ms: maxQ1 = 4. A batch of 6 at t = 0: slacks 3, 2, 1, 0
        // then two overflow requests.
        let mut m = Miser::new(Rtt::new(Capacity::from_iops(1000.0).unwrap(), 4 * NS_PER_MS).unwrap());
        for i in 0..6 {
            m.enqueue(Request::new(i, 0, 0, 4096), 0);
        }
        assert_eq!(m.queue_lengths(), (4, 2));
        assert_eq!(m.min_slack(), Some(0));
        // The last primary has no slack: Q1 goes first until it has left.
        let ids: Vec<u64> = std::iter::from_fn(|| m.dispatch(0, &FREE)).map(|r| r.id).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4, 5]);

        // Now with slack: 2 primary requests (slacks 3, 2) and 2 overflow ones arriving
        // behind a full queue later. Overflow can jump ahead twice, then slack is 0.
        let mut m = Miser::new(Rtt::new(Capacity::from_iops(1000.0).unwrap(), 4 * NS_PER_MS).unwrap());
        for i in 0..4 {
            m.enqueue(Request::new(i, 0, 0, 4096), 0); // slacks 3, 2, 1, 0
        }
        m.dispatch(0, &FREE); // 0
        m.dispatch(0, &FREE); // 1
        m.dispatch(0, &FREE); // 2
        m.dispatch(0, &FREE); // 3
        // 10 ms later the RTT backlog is empty: 3 primaries (slacks 3, 2, 1), then 2 more
        // would fit only one: request 14 fills the queue (slack 0), 15 overflows.
        for i in 10..16 {
            m.enqueue(Request::new(i, 0, 10 * NS_PER_MS, 4096), 10 * NS_PER_MS);
        }
        assert_eq!(m.queue_lengths(), (4, 2));
        assert_eq!(m.min_slack(), Some(0));
        let ids: Vec<(u64, u32)> = std::iter::from_fn(|| m.dispatch(0, &FREE)).map(|r| (r.id, r.class)).collect();
        assert_eq!(ids, [(10, 0), (11, 0), (12, 0), (13, 0), (14, 1), (15, 1)]);
    }

    #[test]
    fn overflow_jumps_ahead_by_the_minimum_slack() {
        let cap = Capacity::from_iops(1000.0).unwrap();
        let mut m = Miser::new(Rtt::new(cap, 10 * NS_PER_MS).unwrap());
        // A burst of 12 at t = 0: 10 primary (slacks 9..0), 2 overflow.
        for i in 0..12 {
            m.enqueue(Request::new(i, 0, 0, 4096), 0);
        }
        // Serve 5 primaries: remaining slacks 4, 3, 2, 1, 0 → no overflow yet.
        for want in 0..5 {
            assert_eq!(m.dispatch(0, &FREE).unwrap().id, want);
        }
        assert_eq!(m.min_slack(), Some(0));
        // The overflow request arrives... nothing more: serve all of Q1, then Q2.
        let rest: Vec<u64> = std::iter::from_fn(|| m.dispatch(0, &FREE)).map(|r| r.id).collect();
        assert_eq!(rest, [5, 6, 7, 8, 9, 10, 11]);
        // Slack then allows Q2 ahead: 3 primaries with slacks 9, 8, 7 and two overflow
        // requests queued behind them are served first (min slack ≥ 1), decrementing.
        let mut m = Miser::new(Rtt::new(cap, 10 * NS_PER_MS).unwrap());
        let mut r = Rtt::new(cap, 10 * NS_PER_MS).unwrap();
        for i in 0..3 {
            m.enqueue(Request::new(i, 0, 0, 4096), 0);
            r.admit(0);
        }
        // Overflow: force two secondary requests straight into Q2.
        for i in 3..5 {
            let mut q = Request::new(i, 0, 0, 4096);
            q.class = SECONDARY;
            m.q2.push_back(q);
        }
        assert_eq!(m.min_slack(), Some(7));
        let order: Vec<u64> = std::iter::from_fn(|| m.dispatch(0, &FREE)).map(|r| r.id).collect();
        assert_eq!(order, [3, 4, 0, 1, 2]);
        assert_eq!(m.queued(), 0);
    }
}
