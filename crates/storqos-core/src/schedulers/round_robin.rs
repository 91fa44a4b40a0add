//! Round robin between tenants (Nagle, "On Packet Switches with Infinite Storage", IEEE
//! Transactions on Communications 35(4), 1987, §"Fair queuing"): one FIFO queue per
//! tenant, served one request at a time in turn, so each backlogged tenant gets an equal
//! share of dispatches whatever its arrival rate. A toy beside WF2Q+: no weights, no costs.

use std::collections::VecDeque;

use crate::device::DeviceState;
use crate::request::Request;
use crate::scheduler::Scheduler;
use crate::time::Nanos;

/// Round robin between tenants.
#[derive(Debug, Default, Clone)]
pub struct RoundRobin {
    /// Queue of tenant i.
    queues: Vec<VecDeque<Request>>,
    /// The tenant whose turn is next.
    next: usize,
    queued: usize,
}

impl RoundRobin {
    /// Empty queues.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Scheduler for RoundRobin {
    fn name(&self) -> String {
        "round-robin".into()
    }
    fn enqueue(&mut self, req: Request, _now: Nanos) {
        let t = req.tenant as usize;
        if self.queues.len() <= t {
            self.queues.resize_with(t + 1, VecDeque::new);
        }
        self.queues[t].push_back(req);
        self.queued += 1;
    }
    fn dispatch(&mut self, _now: Nanos, _dev: &DeviceState) -> Option<Request> {
        if self.queued == 0 {
            return None;
        }
        let n = self.queues.len();
        for k in 0..n {
            let t = (self.next + k) % n;
            if let Some(r) = self.queues[t].pop_front() {
                self.next = (t + 1) % n;
                self.queued -= 1;
                return Some(r);
            }
        }
        None
    }
    fn queued(&self) -> usize {
        self.queued
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backlogged_tenants_take_turns_whatever_their_arrivals() {
        let mut s = RoundRobin::new();
        // Tenant 0 sends 6 requests before tenant 1's 2 and tenant 2's 1 arrive.
        let arrivals = [(0, 0), (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 1), (7, 1), (8, 2)];
        for (id, tenant) in arrivals {
            s.enqueue(Request::new(id, tenant, 0, 4096), id);
        }
        let dev = DeviceState { outstanding: 0, free_slots: 1 };
        let ids: Vec<u64> = std::iter::from_fn(|| s.dispatch(100, &dev)).map(|r| r.id).collect();
        // Turns 0, 1, 2, then 0, 1, then tenant 0 alone: FCFS would serve 0-5 first.
        assert_eq!(ids, vec![0, 6, 8, 1, 7, 2, 3, 4, 5]);
        assert_eq!(s.queued(), 0);
    }
}
