//! What every rate limiter of the stacks shares: requests held in lanes (FIFO queues)
//! until their limiter lets the head pass, then sent to the device in the order they
//! passed, work conserving behind the limiter.
//!
//! A [`Throttle`] says which lane a request waits in (QEMU: the drive and the direction;
//! blk-throttle: the cgroup and the direction; SPDK: the bdev), when the head of a lane
//! may pass, and what passing charges. [`Throttled`] keeps the lanes, asks only about a
//! lane's head (as every one of these systems does: a request never overtakes an older
//! one of its lane), wakes a waiting lane at the time its throttle named, and takes
//! lanes ready at the same time in turn (the lane that passed goes to the back), which is
//! the round robin QEMU's throttle groups and blk-throttle's dispatch both keep.
//!
//! A throttle's state only moves forward when a request passes or time advances, and a
//! pass only delays the others: a lane's answer "not before t" stays true until t, so a
//! waiting lane is asked again only at its time. The cost per request is a heap push and
//! pop over the lanes waiting, not a scan of every lane.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::device::DeviceState;
use crate::request::Request;
use crate::scheduler::Scheduler;
use crate::time::Nanos;

/// A rate limiter's rules, asked by [`Throttled`] about the head of each lane.
pub trait Throttle {
    /// The system's name in reports (e.g. `"qemu-throttle"`).
    fn name(&self) -> String;

    /// The lane `req` waits in (lanes are numbered from 0; any number is taken).
    fn lane(&self, req: &Request) -> usize;

    /// The earliest time at which `req`, the head of its lane, may pass: `now` (or
    /// earlier) when it may pass at once. Called with non-decreasing `now`.
    fn ready_at(&mut self, req: &Request, now: Nanos) -> Nanos;

    /// `req` passes at `now` (after [`Throttle::ready_at`] said it may): charge it.
    fn pass(&mut self, req: &Request, now: Nanos);

    /// A request this throttle passed has completed (for throttles that count
    /// completions; default nothing).
    fn complete(&mut self, _req: &Request, _now: Nanos) {}

    /// Internal state for the time series (default nothing).
    fn gauges(&self, _sink: &mut dyn FnMut(&str, f64)) {}
}

/// A [`Throttle`] in front of the device: lanes held back, the requests that passed
/// served first come first served.
#[derive(Debug, Clone)]
pub struct Throttled<T> {
    throttle: T,
    lanes: Vec<VecDeque<Request>>,
    /// Lanes with requests that wait for a time: (time, turn, lane). `turn` orders lanes
    /// ready at the same time by when they began to wait.
    waiting: BinaryHeap<Reverse<(Nanos, u64, usize)>>,
    /// Whether a lane is in `waiting` (a backlogged lane is there exactly once).
    armed: Vec<bool>,
    turn: u64,
    released: VecDeque<Request>,
    held: usize,
}

impl<T: Throttle> Throttled<T> {
    /// `throttle` with no request yet.
    pub fn new(throttle: T) -> Self {
        Throttled {
            throttle,
            lanes: Vec::new(),
            waiting: BinaryHeap::new(),
            armed: Vec::new(),
            turn: 0,
            released: VecDeque::new(),
            held: 0,
        }
    }

    /// The throttle's rules and state.
    pub fn throttle(&self) -> &T {
        &self.throttle
    }

    fn arm(&mut self, lane: usize, at: Nanos) {
        self.turn += 1;
        self.armed[lane] = true;
        self.waiting.push(Reverse((at, self.turn, lane)));
    }

    /// Let pass every head whose time has come, in turn.
    fn pump(&mut self, now: Nanos) {
        while let Some(&Reverse((at, _, lane))) = self.waiting.peek() {
            if at > now {
                break;
            }
            self.waiting.pop();
            self.armed[lane] = false;
            let Some(head) = self.lanes[lane].front().copied() else { continue };
            let ready = self.throttle.ready_at(&head, now);
            if ready > now {
                self.arm(lane, ready);
                continue;
            }
            self.throttle.pass(&head, now);
            self.lanes[lane].pop_front();
            self.held -= 1;
            self.released.push_back(head);
            if !self.lanes[lane].is_empty() {
                // Its next head is asked again now, behind the lanes already waiting
                // for this moment.
                self.arm(lane, now);
            }
        }
    }
}

impl<T: Throttle> Scheduler for Throttled<T> {
    fn name(&self) -> String {
        self.throttle.name()
    }

    fn enqueue(&mut self, req: Request, now: Nanos) {
        let lane = self.throttle.lane(&req);
        if lane >= self.lanes.len() {
            self.lanes.resize_with(lane + 1, VecDeque::new);
            self.armed.resize(lane + 1, false);
        }
        self.lanes[lane].push_back(req);
        self.held += 1;
        if !self.armed[lane] {
            self.arm(lane, now);
        }
        self.pump(now);
    }

    fn dispatch(&mut self, now: Nanos, _dev: &DeviceState) -> Option<Request> {
        self.pump(now);
        self.released.pop_front()
    }

    fn complete(&mut self, done: &crate::request::Completion, now: Nanos) {
        self.throttle.complete(&done.req, now);
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.waiting.peek().map(|Reverse((at, _, _))| *at)
    }

    fn on_timer(&mut self, now: Nanos) {
        self.pump(now);
    }

    fn queued(&self) -> usize {
        self.held + self.released.len()
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("held", self.held as f64);
        self.throttle.gauges(sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS as MS;

    /// One request per lane every `gap`: lane = tenant.
    struct Spacing {
        gap: Nanos,
        next: Vec<Nanos>,
    }

    impl Throttle for Spacing {
        fn name(&self) -> String {
            "spacing".into()
        }
        fn lane(&self, req: &Request) -> usize {
            req.tenant as usize
        }
        fn ready_at(&mut self, req: &Request, _now: Nanos) -> Nanos {
            self.next[req.tenant as usize]
        }
        fn pass(&mut self, req: &Request, now: Nanos) {
            self.next[req.tenant as usize] = now + self.gap;
        }
    }

    fn drive(s: &mut Throttled<Spacing>, until: Nanos) -> Vec<(Nanos, u64)> {
        let dev = DeviceState { outstanding: 0, free_slots: 1 };
        let mut out = Vec::new();
        let mut now = 0;
        loop {
            while let Some(r) = s.dispatch(now, &dev) {
                out.push((now, r.id));
            }
            match s.next_timer() {
                Some(t) if t <= until => {
                    now = t;
                    s.on_timer(now);
                }
                _ => return out,
            }
        }
    }

    #[test]
    fn a_lane_passes_at_its_throttles_times_in_order() {
        let mut s = Throttled::new(Spacing { gap: 10 * MS, next: vec![0] });
        for id in 0..4 {
            s.enqueue(Request::new(id, 0, 0, 4096), 0);
        }
        assert_eq!(drive(&mut s, 1_000 * MS), vec![(0, 0), (10 * MS, 1), (20 * MS, 2), (30 * MS, 3)]);
        assert_eq!(s.queued(), 0);
    }

    #[test]
    fn lanes_do_not_hold_each_other_back() {
        let mut s = Throttled::new(Spacing { gap: 10 * MS, next: vec![0, 0] });
        for id in 0..3 {
            s.enqueue(Request::new(id, 0, 0, 4096), 0);
        }
        s.enqueue(Request::new(9, 1, 0, 4096), 0);
        let got = drive(&mut s, 1_000 * MS);
        // Tenant 1's one request goes at once, beside tenant 0's first.
        assert_eq!(got[..2], [(0, 0), (0, 9)]);
        assert_eq!(got[2..], [(10 * MS, 1), (20 * MS, 2)]);
    }
}
