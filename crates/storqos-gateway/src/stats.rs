//! Per-tenant live statistics: completed operations, bytes, errors, and the
//! gateway-side response time (from the request parsed to its reply written to the
//! client: the policy's queue, the backend, the page cache and the reply path) in the simulator's own per-tenant summary
//! ([`GroupSummary`]: HDR histogram, exact max), reported as mean / p50 / p99 / max in
//! microseconds and IOPS over the serving time.
//!
//! With a window length, also the per-window series the simulator keeps: one row per
//! (window, tenant) with activity (operations, bytes, IOPS, mean and exact nearest-rank
//! p50 / p95 / p99 and max response time), and the policy's gauges
//! (`Scheduler::gauges`, e.g. AVATAR's threshold L^O) sampled at the end of every
//! window, so a live run and a simulated one can be put side by side.
//!
//! Memory stays bounded however long the gateway serves: a window keeps at most
//! [`EXACT_SAMPLES`] response times per tenant for its exact percentiles (beyond, an
//! HDR histogram of 3 significant digits), and the rows of closed windows are kept only
//! until they are taken ([`Recorder::take_windows`]; the Python binding takes them
//! every 100 ms and streams them to the caller).

use std::collections::BTreeMap;

use serde::Serialize;
use storqos_core::request::{Completion, Op};
use storqos_core::sim::quantile::exact_quantiles;
use storqos_core::sim::summary::{HIST_MAX_NS, HIST_SIGFIGS};
use storqos_core::sim::GroupSummary;
use storqos_core::time::Nanos;

/// Response times a window keeps per tenant for exact percentiles (512 KiB); a busier
/// window's percentiles come from an HDR histogram (3 significant digits).
pub const EXACT_SAMPLES: usize = 1 << 16;

/// One tenant's activity in the open window.
#[derive(Default)]
struct WindowAcc {
    ops: u64,
    bytes: u64,
    sum_ns: u128,
    max_ns: Nanos,
    /// The response times, while there are at most [`EXACT_SAMPLES`].
    exact: Vec<Nanos>,
    /// All of them, once there were more.
    hist: Option<hdrhistogram::Histogram<u64>>,
}

impl WindowAcc {
    fn record(&mut self, response: Nanos, bytes: u32) {
        self.ops += 1;
        self.bytes += u64::from(bytes);
        self.sum_ns += u128::from(response);
        self.max_ns = self.max_ns.max(response);
        if let Some(h) = self.hist.as_mut() {
            h.saturating_record(response.clamp(1, HIST_MAX_NS));
        } else if self.exact.len() < EXACT_SAMPLES {
            self.exact.push(response);
        } else if let Ok(mut h) = hdrhistogram::Histogram::new_with_bounds(1, HIST_MAX_NS, HIST_SIGFIGS) {
            for &x in self.exact.iter().chain([&response]) {
                h.saturating_record(x.clamp(1, HIST_MAX_NS));
            }
            self.exact = Vec::new();
            self.hist = Some(h);
        }
    }

    fn quantiles(&mut self) -> [Nanos; 3] {
        const Q: [f64; 3] = [0.50, 0.95, 0.99];
        match &self.hist {
            Some(h) => Q.map(|q| h.value_at_quantile(q)),
            None => exact_quantiles(&mut self.exact, Q),
        }
    }
}

/// The final statistics of one tenant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantStats {
    /// Tenant id.
    pub tenant: u32,
    /// Names of the exports accounted to this tenant.
    pub exports: Vec<String>,
    /// Reads and writes completed successfully.
    pub ops: u64,
    /// Of which reads.
    pub reads: u64,
    /// Of which writes.
    pub writes: u64,
    /// Bytes read and written by those operations.
    pub bytes: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// Requests answered with an error (out of range, unsupported, backend failure,
    /// rejected at a limit).
    pub errors: u64,
    /// Of which rejected by the policy at the tenant's limit (mClock `at_limit = reject`).
    pub rejected: u64,
    /// Completed operations per second of serving time.
    pub iops: f64,
    /// Mean response time (µs).
    pub mean_us: f64,
    /// Median response time (µs).
    pub p50_us: f64,
    /// 99th percentile response time (µs).
    pub p99_us: f64,
    /// Largest response time (µs).
    pub max_us: f64,
}

/// What a gateway run did, returned when it stops.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats {
    /// The policy's name (e.g. `"wf2q+"`).
    pub policy: String,
    /// Serving time (s): from the start to the stop request.
    pub elapsed_s: f64,
    /// Client connections accepted.
    pub connections: u64,
    /// Connections closed because of a protocol error (bad magic, oversized or
    /// truncated packet...).
    pub protocol_errors: u64,
    /// Per tenant, in tenant order (every configured tenant, even idle ones).
    pub tenants: Vec<TenantStats>,
    /// Per-window series (empty without a window length).
    pub windows: Vec<WindowRow>,
    /// The policy's gauges at the end of every window (empty without a window length).
    pub gauges: Vec<GaugeRow>,
}

/// One (window, tenant) row of the per-window series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WindowRow {
    /// Window start (s since the gateway started).
    pub start_s: f64,
    /// Window length (s; the last window ends when the gateway stops).
    pub length_s: f64,
    /// Tenant id.
    pub tenant: u32,
    /// Reads and writes completed in the window.
    pub ops: u64,
    /// Their bytes.
    pub bytes: u64,
    /// `ops / length_s`.
    pub iops: f64,
    /// Mean response time (µs).
    pub mean_us: f64,
    /// Exact nearest-rank median response time (µs).
    pub p50_us: f64,
    /// Exact nearest-rank 95th percentile (µs).
    pub p95_us: f64,
    /// Exact nearest-rank 99th percentile (µs).
    pub p99_us: f64,
    /// Largest response time (µs).
    pub max_us: f64,
}

/// One gauge of the policy, sampled at the end of a window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GaugeRow {
    /// Start of the window it closes (s since the gateway started).
    pub start_s: f64,
    /// Gauge name (the policy's own, e.g. `lo`).
    pub name: String,
    /// Value.
    pub value: f64,
}

/// The open window and the rows of the closed ones.
struct Windows {
    len: Nanos,
    start: Nanos,
    /// Per tenant: the open window's activity.
    open: BTreeMap<u32, WindowAcc>,
    /// Closed windows' rows and gauges not taken yet.
    rows: Vec<WindowRow>,
    gauges: Vec<GaugeRow>,
}

impl Windows {
    /// Close the open window as ending at `end` (rows and gauges).
    fn close(&mut self, end: Nanos, gauges: &mut GaugeSampler) {
        let start_s = self.start as f64 / 1e9;
        let length_s = end.saturating_sub(self.start) as f64 / 1e9;
        for (&tenant, acc) in self.open.iter_mut() {
            if acc.ops == 0 {
                continue;
            }
            let us = |ns: Nanos| ns as f64 / 1e3;
            let [p50, p95, p99] = acc.quantiles();
            self.rows.push(WindowRow {
                start_s,
                length_s,
                tenant,
                ops: acc.ops,
                bytes: acc.bytes,
                iops: if length_s > 0.0 { acc.ops as f64 / length_s } else { 0.0 },
                mean_us: acc.sum_ns as f64 / acc.ops as f64 / 1e3,
                p50_us: us(p50),
                p95_us: us(p95),
                p99_us: us(p99),
                max_us: us(acc.max_ns),
            });
            *acc = WindowAcc::default();
        }
        let rows = &mut self.gauges;
        gauges(&mut |name: &str, value: f64| rows.push(GaugeRow { start_s, name: name.to_string(), value }));
    }
}

impl Stats {
    /// The statistics of `tenant`, if it is configured.
    pub fn tenant(&self, tenant: u32) -> Option<&TenantStats> {
        self.tenants.iter().find(|t| t.tenant == tenant)
    }
}

/// One tenant's counters; its response times (and completed bytes) are the simulator's
/// own [`GroupSummary`].
#[derive(Default)]
struct Acc {
    exports: Vec<String>,
    reads: u64,
    writes: u64,
    flushes: u64,
    errors: u64,
    rejected: u64,
    latency: GroupSummary,
    /// Completions within the tenant's SLO.
    slo_met: u64,
    /// (second, met, completed) of the last [`RECENT_SECONDS`] seconds, by second modulo.
    recent: [(u64, u64, u64); RECENT_SECONDS],
}

/// Seconds over which [`TenantMetrics::slo_compliance`] is taken.
pub const RECENT_SECONDS: usize = 10;

/// One tenant's counters for a metrics scrape.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantMetrics {
    /// Tenant id.
    pub tenant: u32,
    /// Reads and writes completed.
    pub reads: u64,
    /// Writes completed.
    pub writes: u64,
    /// Bytes completed.
    pub bytes: u64,
    /// Requests answered with an error.
    pub errors: u64,
    /// Of which rejected at the tenant's limit.
    pub rejected: u64,
    /// Flushes completed.
    pub flushes: u64,
    /// Sum of response times (s).
    pub latency_sum_s: f64,
    /// Requests completed within each bound (s), per bound (not cumulative).
    pub latency_buckets: Vec<(f64, u64)>,
    /// The tenant's latency target (s), if it has one.
    pub slo_s: Option<f64>,
    /// Completions within it.
    pub slo_met: u64,
    /// Fraction of the last [`RECENT_SECONDS`] seconds' completions within it (None
    /// without a target or without completions).
    pub slo_compliance: Option<f64>,
}

/// Accumulates per-tenant statistics while the gateway runs.
pub struct Recorder {
    tenants: BTreeMap<u32, Acc>,
    windows: Option<Windows>,
    /// Latency targets by tenant (ns).
    slos: BTreeMap<u32, Nanos>,
}

/// Samples a policy's gauges into the sink it is given (`|sink| sched.gauges(sink)`).
pub type GaugeSampler<'a> = dyn FnMut(&mut dyn FnMut(&str, f64)) + 'a;

impl Recorder {
    /// A recorder knowing the configured `(tenant, export name)` pairs.
    pub fn new<'a>(exports: impl IntoIterator<Item = (u32, &'a str)>) -> Self {
        let mut tenants = BTreeMap::new();
        for (t, name) in exports {
            tenants.entry(t).or_insert_with(Acc::default).exports.push(name.to_string());
        }
        Recorder { tenants, windows: None, slos: BTreeMap::new() }
    }

    /// Account export `name` to `tenant` from now on (an export added while serving).
    pub fn add_export(&mut self, tenant: u32, name: &str) {
        let exports = &mut self.acc(tenant).exports;
        if !exports.iter().any(|e| e == name) {
            exports.push(name.to_string());
        }
    }

    /// Set (or change) `tenant`'s latency target (ns).
    pub fn set_slo(&mut self, tenant: u32, slo: Nanos) {
        self.slos.insert(tenant, slo);
    }

    /// Count each tenant's completions within its latency target (ns).
    pub fn with_slos(mut self, slos: impl IntoIterator<Item = (u32, Nanos)>) -> Self {
        self.slos = slos.into_iter().collect();
        self
    }

    /// Also keep the per-window series, in windows of `window` ns (> 0) from time 0.
    pub fn with_window(mut self, window: Nanos) -> Self {
        self.windows =
            Some(Windows { len: window.max(1), start: 0, open: BTreeMap::new(), rows: Vec::new(), gauges: Vec::new() });
        self
    }

    /// End of the open window (`None` without windows): [`Recorder::roll`] is due at or
    /// after it.
    pub fn window_end(&self) -> Option<Nanos> {
        self.windows.as_ref().map(|w| w.start + w.len)
    }

    /// Close the open window if `now` is past it (its rows, and `gauges` sampled once)
    /// and open the window holding `now`; windows in between had no completions.
    pub fn roll(&mut self, now: Nanos, gauges: &mut GaugeSampler) {
        let Some(w) = self.windows.as_mut() else { return };
        if now < w.start + w.len {
            return;
        }
        let end = w.start + w.len;
        w.close(end, gauges);
        w.start = now / w.len * w.len;
    }

    /// The rows and gauge samples of the windows closed since the last call, handed
    /// over: the recorder keeps no copy, so the [`Recorder::summary`] holds only what
    /// was never taken.
    pub fn take_windows(&mut self) -> (Vec<WindowRow>, Vec<GaugeRow>) {
        match self.windows.as_mut() {
            Some(w) => (std::mem::take(&mut w.rows), std::mem::take(&mut w.gauges)),
            None => (Vec::new(), Vec::new()),
        }
    }

    /// Close the last, partial window at `now` (when the gateway stops).
    pub fn finish_windows(&mut self, now: Nanos, gauges: &mut GaugeSampler) {
        self.roll(now, gauges);
        if let Some(w) = self.windows.as_mut() {
            w.close(now.max(w.start), gauges);
            w.start = now.max(w.start);
        }
    }

    fn acc(&mut self, tenant: u32) -> &mut Acc {
        self.tenants.entry(tenant).or_default()
    }

    /// A read or write completed successfully (in the open window: [`Recorder::roll`]
    /// first); its response time is `c.finish − c.req.arrival`.
    pub fn completed(&mut self, c: &Completion) {
        let (tenant, bytes) = (c.req.tenant, c.req.bytes);
        if let Some(w) = self.windows.as_mut() {
            w.open.entry(tenant).or_default().record(c.response(), bytes);
        }
        let slo = self.slos.get(&tenant).copied();
        let a = self.acc(tenant);
        match c.req.op {
            Op::Read => a.reads += 1,
            Op::Write => a.writes += 1,
        }
        a.latency.record(c);
        if let Some(slo) = slo {
            let met = u64::from(c.response() <= slo);
            a.slo_met += met;
            let sec = c.finish / 1_000_000_000;
            let slot = &mut a.recent[(sec % RECENT_SECONDS as u64) as usize];
            if slot.0 != sec {
                *slot = (sec, 0, 0);
            }
            slot.1 += met;
            slot.2 += 1;
        }
    }

    /// Every tenant's counters now (`now`, ns: the clock), with latency counts within
    /// each of `bounds_s` (ascending) and beyond the last (bound `f64::MAX`).
    pub fn metrics(&self, now: Nanos, bounds_s: &[f64]) -> Vec<TenantMetrics> {
        let sec = now / 1_000_000_000;
        self.tenants
            .iter()
            .map(|(&tenant, a)| {
                let h = &a.latency.hist;
                let mut below = 0u64;
                let mut buckets = Vec::with_capacity(bounds_s.len() + 1);
                for &b in bounds_s {
                    let upto = h.count_at_most((b * 1e9) as u64);
                    buckets.push((b, upto.saturating_sub(below)));
                    below = upto.max(below);
                }
                buckets.push((f64::MAX, h.len().saturating_sub(below)));
                let slo = self.slos.get(&tenant).copied();
                let recent = a.recent.iter().filter(|r| r.0 + RECENT_SECONDS as u64 > sec && r.0 <= sec);
                let (met, total) = recent.fold((0, 0), |(m, t), r| (m + r.1, t + r.2));
                TenantMetrics {
                    tenant,
                    reads: a.reads,
                    writes: a.writes,
                    bytes: a.latency.bytes,
                    errors: a.errors,
                    rejected: a.rejected,
                    flushes: a.flushes,
                    latency_sum_s: a.latency.sum_response as f64 / 1e9,
                    latency_buckets: buckets,
                    slo_s: slo.map(|n| n as f64 / 1e9),
                    slo_met: a.slo_met,
                    slo_compliance: (slo.is_some() && total > 0).then(|| met as f64 / total as f64),
                }
            })
            .collect()
    }

    /// A request of `tenant` was answered with an error.
    pub fn error(&mut self, tenant: u32) {
        self.acc(tenant).errors += 1;
    }

    /// A request of `tenant` was rejected by the policy at its limit (answered with an
    /// error the client may retry; counted as an error too).
    pub fn rejected(&mut self, tenant: u32) {
        let a = self.acc(tenant);
        a.errors += 1;
        a.rejected += 1;
    }

    /// A flush of `tenant` completed.
    pub fn flushed(&mut self, tenant: u32) {
        self.acc(tenant).flushes += 1;
    }

    /// The summary after `elapsed_s` seconds of serving.
    pub fn summary(&self, policy: String, elapsed_s: f64, connections: u64, protocol_errors: u64) -> Stats {
        let us = |ns: f64| ns / 1e3;
        let tenants = self
            .tenants
            .iter()
            .map(|(&tenant, a)| {
                let (ops, l) = (a.reads + a.writes, &a.latency);
                let q = |p: f64| us(l.quantile(p) as f64);
                TenantStats {
                    tenant,
                    exports: a.exports.clone(),
                    ops,
                    reads: a.reads,
                    writes: a.writes,
                    bytes: l.bytes,
                    flushes: a.flushes,
                    errors: a.errors,
                    rejected: a.rejected,
                    iops: if elapsed_s > 0.0 { ops as f64 / elapsed_s } else { 0.0 },
                    mean_us: us(l.mean_response()),
                    p50_us: q(0.50),
                    p99_us: q(0.99),
                    max_us: us(l.max_response as f64),
                }
            })
            .collect();
        let (windows, gauges) = match &self.windows {
            Some(w) => (w.rows.clone(), w.gauges.clone()),
            None => (Vec::new(), Vec::new()),
        };
        Stats { policy, elapsed_s, connections, protocol_errors, tenants, windows, gauges }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storqos_core::request::Request;

    /// A completion of `tenant` taking `response` ns.
    fn done(tenant: u32, op: Op, bytes: u32, response: Nanos) -> Completion {
        let req = Request { op, ..Request::new(0, tenant, 0, bytes) };
        Completion { req, dispatch: 0, finish: response }
    }

    #[test]
    fn summary_per_tenant() {
        let mut r = Recorder::new([(0, "a"), (1, "b"), (0, "c")]);
        for i in 1..=100u64 {
            r.completed(&done(0, if i % 2 == 0 { Op::Read } else { Op::Write }, 4096, i * 1_000));
        }
        r.error(0);
        r.flushed(1);
        let s = r.summary("fcfs".into(), 2.0, 3, 1);
        assert_eq!(s.tenants.len(), 2);
        let t0 = s.tenant(0).unwrap();
        assert_eq!(t0.exports, vec!["a".to_string(), "c".to_string()]);
        assert_eq!((t0.ops, t0.reads, t0.writes, t0.bytes, t0.errors), (100, 50, 50, 409_600, 1));
        assert_eq!(t0.iops, 50.0);
        assert!((t0.mean_us - 50.5).abs() < 1e-9, "{}", t0.mean_us);
        assert!((t0.p50_us - 50.0).abs() <= 0.1, "{}", t0.p50_us);
        assert!((t0.p99_us - 99.0).abs() <= 0.1, "{}", t0.p99_us);
        assert!((t0.max_us - 100.0).abs() <= 0.1, "{}", t0.max_us);
        let t1 = s.tenant(1).unwrap();
        assert_eq!((t1.ops, t1.flushes, t1.mean_us, t1.p99_us), (0, 1, 0.0, 0.0));
        assert_eq!((s.connections, s.protocol_errors), (3, 1));
        let j = serde_json::to_value(&s).unwrap();
        assert_eq!(j["tenants"][0]["ops"], 100);
        assert!(s.windows.is_empty() && s.gauges.is_empty());
    }

    #[test]
    fn windows_with_exact_percentiles_and_gauges() {
        const MS: Nanos = 1_000_000;
        let mut r = Recorder::new([(0, "a"), (1, "b")]).with_window(100 * MS);
        let mut samples = 0;
        let mut gauges = |sink: &mut dyn FnMut(&str, f64)| {
            samples += 1;
            sink("lo", samples as f64);
        };
        // Window [0, 100 ms): tenant 0 completes 1..=100 µs.
        for i in 1..=100u64 {
            r.roll(i * MS / 2, &mut gauges);
            r.completed(&done(0, Op::Read, 4096, i * 1_000));
        }
        assert_eq!(r.window_end(), Some(100 * MS));
        // Nothing in [100, 300 ms); window [300, 400 ms): tenant 1, twice.
        r.roll(310 * MS, &mut gauges);
        r.completed(&done(1, Op::Write, 512, 7_000));
        r.completed(&done(1, Op::Write, 512, 9_000));
        assert_eq!(r.window_end(), Some(400 * MS));
        // The live view hands each closed window's rows out once, and keeps no copy.
        let (taken, taken_gauges) = r.take_windows();
        assert_eq!((taken.len(), taken_gauges.len()), (1, 1));
        assert_eq!(r.take_windows(), (Vec::new(), Vec::new()));
        // Stopped at 350 ms: the last window is 50 ms long.
        r.finish_windows(350 * MS, &mut gauges);
        let s = r.summary("fcfs".into(), 0.35, 2, 0);
        assert_eq!(s.windows.iter().map(|w| w.tenant).collect::<Vec<_>>(), vec![1]);
        let windows: Vec<WindowRow> = taken.into_iter().chain(s.windows.iter().cloned()).collect();
        let gauge_rows: Vec<GaugeRow> = taken_gauges.into_iter().chain(s.gauges.iter().cloned()).collect();
        let w0 = &windows[0];
        assert_eq!((w0.start_s, w0.length_s, w0.tenant, w0.ops, w0.bytes), (0.0, 0.1, 0, 100, 409_600));
        assert_eq!((w0.p50_us, w0.p95_us, w0.p99_us, w0.max_us, w0.mean_us), (50.0, 95.0, 99.0, 100.0, 50.5));
        assert!((w0.iops - 1000.0).abs() < 1e-9);
        let w1 = &windows[1];
        assert_eq!((w1.start_s, w1.tenant, w1.ops, w1.p50_us, w1.p99_us), (0.3, 1, 2, 7.0, 9.0));
        assert!((w1.length_s - 0.05).abs() < 1e-12 && (w1.iops - 40.0).abs() < 1e-6);
        // One gauge sample per closed window: at 100 ms (window 0) and at the stop.
        let g: Vec<(f64, f64)> = gauge_rows.iter().map(|g| (g.start_s, g.value)).collect();
        assert_eq!(g, vec![(0.0, 1.0), (0.3, 2.0)]);
        // The totals are unaffected.
        assert_eq!((s.tenant(0).unwrap().ops, s.tenant(1).unwrap().ops), (100, 2));
    }

    #[test]
    fn a_busy_window_keeps_bounded_memory_and_close_percentiles() {
        // 3 × EXACT_SAMPLES completions in one window: 1..=n µs, in a scrambled order.
        let n = 3 * EXACT_SAMPLES as u64;
        let mut r = Recorder::new([(0, "a")]).with_window(1_000_000_000_000);
        for i in 0..n {
            let us = (i * 7919) % n + 1;
            r.completed(&done(0, Op::Read, 4096, us * 1_000));
        }
        let w = &r.windows.as_ref().unwrap().open[&0];
        assert!(w.exact.capacity() <= EXACT_SAMPLES, "kept {} samples", w.exact.capacity());
        r.finish_windows(1, &mut |_| {});
        let row = &r.take_windows().0[0];
        assert_eq!(row.ops, n);
        assert_eq!(row.max_us, n as f64);
        assert!((row.mean_us - (n + 1) as f64 / 2.0).abs() < 1e-6);
        // Nearest rank of 1..=n: p50 = n/2, p99 = 0.99 n; the histogram is within 0.1 %.
        for (got, want) in [(row.p50_us, n as f64 * 0.50), (row.p95_us, n as f64 * 0.95), (row.p99_us, n as f64 * 0.99)]
        {
            assert!((got / want - 1.0).abs() < 2e-3, "{got} vs {want}");
        }
    }
}
