//! First-come first-served: one FIFO queue, work conserving. The baseline every seed
//! compares against (seed 000 §4 "FCFS", the no-QoS case of seeds 001/003).

use std::collections::VecDeque;

use crate::device::DeviceState;
use crate::request::Request;
use crate::scheduler::Scheduler;
use crate::time::Nanos;

/// First-come first-served.
#[derive(Debug, Default, Clone)]
pub struct Fcfs {
    queue: VecDeque<Request>,
}

impl Fcfs {
    /// An empty FCFS queue.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Scheduler for Fcfs {
    fn name(&self) -> String {
        "fcfs".into()
    }
    #[inline]
    fn enqueue(&mut self, req: Request, _now: Nanos) {
        self.queue.push_back(req);
    }
    #[inline]
    fn dispatch(&mut self, _now: Nanos, _dev: &DeviceState) -> Option<Request> {
        self.queue.pop_front()
    }
    #[inline]
    fn queued(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_in_arrival_order() {
        let mut s = Fcfs::new();
        for i in 0..5 {
            s.enqueue(Request::new(i, (i % 2) as u32, i * 10, 4096), i * 10);
        }
        let dev = DeviceState { outstanding: 0, free_slots: 1 };
        let ids: Vec<u64> = std::iter::from_fn(|| s.dispatch(100, &dev)).map(|r| r.id).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4]);
        assert_eq!(s.queued(), 0);
    }
}
