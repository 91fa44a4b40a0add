//! The Lindley recursion: FCFS in front of a constant-rate server, specialised.
//!
//! finish_i = max(arrival_i, finish_{i−1}) + service. This is what the general event loop
//! computes for `Fcfs` + `ConstantRate`; the kernel is the reference point of the
//! simulator benchmark (how close the general loop gets to a loop with nothing else in
//! it), kept out of the product library.

use storqos_core::request::{Completion, Request};
use storqos_core::sim::summary::{FastSummary, GroupSummary, WindowAccumulator, WindowSeries};
use storqos_core::time::Nanos;

/// Completion times of FCFS at one server with a fixed `service` time per request.
/// `arrivals` must be non-decreasing.
pub fn fcfs_constant(arrivals: &[Nanos], service: Nanos) -> Vec<Nanos> {
    let mut out = Vec::with_capacity(arrivals.len());
    let mut last: Nanos = 0;
    for &a in arrivals {
        last = last.max(a) + service;
        out.push(last);
    }
    out
}

/// Mean response time of FCFS at one server with a fixed `service` time, without
/// storing completions (ns).
pub fn fcfs_constant_mean_response(arrivals: &[Nanos], service: Nanos) -> f64 {
    let mut last: Nanos = 0;
    let mut sum: u128 = 0;
    for &a in arrivals {
        last = last.max(a) + service;
        sum += (last - a) as u128;
    }
    if arrivals.is_empty() {
        0.0
    } else {
        sum as f64 / arrivals.len() as f64
    }
}

/// FCFS at one constant-rate server with the same summaries the general event loop
/// keeps for one tenant (HDR histogram of response times, per-window series with exact
/// window percentiles): the like-for-like reference for the simulator benchmark.
pub fn fcfs_constant_summary(arrivals: &[Nanos], service: Nanos, window: Nanos) -> (GroupSummary, WindowSeries) {
    let mut g = FastSummary::default();
    let mut win = WindowAccumulator::new(window);
    let mut last: Nanos = 0;
    for (i, &a) in arrivals.iter().enumerate() {
        let dispatch = last.max(a);
        last = dispatch + service;
        let c = Completion { req: Request::new(i as u64, 0, a, 4096), dispatch, finish: last };
        if win.crossed(last) {
            win.advance(last, &mut |_| {});
        }
        win.arrival(0);
        win.completion(&c);
        g.record(&c);
    }
    win.advance(Nanos::MAX, &mut |_| {});
    (g.finish(), win.series)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recursion() {
        assert_eq!(fcfs_constant(&[0, 0, 5, 40], 10), vec![10, 20, 30, 50]);
        assert_eq!(fcfs_constant_mean_response(&[0, 0, 5, 40], 10), (10.0 + 20.0 + 25.0 + 10.0) / 4.0);
        let (g, w) = fcfs_constant_summary(&[0, 0, 5, 40], 10, 1_000);
        assert_eq!(g.completed, 4);
        assert_eq!(g.max_response, 25);
        assert_eq!(w.completed, vec![4]);
    }
}
