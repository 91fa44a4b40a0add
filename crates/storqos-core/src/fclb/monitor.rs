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
//!
//! [`Monitors`] holds every workload's monitor and, with many workloads, hands them
//! their completions in batches grouped by workload (the results are those of
//! recording each completion on the spot).

use crate::request::Completion;
use crate::sim::summary::{exact_quantile, FastSummary, GroupSummary, TenantOrder};
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
        let mut shifted = *c;
        shifted.req.arrival = released;
        self.record_released(std::slice::from_ref(&shifted));
    }

    /// Record completions in order, each with `req.arrival` set to the time it was
    /// released from the bucket (as [`Monitor::record`] on each; the summary takes the
    /// run with its sums in registers).
    pub fn record_released(&mut self, cs: &[Completion]) {
        self.period.reserve(cs.len());
        for c in cs {
            debug_assert!(c.finish >= c.req.arrival);
            let rt = c.finish - c.req.arrival;
            self.period.push(rt);
            self.violations += u64::from(rt > self.demand);
        }
        self.completed += cs.len() as u64;
        self.summary.record_run(cs);
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
        self.current_p95_in(&mut Vec::new())
    }

    /// [`Monitor::current_p95`], copying the period into `scratch` (one buffer for
    /// every workload's gauge instead of an allocation each).
    pub fn current_p95_in(&self, scratch: &mut Vec<Nanos>) -> Option<Nanos> {
        if self.period.is_empty() {
            return None;
        }
        scratch.clear();
        scratch.extend_from_slice(&self.period);
        Some(exact_quantile(scratch, CONTROL_PERCENTILE))
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

/// Completions gathered before the monitors take them in.
pub const MONITOR_BATCH: usize = 16_384;

/// With fewer workloads than this, every monitor stays in cache and records each
/// completion on the spot.
const MANY_WORKLOADS: usize = 32;

/// Every workload's [`Monitor`] (workload i = tenant i), fed in batches: a completion is
/// appended to one buffer, its `req.arrival` replaced by its release time, and the
/// buffer goes to the monitors [`MONITOR_BATCH`] at a time, and whenever a monitor is
/// read (with fewer than 32 workloads, each completion goes straight to its monitor). A
/// batch is put in workload order first, by a stable counting sort, so each monitor
/// takes its completions in their order and ends exactly as if it had recorded each on
/// the spot; its period buffer, counters and histogram are
/// then reached once per batch instead of once per completion (with thousands of
/// workloads, a few cache misses per request less). Memory: the buffer and its sorted
/// copy, at most [`MONITOR_BATCH`] completions each.
#[derive(Clone, Debug, Default)]
pub struct Monitors {
    monitors: Vec<Monitor>,
    /// Completions not yet recorded, in completion order.
    pending: Vec<Completion>,
    /// A batch put in workload order (buffers reused).
    order: TenantOrder,
}

impl Monitors {
    /// One monitor per workload, counting violations of `demands_ns[i]`.
    pub fn new(demands_ns: impl IntoIterator<Item = Nanos>) -> Self {
        Monitors { monitors: demands_ns.into_iter().map(Monitor::new).collect(), ..Default::default() }
    }

    /// Number of workloads.
    pub fn len(&self) -> usize {
        self.monitors.len()
    }

    /// True without workloads.
    pub fn is_empty(&self) -> bool {
        self.monitors.is_empty()
    }

    /// Record a completion of workload `c.req.tenant` (< [`Monitors::len`]) released
    /// from its bucket at `released` (with few workloads on the spot, else with the
    /// next batch).
    #[inline]
    pub fn record(&mut self, c: &Completion, released: Nanos) {
        let w = c.req.tenant as usize;
        debug_assert!(w < self.monitors.len());
        debug_assert!(c.finish >= released && released >= c.req.arrival);
        let mut shifted = *c;
        shifted.req.arrival = released;
        if self.monitors.len() < MANY_WORKLOADS {
            self.monitors[w].record_released(std::slice::from_ref(&shifted));
            return;
        }
        self.pending.push(shifted);
        if self.pending.len() >= MONITOR_BATCH {
            self.flush();
        }
    }

    /// Hand every gathered completion to its monitor.
    #[inline(never)]
    pub fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let sorted = self.order.sort(&self.pending, self.monitors.len());
        record_runs(&mut self.monitors, sorted);
        self.pending.clear();
    }

    /// The monitors as they stand: without the completions gathered since the last
    /// batch (see [`Monitors::flush`]).
    pub fn recorded(&self) -> &[Monitor] {
        &self.monitors
    }

    /// Workload `i`'s monitor, up to date.
    pub fn get(&mut self, i: usize) -> &Monitor {
        self.flush();
        &self.monitors[i]
    }

    /// Every monitor, up to date.
    pub fn all_mut(&mut self) -> &mut [Monitor] {
        self.flush();
        &mut self.monitors
    }
}

/// Each run of consecutive completions of one workload, to its monitor.
fn record_runs(monitors: &mut [Monitor], cs: &[Completion]) {
    let mut i = 0;
    while i < cs.len() {
        let w = cs[i].req.tenant;
        let mut j = i + 1;
        while j < cs.len() && cs[j].req.tenant == w {
            j += 1;
        }
        monitors[w as usize].record_released(&cs[i..j]);
        i = j;
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
