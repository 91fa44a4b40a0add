//! The leanest hand-written discrete-event simulation of FCFS in front of one
//! constant-rate server: the benchmark's floor for event-driven simulation.
//!
//! Each request is two events (its arrival, its completion), chosen one at a time by
//! comparing the next arrival with the server's completion, exactly as the general loop
//! of `storqos_core::sim::engine` does, but with nothing else: no traits, no timers, no
//! closed-loop clients, one tenant, the summaries recorded on the spot. It keeps the same
//! summaries as [`crate::lindley::fcfs_constant_summary`] (which computes the same
//! completions by the recursion, with no events) and gives the same results.
//!
//! The simulator benchmark runs the three side by side: kernel ÷ this is what being
//! event-driven costs, this ÷ the general loop is what the general loop's generality
//! costs.

use std::collections::VecDeque;

use storqos_core::request::{Completion, Request};
use storqos_core::sim::summary::{FastSummary, GroupSummary, WindowAccumulator, WindowSeries};
use storqos_core::time::Nanos;

/// FCFS at one server with a fixed `service` time per request, simulated event by
/// event; `arrivals` must be non-decreasing. Same outputs as
/// [`fcfs_constant_summary`](crate::lindley::fcfs_constant_summary).
pub fn fcfs_constant_des_summary(arrivals: &[Nanos], service: Nanos, window: Nanos) -> (GroupSummary, WindowSeries) {
    const NONE: Nanos = Nanos::MAX;
    let mut g = FastSummary::default();
    let mut win = WindowAccumulator::new(window);
    let mut queue: VecDeque<Request> = VecDeque::new();
    // The request in service and its completion time (NONE: the server is idle).
    let mut busy = Completion { req: Request::default(), dispatch: 0, finish: NONE };
    let mut next = 0usize;
    loop {
        let t_arr = arrivals.get(next).copied().unwrap_or(NONE);
        let t_done = busy.finish;
        if t_arr == NONE && t_done == NONE {
            break;
        }
        // Completions first on a tie (as the general loop).
        let now = t_arr.min(t_done);
        if win.crossed(now) {
            win.advance(now, &mut |_| {});
        }
        if t_done <= t_arr {
            win.completion(&busy);
            g.record(&busy);
            busy = match queue.pop_front() {
                Some(req) => Completion { req, dispatch: now, finish: now + service },
                None => Completion { req: busy.req, dispatch: 0, finish: NONE },
            };
        } else {
            win.arrival(0);
            let req = Request::new(next as u64, 0, t_arr, 4096);
            if t_done == NONE {
                busy = Completion { req, dispatch: now, finish: now + service };
            } else {
                queue.push_back(req);
            }
            next += 1;
        }
    }
    win.advance(NONE, &mut |_| {});
    (g.finish(), win.series)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lindley::fcfs_constant_summary;

    #[test]
    fn equals_the_recursion() {
        let mut rng = storqos_core::rng::SimRng::new(3);
        let mut t = 0;
        let arrivals: Vec<Nanos> = (0..20_000)
            .map(|_| {
                t += (rng.exp(1.0e6 / 0.9)) as Nanos;
                t
            })
            .collect();
        let (a, wa) = fcfs_constant_des_summary(&arrivals, 1_000_000, 1_000_000_000);
        let (b, wb) = fcfs_constant_summary(&arrivals, 1_000_000, 1_000_000_000);
        assert_eq!(a.completed, 20_000);
        assert_eq!((a.sum_response, a.sum_wait, a.max_response), (b.sum_response, b.sum_wait, b.max_response));
        assert_eq!(a.hist, b.hist);
        // (The kernel counts each arrival in its completion's window, this loop in its own.)
        assert_eq!((wa.completed, wa.p99_response), (wb.completed, wb.p99_response));
        assert_eq!(wa.arrivals.iter().sum::<u64>(), wb.arrivals.iter().sum::<u64>());
        // Simultaneous arrivals queue in order behind the one in service.
        let (g, _) = fcfs_constant_des_summary(&[0, 0, 5, 40], 10, 1_000);
        assert_eq!((g.completed, g.max_response, g.sum_response), (4, 25, 10 + 20 + 25 + 10));
    }
}
