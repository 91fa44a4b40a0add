//! Response-time histograms that cost what their group uses.
//!
//! The buckets are those of an HDR histogram (`hdrhistogram` with lowest value 1,
//! highest [`HIST_MAX_NS`] and 3 significant digits: every value kept to within 0.1 %),
//! and every query answers as `hdrhistogram` answers it (checked against the crate in the
//! tests). The storage differs: a full HDR histogram over 1 ns … 11.6 days is an array
//! of ≈ 41,000 counts (328 KB) whatever it holds, which a simulation of 65,536 tenants
//! cannot afford for every tenant and class. [`LatencyHistogram`] keeps a sorted list of
//! (bucket, count) pairs while it holds few buckets, and a dense array of `u32` counts
//! spanning only the buckets between its lowest and highest value once it holds many
//! values (what a bucket holds beyond 2³² − 1 goes to a short list beside it): a tenant
//! with a handful of requests costs a few hundred bytes, a busy one one add per request,
//! and a finished one ([`LatencyHistogram::compact`]) no room to grow.

use crate::time::Nanos;

/// Largest response time the histograms track exactly (≈ 11.6 days); larger values are
/// clamped to it and still counted.
pub const HIST_MAX_NS: u64 = 1_000_000_000_000_000;
/// HDR significant digits: values are kept to within 0.1 %.
pub const HIST_SIGFIGS: u8 = 3;

/// Bucket layout (lowest discernible value 1, [`HIST_SIGFIGS`] = 3 significant digits):
/// 2,048 sub-buckets (the smallest power of two ≥ 2·10³), of which buckets above the
/// first use the upper half. These are the values `hdrhistogram` derives from the same
/// bounds; the tests check them against it.
const SUB_BUCKET_HALF_MAGNITUDE: u32 = 10;
/// 2,047: values below 2,048 all land in bucket 0.
const SUB_BUCKET_MASK: u64 = (2 << SUB_BUCKET_HALF_MAGNITUDE) - 1;
/// 64 − unit magnitude (0) − half-count magnitude (10) − 1.
const LEADING_ZERO_BASE: u32 = 64 - SUB_BUCKET_HALF_MAGNITUDE - 1;

/// Distinct buckets kept as a sorted list before the histogram turns dense.
const SPARSE_MAX_BUCKETS: usize = 256;
/// Values counted before the histogram turns dense whatever its number of buckets (the
/// dense array is then one add per value on the hot path).
const SPARSE_MAX_COUNT: u64 = 4096;

/// Add `n` to bucket `i` of sorted (bucket, count) pairs.
fn sorted_add(pairs: &mut Vec<(u32, u64)>, i: u32, n: u64) {
    match pairs.binary_search_by_key(&i, |&(k, _)| k) {
        Ok(p) => pairs[p].1 += n,
        Err(p) => pairs.insert(p, (i, n)),
    }
}

/// Index of `v` (0 ≤ v ≤ [`HIST_MAX_NS`]) in the HDR counts array: the index
/// `hdrhistogram` computes, without its generality (unit magnitude, resizing).
#[inline(always)]
pub fn hdr_index(v: u64) -> u32 {
    let bucket = LEADING_ZERO_BASE - (v | SUB_BUCKET_MASK).leading_zeros();
    let sub = (v >> bucket) as u32;
    ((bucket + 1) << SUB_BUCKET_HALF_MAGNITUDE) + sub - (1 << SUB_BUCKET_HALF_MAGNITUDE)
}

/// Lowest value of bucket index `i` (the inverse of [`hdr_index`]).
pub fn hdr_lowest_value(i: u32) -> u64 {
    let half = 1u32 << SUB_BUCKET_HALF_MAGNITUDE;
    let bucket = (i >> SUB_BUCKET_HALF_MAGNITUDE) as i64 - 1;
    let sub = (i & (half - 1)) + half;
    if bucket < 0 {
        (sub - half) as u64
    } else {
        (sub as u64) << bucket
    }
}

/// Highest value of bucket index `i` (every value from [`hdr_lowest_value`] to it is
/// counted in the same bucket).
pub fn hdr_highest_value(i: u32) -> u64 {
    hdr_lowest_value(i) + (1u64 << (i >> SUB_BUCKET_HALF_MAGNITUDE).saturating_sub(1)) - 1
}

/// Response times (ns) in HDR buckets, stored sparsely while few (see the module).
/// Two histograms are equal when they hold the same counts, however stored.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    /// Values counted.
    total: u64,
    /// Smallest and largest value counted (exact, after clamping to [`HIST_MAX_NS`]).
    min: u64,
    max: u64,
    /// Sorted (bucket, count) pairs while the histogram is sparse (`dense` empty).
    sparse: Vec<(u32, u64)>,
    /// Counts of buckets `base`, `base + 1`, … once dense, each to `u32::MAX` (half the
    /// memory of `u64` counts: a run of 10,000 tenants holds 10,000 of these).
    base: u32,
    dense: Vec<u32>,
    /// What a dense bucket holds beyond its `u32` (sorted (bucket, count) pairs; a
    /// bucket's count is its `dense` entry plus its entry here). Empty but for
    /// histograms of billions of values.
    carry: Vec<(u32, u64)>,
}

impl PartialEq for LatencyHistogram {
    fn eq(&self, o: &Self) -> bool {
        (self.total, self.min(), self.max) == (o.total, o.min(), o.max) && self.buckets().eq(o.buckets())
    }
}

impl Eq for LatencyHistogram {}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            total: 0,
            min: u64::MAX,
            max: 0,
            sparse: Vec::new(),
            base: 0,
            dense: Vec::new(),
            carry: Vec::new(),
        }
    }
}

impl LatencyHistogram {
    /// An empty histogram (no allocation until the first value).
    pub fn new() -> Self {
        Self::default()
    }

    /// Count `v` (ns; clamped to 0 … [`HIST_MAX_NS`]).
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        self.record_n(v, 1);
    }

    /// Count `v` `n` times.
    #[inline(always)]
    pub fn record_n(&mut self, v: u64, n: u64) {
        if n == 0 {
            return;
        }
        let v = v.min(HIST_MAX_NS);
        self.total += n;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.add_to_bucket(hdr_index(v), n);
    }

    /// Count every value of `values` (as [`LatencyHistogram::record`] on each), with the
    /// count and extremes kept in registers across them.
    #[inline]
    pub fn record_all(&mut self, values: impl IntoIterator<Item = u64>) {
        let (mut n, mut lo, mut hi) = (0u64, self.min, self.max);
        for v in values {
            let v = v.min(HIST_MAX_NS);
            n += 1;
            lo = lo.min(v);
            hi = hi.max(v);
            self.add_to_bucket(hdr_index(v), 1);
        }
        self.total += n;
        (self.min, self.max) = (lo, hi);
    }

    /// True once the counts are a dense array (one add per value).
    #[inline(always)]
    pub fn is_dense(&self) -> bool {
        !self.dense.is_empty()
    }

    /// Count the values of the HDR buckets in `indices` (sorted here, then merged in one
    /// pass: the cheap way to fill a sparse histogram), whose count, smallest and largest
    /// value (clamped as by [`LatencyHistogram::record`]) are `n`, `lo` and `hi`.
    pub fn record_indices(&mut self, indices: &mut [u32], n: u64, lo: u64, hi: u64) {
        if indices.is_empty() {
            return;
        }
        self.total += n;
        self.min = self.min.min(lo.min(HIST_MAX_NS));
        self.max = self.max.max(hi.min(HIST_MAX_NS));
        indices.sort_unstable();
        if self.is_dense() {
            for &i in indices.iter() {
                self.add_to_bucket(i, 1);
            }
            return;
        }
        let mut merged = Vec::with_capacity(self.sparse.len() + indices.len());
        let mut old = self.sparse.iter().copied().peekable();
        let mut k = 0;
        while k < indices.len() {
            let i = indices[k];
            let run = indices[k..].iter().take_while(|&&j| j == i).count() as u64;
            k += run as usize;
            while let Some(&(j, c)) = old.peek() {
                if j >= i {
                    break;
                }
                merged.push((j, c));
                old.next();
            }
            match old.peek() {
                Some(&(j, c)) if j == i => {
                    merged.push((i, c + run));
                    old.next();
                }
                _ => merged.push((i, run)),
            }
        }
        merged.extend(old);
        self.sparse = merged;
        self.densify_if_due();
    }

    /// Add `n` to bucket `i` (totals and extremes are the caller's).
    #[inline(always)]
    fn add_to_bucket(&mut self, i: u32, n: u64) {
        if let Some(c) = self.dense.get_mut(i.wrapping_sub(self.base) as usize) {
            let sum = u64::from(*c) + n;
            if sum <= u64::from(u32::MAX) {
                *c = sum as u32;
                return;
            }
        }
        self.add_slow(i, n);
    }

    #[cold]
    #[inline(never)]
    fn add_slow(&mut self, i: u32, n: u64) {
        if !self.dense.is_empty() {
            self.cover(i);
            self.dense_add(i, n);
            return;
        }
        sorted_add(&mut self.sparse, i, n);
        self.densify_if_due();
    }

    /// Add `n` to dense bucket `i` (covered), what its `u32` cannot hold to `carry`.
    fn dense_add(&mut self, i: u32, n: u64) {
        let c = &mut self.dense[(i - self.base) as usize];
        let room = u64::from(u32::MAX - *c);
        let here = n.min(room);
        *c += here as u32;
        if n > here {
            sorted_add(&mut self.carry, i, n - here);
        }
    }

    /// Turn dense once the pairs are many or the values counted are.
    fn densify_if_due(&mut self) {
        if !self.sparse.is_empty() && (self.sparse.len() > SPARSE_MAX_BUCKETS || self.total >= SPARSE_MAX_COUNT) {
            self.densify();
        }
    }

    /// Turn the sorted pairs into a dense array over their range.
    fn densify(&mut self) {
        let (lo, hi) = (self.sparse[0].0, self.sparse[self.sparse.len() - 1].0);
        self.base = lo;
        self.dense = vec![0; (hi - lo + 1) as usize];
        for (k, c) in std::mem::take(&mut self.sparse) {
            self.dense_add(k, c);
        }
    }

    /// Grow the dense array to hold bucket `i`, by at least half its length on the side
    /// that grows (so that a run of growing values costs amortised O(1)), never past the
    /// buckets of 0 and [`HIST_MAX_NS`].
    fn cover(&mut self, i: u32) {
        let last = hdr_index(HIST_MAX_NS);
        let (lo, hi) = (self.base, self.base + self.dense.len() as u32 - 1);
        let slack = (self.dense.len() as u32 / 2).max(16);
        if i < lo {
            let new_lo = i.min(lo.saturating_sub(slack));
            let mut grown = vec![0; (lo - new_lo) as usize];
            grown.extend_from_slice(&self.dense);
            self.dense = grown;
            self.base = new_lo;
        } else if i > hi {
            let new_hi = i.max(hi.saturating_add(slack)).min(last);
            self.dense.resize((new_hi - lo + 1) as usize, 0);
        }
    }

    /// Give back the memory a finished histogram does not need: a dense array's empty
    /// buckets beyond its lowest and highest value (the room [`LatencyHistogram`] keeps
    /// to grow into) and spare capacity. The counts are unchanged.
    pub fn compact(&mut self) {
        if self.dense.is_empty() {
            self.sparse.shrink_to_fit();
            return;
        }
        let (lo, hi) = (hdr_index(self.min) - self.base, hdr_index(self.max) - self.base);
        self.dense.truncate(hi as usize + 1);
        self.dense.drain(..lo as usize);
        self.dense.shrink_to_fit();
        self.base += lo;
    }

    /// Values counted.
    pub fn len(&self) -> u64 {
        self.total
    }

    /// True when nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Smallest value counted (exact), 0 when empty.
    pub fn min(&self) -> u64 {
        if self.total == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest value counted (exact), 0 when empty.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        (self.sparse.capacity() + self.carry.capacity()) * std::mem::size_of::<(u32, u64)>()
            + self.dense.capacity() * std::mem::size_of::<u32>()
    }

    /// Non-empty buckets in increasing order: (bucket index, count).
    pub fn buckets(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        let mut carry = self.carry.iter().copied().peekable();
        let dense = self.dense.iter().enumerate().filter(|(_, &c)| c > 0).map(move |(k, &c)| {
            let i = self.base + k as u32;
            let more = carry.next_if(|&(j, _)| j == i).map_or(0, |(_, m)| m);
            (i, u64::from(c) + more)
        });
        self.sparse.iter().copied().chain(dense)
    }

    /// Add every count of `other`.
    pub fn add(&mut self, other: &LatencyHistogram) {
        if other.total == 0 {
            return;
        }
        if self.total == 0 {
            self.clone_from(other);
            return;
        }
        if self.dense.is_empty() && !other.dense.is_empty() && self.total <= other.total {
            // Take the larger one's layout and add the smaller into it.
            let mut merged = other.clone();
            merged.add(self);
            *self = merged;
            return;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        if !self.dense.is_empty() {
            // The lowest and highest buckets of `other` are those of its extremes.
            self.cover(hdr_index(other.min));
            self.cover(hdr_index(other.max));
        }
        for (i, c) in other.buckets() {
            if self.dense.is_empty() {
                sorted_add(&mut self.sparse, i, c);
            } else {
                self.dense_add(i, c);
            }
        }
        if self.dense.is_empty() {
            self.densify_if_due();
        }
    }

    /// The value at quantile `q` ∈ [0, 1], as `hdrhistogram::Histogram::value_at_quantile`
    /// gives it: the highest value of the first bucket where the running count reaches
    /// ⌈q · n⌉ (at least 1); the lowest value of that bucket for q = 0; 0 when empty.
    pub fn value_at_quantile(&self, q: f64) -> u64 {
        self.values_at_quantiles([q])[0]
    }

    /// [`LatencyHistogram::value_at_quantile`] of each of `qs` (ascending), in one pass.
    pub fn values_at_quantiles<const N: usize>(&self, qs: [f64; N]) -> [u64; N] {
        let mut out = [0u64; N];
        let mut it = self.buckets();
        let (mut seen, mut cur) = (0u64, None::<u32>);
        for (k, &q) in qs.iter().enumerate() {
            debug_assert!(k == 0 || q >= qs[k - 1], "quantiles in ascending order");
            let q = q.min(1.0);
            let want = ((q * self.total as f64).ceil() as u64).max(1);
            while seen < want {
                match it.next() {
                    Some((i, c)) => {
                        seen += c;
                        cur = Some(i);
                    }
                    None => break,
                }
            }
            out[k] = match cur {
                Some(i) if seen >= want => {
                    if q == 0.0 {
                        hdr_lowest_value(i)
                    } else {
                        hdr_highest_value(i)
                    }
                }
                _ => 0,
            };
        }
        out
    }

    /// Values counted in the buckets up to the one of `v` (as `hdrhistogram`'s
    /// `count_between(0, v)`: the whole of `v`'s bucket counts).
    pub fn count_at_most(&self, v: u64) -> u64 {
        let last = hdr_index(v.min(HIST_MAX_NS));
        self.buckets().take_while(|&(i, _)| i <= last).map(|(_, c)| c).sum()
    }

    /// Response-time CDF: for each non-empty bucket, its highest value (never above the
    /// largest value counted) and the fraction of values up to it.
    pub fn cdf(&self) -> (Vec<Nanos>, Vec<f64>) {
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        let mut cum = 0u64;
        for (i, c) in self.buckets() {
            cum += c;
            xs.push(hdr_highest_value(i).min(self.max));
            ys.push(cum as f64 / self.total as f64);
        }
        (xs, ys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;
    use hdrhistogram::Histogram;

    fn reference() -> Histogram<u64> {
        Histogram::new_with_bounds(1, HIST_MAX_NS, HIST_SIGFIGS).unwrap()
    }

    #[test]
    fn a_dense_bucket_counts_past_u32() {
        // Dense first (5,000 values), then counts that no u32 holds, added one way and
        // another: the counts and quantiles are the reference's, in u64.
        let mut reference = reference();
        let (mut h, mut merged) = (LatencyHistogram::new(), LatencyHistogram::new());
        for v in 1..=5_000u64 {
            reference.record(v * 100).unwrap();
            h.record(v * 100);
        }
        assert!(h.is_dense());
        let big = 3 * u64::from(u32::MAX) + 7;
        for (v, n) in [(250_000, big), (250_000, u64::from(u32::MAX)), (9_000, 5), (400_000, big)] {
            reference.record_n(v, n).unwrap();
            h.record_n(v, n);
            let mut one = LatencyHistogram::new();
            one.record_n(v, n);
            merged.add(&one);
        }
        let mut rest = LatencyHistogram::new();
        for v in 1..=5_000u64 {
            rest.record(v * 100);
        }
        merged.add(&rest);
        let mut compacted = h.clone();
        compacted.compact();
        for x in [&h, &merged, &compacted] {
            assert_eq!(x.len(), reference.len());
            assert_eq!(x.count_at_most(250_000), reference.count_between(0, 250_000));
            for q in [0.0, 0.000001, 0.3, 0.5, 0.7, 0.999, 1.0] {
                assert_eq!(x.value_at_quantile(q), reference.value_at_quantile(q), "q {q}");
            }
        }
        assert_eq!(h, merged);
    }

    #[test]
    fn index_matches_hdrhistogram() {
        let h = reference();
        let mut rng = SimRng::new(3);
        let mut vs: Vec<u64> = (1..5000).collect();
        vs.extend((0..50).flat_map(|k| [(1u64 << k).saturating_sub(1), 1 << k, (1 << k) + 1]));
        vs.extend((0..100_000).map(|_| 1 + rng.below(HIST_MAX_NS)));
        vs.extend((0..100_000).map(|_| 1 + (rng.uniform() * 1e9) as u64));
        vs.push(HIST_MAX_NS);
        for v in vs.into_iter().filter(|v| (1..=HIST_MAX_NS).contains(v)) {
            let i = hdr_index(v);
            assert_eq!(hdr_lowest_value(i), h.lowest_equivalent(v), "{v}");
            assert_eq!(hdr_highest_value(i), h.highest_equivalent(v), "{v}");
            assert_eq!(hdr_index(hdr_lowest_value(i)), i);
        }
    }

    /// Every query answers as hdrhistogram's full histogram of the same values, whether
    /// the histogram stayed sparse, turned dense, or was merged from pieces of both kinds.
    #[test]
    fn answers_as_hdrhistogram_sparse_dense_and_merged() {
        let mut rng = SimRng::new(11);
        for (case, &n) in [0usize, 1, 3, 200, 300, 5000, 100_000].iter().enumerate() {
            let mut reference = reference();
            let mut whole = LatencyHistogram::new();
            let mut parts: Vec<LatencyHistogram> = (0..5).map(|_| LatencyHistogram::new()).collect();
            let (mut batched, mut batch) = (LatencyHistogram::new(), Vec::new());
            let (mut lo, mut hi) = (u64::MAX, 0);
            for k in 0..n {
                let v = match k % 5 {
                    0 => 1 + rng.below(3000),
                    1 => (rng.exp(1e6 * (1 + case) as f64)) as u64 + 1,
                    2 => 1_000_000 + rng.below(50),
                    3 => 1 + rng.below(HIST_MAX_NS),
                    _ => (1u64 << rng.below(40)) + 1,
                };
                reference.record(v).unwrap();
                whole.record(v);
                // Parts of very different sizes: some stay sparse, some turn dense.
                let part = if k % 100 == 0 {
                    0
                } else if k % 10 == 0 {
                    1
                } else {
                    2 + k % 3
                };
                parts[part].record(v);
                // In sorted-and-merged batches of 97, as the simulator's summaries fill it.
                batch.push(hdr_index(v));
                (lo, hi) = (lo.min(v), hi.max(v));
                if batch.len() == 97 || k + 1 == n {
                    let m = batch.len() as u64;
                    batched.record_indices(&mut batch, m, lo, hi);
                    batch.clear();
                    (lo, hi) = (u64::MAX, 0);
                }
            }
            let mut merged = LatencyHistogram::new();
            for p in &parts {
                merged.add(p);
            }
            // Compacted, a histogram answers the same from no more memory, and grows again.
            let mut compacted = merged.clone();
            compacted.compact();
            assert!(compacted.heap_bytes() <= merged.heap_bytes(), "case {case}");
            assert_eq!(compacted, merged, "case {case}");
            let mut regrown = compacted.clone();
            regrown.add(&parts[0]);
            let mut twice = merged.clone();
            twice.add(&parts[0]);
            assert_eq!(regrown, twice, "case {case}");
            for h in [&whole, &merged, &batched, &compacted] {
                assert_eq!(h.len(), reference.len(), "case {case}");
                if n > 0 {
                    assert_eq!(h.min(), reference.min(), "case {case}");
                    assert_eq!(hdr_index(h.max()), hdr_index(reference.max()), "case {case}");
                }
                let qs = [0.0, 0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0];
                for q in qs {
                    assert_eq!(h.value_at_quantile(q), reference.value_at_quantile(q), "case {case} q {q}");
                }
                assert_eq!(h.values_at_quantiles(qs), qs.map(|q| reference.value_at_quantile(q)), "case {case}");
                for v in [0, 1, 2047, 2048, 1_000_000, 1_000_049, 123_456_789, HIST_MAX_NS] {
                    assert_eq!(h.count_at_most(v), reference.count_between(0, v), "case {case} v {v}");
                }
                let want: Vec<(u64, u64)> =
                    reference.iter_recorded().map(|x| (x.value_iterated_to(), x.count_at_value())).collect();
                let got: Vec<(u64, u64)> = h.buckets().map(|(i, c)| (hdr_highest_value(i), c)).collect();
                assert_eq!(got, want, "case {case}");
            }
        }
    }

    /// A group of a few requests costs a few hundred bytes, not a full HDR array.
    #[test]
    fn a_small_group_stays_small() {
        let mut h = LatencyHistogram::new();
        let mut rng = SimRng::new(5);
        for _ in 0..20 {
            h.record(rng.below(HIST_MAX_NS));
        }
        // A full HDR array over the same range: 41,984 counts of 8 bytes.
        assert!(h.heap_bytes() <= 32 * 16, "{} bytes", h.heap_bytes());
    }

    /// Values above the range are clamped and still counted; 0 is a value.
    #[test]
    fn clamps_and_counts_zero() {
        let mut h = LatencyHistogram::new();
        h.record(0);
        h.record(HIST_MAX_NS * 10);
        assert_eq!((h.len(), h.min(), h.max()), (2, 0, HIST_MAX_NS));
        assert_eq!(h.count_at_most(0), 1);
    }
}
