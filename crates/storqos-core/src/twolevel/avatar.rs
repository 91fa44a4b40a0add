//! AVATAR, the low-level scheduler of seed 001 (`001_f68b1e7da7bb5f73.txt`, Zhang et
//! al., "Storage Performance Virtualization via Throughput and Latency Control"), §3.4:
//! an EDF queue in front of the storage utility and a feedback controller of how many
//! requests may be outstanding at the utility, the queue threshold `L^O`.
//!
//! **1. Why a threshold.** The utility reorders what it holds (a disk array serves its
//! queue by position, see [`crate::devices::array`]), so a deep utility queue means high
//! throughput and long, deadline-blind waits; a shallow one leaves the order to EDF. `L^O`
//! trades one for the other, window by window.
//!
//! **2. Monitor** (§3.4.1, [`crate::twolevel::monitor`]): arrivals `L^E_new(k)` and those
//! due in the window `L^E_new-deadline(k)`, completions `X(k)`, mean EDF wait `MT^E_i(k)`,
//! the 95th-percentile utility response time `T^O_i(k)`, most outstanding `L^O_max(k)`.
//! Next-window quantities are predicted by their last value.
//!
//! **3. Controller** (§3.4.2, Fig. 4 as the spec reconstructs it; [`control`]). At the end
//! of window `k`, with reference length `L = L^O(k)` (or `L^O_max(k)` in overload, where
//! `L^O(k) = ∞`, and whenever the queue stayed below the threshold: see "Reference
//! length" below):
//! - lower throughput demand `X̲ = L^O_exist(k) + L^E_exist-deadline(k) + L^E_new-deadline(k+1)`
//!   (everything due in the next window, Eq. 5) and `L_X̲ = L·X̲/X(k)` (Eq. 6);
//! - upper demand `X̄ = L^O_exist(k) + L^E_exist(k) + L^E_new(k+1)` (everything there is,
//!   Eq. 7) and `L_X̄ = L·X̄/X(k)` (Eq. 8);
//! - per class `E_i = (D_i − MT^E_i)/T^O_i(k)` and `L_RT,i = E_i·L` (Eqs. 3–4, Little's law
//!   across two windows at equal throughput).
//!
//! Underload: `L_RT,i < L_X̲` → ∞ (latency and throughput cannot both be met: optimise
//! throughput); else `L_RT,i > L_X̄` → `L_X̄` (no need to go above the upper bound); else
//! `L_RT,i < L^O(k)` or `L^O_max(k) ≥ L^O(k)` → `L_RT,i` (decrease for latency, or the
//! threshold was reached: increase for throughput); else keep `L^O(k)` (balanced).
//! Overload: `X̲ ≤ 0.9·X(k)` → `max(L_RT,i, L_X̲)` (back to underload) else ∞.
//! `L^O(k+1) = min_i L^O_i(k+1)`. Each case is a [`Branch`]; the unit tests below drive
//! [`control`] through every one with explicit statistics.
//!
//! **4. Dispatcher** (§3.4.3): a request whose deadline has passed goes to the utility
//! regardless of the threshold; otherwise requests leave the EDF queue in deadline order
//! while outstanding < `L^O`, at arrivals, departures and window starts (the simulator
//! offers dispatch after every event; a timer fires when the EDF head becomes late).
//!
//! **5. Spareness** (§3.4.4, [`Avatar::spare`]): spare bandwidth iff underload and
//! `L_curr < 0.9·L^O` ([`SPARE_MARGIN`]). `L_curr` is the outstanding count once the
//! dispatcher has topped the utility up to `L^O` from the EDF queue at the same instant
//! (it does so at every departure), so a departure with a full EDF queue behind it is not
//! spare. In overload there is never spare bandwidth. SARC reads this (§3.2).
//!
//! **Reference length** (our refinement). Eq. 2 scales the utility's *mean queue length*
//! across windows and approximates it by the threshold (`L^O(k+1)/L^O(k) ≈
//! ML^O(k+1)/ML^O(k)`). That holds while the threshold binds; when the queue never
//! reached it (`L^O_max(k) < L^O(k)`, light load) `L^O(k)` says nothing about the queue,
//! and scaling it by `X̄/X(k)` (> 1 whenever requests are outstanding at the window's end)
//! lets the threshold creep up without bound, which would silence the spareness signal
//! SARC relies on. So the reference is `L = min(L^O(k), L^O_max(k))`: `L^O(k)` when it
//! binds, the depth actually used otherwise — exactly the spec's `L^O_max(k)` in
//! overload, where `L^O(k) = ∞`.
//!
//! **Choices the paper leaves open** (named constants below): the first window's
//! threshold, the smallest threshold (1), what a window without completions does (keeps
//! `L^O`), classes without completions in a window give no guideline.
//!
//! Cost: `O(m)` per request for `m` classes (the per-class EDF queue of
//! [`crate::twolevel::edf`]), `O(n)` per window (percentile selection).

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::request::{Completion, Request};
use crate::scheduler::Scheduler;
use crate::time::{Nanos, NS_PER_SEC};
use crate::twolevel::edf::ClassEdf;
use crate::twolevel::monitor::{Monitor, WindowStats};
use crate::twolevel::slo::SloSet;
use crate::twolevel::LowLevel;

/// AVATAR's default time window: 1 s, the window of the paper's evaluation (it matches
/// the 1 s SLO interval, §3.1 and §4).
pub const DEFAULT_WINDOW: Nanos = NS_PER_SEC;

/// Spareness margin (§3.4.4: "If L_curr < L^O · 0.9, we consider the storage utility to
/// have spare bandwidth. We use 90% of the queue threshold for stability reasons").
pub const SPARE_MARGIN: f64 = 0.9;

/// Overload exit margin (Fig. 4 line 27: back to underload when `X̲(k+1) ≤ X(k)·0.9`).
pub const OVERLOAD_EXIT_MARGIN: f64 = 0.9;

/// Threshold of the first window, before any statistics exist: 16, two requests per
/// disk of seed 001's 8-disk array (§4). Our choice: enough for the steady load of the
/// E1/E2 experiments, so that window 0 is not an artificial overload; the controller
/// moves it after window 0 (Facade starts from the same depth).
pub const INITIAL_THRESHOLD: f64 = 16.0;

/// Smallest finite threshold: one outstanding request (a threshold below 1 would stop
/// the utility altogether).
pub const MIN_THRESHOLD: f64 = 1.0;

/// The controller's view of one closed window (Fig. 4's inputs).
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerInput {
    /// `L^O(k)`; `f64::INFINITY` means the window was in overload.
    pub threshold: f64,
    /// `L^O_max(k)`.
    pub max_outstanding: f64,
    /// `L^O_exist(k)`: outstanding at the utility at the window's end.
    pub outstanding: f64,
    /// `L^E_exist(k)`: requests in the EDF queue at the window's end.
    pub edf_queued: f64,
    /// `L^E_exist-deadline(k)`: of those, the ones due in the next window (or already late).
    pub edf_due_next: f64,
    /// `L^E_new(k)` (the last-value prediction of `L^E_new(k+1)`).
    pub arrivals: f64,
    /// `L^E_new-deadline(k)` (the prediction of `L^E_new-deadline(k+1)`).
    pub arrivals_due: f64,
    /// `X(k)`: completions.
    pub completed: f64,
    /// Per class: (`D_i`, `MT^E_i(k)` as the prediction of `MT^E_i(k+1)`, `T^O_i(k)`), all
    /// in ns; `T^O_i = None` when the class completed nothing (no guideline).
    pub classes: Vec<(f64, f64, Option<f64>)>,
}

/// Which case of Fig. 4 decided a class's threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Branch {
    /// Underload, `L_RT,i < L_X̲`: latency and throughput demand cannot both be met → ∞.
    ThroughputFirst,
    /// Underload, `L_RT,i > L_X̄`: the upper bound `L_X̄`.
    UpperBound,
    /// Underload, `L_RT,i < L^O(k)` or `L^O_max(k) ≥ L^O(k)`: `L_RT,i` (decreased to
    /// satisfy latency, or increased to improve throughput).
    LatencyTarget,
    /// Underload, balanced: keep `L^O(k)`.
    Balanced,
    /// Overload, `X̲ ≤ 0.9·X(k)`: back to underload at `max(L_RT,i, L_X̲)`.
    LeaveOverload,
    /// Overload, `X̲ > 0.9·X(k)`: stay at ∞.
    StayOverload,
    /// The class completed nothing in the window: no guideline.
    NoData,
}

/// The controller's decision.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// `L^O(k+1)` (∞ for overload), at least [`MIN_THRESHOLD`].
    pub threshold: f64,
    /// `L_X̲(k+1)`, `L_X̄(k+1)`.
    pub bounds: (f64, f64),
    /// Per class: (`L^O_i(k+1)`, the branch taken).
    pub classes: Vec<(f64, Branch)>,
}

/// Fig. 4: the threshold for window `k+1` from window `k`'s statistics.
///
/// A window without completions (`X(k) = 0`) gives no rate to scale by: the threshold
/// is kept, except that an overloaded utility with nothing left to do leaves overload at
/// the largest depth it used (`L^O_max`, at least [`MIN_THRESHOLD`]).
pub fn control(inp: &ControllerInput) -> Decision {
    let overload = inp.threshold.is_infinite();
    // L^O(k), or L^O_max(k) when the utility queue never reached the threshold (always
    // so in overload, where L^O(k) = ∞): see "Reference length" in the module docs.
    let lref = inp.threshold.min(inp.max_outstanding.max(MIN_THRESHOLD));
    let x_low = inp.outstanding + inp.edf_due_next + inp.arrivals_due;
    let x_high = inp.outstanding + inp.edf_queued + inp.arrivals;
    if inp.completed <= 0.0 {
        let idle = inp.outstanding == 0.0 && inp.edf_queued == 0.0;
        let t = if overload && idle { lref } else { inp.threshold };
        return Decision {
            threshold: t,
            bounds: (f64::NAN, f64::NAN),
            classes: vec![(t, Branch::NoData); inp.classes.len()],
        };
    }
    let l_low = lref * x_low / inp.completed;
    let l_high = lref * x_high / inp.completed;
    let mut classes = Vec::with_capacity(inp.classes.len());
    for &(d, wait, t_o) in &inp.classes {
        let Some(t_o) = t_o else {
            classes.push((f64::INFINITY, Branch::NoData));
            continue;
        };
        let e = (d - wait) / t_o.max(1.0);
        let l_rt = e * lref;
        let choice = if !overload {
            if l_rt < l_low {
                (f64::INFINITY, Branch::ThroughputFirst)
            } else if l_rt > l_high {
                (l_high, Branch::UpperBound)
            } else if l_rt < inp.threshold || inp.max_outstanding >= inp.threshold {
                (l_rt, Branch::LatencyTarget)
            } else {
                (inp.threshold, Branch::Balanced)
            }
        } else if x_low <= OVERLOAD_EXIT_MARGIN * inp.completed {
            (l_rt.max(l_low), Branch::LeaveOverload)
        } else {
            (f64::INFINITY, Branch::StayOverload)
        };
        classes.push(choice);
    }
    let mut threshold = classes.iter().filter(|c| c.1 != Branch::NoData).map(|c| c.0).fold(f64::INFINITY, f64::min);
    if classes.iter().all(|c| c.1 == Branch::NoData) {
        // No class has a guideline: underload keeps L^O; overload applies the exit test
        // alone.
        threshold = if !overload {
            inp.threshold
        } else if x_low <= OVERLOAD_EXIT_MARGIN * inp.completed {
            l_low
        } else {
            f64::INFINITY
        };
    }
    Decision { threshold: threshold.max(MIN_THRESHOLD), bounds: (l_low, l_high), classes }
}

/// `⌈l⌉` as a request count; ∞ → `usize::MAX`.
#[inline]
fn limit_of(l: f64) -> usize {
    if l.is_finite() {
        l.ceil() as usize
    } else {
        usize::MAX
    }
}

/// The spareness bound for threshold `l`: `⌈0.9·l⌉`, or 0 in overload (`l = ∞`), so
/// that no count is below it (§3.4.4: "in overload, there is no spare bandwidth").
#[inline]
fn spare_limit_of(l: f64) -> usize {
    if l.is_finite() {
        limit_of(SPARE_MARGIN * l)
    } else {
        0
    }
}

/// AVATAR: EDF queue + Monitor + Controller + Dispatcher + spareness.
#[derive(Clone, Debug)]
pub struct Avatar {
    window: Nanos,
    edf: ClassEdf,
    monitor: Monitor,
    threshold: f64,
    /// `⌈L^O⌉` as a count (`usize::MAX` for ∞): outstanding < `limit` ⇔ outstanding < `L^O`
    /// for whole numbers of requests; the dispatcher and spareness compare integers.
    limit: usize,
    /// `⌈0.9·L^O⌉` as a count: `L_curr < 0.9·L^O` ⇔ `L_curr < spare_limit` (§3.4.4);
    /// 0 in overload, where there is never spare bandwidth (see [`spare_limit_of`]).
    spare_limit: usize,
    last: Option<(WindowStats, Decision)>,
    /// Latest `now` seen (timers are never armed in the past).
    now: Nanos,
}

impl Avatar {
    /// AVATAR for `slos` with time windows of `window` ns (> 0; [`DEFAULT_WINDOW`]).
    pub fn new(slos: SloSet, window: Nanos) -> Result<Self> {
        if window == 0 {
            return config("avatar: window_ns must be > 0");
        }
        Ok(Avatar {
            window,
            edf: ClassEdf::new(slos.len()),
            monitor: Monitor::new(slos, window),
            threshold: INITIAL_THRESHOLD,
            limit: limit_of(INITIAL_THRESHOLD),
            spare_limit: spare_limit_of(INITIAL_THRESHOLD),
            last: None,
            now: 0,
        })
    }

    /// Start from threshold `l` (≥ 1, or ∞) instead of [`INITIAL_THRESHOLD`].
    pub fn with_threshold(mut self, l: f64) -> Result<Self> {
        if l.is_nan() || l < MIN_THRESHOLD {
            return config(format!("avatar: initial threshold must be >= 1, got {l}"));
        }
        self.threshold = l;
        self.limit = limit_of(l);
        self.spare_limit = spare_limit_of(l);
        Ok(self)
    }

    /// The queue threshold `L^O` (∞ in overload).
    #[inline]
    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    /// True while the controller is in the overload state (`L^O = ∞`).
    #[inline]
    pub fn overloaded(&self) -> bool {
        self.threshold.is_infinite()
    }

    /// The monitor (statistics of the open window, cumulative misses).
    pub fn monitor(&self) -> &Monitor {
        &self.monitor
    }

    /// The last closed window's statistics and the controller's decision on it.
    pub fn last_window(&self) -> Option<&(WindowStats, Decision)> {
        self.last.as_ref()
    }

    /// Requests in the EDF queue.
    pub fn edf_len(&self) -> usize {
        self.edf.len()
    }

    /// Close the window ending now: run the controller, set `L^O(k+1)`.
    fn close_window(&mut self, now: Nanos) {
        let next_end = (now / self.window + 1) * self.window;
        let edf_due_next = self.edf.count_due_by(next_end.saturating_sub(1));
        let stats = self.monitor.close_window(next_end);
        let slos = self.monitor.slos();
        let inp = ControllerInput {
            threshold: self.threshold,
            max_outstanding: stats.max_outstanding as f64,
            outstanding: stats.outstanding as f64,
            edf_queued: self.edf.len() as f64,
            edf_due_next: edf_due_next as f64,
            arrivals: stats.arrivals as f64,
            arrivals_due: stats.arrivals_due as f64,
            completed: stats.completed as f64,
            classes: stats
                .classes
                .iter()
                .zip(slos.classes())
                .map(|(c, s)| (s.latency as f64, c.mean_edf_wait, c.device_percentile.map(|t| t as f64)))
                .collect(),
        };
        let d = control(&inp);
        self.threshold = d.threshold;
        self.limit = limit_of(d.threshold);
        self.spare_limit = spare_limit_of(d.threshold);
        debug_assert!(self.threshold >= MIN_THRESHOLD);
        self.last = Some((stats, d));
    }
}

impl LowLevel for Avatar {
    /// §3.4.4: underload and `L_curr < 0.9·L^O`, with `L_curr` counted after the
    /// dispatcher's top-up from the EDF queue.
    #[inline(always)]
    fn spare(&self) -> bool {
        // (In overload `spare_limit` is 0: never spare.)
        let cur = self.monitor.outstanding();
        let room = self.limit.saturating_sub(cur);
        let after = cur + room.min(self.edf.len());
        after < self.spare_limit
    }

    fn class_latency(&self, class: usize) -> Option<Nanos> {
        self.last.as_ref().and_then(|(s, _)| s.classes.get(class).and_then(|c| c.low_percentile))
    }

    fn threshold(&self) -> f64 {
        self.threshold
    }

    fn monitor(&self) -> &Monitor {
        &self.monitor
    }
}

impl Scheduler for Avatar {
    fn name(&self) -> String {
        "avatar".into()
    }

    #[inline(always)]
    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.now = self.now.max(now);
        let d = self.monitor.deadline(&req, now);
        self.monitor.arrive(d);
        self.edf.push(self.monitor.slos().index(req.class), req, d);
    }

    #[inline(always)]
    fn dispatch(&mut self, now: Nanos, dev: &DeviceState) -> Option<Request> {
        self.now = self.now.max(now);
        let deadline = self.edf.earliest_deadline()?;
        let late = deadline < now;
        if !late && dev.outstanding >= self.limit {
            return None;
        }
        let (req, deadline) = self.edf.pop().expect("peeked");
        self.monitor.dispatched(&req, deadline, now);
        Some(req)
    }

    #[inline(always)]
    fn complete(&mut self, done: &Completion, now: Nanos) {
        self.now = self.now.max(now);
        self.monitor.completed(done);
    }

    #[inline(always)]
    fn next_timer(&self) -> Option<Nanos> {
        let end = self.monitor.window_end();
        // The EDF head becomes late while the threshold holds it back: dispatch it then.
        // (The integer test first: below the threshold nothing is held back.)
        if self.monitor.outstanding() >= self.limit {
            if let Some(d) = self.edf.earliest_deadline() {
                let t = d.saturating_add(1);
                if t < end && t > self.now {
                    return Some(t);
                }
            }
        }
        Some(end)
    }

    fn on_timer(&mut self, now: Nanos) {
        self.now = self.now.max(now);
        if now >= self.monitor.window_end() {
            self.close_window(now);
        }
    }

    #[inline]
    fn queued(&self) -> usize {
        self.edf.len()
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("lo", self.threshold);
        sink("lo_max", self.monitor.max_outstanding() as f64);
        sink("overload", self.overloaded() as u8 as f64);
        sink("spare", self.spare() as u8 as f64);
        sink("edf_queued", self.edf.len() as f64);
        self.monitor.gauges(sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS;
    use crate::twolevel::slo::Slo;

    const MS: f64 = NS_PER_MS as f64;

    /// A window of 100 completions at threshold 10 (reached), nothing queued, 100
    /// arrivals of which 50 are due in the window; one class with D = 400 ms.
    fn base() -> ControllerInput {
        ControllerInput {
            threshold: 10.0,
            max_outstanding: 10.0,
            outstanding: 5.0,
            edf_queued: 0.0,
            edf_due_next: 0.0,
            arrivals: 100.0,
            arrivals_due: 50.0,
            completed: 100.0,
            classes: vec![(400.0 * MS, 0.0, Some(100.0 * MS))],
        }
    }

    #[test]
    fn underload_latency_target() {
        // E = 400/100 = 4 → L_RT = 40; L_X̲ = 10·55/100 = 5.5; L_X̄ = 10·105/100 = 10.5.
        // 40 > 10.5 → upper bound.
        let d = control(&base());
        assert_eq!(d.classes[0].1, Branch::UpperBound);
        assert!((d.threshold - 10.5).abs() < 1e-9);
        assert!((d.bounds.0 - 5.5).abs() < 1e-9 && (d.bounds.1 - 10.5).abs() < 1e-9);
        // T^O = 500 ms → E = 0.8, L_RT = 8 < L^O = 10 (between the bounds) → decrease to 8.
        let mut i = base();
        i.classes[0].2 = Some(500.0 * MS);
        let d = control(&i);
        assert_eq!(d.classes[0], (8.0, Branch::LatencyTarget));
        assert_eq!(d.threshold, 8.0);
    }

    #[test]
    fn underload_increase_when_threshold_was_reached() {
        // L_RT = 10.2·… : T^O = 392.16 ms → E ≈ 1.02 → L_RT ≈ 10.2 ≥ L^O = 10, below L_X̄ = 10.5.
        let mut i = base();
        i.classes[0].2 = Some(400.0 / 1.02 * MS);
        // The utility queue reached the threshold: increase for throughput.
        i.max_outstanding = 10.0;
        let d = control(&i);
        assert_eq!(d.classes[0].1, Branch::LatencyTarget);
        assert!((d.threshold - 10.2).abs() < 1e-6, "{}", d.threshold);
        // It never reached it (L^O_max = 7 is the reference length): with E = 2, L_RT =
        // 14 ≥ L^O = 10 and below L_X̄ = 7·205/100 = 14.35: balanced, keep L^O.
        i.max_outstanding = 7.0;
        i.classes[0].2 = Some(200.0 * MS);
        i.arrivals = 200.0;
        let d = control(&i);
        assert_eq!(d.classes[0], (10.0, Branch::Balanced));
        assert_eq!(d.threshold, 10.0);
    }

    #[test]
    fn reference_length_is_the_depth_used_when_the_threshold_did_not_bind() {
        // Threshold 100 but at most 10 outstanding: bounds scale from 10, not 100, so a
        // lightly loaded utility does not let L^O creep up (L_X̄ = 10·105/100).
        let mut i = base();
        i.threshold = 100.0;
        let d = control(&i);
        assert_eq!(d.classes[0].1, Branch::UpperBound);
        assert!((d.threshold - 10.5).abs() < 1e-9, "{}", d.threshold);
    }

    #[test]
    fn underload_to_overload() {
        // The EDF wait eats most of the deadline: E = (400 − 380)/100 = 0.2 → L_RT = 2 <
        // L_X̲ = 5.5 → ∞: latency cannot be met, optimise throughput.
        let mut i = base();
        i.classes[0].1 = 380.0 * MS;
        let d = control(&i);
        assert_eq!(d.classes[0].1, Branch::ThroughputFirst);
        assert!(d.threshold.is_infinite());
    }

    #[test]
    fn overload_stays_then_leaves() {
        // In overload the reference length is L^O_max = 40.
        let mut i = base();
        i.threshold = f64::INFINITY;
        i.max_outstanding = 40.0;
        i.outstanding = 40.0;
        i.arrivals_due = 60.0; // X̲ = 100 > 0.9·100 → stay.
        let d = control(&i);
        assert_eq!(d.classes[0].1, Branch::StayOverload);
        assert!(d.threshold.is_infinite());
        // Load fell: X̲ = 10 + 20 = 30 ≤ 90 → leave at max(L_RT, L_X̲) with L = 40:
        // L_RT = 4·40 = 160, L_X̲ = 40·30/100 = 12.
        i.outstanding = 10.0;
        i.arrivals_due = 20.0;
        let d = control(&i);
        assert_eq!(d.classes[0], (160.0, Branch::LeaveOverload));
        // With a tight class L_RT < L_X̲ and the lower bound wins.
        i.classes[0].2 = Some(4_000.0 * MS); // E = 0.1 → L_RT = 4
        let d = control(&i);
        assert_eq!(d.classes[0], (12.0, Branch::LeaveOverload));
    }

    #[test]
    fn minimum_over_classes_and_missing_data() {
        let mut i = base();
        i.classes = vec![(400.0 * MS, 0.0, Some(500.0 * MS)), (900.0 * MS, 0.0, Some(100.0 * MS)), (1.0, 0.0, None)];
        let d = control(&i);
        assert_eq!(d.classes[0], (8.0, Branch::LatencyTarget));
        assert_eq!(d.classes[1].1, Branch::UpperBound);
        assert_eq!(d.classes[2].1, Branch::NoData);
        assert_eq!(d.threshold, 8.0);
        // No class with data: keep L^O.
        i.classes = vec![(1.0, 0.0, None)];
        assert_eq!(control(&i).threshold, 10.0);
        // No completions at all: keep, and an idle overloaded utility leaves overload.
        i.completed = 0.0;
        assert_eq!(control(&i).threshold, 10.0);
        i.threshold = f64::INFINITY;
        i.outstanding = 0.0;
        i.max_outstanding = 30.0;
        assert_eq!(control(&i).threshold, 30.0);
        // Thresholds never go below one request.
        let mut i = base();
        i.classes[0].2 = Some(100_000.0 * MS);
        i.arrivals_due = 0.0;
        i.outstanding = 0.0;
        assert_eq!(control(&i).threshold, MIN_THRESHOLD);
    }

    fn slos() -> SloSet {
        SloSet::new(vec![Slo::new(100.0, 400 * NS_PER_MS)], 0.95).unwrap()
    }

    #[test]
    fn dispatcher_holds_at_threshold_and_releases_late_requests() {
        let mut a = Avatar::new(slos(), DEFAULT_WINDOW).unwrap().with_threshold(2.0).unwrap();
        for i in 0..4 {
            a.enqueue(Request::new(i, 0, 0, 4096), 0);
        }
        let st = |o| DeviceState { outstanding: o, free_slots: 100 };
        assert_eq!(a.dispatch(0, &st(0)).map(|r| r.id), Some(0));
        assert_eq!(a.dispatch(0, &st(1)).map(|r| r.id), Some(1));
        assert_eq!(a.dispatch(0, &st(2)), None);
        // Not spare: the utility is at the threshold.
        assert!(!a.spare());
        // A timer fires just after the head's deadline (400 ms) ...
        assert_eq!(a.next_timer(), Some(400 * NS_PER_MS + 1));
        // ... when the late head bypasses the threshold.
        assert_eq!(a.dispatch(400 * NS_PER_MS + 1, &st(2)).map(|r| r.id), Some(2));
        assert_eq!(a.queued(), 1);
    }

    #[test]
    fn spareness_counts_the_dispatcher_top_up() {
        let mut a = Avatar::new(slos(), DEFAULT_WINDOW).unwrap().with_threshold(10.0).unwrap();
        assert!(a.spare()); // nothing outstanding
        for i in 0..12 {
            a.enqueue(Request::new(i, 0, 0, 4096), 0);
        }
        // 12 queued: the dispatcher will fill the utility to 10 → not spare.
        assert!(!a.spare());
        let mut done = Vec::new();
        for o in 0..10 {
            done.push(a.dispatch(0, &DeviceState { outstanding: o, free_slots: 100 }).unwrap());
        }
        // A departure with 2 still queued: top-up refills to 10 → not spare.
        a.complete(&Completion { req: done[0], dispatch: 0, finish: 5 }, 5);
        assert!(!a.spare());
        for o in [9, 9] {
            a.dispatch(5, &DeviceState { outstanding: o, free_slots: 100 }).unwrap();
            a.complete(&Completion { req: done[1], dispatch: 0, finish: 6 }, 6);
        }
        // Queue empty, 8 outstanding < 9 → spare.
        for r in &done[2..4] {
            a.complete(&Completion { req: *r, dispatch: 0, finish: 7 }, 7);
        }
        assert!(a.monitor().outstanding() < 9);
        assert!(a.spare());
    }
}
