//! Cmin(100 %, δ) in closed form: the capacity at which RTT admits every request of a
//! trace (seed 000 §4.2, Table 4.1's last column; SPEC "Algorithm notes → Cmin").
//!
//! ## The formula
//! Every request meets δ at capacity C iff, for every pair of requests i ≤ j, the
//! j − i + 1 requests arriving in [a_i, a_j] can all be served by a_j + δ:
//! `(j − i + 1)/C ≤ a_j − a_i + δ` (Lemma 1 of the thesis with zero drops; sufficiency
//! is RTT's optimality). So
//!
//! ```text
//! Cmin(100 %, δ) = max over i ≤ j of (j − i + 1) / (a_j − a_i + δ).
//! ```
//!
//! ## Computing the maximum ratio
//! **Dinkelbach's iteration.** For a ratio r, `g(r) = max_{i≤j} (j − i + 1) − r·(a_j − a_i + δ)`
//! is one O(n) pass: with v_j = r·a_j − j it is `max_j (max_{i≤j} v_i) − v_j + 1 − r·δ`,
//! a running maximum. g(r) > 0 iff some pair beats r, and the argmax pair's own ratio
//! is the next r; the sequence increases to the optimum superlinearly and stops when
//! the argmax pair is no better (an exact integer comparison of two fractions).
//!
//! **A good start.** From the trace's average rate Dinkelbach needs 9–13 passes on a
//! 10 M-request bursty trace. Any pair's ratio is a valid start, so we first take the
//! best of the windows of 2^k consecutive requests (k = 0 … [`MAX_WINDOW_LOG2`]):
//! `(w + 1)/(min_j (a_j − a_{j−w}) + δ)`. The minimum spans do not depend on δ, so one
//! cache-blocked sweep serves every deadline, and Dinkelbach then needs 2–3 passes.
//! The passes of all deadlines run interleaved in one sweep (independent dependency
//! chains, [`DEADLINES_PER_SWEEP`] at a time).
//!
//! **Exact on the grid.** The result is the argmax pair's ratio rounded up to the
//! 1/1000 IOPS grid with integer arithmetic, so it is a capacity that pair really
//! needs: one grid step less is provably infeasible. The floating-point scan could, in
//! a near-tie, pick a pair a hair below the true maximum; the planner therefore checks
//! the result with one RTT probe ([`super::cmin()`]).

use crate::shaping::lanes::has_avx2;
use crate::shaping::rtt::{Capacity, SERVICE_UNITS};
use crate::time::Nanos;

/// Largest window (2^k consecutive requests) of the starting bound: 2^16 keeps both ends
/// of every window within a 1 MB second-level cache of the block being swept.
pub const MAX_WINDOW_LOG2: u32 = 16;

/// Arrivals per block of the window sweep (2^15 · 8 B = 256 KB).
const WINDOW_BLOCK: usize = 1 << 15;

/// Deadlines whose Dinkelbach passes share one sweep of the arrivals.
pub const DEADLINES_PER_SWEEP: usize = 4;

/// A pair of requests as (requests in it, ns it spans + δ): the capacity it needs is
/// the ratio.
type Pair = (u64, u64);

/// `a > b` for ratios `a.0/a.1`, `b.0/b.1` (exact).
fn beats(a: Pair, b: Pair) -> bool {
    a.0 as u128 * b.1 as u128 > b.0 as u128 * a.1 as u128
}

/// `min_j (a_j − a_{j−w})` over one block, as i64 (the compiler vectorises an i64 min;
/// spans are < 2^63).
#[inline(always)]
fn block_min(hi: &[Nanos], lo: &[Nanos]) -> i64 {
    let mut m = i64::MAX;
    for (&a, &b) in hi.iter().zip(lo) {
        let d = (a - b) as i64;
        m = if d < m { d } else { m };
    }
    m
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn block_min_avx2(hi: &[Nanos], lo: &[Nanos]) -> i64 {
    block_min(hi, lo)
}

/// `(w, min_j (a_j − a_{j−w}))` for w = 1, 2, 4, … < n (at most 2^MAX_WINDOW_LOG2).
fn min_spans(arrivals: &[Nanos], simd: bool) -> Vec<(u64, u64)> {
    let n = arrivals.len();
    let ws: Vec<usize> = (0..=MAX_WINDOW_LOG2).map(|k| 1usize << k).take_while(|&w| w < n).collect();
    let mut best = vec![i64::MAX; ws.len()];
    let mut start = 0;
    while start < n {
        let end = (start + WINDOW_BLOCK).min(n);
        for (k, &w) in ws.iter().enumerate() {
            let from = start.max(w);
            if from >= end {
                continue;
            }
            let (hi, lo) = (&arrivals[from..end], &arrivals[from - w..end - w]);
            #[cfg(target_arch = "x86_64")]
            let m = if simd {
                // SAFETY: `simd` is true only when `has_avx2()` found AVX2 on this CPU.
                unsafe { block_min_avx2(hi, lo) }
            } else {
                block_min(hi, lo)
            };
            #[cfg(not(target_arch = "x86_64"))]
            let m = block_min(hi, lo);
            best[k] = best[k].min(m);
        }
        start = end;
    }
    ws.iter().map(|&w| w as u64).zip(best.into_iter().map(|m| m as u64)).collect()
}

/// One Dinkelbach pass for [`DEADLINES_PER_SWEEP`] ratios at once: the argmax pair
/// (i, j) of g(r) for each. Branch-free (indices carried as exact f64) so that the four
/// ratios share vector instructions.
#[inline(always)]
fn dinkelbach_pass_generic(
    arrivals: &[Nanos],
    r: &[f64; DEADLINES_PER_SWEEP],
) -> [(usize, usize); DEADLINES_PER_SWEEP] {
    const K: usize = DEADLINES_PER_SWEEP;
    let a0 = arrivals[0];
    let mut head = [f64::NEG_INFINITY; K];
    let mut head_i = [0f64; K];
    let mut best = [f64::NEG_INFINITY; K];
    let mut pi = [0f64; K];
    let mut pj = [0f64; K];
    let mut jf = 0f64;
    for &a in arrivals {
        let x = (a - a0) as f64;
        for l in 0..K {
            let v = r[l] * x - jf;
            let up = v > head[l];
            head[l] = if up { v } else { head[l] };
            head_i[l] = if up { jf } else { head_i[l] };
            // g = (head − v) + 1 − r·δ: the constant does not move the argmax.
            let g = head[l] - v;
            let better = g > best[l];
            best[l] = if better { g } else { best[l] };
            pi[l] = if better { head_i[l] } else { pi[l] };
            pj[l] = if better { jf } else { pj[l] };
        }
        jf += 1.0;
    }
    std::array::from_fn(|l| (pi[l] as usize, pj[l] as usize))
}

/// [`dinkelbach_pass_generic`] with the four ratios in one AVX2 register (the compiler
/// does not vectorise the argmax bookkeeping on its own). Same arithmetic except the
/// fused `r·x − j`, which can only move a near-tie (the planner checks the result).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn dinkelbach_pass_avx2(arrivals: &[Nanos], r: &[f64; DEADLINES_PER_SWEEP]) -> [(usize, usize); DEADLINES_PER_SWEEP] {
    use std::arch::x86_64::*;
    const _: () = assert!(DEADLINES_PER_SWEEP == 4, "one __m256d holds four ratios");
    let a0 = arrivals[0];
    let rv = _mm256_setr_pd(r[0], r[1], r[2], r[3]);
    let mut head = _mm256_set1_pd(f64::NEG_INFINITY);
    let mut best = _mm256_set1_pd(f64::NEG_INFINITY);
    let (mut head_i, mut pi, mut pj) = (_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd());
    let mut jf = 0f64;
    for &a in arrivals {
        let x = _mm256_set1_pd((a - a0) as f64);
        let j = _mm256_set1_pd(jf);
        let v = _mm256_fmsub_pd(rv, x, j);
        let up = _mm256_cmp_pd::<_CMP_GT_OQ>(v, head);
        head = _mm256_blendv_pd(head, v, up);
        head_i = _mm256_blendv_pd(head_i, j, up);
        let g = _mm256_sub_pd(head, v);
        let better = _mm256_cmp_pd::<_CMP_GT_OQ>(g, best);
        best = _mm256_blendv_pd(best, g, better);
        pi = _mm256_blendv_pd(pi, head_i, better);
        pj = _mm256_blendv_pd(pj, j, better);
        jf += 1.0;
    }
    let (mut i4, mut j4) = ([0f64; 4], [0f64; 4]);
    // SAFETY: each array holds exactly the four f64 of one __m256d.
    unsafe {
        _mm256_storeu_pd(i4.as_mut_ptr(), pi);
        _mm256_storeu_pd(j4.as_mut_ptr(), pj);
    }
    std::array::from_fn(|l| (i4[l] as usize, j4[l] as usize))
}

fn dinkelbach_pass(
    arrivals: &[Nanos],
    r: &[f64; DEADLINES_PER_SWEEP],
    simd: bool,
) -> [(usize, usize); DEADLINES_PER_SWEEP] {
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is true only when `has_avx2()` found AVX2 and FMA on this CPU.
        return unsafe { dinkelbach_pass_avx2(arrivals, r) };
    }
    let _ = simd;
    dinkelbach_pass_generic(arrivals, r)
}

/// Cmin(100 %, δ) for every deadline (arrivals non-empty and non-decreasing), with the
/// number of sweeps over the arrivals it took (the window sweep included).
pub fn cmin_all_many(arrivals: &[Nanos], deadlines: &[Nanos]) -> (Vec<Capacity>, u64) {
    cmin_all_with(arrivals, deadlines, has_avx2())
}

/// [`cmin_all_many`]; `simd`: use the AVX2 kernels (only when [`has_avx2()`]).
pub fn cmin_all_with(arrivals: &[Nanos], deadlines: &[Nanos], simd: bool) -> (Vec<Capacity>, u64) {
    let simd = simd && has_avx2();
    let n = arrivals.len();
    let span = arrivals[n - 1] - arrivals[0];
    let spans = min_spans(arrivals, simd);
    let mut sweeps = 1u64;
    // Starting pairs: the whole trace, one request, the best window.
    let mut best: Vec<Pair> = deadlines
        .iter()
        .map(|&d| {
            let mut b = (n as u64, span + d);
            for cand in std::iter::once((1, d)).chain(spans.iter().map(|&(w, m)| (w + 1, m + d))) {
                if beats(cand, b) {
                    b = cand;
                }
            }
            b
        })
        .collect();
    let mut open: Vec<usize> = (0..deadlines.len()).collect();
    while !open.is_empty() {
        sweeps += 1;
        let mut still = Vec::new();
        for group in open.chunks(DEADLINES_PER_SWEEP) {
            let mut r = [0.0; DEADLINES_PER_SWEEP];
            for l in 0..DEADLINES_PER_SWEEP {
                let b = best[group[l.min(group.len() - 1)]];
                r[l] = b.0 as f64 / b.1 as f64;
            }
            let pairs = dinkelbach_pass(arrivals, &r, simd);
            for (&k, &(i, j)) in group.iter().zip(&pairs) {
                let cand = ((j - i + 1) as u64, arrivals[j] - arrivals[i] + deadlines[k]);
                if beats(cand, best[k]) {
                    best[k] = cand;
                    still.push(k);
                }
            }
        }
        open = still;
    }
    let caps = best
        .iter()
        .map(|&(count, ns)| {
            // Feasible for the pair iff milli · ns ≥ count · SERVICE_UNITS.
            let milli = (count as u128 * SERVICE_UNITS as u128).div_ceil(ns as u128);
            Capacity::from_milli(milli.min(u64::MAX as u128) as u64)
        })
        .collect();
    (caps, sweeps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;
    use crate::shaping::cmin::tests_support::bursty;
    use crate::shaping::rtt::admitted_count;
    use crate::time::NS_PER_MS;

    /// max over pairs by brute force, as an exact fraction.
    fn brute(arr: &[Nanos], d: Nanos) -> Capacity {
        let mut best: Pair = (1, d);
        for i in 0..arr.len() {
            for j in i..arr.len() {
                let c = ((j - i + 1) as u64, arr[j] - arr[i] + d);
                if beats(c, best) {
                    best = c;
                }
            }
        }
        Capacity::from_milli((best.0 as u128 * SERVICE_UNITS as u128).div_ceil(best.1 as u128) as u64)
    }

    #[test]
    fn closed_form_equals_the_brute_force_maximum_and_rtt() {
        let mut rng = SimRng::new(5);
        for _ in 0..300 {
            let n = 1 + rng.below(60) as usize;
            let mut t = 0;
            let arr: Vec<Nanos> = (0..n)
                .map(|_| {
                    t += rng.below(3) * rng.below(4 * NS_PER_MS);
                    t
                })
                .collect();
            let ds: Vec<Nanos> = (0..1 + rng.below(6)).map(|_| 1 + rng.below(20 * NS_PER_MS)).collect();
            let (caps, _) = cmin_all_with(&arr, &ds, false);
            assert_eq!(caps, cmin_all_many(&arr, &ds).0);
            for (&d, &c) in ds.iter().zip(&caps) {
                assert_eq!(c, brute(&arr, d), "{arr:?} δ={d}");
                assert_eq!(admitted_count(&arr, c, d).unwrap(), n as u64, "{arr:?} δ={d}");
                if c.milli() > 1 {
                    assert!(admitted_count(&arr, Capacity::from_milli(c.milli() - 1), d).unwrap() < n as u64);
                }
            }
        }
    }

    #[test]
    fn window_start_leaves_few_sweeps() {
        let arr = bursty(400_000, 300.0, 11);
        let ds = [5 * NS_PER_MS, 10 * NS_PER_MS, 20 * NS_PER_MS, 50 * NS_PER_MS];
        let (caps, sweeps) = cmin_all_many(&arr, &ds);
        // One window sweep + a few Dinkelbach sweeps shared by the four deadlines.
        assert!(sweeps <= 6, "{sweeps} sweeps");
        for (&d, &c) in ds.iter().zip(&caps) {
            assert_eq!(admitted_count(&arr, c, d).unwrap(), arr.len() as u64);
            assert!(admitted_count(&arr, Capacity::from_milli(c.milli() - 1), d).unwrap() < arr.len() as u64);
        }
    }
}
