//! Streaming results: per-group latency summaries (HDR histograms, bounded memory),
//! per-window series (exact per-window percentiles from a buffer that is reused every
//! window), scheduler gauges, and the optional per-request log.

use hdrhistogram::Histogram;

use crate::request::Completion;
use crate::time::Nanos;

/// Largest response time the histograms track exactly (≈ 11.6 days); larger values are
/// clamped to it and still counted.
pub const HIST_MAX_NS: u64 = 1_000_000_000_000_000;
/// HDR significant digits: values are kept to within 0.1 %.
pub const HIST_SIGFIGS: u8 = 3;

/// Latency summary of one group (a tenant or a class), kept in O(1) memory.
#[derive(Clone, Debug)]
pub struct GroupSummary {
    /// Requests completed.
    pub completed: u64,
    /// Bytes completed.
    pub bytes: u64,
    /// Sum of response times (ns).
    pub sum_response: u128,
    /// Sum of scheduler waits (dispatch − arrival, ns).
    pub sum_wait: u128,
    /// Largest response time (ns).
    pub max_response: Nanos,
    /// First arrival and last completion seen.
    pub first_arrival: Nanos,
    /// Last completion time.
    pub last_finish: Nanos,
    /// Response-time histogram (ns, 3 significant digits).
    pub hist: Histogram<u64>,
}

impl Default for GroupSummary {
    fn default() -> Self {
        GroupSummary {
            completed: 0,
            bytes: 0,
            sum_response: 0,
            sum_wait: 0,
            max_response: 0,
            first_arrival: Nanos::MAX,
            last_finish: 0,
            hist: Histogram::new_with_bounds(1, HIST_MAX_NS, HIST_SIGFIGS).expect("valid HDR bounds"),
        }
    }
}

impl GroupSummary {
    /// Account one completion.
    #[inline]
    pub fn record(&mut self, c: &Completion) {
        let r = c.response();
        self.completed += 1;
        self.bytes += c.req.bytes as u64;
        self.sum_response += r as u128;
        self.sum_wait += c.wait() as u128;
        self.max_response = self.max_response.max(r);
        self.first_arrival = self.first_arrival.min(c.req.arrival);
        self.last_finish = self.last_finish.max(c.finish);
        self.hist.saturating_record(r.clamp(1, HIST_MAX_NS));
    }
    /// Mean response time (ns), 0 when empty.
    pub fn mean_response(&self) -> f64 {
        if self.completed == 0 { 0.0 } else { self.sum_response as f64 / self.completed as f64 }
    }
    /// Mean scheduler wait (ns), 0 when empty.
    pub fn mean_wait(&self) -> f64 {
        if self.completed == 0 { 0.0 } else { self.sum_wait as f64 / self.completed as f64 }
    }
    /// Response-time quantile q in [0, 1] (ns, within 0.1 %, never above the maximum); 0
    /// when empty.
    pub fn quantile(&self, q: f64) -> Nanos {
        if self.completed == 0 { 0 } else { self.hist.value_at_quantile(q).min(self.max_response) }
    }
    /// Add another summary's counts into this one.
    pub fn merge(&mut self, o: &GroupSummary) {
        self.completed += o.completed;
        self.bytes += o.bytes;
        self.sum_response += o.sum_response;
        self.sum_wait += o.sum_wait;
        self.max_response = self.max_response.max(o.max_response);
        self.first_arrival = self.first_arrival.min(o.first_arrival);
        self.last_finish = self.last_finish.max(o.last_finish);
        self.hist.add(&o.hist).expect("histograms share bounds");
    }

    /// Fraction of requests with response time ≤ `deadline` (within histogram precision).
    pub fn fraction_within(&self, deadline: Nanos) -> f64 {
        if self.completed == 0 {
            return 1.0;
        }
        self.hist.count_between(0, deadline) as f64 / self.completed as f64
    }
}

/// Summaries per (tenant, class) pair: one histogram update per completion; the
/// per-tenant, per-class and overall views are merged from it at the end of a run.
#[derive(Debug, Default)]
pub(crate) struct PairTable {
    keys: Vec<(u32, u32)>,
    groups: Vec<GroupSummary>,
    /// Index and packed key (tenant << 32 | class) of the last pair used: consecutive
    /// completions usually share it.
    last: usize,
    last_key: u64,
}

impl PairTable {
    /// Account one completion under its (tenant, class).
    #[inline]
    pub fn record(&mut self, c: &Completion) {
        let packed = (c.req.tenant as u64) << 32 | c.req.class as u64;
        if packed != self.last_key || self.groups.is_empty() {
            let key = (c.req.tenant, c.req.class);
            self.last_key = packed;
            self.last = match self.keys.iter().position(|k| *k == key) {
                Some(i) => i,
                None => {
                    self.keys.push(key);
                    self.groups.push(GroupSummary::default());
                    self.keys.len() - 1
                }
            };
        }
        self.groups[self.last].record(c);
    }

    /// (per tenant, per class, overall), indexed by tenant / class id.
    pub fn finish(self) -> (Vec<GroupSummary>, Vec<GroupSummary>, GroupSummary) {
        let mut tenants: Vec<GroupSummary> = Vec::new();
        let mut classes: Vec<GroupSummary> = Vec::new();
        let mut total = GroupSummary::default();
        for ((t, c), g) in self.keys.iter().zip(&self.groups) {
            for (v, i) in [(&mut tenants, *t), (&mut classes, *c)] {
                let i = i as usize;
                if i >= v.len() {
                    v.resize_with(i + 1, GroupSummary::default);
                }
                v[i].merge(g);
            }
            total.merge(g);
        }
        (tenants, classes, total)
    }
}

/// Long-format per-window rows: one row per (window, tenant) with activity.
#[derive(Clone, Debug, Default)]
pub struct WindowSeries {
    /// Window start time (ns).
    pub start: Vec<Nanos>,
    /// Tenant.
    pub tenant: Vec<u32>,
    /// Arrivals in the window.
    pub arrivals: Vec<u64>,
    /// Completions in the window.
    pub completed: Vec<u64>,
    /// Bytes completed in the window.
    pub bytes: Vec<u64>,
    /// Mean response time of the window's completions (ns).
    pub mean_response: Vec<f64>,
    /// Exact median response time (ns).
    pub p50_response: Vec<Nanos>,
    /// Exact 95th percentile response time (ns).
    pub p95_response: Vec<Nanos>,
    /// Exact 99th percentile response time (ns).
    pub p99_response: Vec<Nanos>,
    /// Largest response time (ns).
    pub max_response: Vec<Nanos>,
}

/// Long-format scheduler gauges sampled at each window end.
#[derive(Clone, Debug, Default)]
pub struct GaugeSeries {
    /// Window start time (ns).
    pub start: Vec<Nanos>,
    /// Gauge name.
    pub name: Vec<String>,
    /// Value.
    pub value: Vec<f64>,
}

/// Per-request log in columns (only when asked for: memory grows with the run).
#[derive(Clone, Debug, Default)]
pub struct RequestLog {
    /// Request id.
    pub id: Vec<u64>,
    /// Tenant.
    pub tenant: Vec<u32>,
    /// Class assigned by the policy.
    pub class: Vec<u32>,
    /// Arrival (ns).
    pub arrival: Vec<Nanos>,
    /// Dispatch to the device (ns).
    pub dispatch: Vec<Nanos>,
    /// Completion (ns).
    pub finish: Vec<Nanos>,
    /// Device target where it was served.
    pub target: Vec<u8>,
    /// Size (bytes).
    pub bytes: Vec<u32>,
    /// True for reads.
    pub is_read: Vec<bool>,
}

impl RequestLog {
    /// Append one completion.
    #[inline]
    pub fn push(&mut self, c: &Completion) {
        self.id.push(c.req.id);
        self.tenant.push(c.req.tenant);
        self.class.push(c.req.class);
        self.arrival.push(c.req.arrival);
        self.dispatch.push(c.dispatch);
        self.finish.push(c.finish);
        self.target.push(c.req.target);
        self.bytes.push(c.req.bytes);
        self.is_read.push(c.req.op == crate::request::Op::Read);
    }
    /// Number of requests logged.
    pub fn len(&self) -> usize {
        self.id.len()
    }
    /// True when nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }
}

/// Accumulates the current window per tenant and flushes it into a [`WindowSeries`].
/// Per-window accumulator (crate-internal; the event loop and the Lindley kernel use it).
#[derive(Debug, Default)]
pub(crate) struct WindowAccumulator {
    pub window: Nanos,
    pub current: u64,
    end: Nanos,
    arrivals: Vec<u64>,
    bytes: Vec<u64>,
    latencies: Vec<Vec<Nanos>>,
    pub series: WindowSeries,
    pub gauges: GaugeSeries,
}

impl WindowAccumulator {
    pub fn new(window: Nanos) -> Self {
        WindowAccumulator { window, end: window, ..Default::default() }
    }

    #[inline]
    fn ensure(&mut self, tenant: usize) {
        if tenant >= self.arrivals.len() {
            self.arrivals.resize(tenant + 1, 0);
            self.bytes.resize(tenant + 1, 0);
            self.latencies.resize_with(tenant + 1, Vec::new);
        }
    }

    /// Is `now` past the current window?
    #[inline]
    pub fn crossed(&self, now: Nanos) -> bool {
        now >= self.end
    }

    /// Close the current window (emitting rows and gauges) and move to `now`'s window.
    pub fn advance(&mut self, now: Nanos, gauges: &mut dyn FnMut(&mut dyn FnMut(&str, f64))) {
        let start = self.current * self.window;
        let mut any = false;
        for t in 0..self.arrivals.len() {
            let lat = &mut self.latencies[t];
            if self.arrivals[t] == 0 && lat.is_empty() {
                continue;
            }
            any = true;
            let n = lat.len();
            let (mean, p50, p95, p99, max) = if n == 0 {
                (0.0, 0, 0, 0, 0)
            } else {
                let mean = lat.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
                let max = *lat.iter().max().unwrap();
                let [p50, p95, p99] = exact_quantiles(lat, [0.50, 0.95, 0.99]);
                (mean, p50, p95, p99, max)
            };
            let s = &mut self.series;
            s.start.push(start);
            s.tenant.push(t as u32);
            s.arrivals.push(self.arrivals[t]);
            s.completed.push(n as u64);
            s.bytes.push(self.bytes[t]);
            s.mean_response.push(mean);
            s.p50_response.push(p50);
            s.p95_response.push(p95);
            s.p99_response.push(p99);
            s.max_response.push(max);
            self.arrivals[t] = 0;
            self.bytes[t] = 0;
            lat.clear();
        }
        if any {
            let g = &mut self.gauges;
            gauges(&mut |name: &str, v: f64| {
                g.start.push(start);
                g.name.push(name.to_string());
                g.value.push(v);
            });
        }
        self.current = now / self.window;
        self.end = self.current.saturating_add(1).saturating_mul(self.window);
    }

    #[inline]
    pub fn arrival(&mut self, tenant: u32) {
        let t = tenant as usize;
        self.ensure(t);
        self.arrivals[t] += 1;
    }

    #[inline]
    pub fn completion(&mut self, c: &Completion) {
        let t = c.req.tenant as usize;
        self.ensure(t);
        self.bytes[t] += c.req.bytes as u64;
        self.latencies[t].push(c.response());
    }
}

/// Exact quantile by the nearest-rank method (the ⌈q·n⌉-th smallest value); reorders
/// `values`.
pub fn exact_quantile(values: &mut [Nanos], q: f64) -> Nanos {
    debug_assert!(!values.is_empty());
    let n = values.len();
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    *values.select_nth_unstable(rank - 1).1
}

/// Several exact nearest-rank quantiles (ascending `qs`) with one partial sort each on
/// a shrinking suffix; reorders `values`.
pub fn exact_quantiles<const K: usize>(values: &mut [Nanos], qs: [f64; K]) -> [Nanos; K] {
    debug_assert!(!values.is_empty());
    debug_assert!(qs.windows(2).all(|w| w[0] <= w[1]));
    let n = values.len();
    let mut out = [0; K];
    let mut lo = 0usize;
    for (k, q) in qs.iter().enumerate() {
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
        // Everything before `lo` is ≤ values[lo-1] ≤ the wanted element.
        let rank = rank.max(lo);
        out[k] = *values[lo..].select_nth_unstable(rank - lo).1;
        lo = rank;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
