//! Earliest deadline first (Liu & Layland 1973; Jackson's rule for one machine).
//!
//! Each request gets an absolute deadline `arrival + D_c`, where `D_c` is the relative
//! deadline (latency target) of its class `req.class`, from a per-class list with a
//! default for unlisted classes. The queue dispatches the request with the smallest
//! deadline; ties go to the earlier arrival, then the smaller id, then insertion order,
//! so runs are deterministic. The policy is work conserving: it dispatches whenever the
//! device has a free slot and a request waits.
//!
//! Where the seeds use it:
//! - seed 001 (SARC + AVATAR) §3.2: AVATAR's low level is an EDF queue whose deadlines are
//!   "the sum of the request arrival time to the EDF queue and its class latency
//!   requirement"; AVATAR only decides *how many* to release to the device. AVATAR and
//!   Facade (Lumb et al., FAST'03, the seed-001 baseline: EDF plus a device queue-depth
//!   controller) use `twolevel::edf::ClassEdf`, one deadline-sorted FIFO per class,
//!   since a class's deadlines arrive in order; it dispatches in the same order as
//!   [`EdfQueue`], which serves arbitrary deadlines ([`EdfQueue::push`],
//!   [`Edf::enqueue_with_deadline`]).
//!
//! Optimality (tested in `tests/fairness.rs`): for requests of equal service time on one
//! server, EDF minimises the maximum lateness among all work-conserving schedules (an
//! exchange argument over the fixed service slots), and among *all* schedules when
//! release times are multiples of the service time. So whenever some schedule of that
//! kind meets every deadline, EDF does too.
//!
//! Cost: `O(log n)` per enqueue and dispatch (a binary heap).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::request::Request;
use crate::scheduler::Scheduler;
use crate::time::Nanos;

/// One queued request and its ordering key.
#[derive(Clone, Copy, Debug)]
struct Entry {
    deadline: Nanos,
    seq: u64,
    req: Request,
}

impl Entry {
    #[inline]
    fn key(&self) -> (Nanos, Nanos, u64, u64) {
        (self.deadline, self.req.arrival, self.req.id, self.seq)
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// A deadline-ordered queue of requests: the building block of [`Edf`] and of composite
/// policies (AVATAR's EDF queue) that compute deadlines themselves.
///
/// Order: smallest deadline, then earliest arrival, then smallest id, then insertion
/// order.
#[derive(Clone, Debug, Default)]
pub struct EdfQueue {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
}

impl EdfQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Insert `req` with absolute deadline `deadline`.
    #[inline]
    pub fn push(&mut self, req: Request, deadline: Nanos) {
        let e = Entry { deadline, seq: self.seq, req };
        self.seq += 1;
        self.heap.push(Reverse(e));
    }

    /// Remove and return the most urgent request with its deadline.
    #[inline]
    pub fn pop(&mut self) -> Option<(Request, Nanos)> {
        self.heap.pop().map(|Reverse(e)| (e.req, e.deadline))
    }

    /// The most urgent request and its deadline, without removing it.
    #[inline]
    pub fn peek(&self) -> Option<(&Request, Nanos)> {
        self.heap.peek().map(|Reverse(e)| (&e.req, e.deadline))
    }

    /// The earliest deadline in the queue.
    #[inline]
    pub fn earliest_deadline(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse(e)| e.deadline)
    }

    /// Requests queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// No request queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Every queued request with its deadline, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&Request, Nanos)> + '_ {
        self.heap.iter().map(|Reverse(e)| (&e.req, e.deadline))
    }

    /// How many queued requests have a deadline ≤ `t` (e.g. AVATAR's "existing requests
    /// with deadlines in the next window"). `O(n)`.
    pub fn count_due_by(&self, t: Nanos) -> usize {
        self.heap.iter().filter(|Reverse(e)| e.deadline <= t).count()
    }
}

/// Earliest deadline first with per-class relative deadlines.
#[derive(Clone, Debug)]
pub struct Edf {
    deadlines: Vec<Nanos>,
    default_deadline: Nanos,
    queue: EdfQueue,
}

impl Edf {
    /// EDF where class `c` has relative deadline `deadlines_ns[c]` and every other class
    /// `default_deadline_ns`. All deadlines must be > 0.
    pub fn new(deadlines_ns: Vec<Nanos>, default_deadline_ns: Nanos) -> Result<Self> {
        if let Some(i) = deadlines_ns.iter().position(|&d| d == 0) {
            return config(format!("edf: deadlines_ns[{i}] must be > 0 ns"));
        }
        if default_deadline_ns == 0 {
            return config("edf: default_deadline_ns must be > 0 ns");
        }
        Ok(Edf { deadlines: deadlines_ns, default_deadline: default_deadline_ns, queue: EdfQueue::new() })
    }

    /// The relative deadline of class `class`.
    #[inline]
    pub fn relative_deadline(&self, class: u32) -> Nanos {
        self.deadlines.get(class as usize).copied().unwrap_or(self.default_deadline)
    }

    /// The absolute deadline EDF gives `req`: its arrival plus its class's relative
    /// deadline (saturating at `Nanos::MAX`).
    #[inline]
    pub fn deadline_of(&self, req: &Request) -> Nanos {
        req.arrival.saturating_add(self.relative_deadline(req.class))
    }

    /// Queue `req` with an explicit absolute deadline instead of its class's (for
    /// composite policies that compute deadlines themselves).
    #[inline]
    pub fn enqueue_with_deadline(&mut self, req: Request, deadline: Nanos) {
        self.queue.push(req, deadline);
    }

    /// The underlying deadline queue (read only).
    #[inline]
    pub fn queue(&self) -> &EdfQueue {
        &self.queue
    }
}

impl Scheduler for Edf {
    fn name(&self) -> String {
        "edf".into()
    }
    #[inline]
    fn enqueue(&mut self, req: Request, _now: Nanos) {
        let d = self.deadline_of(&req);
        self.queue.push(req, d);
    }
    #[inline]
    fn dispatch(&mut self, _now: Nanos, _dev: &DeviceState) -> Option<Request> {
        self.queue.pop().map(|(r, _)| r)
    }
    #[inline]
    fn queued(&self) -> usize {
        self.queue.len()
    }
    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("edf_queued", self.queue.len() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FREE: DeviceState = DeviceState { outstanding: 0, free_slots: 1 };

    fn req(id: u64, class: u32, arrival: Nanos) -> Request {
        let mut r = Request::new(id, 0, arrival, 4096);
        r.class = class;
        r
    }

    fn drain(s: &mut Edf, now: Nanos) -> Vec<u64> {
        std::iter::from_fn(|| s.dispatch(now, &FREE)).map(|r| r.id).collect()
    }

    #[test]
    fn orders_by_absolute_deadline() {
        // Class 0: 100 ns, class 1: 10 ns, others 50 ns.
        let mut s = Edf::new(vec![100, 10], 50).unwrap();
        s.enqueue(req(0, 0, 0), 0); // deadline 100
        s.enqueue(req(1, 1, 20), 20); // 30
        s.enqueue(req(2, 7, 30), 30); // 80
        s.enqueue(req(3, 1, 85), 85); // 95
        assert_eq!(s.queued(), 4);
        assert_eq!(drain(&mut s, 90), vec![1, 2, 3, 0]);
        assert_eq!(s.queued(), 0);
    }

    #[test]
    fn ties_by_arrival_then_id() {
        let mut s = Edf::new(vec![100, 50], 1).unwrap();
        s.enqueue(req(9, 0, 0), 0); // 100
        s.enqueue(req(4, 1, 50), 50); // 100, later arrival
        s.enqueue(req(3, 0, 0), 0); // 100, same arrival as 9, smaller id
        assert_eq!(drain(&mut s, 60), vec![3, 9, 4]);
    }

    #[test]
    fn explicit_deadlines_and_queue_queries() {
        let mut s = Edf::new(vec![], 1_000).unwrap();
        s.enqueue(req(0, 0, 0), 0); // 1000
        s.enqueue_with_deadline(req(1, 0, 5), 7);
        s.enqueue_with_deadline(req(2, 0, 6), Nanos::MAX);
        assert_eq!(s.queue().earliest_deadline(), Some(7));
        assert_eq!(s.queue().count_due_by(1_000), 2);
        assert_eq!(s.queue().iter().count(), 3);
        assert_eq!(s.queue().peek().map(|(r, d)| (r.id, d)), Some((1, 7)));
        assert_eq!(drain(&mut s, 10), vec![1, 0, 2]);
        // Deadlines saturate instead of overflowing.
        let s = Edf::new(vec![], Nanos::MAX).unwrap();
        assert_eq!(s.deadline_of(&req(0, 0, 5)), Nanos::MAX);
    }

    #[test]
    fn rejects_zero_deadlines() {
        let e = Edf::new(vec![5, 0], 10).unwrap_err().to_string();
        assert!(e.contains("deadlines_ns[1]"), "{e}");
        let e = Edf::new(vec![], 0).unwrap_err().to_string();
        assert!(e.contains("default_deadline_ns"), "{e}");
    }
}
