//! The FCLB monitor (seed 003 §3.1, "Monitor"): collects each workload's response times
//! during a control period and hands the controller their 95th percentile `RT_i(k)` at
//! the period's end. It also keeps whole-run counts (completions, violations of the
//! demanded response time) and an HDR histogram for reports.
//!
//! The response time measured is the one the leaky bucket controls: from the moment a
//! request passes its bucket (enters YFQ's reservation queue) to its completion. The
//! wait for a token is the throttling itself; counting it would make the plant's sign
//! depend on how many requests a closed-loop client keeps outstanding (a greedy client
//! waiting at its bucket sees *less* delay when its rate rises).

use crate::request::Completion;
use crate::sim::summary::{exact_quantile, FastSummary, GroupSummary};
use crate::time::Nanos;

/// The percentile the controller regulates: "the 95th percentile of all response
/// times" (seed 003 §2, admission control; spec "Algorithm notes → FCLB").
pub const CONTROL_PERCENTILE: f64 = 0.95;

/// One workload's measurements.
#[derive(Clone, Debug, Default)]
pub struct Monitor {
    /// Response times (ns) in the current control period.
    period: Vec<Nanos>,
    /// Demanded response time RT_i (ns): completions above it are violations.
    demand: Nanos,
    /// Completions so far.
    completed: u64,
    /// Completions with a response time above the demanded one.
    violations: u64,
    /// Whole-run summary of the controlled response time (batched: a workload's
    /// histogram stays sparse while small, and values reach it a batch at a time).
    summary: FastSummary,
    /// p95 of the last closed period with completions (ns).
    last_p95: Option<Nanos>,
}

impl Monitor {
    /// A monitor counting violations of `demand_ns`.
    pub fn new(demand_ns: Nanos) -> Self {
        Monitor { demand: demand_ns, ..Default::default() }
    }

    /// Record a completion released from the bucket at `released`.
    pub fn record(&mut self, c: &Completion, released: Nanos) {
        debug_assert!(c.finish >= released && released >= c.req.arrival);
        let rt = c.finish - released;
        self.period.push(rt);
        self.completed += 1;
        if rt > self.demand {
            self.violations += 1;
        }
        let mut shifted = *c;
        shifted.req.arrival = released;
        self.summary.record(&shifted);
    }

    /// Close the control period: the p95 of its response times (`None` if nothing
    /// completed), and start the next one.
    pub fn close_period(&mut self) -> Option<Nanos> {
        if self.period.is_empty() {
            return None;
        }
        let p = exact_quantile(&mut self.period, CONTROL_PERCENTILE);
        self.period.clear();
        self.last_p95 = Some(p);
        Some(p)
    }

    /// p95 of the current (open) period so far, for gauges.
    pub fn current_p95(&self) -> Option<Nanos> {
        if self.period.is_empty() {
            return None;
        }
        let mut v = self.period.clone();
        Some(exact_quantile(&mut v, CONTROL_PERCENTILE))
    }

    /// p95 of the last closed period with completions.
    pub fn last_p95(&self) -> Option<Nanos> {
        self.last_p95
    }

    /// Completions so far.
    pub fn completed(&self) -> u64 {
        self.completed
    }

    /// Completions whose response time exceeded the demanded one.
    pub fn violations(&self) -> u64 {
        self.violations
    }

    /// Fraction of completions that violated the demanded response time (0 if none).
    pub fn violation_fraction(&self) -> f64 {
        if self.completed == 0 {
            0.0
        } else {
            self.violations as f64 / self.completed as f64
        }
    }

    /// Whole-run summary of the controlled response time (bucket exit → completion).
    pub fn summary(&self) -> GroupSummary {
        self.summary.finish()
    }

    /// The demanded response time (ns).
    pub fn demand(&self) -> Nanos {
        self.demand
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;

    fn done(arrival: Nanos, finish: Nanos) -> Completion {
        Completion { req: Request::new(0, 0, arrival, 4096), dispatch: finish, finish }
    }

    #[test]
    fn p95_per_period_and_violations() {
        let mut m = Monitor::new(35);
        for i in 1..=100 {
            m.record(&done(0, 10 + i), 10); // response i
        }
        assert_eq!(m.current_p95(), Some(95));
        assert_eq!(m.violations(), 65); // 36..=100
        assert_eq!(m.close_period(), Some(95));
        assert_eq!(m.close_period(), None);
        assert_eq!(m.last_p95(), Some(95));
        assert_eq!(m.completed(), 100);
        assert!((m.violation_fraction() - 0.65).abs() < 1e-12);
        assert_eq!(m.summary().max_response, 100);
    }
}
