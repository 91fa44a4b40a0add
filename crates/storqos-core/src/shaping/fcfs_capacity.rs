//! The capacity plain FCFS needs for a fraction f of a trace's requests to finish within
//! δ, beside Cmin(f, δ) (seed 000, §4.2 and Fig. 4.2: FCFS on the undecomposed trace at
//! Cmin meets δ for far fewer than f of the requests).
//!
//! Cmin is the least capacity *any* schedule needs (RTT admits the most requests that
//! can meet δ, Lemma 3); RTT decomposition with Miser recombination on Cmin + ΔC meets
//! it. A server that serves its queue first come, first served needs more: every request
//! of a burst waits behind the whole burst, so it is FCFS's own capacity an operator
//! without shaping must provision.
//!
//! ## The kernel: Lindley's recursion, exact
//! FCFS on one server of C IOPS is Lindley's recursion,
//! `finish_k = max(a_k, finish_{k−1}) + 1/C`, and request k is on time iff
//! `finish_k − a_k ≤ δ`. It is kept in RTT's exact integer arithmetic ([`super::rtt`]):
//! C is a whole number of milli-IOPS and time is counted in units of 1/milli ns, so one
//! service is exactly [`SERVICE_UNITS`]. The backlog `finish − a` is a `u128` (FCFS's
//! queue, unlike RTT's, has no bound), so no product overflows. A probe stops as soon
//! as its verdict is known: enough requests on time, or too many late.
//!
//! ## The search
//! The on-time count only grows with C, so each cell is a bisection (geometric
//! midpoints) to [`TOLERANCE`], the same 0.1 % as Cmin's. The bracket comes from the
//! Cmin table: FCFS cannot beat the least capacity of any schedule, and the table's
//! Cmin is at most [`TOLERANCE`] above it, so `Cmin / (1 + TOLERANCE)` fails; and at
//! Cmin(100 %, δ) RTT admits every request, which is FCFS meeting δ for all of them (the
//! same recursion with nothing dropped), so it holds for every f. Cells are searched
//! from the highest fraction and the smallest deadline down, each narrowed by those
//! already found (FCFS's capacity grows with f and shrinks as δ grows), so the table is
//! monotone in both.
//!
//! At f = 100 % FCFS and RTT coincide, so FCFS needs exactly Cmin(100 %, δ). Below, a
//! cell's FCFS capacity is also feasible for RTT (Lemma 3): where it falls under the
//! table's Cmin (which may be up to 0.1 % above the minimum), [`FcfsTable::tighten`]
//! lowers Cmin to it, so that FCFS's column is never below Cmin's.

use crate::error::{Error, Result};
use crate::shaping::cmin::{needed, CapacityTable, TOLERANCE};
use crate::shaping::cmin_all::cmin_all_many;
use crate::shaping::rtt::{Capacity, SERVICE_UNITS};
use crate::time::Nanos;

/// FCFS's capacity for every cell of a Cmin table, and what the search cost.
#[derive(Clone, Debug, PartialEq)]
pub struct FcfsTable {
    /// FCFS's capacity per (deadline, fraction), row-major like [`CapacityTable::cmin`]:
    /// FCFS meets the cell's target there, and at most [`TOLERANCE`] below the least
    /// capacity at which it does.
    pub capacity: Vec<Vec<Capacity>>,
    /// Lindley probes run (each over at most the whole trace).
    pub probes: u64,
    /// Requests stepped through by all probes: divided by the trace length, the work in
    /// full-trace passes.
    pub steps: u64,
}

impl FcfsTable {
    /// Lower every Cmin cell that FCFS meets below it to FCFS's capacity: a capacity at
    /// which FCFS meets the target is one at which RTT does (Lemma 3), so the cell stays
    /// feasible and comes closer to the true minimum. Returns how many cells changed.
    pub fn tighten(&self, table: &mut CapacityTable) -> usize {
        let mut changed = 0;
        for (row, fcfs) in table.cmin.iter_mut().zip(&self.capacity) {
            for (c, &f) in row.iter_mut().zip(fcfs) {
                if f < *c {
                    *c = f;
                    changed += 1;
                }
            }
        }
        changed
    }
}

/// Requests of `arrivals` (non-decreasing) that FCFS at `cap` finishes within
/// `deadline` of their arrival: the full-pass reference of the search's probe.
pub fn fcfs_on_time(arrivals: &[Nanos], cap: Capacity, deadline: Nanos) -> u64 {
    let n = arrivals.len() as u64;
    let (on_time, _) = lindley(arrivals, cap, deadline, n, n);
    on_time
}

/// Lindley's recursion at `cap`, stopping once `need` requests are on time or more than
/// `allowed` are late: (on-time requests counted, requests stepped through).
#[inline]
fn lindley(arrivals: &[Nanos], cap: Capacity, deadline: Nanos, need: u64, allowed: u64) -> (u64, u64) {
    let milli = cap.milli() as u128;
    let limit = deadline as u128 * milli;
    let service = SERVICE_UNITS as u128;
    let mut backlog: u128 = 0; // finish of the previous request − the current arrival, scaled
    let mut last = arrivals.first().copied().unwrap_or(0);
    let (mut on_time, mut late) = (0u64, 0u64);
    for (k, &a) in arrivals.iter().enumerate() {
        backlog = backlog.saturating_sub((a - last) as u128 * milli) + service;
        last = a;
        if backlog <= limit {
            on_time += 1;
            if on_time >= need {
                return (on_time, k as u64 + 1);
            }
        } else {
            late += 1;
            if late > allowed {
                return (on_time, k as u64 + 1);
            }
        }
    }
    (on_time, arrivals.len() as u64)
}

/// Whether FCFS at `milli` milli-IOPS finishes `need` requests within `deadline`.
fn meets(arrivals: &[Nanos], milli: u64, deadline: Nanos, need: u64, probes: &mut u64, steps: &mut u64) -> bool {
    let n = arrivals.len() as u64;
    let (on_time, stepped) = lindley(arrivals, Capacity::from_milli(milli), deadline, need, n - need);
    *probes += 1;
    *steps += stepped;
    on_time >= need
}

/// FCFS's capacity for every cell of `table` (a Cmin table of `arrivals`; see the module
/// notes for the bracket it gives).
pub fn fcfs_capacity_table(arrivals: &[Nanos], table: &CapacityTable) -> Result<FcfsTable> {
    if arrivals.len() as u64 != table.requests || arrivals.is_empty() {
        return Err(Error::InvalidInput(format!(
            "fcfs capacity: {} arrivals for a table of {} requests",
            arrivals.len(),
            table.requests
        )));
    }
    if let Some(i) = arrivals.windows(2).position(|w| w[1] < w[0]) {
        return Err(Error::InvalidInput(format!(
            "request {} arrives before the previous request: sort the trace by time",
            i + 1
        )));
    }
    let n = arrivals.len() as u64;
    let (nd, nf) = (table.deadlines.len(), table.fractions.len());
    let (mut probes, mut steps) = (0u64, 0u64);
    // The top of every bracket: Cmin(100 %, δ), checked (a near-tie in the closed form's
    // floating-point scan could leave it a grid step short).
    let (all, _) = cmin_all_many(arrivals, &table.deadlines);
    let mut top: Vec<u64> = Vec::with_capacity(nd);
    for (&d, c) in table.deadlines.iter().zip(&all) {
        let mut hi = c.milli();
        while !meets(arrivals, hi, d, n, &mut probes, &mut steps) {
            hi += (hi as f64 * TOLERANCE).ceil().max(1.0) as u64;
        }
        top.push(hi);
    }
    // Highest fraction first, smallest deadline first: every cell found bounds the next.
    let mut fs: Vec<usize> = (0..nf).collect();
    fs.sort_by(|&a, &b| table.fractions[b].total_cmp(&table.fractions[a]));
    let mut ds: Vec<usize> = (0..nd).collect();
    ds.sort_by_key(|&i| table.deadlines[i]);
    // (infeasible lo, feasible hi] per cell, milli-IOPS; None until searched.
    let mut found: Vec<Vec<Option<(u64, u64)>>> = vec![vec![None; nf]; nd];
    for &di in &ds {
        let d = table.deadlines[di];
        for &fi in &fs {
            let f = table.fractions[fi];
            let need = needed(n, f);
            if need == 0 {
                found[di][fi] = Some((0, 1));
                continue;
            }
            let cmin = table.cmin[di][fi].milli();
            let mut lo = ((cmin as f64 / (1.0 + TOLERANCE)).floor() as u64).min(cmin - 1).saturating_sub(1);
            let mut hi = top[di];
            for (dj, row) in found.iter().enumerate() {
                for (fj, cell) in row.iter().enumerate() {
                    let Some((l, h)) = *cell else { continue };
                    let (dd, ff) = (table.deadlines[dj], table.fractions[fj]);
                    if dd <= d && ff >= f {
                        hi = hi.min(h); // a stricter target FCFS met
                    }
                    if dd >= d && ff <= f {
                        lo = lo.max(l); // a looser target FCFS missed
                    }
                }
            }
            while !(hi <= lo + 1 || (hi - lo) as f64 <= lo as f64 * TOLERANCE) {
                let mid = if lo == 0 {
                    hi / 2
                } else {
                    ((lo as f64 * hi as f64).sqrt().round() as u64).clamp(lo + 1, hi - 1)
                };
                if meets(arrivals, mid, d, need, &mut probes, &mut steps) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            found[di][fi] = Some((lo, hi));
        }
    }
    let capacity =
        found.iter().map(|row| row.iter().map(|c| Capacity::from_milli(c.map_or(1, |(_, h)| h))).collect()).collect();
    Ok(FcfsTable { capacity, probes, steps })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;
    use crate::shaping::cmin::tests_support::bursty;
    use crate::shaping::cmin::{capacity_table, capacity_table_bisect};
    use crate::shaping::rtt::admitted_count;
    use crate::time::NS_PER_MS;

    /// Lindley's recursion in f64 seconds, written as in a textbook: the reference.
    fn on_time_f64(arr: &[Nanos], iops: f64, d: Nanos) -> u64 {
        let mut finish = 0f64;
        let mut ok = 0;
        for &a in arr {
            let a = a as f64 / 1e9;
            finish = finish.max(a) + 1.0 / iops;
            ok += ((finish - a) * 1e9 <= d as f64 + 1e-3) as u64;
        }
        ok
    }

    /// The least grid capacity at which FCFS meets `need`, by bisection down to one grid
    /// step from the always-sufficient n/δ.
    fn exact(arr: &[Nanos], need: u64, d: Nanos) -> u64 {
        let n = arr.len() as u64;
        let (mut lo, mut hi) = (0u64, (n as u128 * SERVICE_UNITS as u128).div_ceil(d as u128) as u64 + 1);
        while hi > lo + 1 {
            let mid = lo + (hi - lo) / 2;
            if fcfs_on_time(arr, Capacity::from_milli(mid), d) >= need {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }

    #[test]
    fn a_burst_and_a_late_request_by_hand() {
        // Nine requests at 0 and one at 1 ms, δ = 10 ms: the numbers can be redone on paper.
        let arr: Vec<Nanos> = [0; 9].iter().copied().chain([NS_PER_MS]).collect();
        let d = 10 * NS_PER_MS;
        // FCFS at 900 IOPS: the ninth of the burst ends at 9/900 s = 10 ms (on time), the
        // late one at 10/900 s = 11.11 ms, 10.11 ms after it arrived (late): 9 on time.
        assert_eq!(fcfs_on_time(&arr, Capacity::from_milli(900_000), d), 9);
        // At 899.999 the ninth ends 10.00001 ms: 8 on time.
        assert_eq!(fcfs_on_time(&arr, Capacity::from_milli(899_999), d), 8);
        // All ten: the late one must end by 11 ms, 10/C ≤ 11 ms: C ≥ 909.0909… IOPS.
        assert_eq!(fcfs_on_time(&arr, Capacity::from_milli(909_091), d), 10);
        assert_eq!(fcfs_on_time(&arr, Capacity::from_milli(909_090), d), 9);
        // Any schedule needs less for nine: drop one of the burst, finish the other 8 by
        // 10 ms (C ≥ 800) and the late one by 11 ms (9/C ≤ 11 ms): C ≥ 818.18… IOPS.
        // RTT finds it: at 818.182 the late one ends 9.99999 ms after arriving.
        assert_eq!(admitted_count(&arr, Capacity::from_milli(818_182), d).unwrap(), 9);
        assert_eq!(admitted_count(&arr, Capacity::from_milli(818_181), d).unwrap(), 8);
        let mut t = capacity_table(&arr, &[d], &[0.9, 1.0]).unwrap();
        let f = fcfs_capacity_table(&arr, &t).unwrap();
        let got: Vec<u64> = f.capacity[0].iter().map(|c| c.milli()).collect();
        assert!((900_000..=900_900).contains(&got[0]), "{got:?}");
        assert_eq!(got[1], 909_091, "at 100 % FCFS needs exactly Cmin(100 %)");
        assert_eq!(t.cmin[0][1].milli(), 909_091);
        assert!((818_182..=819_000).contains(&t.cmin[0][0].milli()), "{:?}", t.cmin);
        assert_eq!(f.tighten(&mut t), 0, "FCFS needs more than Cmin for 90 %: nothing to tighten");
    }

    #[test]
    fn the_kernel_is_lindleys_recursion() {
        let mut rng = SimRng::new(5);
        for _ in 0..300 {
            let n = 1 + rng.below(200) as usize;
            let mut t = 0;
            let arr: Vec<Nanos> = (0..n)
                .map(|_| {
                    if rng.bernoulli(0.6) {
                        t += rng.below(3 * NS_PER_MS);
                    }
                    t
                })
                .collect();
            // Capacities whose 1/C is a whole number of µs, so every time is a whole ns.
            const US: [u64; 10] = [50, 64, 125, 200, 250, 400, 625, 1_000, 2_500, 5_000];
            let us = US[rng.below(US.len() as u64) as usize];
            let milli = 1_000_000_000 / us;
            let d = 1 + rng.below(30 * NS_PER_MS);
            assert_eq!(fcfs_on_time(&arr, Capacity::from_milli(milli), d), on_time_f64(&arr, milli as f64 / 1e3, d));
        }
    }

    #[test]
    fn each_cell_is_within_tolerance_of_the_least_and_never_below_cmin() {
        let mut rng = SimRng::new(8);
        let fs = [0.5, 0.9, 0.95, 0.99, 0.999, 1.0];
        for case in 0..6 {
            let arr = bursty(2_000 + rng.below(6_000) as usize, 100.0 + rng.below(500) as f64, case);
            let ds = [2 * NS_PER_MS, 10 * NS_PER_MS, 50 * NS_PER_MS];
            for bisect in [false, true] {
                let mut t = if bisect { capacity_table_bisect(&arr, &ds, &fs) } else { capacity_table(&arr, &ds, &fs) }
                    .unwrap();
                let f = fcfs_capacity_table(&arr, &t).unwrap();
                let before = t.cmin.clone();
                f.tighten(&mut t);
                for (di, &d) in ds.iter().enumerate() {
                    for (fi, &need) in t.needed.iter().enumerate() {
                        let least = exact(&arr, need, d);
                        let got = f.capacity[di][fi].milli();
                        assert!(
                            got >= least && got as f64 <= least as f64 * (1.0 + TOLERANCE) + 1.0,
                            "case {case} δ={d} f={}: {got} vs least {least}",
                            fs[fi]
                        );
                        assert!(got >= t.cmin[di][fi].milli());
                        let c = t.cmin[di][fi];
                        assert!(c <= before[di][fi]);
                        assert!(admitted_count(&arr, c, d).unwrap() >= need, "tightened Cmin stays feasible");
                    }
                    assert_eq!(f.capacity[di][fs.len() - 1], t.cmin[di][fs.len() - 1], "FCFS = Cmin at 100 %");
                    if !bisect {
                        assert_eq!(before[di][fs.len() - 1], t.cmin[di][fs.len() - 1], "the closed form is exact");
                    }
                    assert!(f.capacity[di].windows(2).all(|w| w[0] <= w[1]), "grows with f");
                    assert!(t.cmin[di].windows(2).all(|w| w[0] <= w[1]), "tightened Cmin grows with f");
                }
                for fi in 0..fs.len() {
                    assert!(f.capacity.windows(2).all(|w| w[0][fi] >= w[1][fi]), "shrinks as δ grows");
                }
                // About log2(ln(hi/lo)/ln(1.001)) probes a cell, many stopped early.
                assert!(f.probes <= 20 * (ds.len() * fs.len()) as u64, "{} probes", f.probes);
            }
        }
    }

    #[test]
    fn a_table_of_another_trace_is_refused() {
        let t = capacity_table(&[0, 1, 2], &[NS_PER_MS], &[0.9]).unwrap();
        assert!(fcfs_capacity_table(&[0, 1], &t).unwrap_err().to_string().contains("2 arrivals for a table of 3"));
    }
}
