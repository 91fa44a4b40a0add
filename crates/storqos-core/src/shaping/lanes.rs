//! Many RTT instances over one pass of the arrivals: the kernel of the capacity planner
//! ([`super::cmin()`]). Seed 000 §3.3.1 (Algorithm 1) for the rule, SPEC "Algorithm notes →
//! RTT" for its finish-time form; this file only makes it fast.
//!
//! ## The step
//! Per arrival and per lane (one lane = one RTT at its own capacity and deadline), in
//! the scaled units of [`super::rtt`] (1 unit = 1/milli ns, one service = 10^12 units):
//!
//! ```text
//! drained = max(backlog − gap·milli, 0)
//! admit   = drained ≤ limit − SERVICE          (limit = δ·milli)
//! backlog = drained + (admit ? SERVICE : 0);   drops += !admit
//! ```
//!
//! exactly [`super::rtt::Rtt::admit`], written without branches.
//!
//! ## Structure of arrays, f64, and why it is still exact
//! The lanes are kept as arrays `[f64; K]` (K a multiple of [`LANE_GROUP`]) and the step
//! is written once per lane, so the compiler turns it into vector instructions: with
//! AVX2 + FMA (detected at run time) four lanes per instruction, one fused
//! multiply-subtract, one max, one compare, one masked add per lane group and arrival.
//! The backlog chain of one lane is latency-bound (about 14 cycles per arrival), so
//! several lane groups interleave almost for free: a 24-lane pass costs about as much as
//! an 8-lane one (measured: 10 M arrivals, 24 lanes, ≈ 45 ms; 0.19 ns per arrival and
//! lane, against ≈ 1.5 ns for the scalar u64 kernel).
//!
//! f64 represents every integer below 2^53 exactly. Every quantity of the step is an
//! integer: backlog ≤ limit, drained ≤ limit, drained + SERVICE ≤ limit + SERVICE, and a
//! lane runs in f64 only when `limit + SERVICE < 2^53` ([`f64_exact`]; e.g. δ = 50 ms up
//! to 180 000 IOPS), so those are exact. The product gap·milli may exceed 2^53 (a long
//! idle gap): then the true `backlog − gap·milli` is negative, rounding (fused or not)
//! keeps it ≤ 0, and the max clamps it to 0 — the exact answer. Gaps are clamped to
//! [`GAP_CLAMP`] (< 2^53 ns, 52 days) before conversion, which changes nothing for the
//! same reason. Lanes outside the f64 range run in the u64 kernel (same step, integer).
//!
//! ## Early exits
//! The pass runs in chunks of [`CHUNK`] arrivals. After each chunk a lane with an
//! early-exit budget stops once its drops exceed the budget (too small for it: a burst
//! near the start settles it) or once even dropping every remaining request would stay
//! within the budget (big enough); the remaining lanes are packed and the pass goes on.

use crate::shaping::rtt::SERVICE_UNITS;
use crate::time::Nanos;

/// Most lanes in one pass: six groups of four. Beyond this the lanes' state no longer
/// fits the 16 vector registers of AVX2 and a pass costs proportionally more.
pub const MAX_LANES: usize = 24;

/// Lanes are run in groups of this many (one 256-bit vector of f64); a pass with a
/// number of lanes that is not a multiple pads with copies of its first lane.
pub const LANE_GROUP: usize = 4;

/// Arrivals processed between checks of the early exits (and of lanes to retire).
pub const CHUNK: usize = 1 << 14;

/// Gaps between arrivals are clamped to this before conversion to f64 (2^52 ns): any gap
/// longer than the deadline empties the backlog, so the clamp changes nothing.
pub const GAP_CLAMP: u64 = 1 << 52;

/// 2^53: integers below are exact in f64.
const F64_EXACT: u64 = 1 << 53;

const SERVICE: f64 = SERVICE_UNITS as f64;

/// One RTT run: capacity (milli-IOPS), deadline, admission limit `δ·milli` (scaled
/// units) and optional early exits on the drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lane {
    /// Capacity, milli-IOPS.
    pub milli: u64,
    /// Deadline δ, ns.
    pub deadline: Nanos,
    /// `δ · milli` (see [`crate::shaping::rtt::Capacity::limit_units`]).
    pub limit: u64,
    /// Stop once the drops exceed this (the capacity is too small for every budget up
    /// to it). `None`: never.
    pub stop_above: Option<u64>,
    /// Stop once the drops plus every remaining request stay within this (big enough
    /// for every budget from it up). `None`: never.
    pub stop_within: Option<u64>,
}

/// What one lane's pass proved about its drop count `d`: `drops_min ≤ d ≤ drops_max`
/// (equal when the lane ran to the end), and `estimate`, the drops so far extrapolated
/// to the whole trace when it stopped early (a guide for interpolation, never a verdict).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneResult {
    /// Lower bound on the drops.
    pub drops_min: u64,
    /// Upper bound on the drops (`u64::MAX`: it stopped over budget).
    pub drops_max: u64,
    /// Best estimate of the drops (exact when `drops_min == drops_max`).
    pub estimate: u64,
    /// Arrivals this lane processed (its share of the work).
    pub steps: u64,
}

/// Can this lane run in the f64 kernel without losing exactness (module notes)?
pub fn f64_exact(lane: &Lane) -> bool {
    lane.limit.checked_add(SERVICE_UNITS).is_some_and(|x| x < F64_EXACT) && lane.milli < F64_EXACT
}

/// The f64 step over one chunk for `K` lanes. `FMA`: use a fused multiply-subtract
/// (only where the target has one; otherwise `mul_add` would be a library call).
#[inline(always)]
fn chunk_f64<const K: usize, const FMA: bool>(
    arr: &[Nanos],
    prev: &mut Nanos,
    cap: &[f64; K],
    thr: &[f64; K],
    backlog: &mut [f64; K],
    drops: &mut [u64; K],
) {
    let mut b = *backlog;
    let mut d = *drops;
    let mut p = *prev;
    for &a in arr {
        let gap = (a - p).min(GAP_CLAMP) as f64;
        p = a;
        for l in 0..K {
            let t = if FMA { (-gap).mul_add(cap[l], b[l]) } else { b[l] - gap * cap[l] };
            let drained = if t > 0.0 { t } else { 0.0 };
            let admit = drained <= thr[l];
            b[l] = drained + if admit { SERVICE } else { 0.0 };
            // An integer count: the compiler subtracts the compare mask (one instruction).
            d[l] += (!admit) as u64;
        }
    }
    *prev = p;
    *backlog = b;
    *drops = d;
}

/// The portable kernel (baseline instruction set: two lanes per SSE2 instruction).
#[inline(never)]
fn chunk_portable<const K: usize>(
    arr: &[Nanos],
    prev: &mut Nanos,
    cap: &[f64; K],
    thr: &[f64; K],
    backlog: &mut [f64; K],
    drops: &mut [u64; K],
) {
    chunk_f64::<K, false>(arr, prev, cap, thr, backlog, drops)
}

/// The AVX2 + FMA kernel (four lanes per instruction).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn chunk_avx2<const K: usize>(
    arr: &[Nanos],
    prev: &mut Nanos,
    cap: &[f64; K],
    thr: &[f64; K],
    backlog: &mut [f64; K],
    drops: &mut [u64; K],
) {
    chunk_f64::<K, true>(arr, prev, cap, thr, backlog, drops)
}

/// Whether the AVX2 + FMA kernel can run here (cached by the standard library).
#[inline]
pub fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Lane state of a pass in the f64 kernel, padded to a multiple of [`LANE_GROUP`].
struct F64Lanes {
    cap: [f64; MAX_LANES],
    thr: [f64; MAX_LANES],
    backlog: [f64; MAX_LANES],
    drops: [u64; MAX_LANES],
}

fn run_chunk_f64<const K: usize>(arr: &[Nanos], prev: &mut Nanos, s: &mut F64Lanes, simd: bool) {
    let cap: &[f64; K] = s.cap[..K].try_into().expect("K ≤ MAX_LANES");
    let thr: &[f64; K] = s.thr[..K].try_into().expect("K ≤ MAX_LANES");
    let mut b: [f64; K] = s.backlog[..K].try_into().expect("K ≤ MAX_LANES");
    let mut d: [u64; K] = s.drops[..K].try_into().expect("K ≤ MAX_LANES");
    #[cfg(target_arch = "x86_64")]
    if simd {
        // SAFETY: `simd` is true only when `has_avx2()` found AVX2 and FMA on this CPU.
        unsafe { chunk_avx2::<K>(arr, prev, cap, thr, &mut b, &mut d) };
        s.backlog[..K].copy_from_slice(&b);
        s.drops[..K].copy_from_slice(&d);
        return;
    }
    let _ = simd;
    chunk_portable::<K>(arr, prev, cap, thr, &mut b, &mut d);
    s.backlog[..K].copy_from_slice(&b);
    s.drops[..K].copy_from_slice(&d);
}

fn dispatch_f64(arr: &[Nanos], prev: &mut Nanos, s: &mut F64Lanes, padded: usize, simd: bool) {
    match padded {
        4 => run_chunk_f64::<4>(arr, prev, s, simd),
        8 => run_chunk_f64::<8>(arr, prev, s, simd),
        12 => run_chunk_f64::<12>(arr, prev, s, simd),
        16 => run_chunk_f64::<16>(arr, prev, s, simd),
        20 => run_chunk_f64::<20>(arr, prev, s, simd),
        24 => run_chunk_f64::<24>(arr, prev, s, simd),
        _ => unreachable!("lanes are padded to a multiple of LANE_GROUP ≤ MAX_LANES"),
    }
}

/// The u64 step (the integer form of [`crate::shaping::rtt::Rtt::admit`]) for lanes
/// outside the f64 range: one lane at a time.
fn chunk_u64(arr: &[Nanos], prev: Nanos, lane: &Lane, backlog: &mut u64, drops: &mut u64) {
    let mut p = prev;
    let (mut b, mut d) = (*backlog, *drops);
    for &a in arr {
        let gap = a - p;
        p = a;
        let drained = b.saturating_sub(gap.min(lane.deadline) * lane.milli);
        let after = drained + SERVICE_UNITS;
        let ok = after <= lane.limit;
        b = if ok { after } else { drained };
        d += (!ok) as u64;
    }
    *backlog = b;
    *drops = d;
}

/// Run up to [`MAX_LANES`] RTT instances over `arr` in one pass (early exits as in the
/// module notes). `simd`: use the AVX2 kernel (pass [`has_avx2()`]; `false` forces the
/// portable one, for tests).
pub fn run_lanes(arr: &[Nanos], lanes: &[Lane], simd: bool) -> Vec<LaneResult> {
    assert!(!lanes.is_empty() && lanes.len() <= MAX_LANES, "1..=MAX_LANES lanes per pass");
    let n = arr.len() as u64;
    let mut result = vec![LaneResult { drops_min: 0, drops_max: 0, estimate: 0, steps: 0 }; lanes.len()];
    let exact = lanes.iter().all(f64_exact);
    // Active lanes: index into `lanes`, packed at the front of the state arrays.
    let mut active: Vec<usize> = (0..lanes.len()).collect();
    let mut s =
        F64Lanes { cap: [0.0; MAX_LANES], thr: [0.0; MAX_LANES], backlog: [0.0; MAX_LANES], drops: [0; MAX_LANES] };
    let mut ub = vec![0u64; lanes.len()];
    let mut ud = vec![0u64; lanes.len()];
    let fill = |s: &mut F64Lanes, active: &[usize]| {
        let k = active.len();
        for (i, &j) in active.iter().enumerate() {
            s.cap[i] = lanes[j].milli as f64;
            s.thr[i] = lanes[j].limit as f64 - SERVICE;
        }
        // Padding lanes repeat the first active lane (their results are ignored).
        for i in k..k.next_multiple_of(LANE_GROUP) {
            s.cap[i] = s.cap[0];
            s.thr[i] = s.thr[0];
            s.backlog[i] = s.backlog[0];
            s.drops[i] = s.drops[0];
        }
    };
    fill(&mut s, &active);
    let mut prev = arr.first().copied().unwrap_or(0);
    let mut done = 0u64;
    for chunk in arr.chunks(CHUNK) {
        if exact {
            let padded = active.len().next_multiple_of(LANE_GROUP);
            dispatch_f64(chunk, &mut prev, &mut s, padded, simd);
        } else {
            for (i, &j) in active.iter().enumerate() {
                chunk_u64(chunk, prev, &lanes[j], &mut ub[i], &mut ud[i]);
            }
            prev = *chunk.last().expect("chunks are non-empty");
        }
        done += chunk.len() as u64;
        let remaining = n - done;
        let extrapolate = |d: u64| (d as u128 * n as u128 / done as u128) as u64;
        let mut k = 0;
        for i in 0..active.len() {
            let j = active[i];
            let d = if exact { s.drops[i] } else { ud[i] };
            let (lane, more) = (&lanes[j], remaining > 0);
            let settled = if more && lane.stop_above.is_some_and(|b| d > b) {
                Some(LaneResult { drops_min: d, drops_max: u64::MAX, estimate: extrapolate(d).max(d), steps: done })
            } else if more && lane.stop_within.is_some_and(|b| d + remaining <= b) {
                Some(LaneResult {
                    drops_min: d,
                    drops_max: d + remaining,
                    estimate: extrapolate(d).min(d + remaining),
                    steps: done,
                })
            } else {
                None
            };
            match settled {
                Some(r) => result[j] = r,
                None => {
                    active[k] = j;
                    s.cap[k] = s.cap[i];
                    s.thr[k] = s.thr[i];
                    s.backlog[k] = s.backlog[i];
                    s.drops[k] = s.drops[i];
                    ub[k] = ub[i];
                    ud[k] = ud[i];
                    k += 1;
                }
            }
        }
        if k < active.len() {
            active.truncate(k);
            if k == 0 {
                return result;
            }
            fill(&mut s, &active);
        }
    }
    for (i, &j) in active.iter().enumerate() {
        let d = if exact { s.drops[i] } else { ud[i] };
        result[j] = LaneResult { drops_min: d, drops_max: d, estimate: d, steps: n };
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shaping::cmin::tests_support::bursty;
    use crate::shaping::rtt::{admitted_count, Capacity};
    use crate::time::NS_PER_MS;

    fn lane(milli: u64, deadline: Nanos, budget: Option<u64>) -> Lane {
        let limit = Capacity::from_milli(milli).limit_units(deadline).unwrap();
        Lane { milli, deadline, limit, stop_above: budget, stop_within: budget }
    }

    #[test]
    fn every_kernel_agrees_with_the_single_lane_rtt() {
        let arr = bursty(60_000, 500.0, 3);
        let n = arr.len() as u64;
        // 1..=24 lanes (padding), capacities with fractional milli parts, a 1 µs
        // deadline (C·δ < 1: nothing fits) and a huge one (outside the f64 range).
        for k in [1usize, 3, 4, 7, 13, 24] {
            let lanes: Vec<Lane> = (0..k)
                .map(|i| {
                    lane(
                        2_500_123 + i as u64 * 313_377,
                        [2 * NS_PER_MS, 10 * NS_PER_MS, 1_000, 50 * NS_PER_MS][i % 4],
                        None,
                    )
                })
                .collect();
            let truth: Vec<u64> = lanes
                .iter()
                .map(|l| n - admitted_count(&arr, Capacity::from_milli(l.milli), l.deadline).unwrap())
                .collect();
            assert!(truth.iter().any(|&t| t > 0 && t < n / 5), "{truth:?}");
            for simd in [false, has_avx2()] {
                let got: Vec<u64> = run_lanes(&arr, &lanes, simd).iter().map(|r| r.drops_min).collect();
                assert_eq!(got, truth, "k = {k}, simd = {simd}");
            }
        }
        let big = lane(20_000_000, 1_000 * NS_PER_MS, None);
        assert!(!f64_exact(&big));
        let truth = n - admitted_count(&arr, Capacity::from_milli(big.milli), big.deadline).unwrap();
        assert_eq!(run_lanes(&arr, &[big, lane(900_000, NS_PER_MS, None)], true)[0].drops_min, truth);
    }

    #[test]
    fn early_exits_bound_the_true_count_and_settle_the_verdict() {
        let arr = bursty(100_000, 500.0, 4);
        let n = arr.len() as u64;
        let caps: Vec<(u64, Nanos)> =
            (0..11).map(|i| (1_000_000 + i * 400_000, [2, 10, 50][i as usize % 3] * NS_PER_MS)).collect();
        let truth: Vec<u64> =
            caps.iter().map(|&(c, d)| n - admitted_count(&arr, Capacity::from_milli(c), d).unwrap()).collect();
        for budget in [0, 500, 5_000, n / 2, n] {
            let lanes: Vec<Lane> = caps.iter().map(|&(c, d)| lane(c, d, Some(budget))).collect();
            for (r, &d) in run_lanes(&arr, &lanes, has_avx2()).iter().zip(&truth) {
                assert!(r.drops_min <= d && d <= r.drops_max, "{r:?} vs {d}");
                assert_eq!(r.drops_max <= budget, d <= budget, "{r:?} vs {d}, budget {budget}");
                assert_eq!(r.drops_min > budget, d > budget, "{r:?} vs {d}, budget {budget}");
                assert!(r.steps <= n);
            }
        }
    }
}
