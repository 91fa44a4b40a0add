//! What the live gateway hands Python, typed: its ready information (`GatewayInfo`, the
//! exports as `GatewayExport`), its final statistics (`GatewayStats`, per tenant
//! `TenantStats`) and the rows of its per-window series (`WindowRow`, `GaugeRow`).
//!
//! Each mirrors its `storqos_gateway` type field for field, in the same order, so that
//! `to_json()` writes the document the gateway's own serialisation wrote (the JSON
//! `storqos serve --json` prints and the ready line of a gateway child process).

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use serde::Serialize;

/// `v` as JSON text (a `RuntimeError` if it cannot be: never for these plain types).
fn json<T: Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// One served export as reported when the gateway is ready.
#[pyclass(module = "storqos._core", frozen, get_all)]
#[derive(Clone, Serialize)]
pub struct GatewayExport {
    /// NBD export name.
    pub name: String,
    /// Backing file.
    pub path: String,
    /// Tenant.
    pub tenant: u32,
    /// Scheduling class (`class_` in Python, where `class` is a keyword).
    #[serde(rename = "class")]
    pub class_: u32,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Served read-only.
    pub read_only: bool,
    /// Read and written with `O_DIRECT`.
    pub direct: bool,
    /// Client networks allowed (empty: all).
    pub allow: Vec<String>,
}

impl From<&storqos_gateway::ExportInfo> for GatewayExport {
    fn from(e: &storqos_gateway::ExportInfo) -> Self {
        Self {
            name: e.name.clone(),
            path: e.path.clone(),
            tenant: e.tenant,
            class_: e.class,
            size_bytes: e.size_bytes,
            read_only: e.read_only,
            direct: e.direct,
            allow: e.allow.clone(),
        }
    }
}

/// What the gateway serves, known once it listens (or, from `check_gateway`, what it
/// would serve, `listen` as given).
#[pyclass(module = "storqos._core", frozen, get_all)]
#[derive(Clone, Serialize)]
pub struct GatewayInfo {
    /// The bound address (the real port when port 0 was asked for), or `unix:/PATH`.
    pub listen: String,
    /// TLS: `off`, `on` or `require`.
    pub tls: String,
    /// Policy name.
    pub policy: String,
    /// Backend slots.
    pub depth: usize,
    /// Emulated capacity (IOPS), if any.
    pub iops: Option<f64>,
    /// Where Prometheus metrics are served, if anywhere.
    pub metrics: Option<String>,
    /// How direct exports' files are read: `threads` or `io_uring`.
    pub direct_reads: String,
    /// The exports.
    pub exports: Vec<GatewayExport>,
    /// What the check found doubtful without refusing it.
    pub warnings: Vec<String>,
}

impl From<&storqos_gateway::ReadyInfo> for GatewayInfo {
    fn from(i: &storqos_gateway::ReadyInfo) -> Self {
        Self {
            listen: i.listen.clone(),
            tls: i.tls.clone(),
            policy: i.policy.clone(),
            depth: i.depth,
            iops: i.iops,
            metrics: i.metrics.clone(),
            direct_reads: i.direct_reads.clone(),
            exports: i.exports.iter().map(GatewayExport::from).collect(),
            warnings: i.warnings.clone(),
        }
    }
}

#[pymethods]
impl GatewayInfo {
    /// The information as the gateway's JSON document.
    fn to_json(&self) -> PyResult<String> {
        json(self)
    }
}

/// The final statistics of one tenant.
#[pyclass(module = "storqos._core", frozen, get_all)]
#[derive(Clone, Serialize)]
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
    /// Requests answered with an error.
    pub errors: u64,
    /// Of which rejected by the policy at the tenant's limit.
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

impl From<&storqos_gateway::TenantStats> for TenantStats {
    fn from(t: &storqos_gateway::TenantStats) -> Self {
        Self {
            tenant: t.tenant,
            exports: t.exports.clone(),
            ops: t.ops,
            reads: t.reads,
            writes: t.writes,
            bytes: t.bytes,
            flushes: t.flushes,
            errors: t.errors,
            rejected: t.rejected,
            iops: t.iops,
            mean_us: t.mean_us,
            p50_us: t.p50_us,
            p99_us: t.p99_us,
            max_us: t.max_us,
        }
    }
}

/// One (window, tenant) row of the per-window series.
#[pyclass(module = "storqos._core", frozen, get_all)]
#[derive(Clone, Serialize)]
pub struct WindowRow {
    /// Window start (s since the gateway started).
    pub start_s: f64,
    /// Window length (s).
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
    /// Median response time (µs).
    pub p50_us: f64,
    /// 95th percentile (µs).
    pub p95_us: f64,
    /// 99th percentile (µs).
    pub p99_us: f64,
    /// Largest response time (µs).
    pub max_us: f64,
}

impl From<&storqos_gateway::WindowRow> for WindowRow {
    fn from(r: &storqos_gateway::WindowRow) -> Self {
        Self {
            start_s: r.start_s,
            length_s: r.length_s,
            tenant: r.tenant,
            ops: r.ops,
            bytes: r.bytes,
            iops: r.iops,
            mean_us: r.mean_us,
            p50_us: r.p50_us,
            p95_us: r.p95_us,
            p99_us: r.p99_us,
            max_us: r.max_us,
        }
    }
}

/// One gauge of the policy, sampled at the end of a window.
#[pyclass(module = "storqos._core", frozen, get_all)]
#[derive(Clone, Serialize)]
pub struct GaugeRow {
    /// Start of the window it closes (s since the gateway started).
    pub start_s: f64,
    /// Gauge name.
    pub name: String,
    /// Value.
    pub value: f64,
}

impl From<&storqos_gateway::GaugeRow> for GaugeRow {
    fn from(g: &storqos_gateway::GaugeRow) -> Self {
        Self { start_s: g.start_s, name: g.name.clone(), value: g.value }
    }
}

/// What a gateway run did, returned when it stops.
#[pyclass(module = "storqos._core", frozen, get_all)]
#[derive(Clone, Serialize)]
pub struct GatewayStats {
    /// The policy's name.
    pub policy: String,
    /// Serving time (s).
    pub elapsed_s: f64,
    /// Client connections accepted.
    pub connections: u64,
    /// Connections closed because of a protocol error.
    pub protocol_errors: u64,
    /// Per tenant, in tenant order (every configured tenant, even idle ones).
    pub tenants: Vec<TenantStats>,
    /// Per-window series (empty without a window length, or when handed to `on_window`).
    pub windows: Vec<WindowRow>,
    /// The policy's gauges at the end of every window (empty likewise).
    pub gauges: Vec<GaugeRow>,
}

impl From<&storqos_gateway::Stats> for GatewayStats {
    fn from(s: &storqos_gateway::Stats) -> Self {
        Self {
            policy: s.policy.clone(),
            elapsed_s: s.elapsed_s,
            connections: s.connections,
            protocol_errors: s.protocol_errors,
            tenants: s.tenants.iter().map(TenantStats::from).collect(),
            windows: rows(&s.windows),
            gauges: gauges(&s.gauges),
        }
    }
}

#[pymethods]
impl GatewayStats {
    /// The statistics as the gateway's JSON document.
    fn to_json(&self) -> PyResult<String> {
        json(self)
    }
}

/// The gateway's window rows, typed.
pub(crate) fn rows(rows: &[storqos_gateway::WindowRow]) -> Vec<WindowRow> {
    rows.iter().map(WindowRow::from).collect()
}

/// The gateway's gauge samples, typed.
pub(crate) fn gauges(gauges: &[storqos_gateway::GaugeRow]) -> Vec<GaugeRow> {
    gauges.iter().map(GaugeRow::from).collect()
}

/// Add the gateway's result classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GatewayExport>()?;
    m.add_class::<GatewayInfo>()?;
    m.add_class::<TenantStats>()?;
    m.add_class::<WindowRow>()?;
    m.add_class::<GaugeRow>()?;
    m.add_class::<GatewayStats>()
}
