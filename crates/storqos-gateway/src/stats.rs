//! Per-tenant live statistics: completed operations, bytes, errors and an HDR
//! histogram of the gateway-side response time (from the request entering the
//! scheduler to its backend I/O completing), summarised as mean / p50 / p99 / max in
//! microseconds and IOPS over the serving time.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;
use storqos_core::request::Op;
use storqos_core::time::Nanos;

/// Largest response time the histograms track exactly (1 hour); longer ones saturate.
const MAX_TRACKED_NS: u64 = 3_600_000_000_000;
/// Significant digits of the histograms (0.1 % relative error).
const SIGFIG: u8 = 3;

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
    /// Requests answered with an error (out of range, unsupported, backend failure).
    pub errors: u64,
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
}

impl Stats {
    /// The statistics of `tenant`, if it is configured.
    pub fn tenant(&self, tenant: u32) -> Option<&TenantStats> {
        self.tenants.iter().find(|t| t.tenant == tenant)
    }
}

struct Acc {
    exports: Vec<String>,
    reads: u64,
    writes: u64,
    bytes: u64,
    flushes: u64,
    errors: u64,
    sum_ns: u128,
    hist: Histogram<u64>,
}

impl Acc {
    fn new() -> Self {
        Acc {
            exports: Vec::new(),
            reads: 0,
            writes: 0,
            bytes: 0,
            flushes: 0,
            errors: 0,
            sum_ns: 0,
            hist: Histogram::new_with_bounds(1, MAX_TRACKED_NS, SIGFIG).expect("valid histogram bounds"),
        }
    }
}

/// Accumulates per-tenant statistics while the gateway runs.
pub struct Recorder {
    tenants: BTreeMap<u32, Acc>,
}

impl Recorder {
    /// A recorder knowing the configured `(tenant, export name)` pairs.
    pub fn new<'a>(exports: impl IntoIterator<Item = (u32, &'a str)>) -> Self {
        let mut tenants = BTreeMap::new();
        for (t, name) in exports {
            tenants.entry(t).or_insert_with(Acc::new).exports.push(name.to_string());
        }
        Recorder { tenants }
    }

    fn acc(&mut self, tenant: u32) -> &mut Acc {
        self.tenants.entry(tenant).or_insert_with(Acc::new)
    }

    /// A read or write of `bytes` completed successfully after `response` ns.
    pub fn completed(&mut self, tenant: u32, op: Op, bytes: u32, response: Nanos) {
        let a = self.acc(tenant);
        match op {
            Op::Read => a.reads += 1,
            Op::Write => a.writes += 1,
        }
        a.bytes += u64::from(bytes);
        a.sum_ns += u128::from(response);
        a.hist.saturating_record(response.max(1));
    }

    /// A request of `tenant` was answered with an error.
    pub fn error(&mut self, tenant: u32) {
        self.acc(tenant).errors += 1;
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
                let ops = a.reads + a.writes;
                let q = |p: f64| if ops == 0 { 0.0 } else { us(a.hist.value_at_quantile(p) as f64) };
                TenantStats {
                    tenant,
                    exports: a.exports.clone(),
                    ops,
                    reads: a.reads,
                    writes: a.writes,
                    bytes: a.bytes,
                    flushes: a.flushes,
                    errors: a.errors,
                    iops: if elapsed_s > 0.0 { ops as f64 / elapsed_s } else { 0.0 },
                    mean_us: if ops == 0 { 0.0 } else { us(a.sum_ns as f64 / ops as f64) },
                    p50_us: q(0.50),
                    p99_us: q(0.99),
                    max_us: if ops == 0 { 0.0 } else { us(a.hist.max() as f64) },
                }
            })
            .collect();
        Stats { policy, elapsed_s, connections, protocol_errors, tenants }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_per_tenant() {
        let mut r = Recorder::new([(0, "a"), (1, "b"), (0, "c")]);
        for i in 1..=100u64 {
            r.completed(0, if i % 2 == 0 { Op::Read } else { Op::Write }, 4096, i * 1_000);
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
    }
}
