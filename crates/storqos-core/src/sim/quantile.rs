//! Exact nearest-rank quantiles of a batch of response times (the per-window p50 / p95 /
//! p99 of every window series, the monitors' per-period percentiles), by partial sorts
//! (`select_nth_unstable`) on a shrinking suffix.
//!
//! (A bucketed radix selection — one counting pass, then selection inside the bins that
//! hold the wanted ranks — was measured and is slower at window sizes of 10²–10⁴:
//! ≈ 47 vs ≈ 32 instructions per value under callgrind.)

use crate::time::Nanos;

/// 0-based position of the nearest-rank `q`-quantile (the ⌈q·n⌉-th smallest) among `n`
/// values (n ≥ 1).
#[inline]
fn rank(q: f64, n: usize) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n) - 1
}

/// Exact quantile by the nearest-rank method (the ⌈q·n⌉-th smallest value); may reorder
/// `values`, which must not be empty.
pub fn exact_quantile(values: &mut [Nanos], q: f64) -> Nanos {
    exact_quantiles(values, [q])[0]
}

/// Several exact nearest-rank quantiles (ascending `qs`) of non-empty `values`; may
/// reorder `values`.
pub fn exact_quantiles<const K: usize>(values: &mut [Nanos], qs: [f64; K]) -> [Nanos; K] {
    debug_assert!(!values.is_empty());
    debug_assert!(qs.windows(2).all(|w| w[0] <= w[1]));
    let n = values.len();
    let ranks = qs.map(|q| rank(q, n));
    let mut out = [0; K];
    let mut lo = 0usize;
    for (k, &r) in ranks.iter().enumerate() {
        // Everything before `lo` is ≤ values[lo-1] ≤ the wanted element.
        let r = r.max(lo);
        out[k] = *values[lo..].select_nth_unstable(r - lo).1;
        lo = r;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;

    fn by_sorting(v: &[Nanos], qs: &[f64]) -> Vec<Nanos> {
        let mut s = v.to_vec();
        s.sort_unstable();
        qs.iter().map(|&q| s[rank(q, s.len())]).collect()
    }

    #[test]
    fn nearest_rank_quantiles() {
        let mut v: Vec<Nanos> = (1..=100).rev().collect();
        assert_eq!(exact_quantile(&mut v, 0.95), 95);
        assert_eq!(exact_quantile(&mut v, 0.5), 50);
        assert_eq!(exact_quantile(&mut v, 1.0), 100);
        assert_eq!(exact_quantile(&mut v, 0.0), 1);
        let mut w: Vec<Nanos> = (1..=1000).map(|i| (i * 7919) % 1000 + 1).collect();
        assert_eq!(exact_quantiles(&mut w, [0.5, 0.95, 0.99]), [500, 950, 990]);
        let mut one = vec![42];
        assert_eq!(exact_quantiles(&mut one, [0.5, 0.95, 0.99]), [42, 42, 42]);
    }

    /// The selection returns what sorting returns, for many sizes and the shapes that
    /// stress a selection: heavy tails, duplicates, a single outlier, constant runs,
    /// values near `u64::MAX`.
    #[test]
    fn equals_sorting_on_every_shape() {
        let mut rng = SimRng::new(11);
        let qs = [0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0];
        for n in [1usize, 2, 3, 7, 95, 96, 97, 100, 255, 256, 257, 1000, 4097, 20_000] {
            for shape in 0..7 {
                let v: Vec<Nanos> = (0..n)
                    .map(|i| match shape {
                        0 => rng.below(1 << 40),
                        1 => (rng.exp(1e6)) as u64,
                        2 => (rng.exp(1.0).powi(6) * 1e6) as u64,
                        3 => rng.below(5),
                        4 => {
                            if i == n / 2 {
                                u64::MAX - 1
                            } else {
                                1_000_000 + rng.below(1000)
                            }
                        }
                        5 => 7,
                        _ => u64::MAX - rng.below(3),
                    })
                    .collect();
                let want = by_sorting(&v, &qs);
                let got = exact_quantiles(&mut v.clone(), [0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0]);
                assert_eq!(got.to_vec(), want, "n = {n}, shape {shape}");
                for (i, &q) in qs.iter().enumerate() {
                    assert_eq!(exact_quantile(&mut v.clone(), q), want[i], "n = {n}, shape {shape}, q = {q}");
                }
            }
        }
    }
}
