//! Capacity planning: Cmin(f, δ), the smallest capacity at which RTT admits a fraction
//! ≥ f of a trace with response-time bound δ, and the Table 4.1-style capacity table
//! (seed 000, §3.2.2 "Performance Model", §4.2 "Capacity-QoS Tradeoffs", Table 4.1;
//! SPEC "Algorithm notes → Cmin").
//!
//! ## Why a search is valid
//! RTT admits the maximum number of requests that can meet δ at capacity C (Lemma 3,
//! [`super::rtt`]). Any set feasible at C is feasible at C' > C and at δ' > δ, so the
//! drop count d(C, δ) is non-increasing in C and in δ: Cmin is found by searching over
//! C, and every cell of the table brackets its neighbours (Cmin grows with f, shrinks
//! with δ).
//!
//! ## How the table is computed fast
//! The straightforward method ([`capacity_table_bisect`]) bisects each of the 24 cells
//! on its own and re-runs RTT over the whole trace for every probe: about 28 full
//! scalar passes per cell. [`capacity_table`] gets the same answer (to [`TOLERANCE`])
//! with four full-trace probes per cell, 24 to a pass, each pass costing about three
//! scalar probes. Measured on the 10 M-request benchmark trace
//! (`benches/capacity_table.py`): 4 passes, 96 probes, 0.31–0.41 s against 19 s, and
//! callgrind counts in `docs/results/shaping.md`:
//!
//! 1. **f = 100 % in closed form** ([`super::cmin_all()`]): the largest
//!    `(j − i + 1)/(a_j − a_i + δ)` over pairs, by Dinkelbach's iteration from a
//!    windowed starting bound; exact on the 1/1000 IOPS grid and checked by one probe.
//!    It is the upper end of every other cell's bracket; the total-work bound
//!    `C·(span + δ) < need` gives the lower end.
//! 2. **A first search on a block subsample.** For traces of at least
//!    [`SearchOptions::sample_min`] requests, every k-th block of
//!    [`SearchOptions::sample_block`] consecutive requests (about
//!    [`SearchOptions::sample_target`] requests in all) is searched for the same
//!    fractions. Blocks keep the bursts and the rates intact, so the subsample's Cmin
//!    estimates the trace's to within a percent (measured: ≤ 0.85 % on the benchmark
//!    trace). The subsample costs about 0.4 full-trace probes per cell.
//! 3. **Two full-trace probes around each estimate** (± [`GUESS_MARGIN`]) bracket the cell.
//! 4. **Regula falsi on the drop count.** Inside a narrow bracket d(C) is close to linear
//!    (on a wide one, log d against log C is); we interpolate inversely-quadratically
//!    through the bracket ends and the nearest third probe at the same deadline (d(C)
//!    is convex, so the chord alone overshoots). The next probes go just below and just
//!    above the estimate, [`TOLERANCE`] apart, and usually close the cell. A pass's
//!    spare lanes extend that ladder outwards (± 3, 5, … half-tolerances) for the cells
//!    with the widest brackets first. A cell that misses keeps the probe nearest to the
//!    crossing as one end, so the next interpolation is sharper still (the Illinois
//!    failure mode, an end that never moves, cannot arise).
//! 5. **Many probes per pass** ([`super::lanes`]): up to [`MAX_LANES`] RTT instances at
//!    different (C, δ) run side by side in one pass, vectorised (structure of arrays,
//!    f64, exact), so a pass of 24 probes costs about as much as 3 scalar ones.
//! 6. **Every probe informs every cell** through monotonicity: d drops at (C, δ) proves C
//!    feasible for budgets ≥ d at every δ' ≥ δ and infeasible for budgets < d at every
//!    δ' ≤ δ. A probe stops early once its verdict is the same for every open cell of
//!    its deadline.
//!
//! Capacities live on the exact 1/1000 IOPS grid of [`super::rtt`]; a cell is done when
//! its bracket (infeasible lo, feasible hi] is narrower than [`TOLERANCE`] · lo (or one
//! grid step), and the table reports hi: feasible, and within 0.1 % of the true minimum.
//! The target is 0.5 %; 0.1 % costs about one probe per cell more.

use crate::error::{Error, Result};
use crate::shaping::cmin_all::cmin_all_many;
pub use crate::shaping::lanes::MAX_LANES;
use crate::shaping::lanes::{has_avx2, run_lanes, Lane};
use crate::shaping::rtt::{admitted_count, Capacity, SERVICE_UNITS};
use crate::time::Nanos;

/// Relative precision of every Cmin: the reported capacity is feasible and at most
/// 0.1 % (or one 1/1000 IOPS grid step) above the true minimum.
pub const TOLERANCE: f64 = 1e-3;

/// Relative margin of the first full-trace probes around the subsample's estimate: the
/// benchmark trace's 20 estimates are within 0.85 % of the truth; a miss costs one more
/// round, not a wrong answer.
pub const GUESS_MARGIN: f64 = 0.01;

/// Brackets narrower than this (relative) are interpolated linearly and probed
/// [`TOLERANCE`] apart around the estimate; wider ones log-log, with a margin of 1/8 of
/// the bracket.
const NARROW: f64 = 0.05;

/// Rounds of interpolation after which a cell is bisected (a guard: interpolation closes
/// a cell in 2–4 rounds on every trace we have seen).
const MAX_INTERPOLATION_ROUNDS: u32 = 12;

/// Probe points per deadline in the first round when there is no subsample (a geometric
/// grid inside the brackets).
const GRID_POINTS: usize = 6;

/// How the search runs. The defaults are the planner's; tests shrink the subsample so
/// that small traces take the same path as a 10 M-request one.
#[derive(Clone, Copy, Debug)]
pub struct SearchOptions {
    /// Traces with at least this many requests are first searched on a block subsample.
    pub sample_min: usize,
    /// About this many requests in the subsample.
    pub sample_target: usize,
    /// Consecutive requests per block of the subsample: long enough that few bursts are
    /// cut by a block boundary (the benchmark's bursts are ≈ 700 requests).
    pub sample_block: usize,
    /// Use the AVX2 kernel where the CPU has it (`false`: the portable one).
    pub simd: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions { sample_min: 2_000_000, sample_target: 500_000, sample_block: 4096, simd: has_avx2() }
    }
}

/// Check that `arrivals` is non-empty and non-decreasing.
fn check_arrivals(arrivals: &[Nanos]) -> Result<()> {
    if arrivals.is_empty() {
        return Err(Error::InvalidInput("capacity planning needs at least one request".into()));
    }
    if let Some(i) = arrivals.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::InvalidInput(format!(
            "request {} arrives at {} ns, before the previous request ({} ns): sort the trace by time",
            i + 1,
            arrivals[i + 1],
            arrivals[i]
        )));
    }
    Ok(())
}

/// Requests that must be admitted for a fraction `f` of `n`: ⌈f·n⌉ (1e-9 slack so that
/// 0.9 × 1000 is 900, not 901 from binary rounding).
pub fn needed(n: u64, f: f64) -> u64 {
    ((f * n as f64 - 1e-9).ceil().max(0.0) as u64).min(n)
}

/// Cmin(100 %, δ): the largest `(j − i + 1)/(a_j − a_i + δ)` over pairs i ≤ j, rounded up
/// to the 1/1000 IOPS grid ([`super::cmin_all()`]).
pub fn cmin_all(arrivals: &[Nanos], deadline: Nanos) -> Result<Capacity> {
    check_arrivals(arrivals)?;
    Ok(cmin_all_many(arrivals, &[deadline]).0[0])
}

/// Cmin for admitting at least `need` requests at deadline `deadline`.
pub fn cmin_count(arrivals: &[Nanos], need: u64, deadline: Nanos) -> Result<Capacity> {
    check_arrivals(arrivals)?;
    let mut stats = Stats::default();
    let cells = search(arrivals, &[deadline], &[need], &SearchOptions::default(), &mut stats)?;
    Ok(Capacity::from_milli(cells[0]))
}

/// Cmin(f, δ) for one fraction `f` ∈ (0, 1] and deadline `deadline`.
pub fn cmin(arrivals: &[Nanos], fraction: f64, deadline: Nanos) -> Result<Capacity> {
    check_fraction(fraction)?;
    check_arrivals(arrivals)?;
    cmin_count(arrivals, needed(arrivals.len() as u64, fraction), deadline)
}

fn check_fraction(f: f64) -> Result<()> {
    if !(f > 0.0 && f <= 1.0) {
        return Err(Error::InvalidConfig(format!("fraction must be in (0, 1], got {f}")));
    }
    Ok(())
}

/// The capacity table: `cmin[d][f]` for every deadline and fraction, and what the search
/// cost.
#[derive(Clone, Debug, PartialEq)]
pub struct CapacityTable {
    /// Deadlines (rows), ns.
    pub deadlines: Vec<Nanos>,
    /// Fractions (columns), in (0, 1].
    pub fractions: Vec<f64>,
    /// Cmin per (deadline, fraction), row-major.
    pub cmin: Vec<Vec<Capacity>>,
    /// Requests admitted at each cell's Cmin (≥ ⌈f·n⌉).
    pub needed: Vec<u64>,
    /// Requests in the trace.
    pub requests: u64,
    /// RTT passes over the whole trace (each runs up to [`MAX_LANES`] probes).
    pub passes: u64,
    /// RTT probes (lanes) over the whole trace, early-stopped ones included.
    pub probes: u64,
    /// Sweeps of the closed form for f = 100 % (windows + Dinkelbach, all deadlines).
    pub closed_form_sweeps: u64,
    /// Requests in the subsample (0: none was used).
    pub sample_requests: u64,
    /// RTT probes over the subsample.
    pub sample_probes: u64,
    /// RTT steps (one arrival in one lane) of all probes, full trace and subsample:
    /// divided by the trace length, the work in full-trace probe equivalents.
    pub lane_steps: u64,
}

/// What the search did (see [`CapacityTable`]).
#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    passes: u64,
    probes: u64,
    closed_form_sweeps: u64,
    sample_requests: u64,
    sample_probes: u64,
    lane_steps: u64,
}

#[derive(Clone, Debug)]
struct Cell {
    di: usize,
    deadline: Nanos,
    budget: u64,
    /// Largest capacity known infeasible (0: none), with its drops at this deadline when
    /// a probe at this deadline measured them (an estimate if it stopped early).
    lo: u64,
    lo_drops: Option<u64>,
    /// Smallest capacity known feasible, likewise.
    hi: u64,
    hi_drops: Option<u64>,
    /// The subsample's estimate, until it has been probed around.
    guess: Option<u64>,
    /// Rounds of probes this cell asked for.
    rounds: u32,
}

/// What a (possibly early-stopped) probe proved: the run's drop count lies in
/// `[drops_min, drops_max]`; `estimate` guides interpolation only.
#[derive(Clone, Copy, Debug)]
struct Outcome {
    milli: u64,
    deadline: Nanos,
    drops_min: u64,
    drops_max: u64,
    estimate: u64,
}

impl Cell {
    fn resolved(&self) -> bool {
        self.hi <= self.lo + 1 || (self.hi - self.lo) as f64 <= self.lo as f64 * TOLERANCE
    }

    /// Where this cell wants its next probes: around `est`, a ladder of points
    /// `est · (1 ± (2k + 1)·margin)`, k = 0, 1, … (the first two always, more when a
    /// pass has lanes to spare). `points`: exact (capacity, drops) at this deadline.
    fn propose(&mut self, points: &[(u64, u64)]) -> (f64, f64) {
        self.rounds += 1;
        let (lo, hi) = (self.lo.max(1) as f64, self.hi as f64);
        if let Some(g) = self.guess.take() {
            return (g as f64, GUESS_MARGIN);
        }
        let width = (hi - lo) / lo;
        let geometric = |t: f64| (lo.ln() + t * (hi.ln() - lo.ln())).exp();
        match (self.lo_drops, self.hi_drops) {
            (Some(dl), Some(dh)) if dl > dh && self.rounds <= MAX_INTERPOLATION_ROUNDS => {
                // The crossing of d(C) with the budget: between budget and budget + 1.
                let target = self.budget as f64 + 0.5;
                if width > NARROW {
                    let (ya, yb, yt) = ((dl as f64 + 1.0).ln(), (dh as f64 + 1.0).ln(), (target + 1.0).ln());
                    return (geometric(((ya - yt) / (ya - yb)).clamp(0.0, 1.0)), width / 8.0);
                }
                let t = ((dl as f64 - target) / (dl - dh) as f64).clamp(0.0, 1.0);
                let mut est = lo + t * (hi - lo);
                // Inverse quadratic interpolation through the nearest third point at
                // this deadline, when it lands inside the bracket (d(C) is convex, so
                // the chord alone overshoots).
                let third = points.iter().filter(|p| p.0 < self.lo || p.0 > self.hi).min_by_key(|p| {
                    if p.0 < self.lo {
                        self.lo - p.0
                    } else {
                        p.0 - self.hi
                    }
                });
                if let Some(&(c3, d3)) = third {
                    let q = [(dl as f64, lo), (dh as f64, hi), (d3 as f64, c3 as f64)];
                    let distinct = q[0].0 != q[2].0 && q[1].0 != q[2].0;
                    if distinct {
                        let mut c = 0.0;
                        for (k, &(dk, ck)) in q.iter().enumerate() {
                            let mut w = ck;
                            for (m, &(dm, _)) in q.iter().enumerate() {
                                if m != k {
                                    w *= (target - dm) / (dk - dm);
                                }
                            }
                            c += w;
                        }
                        if c > lo && c < hi {
                            est = c;
                        }
                    }
                }
                (est, 0.45 * TOLERANCE)
            }
            (Some(_), Some(_)) => (geometric(0.5), 0.0),
            _ => (geometric(0.5), width / 6.0),
        }
    }

    /// The k-th rung of the ladder around `est` (k = 0, 1 the first two), if it lies
    /// strictly inside the bracket.
    fn rung(&self, est: f64, margin: f64, k: usize) -> Option<u64> {
        let off = (2 * (k / 2) + 1) as f64 * margin;
        let c = (if k.is_multiple_of(2) { est * (1.0 - off) } else { est * (1.0 + off) }).round() as u64;
        let c = if margin == 0.0 { c.clamp(self.lo + 1, self.hi - 1) } else { c };
        (c > self.lo && c < self.hi).then_some(c)
    }

    fn learn(&mut self, o: &Outcome) {
        let same = o.deadline == self.deadline;
        if o.deadline <= self.deadline && o.drops_max <= self.budget && o.milli < self.hi {
            self.hi = o.milli;
            self.hi_drops = same.then_some(o.estimate.min(o.drops_max));
        }
        if o.deadline >= self.deadline && o.drops_min > self.budget && o.milli > self.lo {
            self.lo = o.milli;
            self.lo_drops = same.then_some(o.estimate.max(o.drops_min));
        }
    }
}

/// Every k-th block of `block` consecutive arrivals, k chosen for about `target` in all.
fn block_sample(arrivals: &[Nanos], target: usize, block: usize) -> Vec<Nanos> {
    let block = block.max(1);
    let blocks = arrivals.len().div_ceil(block);
    let k = (arrivals.len() / target.max(1)).max(1);
    arrivals.chunks(block).step_by(k).take(blocks).flatten().copied().collect()
}

/// A probe request: capacity, deadline, early exits (see [`Lane`]).
type Want = (u64, Nanos, Option<u64>, Option<u64>);

/// Run probes in as few passes as possible (up to [`MAX_LANES`] each, spread evenly).
fn run_probes(arrivals: &[Nanos], wanted: &[Want], simd: bool, stats: &mut Stats) -> Vec<Outcome> {
    let lanes: Vec<Lane> = wanted
        .iter()
        .map(|&(milli, deadline, stop_above, stop_within)| Lane {
            milli,
            deadline,
            limit: Capacity::from_milli(milli).limit_units(deadline).unwrap_or(u64::MAX - SERVICE_UNITS),
            stop_above,
            stop_within,
        })
        .collect();
    let mut out = Vec::with_capacity(lanes.len());
    if lanes.is_empty() {
        return out;
    }
    let passes = lanes.len().div_ceil(MAX_LANES);
    let per = lanes.len().div_ceil(passes);
    for group in lanes.chunks(per) {
        stats.passes += 1;
        stats.probes += group.len() as u64;
        for (l, r) in group.iter().zip(run_lanes(arrivals, group, simd)) {
            stats.lane_steps += r.steps;
            out.push(Outcome {
                milli: l.milli,
                deadline: l.deadline,
                drops_min: r.drops_min,
                drops_max: r.drops_max,
                estimate: r.estimate,
            });
        }
    }
    out
}

/// Cmin (milli-IOPS) of every cell deadlines × needs (row-major), by the search of the
/// module notes. `arrivals` is checked by the caller.
fn search(
    arrivals: &[Nanos],
    deadlines: &[Nanos],
    needs: &[u64],
    opts: &SearchOptions,
    stats: &mut Stats,
) -> Result<Vec<u64>> {
    if let Some(&d) = deadlines.iter().find(|&&d| d == 0) {
        return Err(Error::InvalidConfig(format!("deadline must be > 0 ns, got {d}")));
    }
    let n = arrivals.len() as u64;
    let span = arrivals[arrivals.len() - 1] - arrivals[0];
    // 1. Cmin(100 %, δ) per deadline (checked by one probe each in the first round).
    for &d in deadlines {
        Capacity::from_milli(1).limit_units(d)?;
    }
    let (all_caps, sweeps) = cmin_all_many(arrivals, deadlines);
    stats.closed_form_sweeps += sweeps;
    let mut all = Vec::with_capacity(deadlines.len());
    for (&c, &d) in all_caps.iter().zip(deadlines) {
        c.limit_units(d)?;
        all.push(c.milli());
    }
    // 2. Brackets: the total-work bound below, the 100 % capacity above.
    let mut cells: Vec<Cell> = Vec::new();
    for (di, &d) in deadlines.iter().enumerate() {
        for &need in needs {
            let budget = n - need.min(n);
            let num = need as u128 * SERVICE_UNITS as u128;
            // At most milli·(span + δ)/S requests can finish by a_n + δ.
            let lo = (num.div_ceil((span + d) as u128) as u64).saturating_sub(1).min(all[di] - 1);
            let mut c = Cell {
                di,
                deadline: d,
                budget,
                lo,
                lo_drops: None,
                hi: all[di],
                hi_drops: Some(0),
                guess: None,
                rounds: 0,
            };
            if need == 0 {
                (c.lo, c.hi) = (0, 1);
            } else if budget == 0 {
                // The closed form's pair proves one grid step less infeasible.
                c.lo = all[di] - 1;
            }
            cells.push(c);
        }
    }
    // 3. Estimates from a block subsample.
    let open_budget = cells.iter().any(|c| !c.resolved() && c.budget > 0);
    let sampled = arrivals.len() >= opts.sample_min && open_budget;
    if sampled {
        let sub = block_sample(arrivals, opts.sample_target, opts.sample_block);
        let m = sub.len() as u64;
        let sub_needs: Vec<u64> = needs.iter().map(|&need| needed(m, need as f64 / n as f64)).collect();
        let mut sub_stats = Stats::default();
        let no_sample = SearchOptions { sample_min: usize::MAX, ..*opts };
        let est = search(&sub, deadlines, &sub_needs, &no_sample, &mut sub_stats)?;
        stats.sample_requests = m;
        stats.sample_probes += sub_stats.probes;
        stats.lane_steps += sub_stats.lane_steps;
        for (c, &g) in cells.iter_mut().zip(&est) {
            if !c.resolved() && c.budget > 0 {
                c.guess = Some(g);
            }
        }
    }
    // 4.–6. Rounds of probes, all cells' probes of a round sharing passes.
    let mut points: Vec<Vec<(u64, u64)>> = vec![Vec::new(); deadlines.len()];
    let mut round = 0u32;
    loop {
        let mut wanted: Vec<Want> = Vec::new();
        // Early exits that settle the verdict for every open cell of a deadline.
        let exits = |cells: &[Cell], d: Nanos| {
            let open = cells.iter().filter(|c| c.deadline == d && !c.resolved()).map(|c| c.budget);
            let (lo, hi) = open.fold((u64::MAX, 0), |(a, b), x| (a.min(x), b.max(x)));
            if lo == u64::MAX {
                (Some(0), Some(0))
            } else {
                (Some(hi), Some(lo))
            }
        };
        if round == 0 {
            for (di, &d) in deadlines.iter().enumerate() {
                // Check the closed form: stops at the first drop if it is wrong.
                wanted.push((all[di], d, Some(0), None));
                if sampled {
                    continue;
                }
                let open: Vec<&Cell> = cells.iter().filter(|c| c.deadline == d && !c.resolved()).collect();
                if open.is_empty() {
                    continue;
                }
                let lo = open.iter().map(|c| c.lo.max(1)).min().unwrap_or(1) as f64;
                let hi = all[di] as f64;
                let (above, within) = exits(&cells, d);
                for k in 1..=GRID_POINTS {
                    let c = (lo.ln() + (hi.ln() - lo.ln()) * k as f64 / (GRID_POINTS + 1) as f64).exp().round() as u64;
                    if c > lo as u64 && c < all[di] && !wanted.iter().any(|w| w.0 == c && w.1 == d) {
                        wanted.push((c, d, above, within));
                    }
                }
            }
        }
        if round > 0 || sampled {
            // Each open cell's ladder; the first two rungs always, then further rungs
            // round-robin while the passes this round needs have lanes to spare.
            let mut ladders: Vec<(usize, f64, f64)> = Vec::new();
            for (i, c) in cells.iter_mut().enumerate() {
                if !c.resolved() {
                    let (est, margin) = c.propose(&points[c.di]);
                    ladders.push((i, est, margin));
                }
            }
            let add = |wanted: &mut Vec<Want>, cells: &[Cell], i: usize, est: f64, margin: f64, k: usize| {
                let Some(cap) = cells[i].rung(est, margin, k) else { return false };
                let d = cells[i].deadline;
                if wanted.iter().any(|w| w.0 == cap && w.1 == d) {
                    return false;
                }
                let (above, within) = exits(cells, d);
                wanted.push((cap, d, above, within));
                true
            };
            for &(i, est, margin) in &ladders {
                for k in 0..2 {
                    add(&mut wanted, &cells, i, est, margin, k);
                }
            }
            // Spare rungs go first to the least certain estimates (widest brackets).
            ladders.sort_by(|x, y| {
                let w = |i: usize| (cells[i].hi - cells[i].lo) as f64 / cells[i].lo.max(1) as f64;
                w(y.0).total_cmp(&w(x.0))
            });
            let room = wanted.len().div_ceil(MAX_LANES) * MAX_LANES;
            let mut k = 2;
            while wanted.len() < room && k < 2 * MAX_LANES {
                for &(i, est, margin) in &ladders {
                    if wanted.len() < room && margin > 0.0 {
                        add(&mut wanted, &cells, i, est, margin, k);
                    }
                }
                k += 1;
            }
        }
        if wanted.is_empty() {
            break;
        }
        let outcomes = run_probes(arrivals, &wanted, opts.simd, stats);
        for o in &outcomes {
            let checks_closed_form =
                round == 0 && all.iter().zip(deadlines).any(|(&c, &d)| c == o.milli && d == o.deadline);
            if checks_closed_form && o.drops_min > 0 {
                // A near-tie fooled the floating-point scan: fall back to a safe bound
                // (C·δ ≥ n admits everything) and search these cells like the others.
                let safe = (n as u128 * SERVICE_UNITS as u128).div_ceil(o.deadline as u128) as u64;
                for c in cells.iter_mut().filter(|c| c.deadline == o.deadline) {
                    c.lo = c.lo.max(o.milli);
                    c.lo_drops = None;
                    c.hi = safe.max(c.lo + 1);
                    c.hi_drops = Some(0);
                }
            }
        }
        for o in &outcomes {
            if o.drops_min == o.drops_max {
                let di = deadlines.iter().position(|&d| d == o.deadline).expect("probes use the table's deadlines");
                points[di].push((o.milli, o.drops_min));
            }
            for c in cells.iter_mut() {
                c.learn(o);
            }
        }
        round += 1;
    }
    Ok(cells.iter().map(|c| c.hi).collect())
}

fn check_table_args(deadlines: &[Nanos], fractions: &[f64]) -> Result<()> {
    if deadlines.is_empty() || fractions.is_empty() {
        return Err(Error::InvalidConfig("the capacity table needs at least one deadline and one fraction".into()));
    }
    fractions.iter().try_for_each(|&f| check_fraction(f))
}

/// The capacity table Cmin(f, δ) for every deadline × fraction (fast search; see the
/// module notes).
pub fn capacity_table(arrivals: &[Nanos], deadlines: &[Nanos], fractions: &[f64]) -> Result<CapacityTable> {
    capacity_table_with(arrivals, deadlines, fractions, &SearchOptions::default())
}

/// [`capacity_table`] with explicit [`SearchOptions`].
pub fn capacity_table_with(
    arrivals: &[Nanos],
    deadlines: &[Nanos],
    fractions: &[f64],
    opts: &SearchOptions,
) -> Result<CapacityTable> {
    check_table_args(deadlines, fractions)?;
    check_arrivals(arrivals)?;
    let n = arrivals.len() as u64;
    let needs: Vec<u64> = fractions.iter().map(|&f| needed(n, f)).collect();
    let mut stats = Stats::default();
    let cells = search(arrivals, deadlines, &needs, opts, &mut stats)?;
    Ok(CapacityTable {
        deadlines: deadlines.to_vec(),
        fractions: fractions.to_vec(),
        cmin: cells.chunks(fractions.len()).map(|r| r.iter().map(|&c| Capacity::from_milli(c)).collect()).collect(),
        needed: needs,
        requests: n,
        passes: stats.passes,
        probes: stats.probes,
        closed_form_sweeps: stats.closed_form_sweeps,
        sample_requests: stats.sample_requests,
        sample_probes: stats.sample_probes,
        lane_steps: stats.lane_steps,
    })
}

/// The straightforward method, for comparison: each cell bisected on its own between 0
/// and the always-sufficient `n/δ`, every probe a full scalar RTT run over the trace;
/// stops at the same [`TOLERANCE`].
pub fn capacity_table_bisect(arrivals: &[Nanos], deadlines: &[Nanos], fractions: &[f64]) -> Result<CapacityTable> {
    check_table_args(deadlines, fractions)?;
    check_arrivals(arrivals)?;
    let n = arrivals.len() as u64;
    let needs: Vec<u64> = fractions.iter().map(|&f| needed(n, f)).collect();
    let mut passes = 0;
    let mut rows = Vec::new();
    for &d in deadlines {
        let mut row = Vec::new();
        for &need in &needs {
            row.push(Capacity::from_milli(bisect_cell(arrivals, need, d, TOLERANCE, &mut passes)?));
        }
        rows.push(row);
    }
    Ok(CapacityTable {
        deadlines: deadlines.to_vec(),
        fractions: fractions.to_vec(),
        cmin: rows,
        needed: needs,
        requests: n,
        passes,
        probes: passes,
        closed_form_sweeps: 0,
        sample_requests: 0,
        sample_probes: 0,
        lane_steps: passes * n,
    })
}

/// Bisect one cell on [0, n/δ] until (hi − lo) ≤ `tolerance`·lo or one grid step; the
/// smallest feasible capacity seen (milli-IOPS).
fn bisect_cell(arrivals: &[Nanos], need: u64, d: Nanos, tolerance: f64, passes: &mut u64) -> Result<u64> {
    let n = arrivals.len() as u64;
    let (mut lo, mut hi) = (0u64, (n as u128 * SERVICE_UNITS as u128).div_ceil(d as u128) as u64);
    Capacity::from_milli(hi).limit_units(d)?;
    while !(hi <= lo + 1 || (hi - lo) as f64 <= lo as f64 * tolerance) {
        let mid = lo + (hi - lo) / 2;
        *passes += 1;
        if admitted_count(arrivals, Capacity::from_milli(mid), d)? >= need {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

/// Test helpers shared by the shaping modules.
#[cfg(test)]
pub(crate) mod tests_support {
    use crate::rng::SimRng;
    use crate::time::Nanos;

    /// A bursty trace: a Poisson background at `base` IOPS with bursts (on/off) at
    /// 10× the rate, deterministic in `seed`.
    pub fn bursty(n: usize, base: f64, seed: u64) -> Vec<Nanos> {
        let mut rng = SimRng::new(seed);
        let mut t = 0f64;
        let mut out = Vec::with_capacity(n);
        let mut burst_left = 0u32;
        while out.len() < n {
            if burst_left == 0 && rng.bernoulli(0.002) {
                burst_left = 20 + rng.below(400) as u32;
            }
            let rate = if burst_left > 0 {
                burst_left -= 1;
                base * 10.0
            } else {
                base
            };
            t += rng.exp(1e9 / rate);
            out.push(t as Nanos);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::tests_support::bursty;
    use super::*;
    use crate::rng::SimRng;
    use crate::time::{NS_PER_MS, NS_PER_SEC};

    #[test]
    fn fast_table_matches_bisection_and_brackets_the_true_minimum() {
        let arr = bursty(20_000, 300.0, 9);
        let ds = [5 * NS_PER_MS, 10 * NS_PER_MS, 20 * NS_PER_MS, 50 * NS_PER_MS];
        let fs = [0.9, 0.95, 0.99, 0.995, 0.999, 1.0];
        let fast = capacity_table(&arr, &ds, &fs).unwrap();
        let slow = capacity_table_bisect(&arr, &ds, &fs).unwrap();
        for (di, &d) in ds.iter().enumerate() {
            for (fi, &f) in fs.iter().enumerate() {
                let (a, b) = (fast.cmin[di][fi], slow.cmin[di][fi]);
                let need = needed(arr.len() as u64, f);
                // Feasible, and 0.5 % less is not: within 0.5 % of the true minimum.
                assert!(admitted_count(&arr, a, d).unwrap() >= need, "δ={d} f={f}: {a:?}");
                let below = Capacity::from_milli((a.milli() as f64 * 0.995) as u64);
                assert!(admitted_count(&arr, below, d).unwrap() < need, "δ={d} f={f}: {a:?} not minimal");
                let rel = (a.iops() - b.iops()).abs() / b.iops();
                assert!(rel <= 2.0 * TOLERANCE, "δ={d} f={f}: fast {a:?} vs bisect {b:?}");
            }
            // Monotone in f along the row.
            assert!(fast.cmin[di].windows(2).all(|w| w[0] <= w[1]), "{:?}", fast.cmin[di]);
        }
        // Monotone in δ down each column.
        for fi in 0..fs.len() {
            assert!(fast.cmin.windows(2).all(|w| w[0][fi] >= w[1][fi]));
        }
        assert!(fast.passes * 3 < slow.passes, "fast {} passes vs bisect {}", fast.passes, slow.passes);
    }

    /// A random bursty trace: Poisson background, on/off bursts of random rate and
    /// length, some batched arrivals (equal timestamps).
    fn random_bursty(rng: &mut SimRng, n: usize) -> Vec<Nanos> {
        let base = 50.0 + rng.below(2_000) as f64;
        let burst = base * (3.0 + rng.below(30) as f64);
        let p_burst = 0.0005 + 0.005 * rng.below(10) as f64 / 10.0;
        let batch = [0.0, 0.05, 0.3][rng.below(3) as usize];
        let (mut t, mut left, mut out) = (0f64, 0u64, Vec::with_capacity(n));
        while out.len() < n {
            if left == 0 && rng.bernoulli(p_burst) {
                left = 10 + rng.below(1_000);
            }
            let rate = if left > 0 {
                left -= 1;
                burst
            } else {
                base
            };
            if !rng.bernoulli(batch) {
                t += rng.exp(NS_PER_SEC as f64 / rate);
            }
            out.push(t as Nanos);
        }
        out
    }

    #[test]
    fn fast_table_is_the_exact_minimum_on_random_bursty_traces() {
        // The exact Cmin of every cell by bisection down to one 1/1000 IOPS grid step;
        // the fast table must be feasible and within TOLERANCE of it, on both paths
        // (with and without the subsample) and both kernels.
        let mut rng = SimRng::new(31);
        let fs = [0.9, 0.95, 0.99, 0.995, 0.999, 1.0];
        let sampled = SearchOptions { sample_min: 0, sample_target: 2_000, sample_block: 256, simd: has_avx2() };
        for case in 0..8 {
            let n = 3_000 + rng.below(12_000) as usize;
            let arr = random_bursty(&mut rng, n);
            let mut ds: Vec<Nanos> = (0..1 + rng.below(4)).map(|_| (1 + rng.below(60)) * NS_PER_MS / 2).collect();
            ds.sort();
            ds.dedup();
            let opts =
                if case % 2 == 0 { sampled } else { SearchOptions { simd: case % 4 == 1, ..Default::default() } };
            let fast = capacity_table_with(&arr, &ds, &fs, &opts).unwrap();
            assert_eq!(fast.sample_requests > 0, case % 2 == 0);
            for (di, &d) in ds.iter().enumerate() {
                for (fi, &need) in fast.needed.iter().enumerate() {
                    let exact = bisect_cell(&arr, need, d, 0.0, &mut 0).unwrap();
                    let got = fast.cmin[di][fi].milli();
                    assert!(
                        got >= exact && got as f64 <= exact as f64 * (1.0 + TOLERANCE) + 1.0,
                        "case {case}: n={n} δ={d} f={}: fast {got} vs exact {exact} milli-IOPS",
                        fs[fi]
                    );
                }
            }
        }
    }

    #[test]
    fn block_sample_keeps_whole_blocks() {
        let arr: Vec<Nanos> = (0..10_000).collect();
        let s = block_sample(&arr, 2_500, 100);
        assert_eq!(s.len(), 2_500);
        assert_eq!(&s[..3], &[0, 1, 2]);
        assert_eq!(s[100], 400);
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(block_sample(&arr, 50_000, 100).len(), 10_000);
    }

    #[test]
    fn admitted_fraction_is_monotone_in_capacity_and_deadline() {
        let mut rng = SimRng::new(77);
        for case in 0..1000 {
            let n = 2 + rng.below(60) as usize;
            let mut t = 0;
            let arr: Vec<Nanos> = (0..n)
                .map(|_| {
                    if rng.bernoulli(0.7) {
                        t += rng.below(2 * NS_PER_MS);
                    }
                    t
                })
                .collect();
            let c = 100_000 + rng.below(5_000_000);
            let dc = 1 + rng.below(200_000);
            let d = 1 + rng.below(20 * NS_PER_MS);
            let dd = 1 + rng.below(5 * NS_PER_MS);
            let base = admitted_count(&arr, Capacity::from_milli(c), d).unwrap();
            let more_c = admitted_count(&arr, Capacity::from_milli(c + dc), d).unwrap();
            let more_d = admitted_count(&arr, Capacity::from_milli(c), d + dd).unwrap();
            assert!(more_c >= base, "case {case}: C {c}→{} admits {base}→{more_c}", c + dc);
            assert!(more_d >= base, "case {case}: δ {d}→{} admits {base}→{more_d}", d + dd);
        }
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(capacity_table(&[], &[NS_PER_MS], &[0.9]).unwrap_err().to_string().contains("at least one request"));
        let e = capacity_table(&[5, 3], &[NS_PER_MS], &[0.9]).unwrap_err().to_string();
        assert!(e.contains("request 1 arrives at 3 ns"), "{e}");
        assert!(capacity_table(&[1, 2], &[NS_PER_MS], &[1.5]).unwrap_err().to_string().contains("fraction"));
        assert!(capacity_table(&[1, 2], &[0], &[0.9]).unwrap_err().to_string().contains("deadline"));
        assert_eq!(needed(1000, 0.9), 900);
        assert_eq!(needed(1000, 0.999), 999);
        assert_eq!(needed(7, 1.0), 7);
    }
}
