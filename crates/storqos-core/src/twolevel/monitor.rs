//! AVATAR's Monitor (seed 001, `001_f68b1e7da7bb5f73.txt`, §3.4.1): the statistics the
//! low level collects in each time window `k`, shared by [`crate::twolevel::Avatar`] and
//! the [`crate::twolevel::Facade`] baseline so that both are measured the same way.
//!
//! Per window (counted from the request's entry into the low level's EDF queue, its
//! *low-level arrival*, which is when SARC released it):
//! - `L^E_new(k)`: arrivals at the EDF queue; `L^E_new-deadline(k)`: those of them whose
//!   deadline lies in the same window;
//! - `X(k)`: completions at the storage utility;
//! - `MT^E_i(k)`: mean EDF waiting time of class `i` (over requests dispatched in `k`);
//! - `T^O_i(k)`: the SLO percentile (95th) of class `i`'s response time *at the storage
//!   utility* (finish − dispatch), exact by nearest rank;
//! - `L^O_max(k)`: the largest number of outstanding requests at the utility.
//!
//! It also keeps what the paper's evaluation reports (§4.1, Fig. 5 (c)–(d)): the
//! percentile of the *low-level* response time (finish − low-level arrival) per class and
//! window, and the cumulative count of requests that missed their low-level deadline
//! (low-level arrival + D_i), from which the miss ratio follows.
//!
//! Cost: `O(1)` per request (the deadline of each outstanding request goes into a small
//! open-addressing table at dispatch and out at completion; it holds at most the
//! outstanding requests), plus a linear-time selection per class at each window end
//! (and at each gauge sample): see [`nearest_rank`].

use std::cell::Cell;

use crate::request::{Completion, Request};
use crate::sim::summary::exact_quantile;
use crate::time::Nanos;
use crate::twolevel::class_gauge_names;
use crate::twolevel::slo::SloSet;

/// Largest `n − rank + 1` (rank counted from the top) that [`nearest_rank`] selects with
/// a sorted buffer on the stack; beyond it, a general selection.
const TOP_BUFFER: usize = 32;

/// The nearest-rank `q`-quantile of `values` (non-empty): exactly
/// [`exact_quantile`]'s value (rank `⌈q·n⌉` clamped to `1..=n`), without reordering or
/// copying `values` when the rank is near the top.
///
/// The monitor's quantile is the SLO percentile (95th): the `r = n − rank + 1` ≈ `n/20`
/// largest values decide it, so one pass keeps them in a small sorted buffer (a value
/// enters only if it beats the buffer's smallest) and the answer is the buffer's
/// smallest — a compare per value instead of a quickselect's partitioning passes. Equal
/// values may swap places in the buffer, which leaves its multiset, and so the answer,
/// unchanged. Lower quantiles (`r` > `TOP_BUFFER`) select on a copy.
pub fn nearest_rank(values: &[Nanos], q: f64) -> Nanos {
    debug_assert!(!values.is_empty());
    let n = values.len();
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    let r = n - rank + 1;
    if r > TOP_BUFFER {
        return exact_quantile(&mut values.to_vec(), q);
    }
    // The r largest so far, ascending.
    let mut top = [0 as Nanos; TOP_BUFFER];
    let top = &mut top[..r];
    top.copy_from_slice(&values[..r]);
    top.sort_unstable();
    for &x in &values[r..] {
        if x > top[0] {
            // Drop the smallest, insert `x` in order.
            let mut i = 1;
            while i < r && top[i] < x {
                top[i - 1] = top[i];
                i += 1;
            }
            top[i - 1] = x;
        }
    }
    top[0]
}

/// 2^64 / φ, the Fibonacci hashing multiplier (Knuth, TAOCP vol. 3 §6.4): consecutive
/// request ids land in well-spread slots.
const FIBONACCI_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// Marks a free slot of [`Deadlines`] (no request has this id: the simulator's ids stay
/// below 2^63).
const FREE: u64 = u64::MAX;

/// The deadline of every request outstanding at the utility, by request id: an
/// open-addressing table (Fibonacci hash, linear probing, backward-shift deletion, at
/// most half full). It holds at most the outstanding requests (≤ the device's depth), so
/// it stays small and in cache; insert and remove are a multiply and a probe or two, no
/// general-purpose hashing (this replaced a `HashMap`, a fifth of AVATAR's per-request
/// instructions).
#[derive(Clone, Debug)]
struct Deadlines {
    /// (request id or [`FREE`], deadline), side by side: a probe reads one cache line.
    slots: Vec<(u64, Nanos)>,
    len: usize,
    /// `capacity − 1` (the capacity is a power of two).
    mask: usize,
    /// `64 − log₂ capacity`: a hash's top bits index the table.
    shift: u32,
}

impl Deadlines {
    const INITIAL_BITS: u32 = 6;

    fn new() -> Self {
        Self::with_bits(Self::INITIAL_BITS)
    }

    fn with_bits(bits: u32) -> Self {
        let cap = 1usize << bits;
        Deadlines { slots: vec![(FREE, 0); cap], len: 0, mask: cap - 1, shift: 64 - bits }
    }

    #[inline(always)]
    fn slot(&self, id: u64) -> usize {
        (id.wrapping_mul(FIBONACCI_MULTIPLIER) >> self.shift) as usize
    }

    #[cold]
    fn grow(&mut self) {
        let old = std::mem::replace(self, Self::with_bits(65 - self.shift));
        for (k, v) in old.slots {
            if k != FREE {
                self.insert(k, v);
            }
        }
    }

    #[inline(always)]
    fn insert(&mut self, id: u64, deadline: Nanos) {
        debug_assert!(id != FREE, "request id {id} is reserved");
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        let mut i = self.slot(id);
        loop {
            let k = self.slots[i].0;
            if k == FREE || k == id {
                if k == FREE {
                    self.len += 1;
                }
                self.slots[i] = (id, deadline);
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline(always)]
    fn remove(&mut self, id: u64) -> Option<Nanos> {
        let mask = self.mask;
        let mut i = self.slot(id);
        loop {
            let k = self.slots[i].0;
            if k == FREE {
                return None;
            }
            if k == id {
                break;
            }
            i = (i + 1) & mask;
        }
        let v = self.slots[i].1;
        self.len -= 1;
        // Backward-shift deletion: pull later members of the probe run into the hole so
        // that every key stays reachable from its home slot without tombstones.
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let k = self.slots[j].0;
            if k == FREE {
                break;
            }
            let home = self.slot(k);
            // `k` may move to `hole` iff its home is not cyclically in (hole, j].
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole].0 = FREE;
        Some(v)
    }
}

/// One class's statistics in one closed window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClassWindow {
    /// Requests of the class completed in the window.
    pub completed: u64,
    /// Requests of the class dispatched in the window.
    pub dispatched: u64,
    /// `MT^E_i(k)`: mean EDF waiting time of those dispatched (ns; 0 when none).
    pub mean_edf_wait: f64,
    /// `T^O_i(k)`: the SLO percentile of the storage utility's response time (ns).
    pub device_percentile: Option<Nanos>,
    /// The SLO percentile of the low-level response time (EDF wait + utility, ns).
    pub low_percentile: Option<Nanos>,
    /// Completions in the window that missed their low-level deadline.
    pub missed: u64,
}

/// The monitor's statistics for one closed window `k`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WindowStats {
    /// `L^E_new(k)`: arrivals at the EDF queue.
    pub arrivals: u64,
    /// `L^E_new-deadline(k)`: arrivals whose deadline lies in the window.
    pub arrivals_due: u64,
    /// `X(k)`: completions at the storage utility.
    pub completed: u64,
    /// `L^O_max(k)`: most outstanding requests at the utility.
    pub max_outstanding: usize,
    /// `L^O_exist(k)`: outstanding at the window's end.
    pub outstanding: usize,
    /// Per class (index = class).
    pub classes: Vec<ClassWindow>,
}

/// Per-class accumulators of the open window.
#[derive(Clone, Debug, Default)]
struct ClassAcc {
    /// `D_i` (a copy of the SLO's, next to the counters it is used with).
    latency: Nanos,
    dispatched: u64,
    wait_sum: u128,
    device: Vec<Nanos>,
    low: Vec<Nanos>,
    /// The SLO percentile of `low` as last computed, with `low.len()` then: `low` only
    /// grows within a window, so an equal length means the same values. A gauge sample
    /// at the window's end (the summary window is usually AVATAR's) and the window close
    /// that follows select it once.
    low_percentile: Cell<Option<(usize, Nanos)>>,
    missed: u64,
    total_done: u64,
    total_missed: u64,
}

impl ClassAcc {
    /// The `q`-quantile of `low` (non-empty), memoised until `low` changes.
    fn low_percentile(&self, q: f64) -> Nanos {
        match self.low_percentile.get() {
            Some((n, p)) if n == self.low.len() => p,
            _ => {
                let p = nearest_rank(&self.low, q);
                self.low_percentile.set(Some((self.low.len(), p)));
                p
            }
        }
    }
}

/// The Monitor: feed it low-level arrivals, dispatches and completions; close a window
/// to get its [`WindowStats`].
#[derive(Clone, Debug)]
pub struct Monitor {
    slos: SloSet,
    window_end: Nanos,
    arrivals: u64,
    arrivals_due: u64,
    completed: u64,
    outstanding: usize,
    max_outstanding: usize,
    classes: Vec<ClassAcc>,
    /// Deadline of every outstanding request, by request id.
    deadlines: Deadlines,
    /// Per-class gauge names (`low_p_ms.i`, `low_done.i`, `low_missed.i`), built once.
    names: Vec<[String; 3]>,
}

impl Monitor {
    /// A monitor for `slos` whose first window ends at `first_window_end`.
    pub fn new(slos: SloSet, first_window_end: Nanos) -> Self {
        let n = slos.len();
        let classes = slos.classes().iter().map(|s| ClassAcc { latency: s.latency, ..ClassAcc::default() }).collect();
        Monitor {
            slos,
            window_end: first_window_end,
            arrivals: 0,
            arrivals_due: 0,
            completed: 0,
            outstanding: 0,
            max_outstanding: 0,
            classes,
            deadlines: Deadlines::new(),
            names: class_gauge_names(["low_p_ms", "low_done", "low_missed"], n),
        }
    }

    /// The SLOs (deadlines D_i, percentile).
    #[inline]
    pub fn slos(&self) -> &SloSet {
        &self.slos
    }

    /// Requests outstanding at the storage utility (`L_curr`).
    #[inline]
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Most outstanding so far in the open window (`L^O_max`).
    #[inline]
    pub fn max_outstanding(&self) -> usize {
        self.max_outstanding
    }

    /// End of the open window.
    #[inline]
    pub fn window_end(&self) -> Nanos {
        self.window_end
    }

    /// The low-level deadline of `req` entering the EDF queue at `now`: `now + D_i`
    /// (§3.4: "the sum of the request arrival time to the EDF queue and its class latency
    /// requirement").
    #[inline]
    pub fn deadline(&self, req: &Request, now: Nanos) -> Nanos {
        now.saturating_add(self.slos.get(req.class).latency)
    }

    /// A request entered the EDF queue at `now` with `deadline`.
    #[inline]
    pub fn arrive(&mut self, deadline: Nanos) {
        self.arrivals += 1;
        if deadline < self.window_end {
            self.arrivals_due += 1;
        }
    }

    /// `req` (with `deadline`) left the EDF queue for the utility at `now`.
    #[inline(always)]
    pub fn dispatched(&mut self, req: &Request, deadline: Nanos, now: Nanos) {
        let acc = &mut self.classes[self.slos.index(req.class)];
        let entered = deadline - acc.latency;
        acc.dispatched += 1;
        acc.wait_sum += now.saturating_sub(entered) as u128;
        self.deadlines.insert(req.id, deadline);
        self.outstanding += 1;
        self.max_outstanding = self.max_outstanding.max(self.outstanding);
    }

    /// The utility completed `c`. Completions of requests this monitor never saw
    /// dispatched are ignored (they are not the low level's).
    #[inline(always)]
    pub fn completed(&mut self, c: &Completion) {
        let Some(deadline) = self.deadlines.remove(c.req.id) else {
            return;
        };
        debug_assert!(self.outstanding > 0, "completion with nothing outstanding");
        self.outstanding -= 1;
        self.completed += 1;
        let acc = &mut self.classes[self.slos.index(c.req.class)];
        let entered = deadline - acc.latency;
        acc.device.push(c.device_time());
        acc.low.push(c.finish.saturating_sub(entered));
        acc.total_done += 1;
        if c.finish > deadline {
            acc.missed += 1;
            acc.total_missed += 1;
        }
    }

    /// Close the open window: its statistics, and a new window ending at `next_end`.
    pub fn close_window(&mut self, next_end: Nanos) -> WindowStats {
        let q = self.slos.percentile();
        let classes = self
            .classes
            .iter_mut()
            .map(|a| {
                let pct = |v: &mut Vec<Nanos>| (!v.is_empty()).then(|| nearest_rank(v, q));
                let w = ClassWindow {
                    completed: a.device.len() as u64,
                    dispatched: a.dispatched,
                    mean_edf_wait: if a.dispatched == 0 { 0.0 } else { a.wait_sum as f64 / a.dispatched as f64 },
                    device_percentile: pct(&mut a.device),
                    low_percentile: (!a.low.is_empty()).then(|| a.low_percentile(q)),
                    missed: a.missed,
                };
                a.dispatched = 0;
                a.wait_sum = 0;
                a.device.clear();
                a.low.clear();
                a.low_percentile.set(None);
                a.missed = 0;
                w
            })
            .collect();
        let stats = WindowStats {
            arrivals: self.arrivals,
            arrivals_due: self.arrivals_due,
            completed: self.completed,
            max_outstanding: self.max_outstanding,
            outstanding: self.outstanding,
            classes,
        };
        self.arrivals = 0;
        self.arrivals_due = 0;
        self.completed = 0;
        self.max_outstanding = self.outstanding;
        self.window_end = next_end;
        stats
    }

    /// Report per-class gauges: the open window's low-level percentile (ms) and the
    /// cumulative low-level completions and deadline misses.
    pub fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        let q = self.slos.percentile();
        for (a, [p_ms, done, missed]) in self.classes.iter().zip(&self.names) {
            if !a.low.is_empty() {
                sink(p_ms, a.low_percentile(q) as f64 / 1e6);
            }
            sink(done, a.total_done as f64);
            sink(missed, a.total_missed as f64);
        }
    }

    /// Cumulative (completions, deadline misses) of class `i` at the low level.
    pub fn totals(&self, i: usize) -> (u64, u64) {
        self.classes.get(i).map_or((0, 0), |a| (a.total_done, a.total_missed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twolevel::slo::Slo;

    #[test]
    fn deadline_table_matches_a_hash_map() {
        // Random inserts/removes with clustered and strided ids, through several growths.
        use std::collections::HashMap;
        let mut rng = crate::rng::SimRng::new(5);
        let mut t = Deadlines::new();
        let mut m: HashMap<u64, Nanos> = HashMap::new();
        let mut live: Vec<u64> = Vec::new();
        for step in 0..50_000u64 {
            if live.is_empty() || (rng.bernoulli(0.55) && live.len() < 3_000) {
                let id = if rng.bernoulli(0.5) { step } else { step << 20 };
                t.insert(id, step * 3);
                if m.insert(id, step * 3).is_none() {
                    live.push(id);
                }
            } else {
                let k = live.swap_remove(rng.below(live.len() as u64) as usize);
                assert_eq!(t.remove(k), m.remove(&k));
                assert_eq!(t.remove(k), None);
            }
            assert_eq!(t.len, m.len());
        }
        for k in live {
            assert_eq!(t.remove(k), m.remove(&k));
        }
        assert_eq!(t.len, 0);
    }

    #[test]
    fn nearest_rank_is_exact_quantile() {
        let mut rng = crate::rng::SimRng::new(8);
        for n in (1..80).chain([199, 200, 201, 1_000, 5_000]) {
            for spread in [3, 1_000_000] {
                let v: Vec<Nanos> = (0..n).map(|_| rng.below(spread)).collect();
                for q in [0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
                    assert_eq!(nearest_rank(&v, q), exact_quantile(&mut v.clone(), q), "n {n} q {q}");
                }
            }
        }
    }

    #[test]
    fn counts_one_window() {
        let slos = SloSet::new(vec![Slo::new(10.0, 100), Slo::new(10.0, 1_000)], 0.95).unwrap();
        let mut m = Monitor::new(slos, 1_000);
        let mut r0 = Request::new(0, 0, 0, 4096);
        r0.class = 0;
        let mut r1 = Request::new(1, 1, 0, 4096);
        r1.class = 1;
        let (d0, d1) = (m.deadline(&r0, 10), m.deadline(&r1, 20));
        assert_eq!((d0, d1), (110, 1_020));
        m.arrive(d0);
        m.arrive(d1);
        m.dispatched(&r0, d0, 30); // waited 20
        m.dispatched(&r1, d1, 60); // waited 40
        assert_eq!((m.outstanding(), m.max_outstanding()), (2, 2));
        m.completed(&Completion { req: r0, dispatch: 30, finish: 150 }); // late: 150 > 110
        let s = m.close_window(2_000);
        assert_eq!((s.arrivals, s.arrivals_due, s.completed, s.max_outstanding, s.outstanding), (2, 1, 1, 2, 1));
        assert_eq!(s.classes[0].mean_edf_wait, 20.0);
        assert_eq!(s.classes[0].device_percentile, Some(120));
        assert_eq!(s.classes[0].low_percentile, Some(140));
        assert_eq!(s.classes[0].missed, 1);
        assert_eq!(s.classes[1].mean_edf_wait, 40.0);
        assert_eq!(s.classes[1].device_percentile, None);
        m.completed(&Completion { req: r1, dispatch: 60, finish: 1_010 });
        assert_eq!(m.totals(0), (1, 1));
        assert_eq!(m.totals(1), (1, 0));
        // An unknown completion is ignored.
        m.completed(&Completion { req: Request::new(9, 0, 0, 1), dispatch: 0, finish: 1 });
        assert_eq!(m.outstanding(), 0);
    }
}
