//! What `simulate` hands Python, typed: per-group summaries, the response-time CDF, the
//! per-window series, the policy's gauges and the per-request log, each a set of numpy
//! columns of one length (`storqos.model.sim` makes them polars frames), and the run's
//! counts (`SimOutput`).

use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

use storqos_core::sim::cluster::ServerSummary;
use storqos_core::sim::summary::{GaugeSeries, GroupSummary, RequestLog, WindowSeries};
use storqos_core::sim::{ClusterResult, SimResult};

/// A numpy column of `u64`.
type U64s = Py<PyArray1<u64>>;
/// A numpy column of `u32`.
type U32s = Py<PyArray1<u32>>;
/// A numpy column of `f64`.
type F64s = Py<PyArray1<f64>>;

/// `v` as a numpy column owned by Python.
fn col<T: numpy::Element>(py: Python<'_>, v: Vec<T>) -> Py<PyArray1<T>> {
    v.into_pyarray(py).unbind()
}

/// Per-group (tenant, class or the whole run) summaries of the groups that completed
/// requests, one row per group.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct GroupSummaries {
    /// The group's id (tenant or class; 0 for the whole run).
    pub id: U32s,
    /// Requests completed.
    pub completed: U64s,
    /// Their bytes.
    pub bytes: U64s,
    /// Mean response time (ns).
    pub mean_ns: F64s,
    /// Mean time queued before dispatch (ns).
    pub mean_wait_ns: F64s,
    /// Median response time (ns).
    pub p50_ns: U64s,
    /// 90th percentile (ns).
    pub p90_ns: U64s,
    /// 95th percentile (ns).
    pub p95_ns: U64s,
    /// 99th percentile (ns).
    pub p99_ns: U64s,
    /// 99.9th percentile (ns).
    pub p999_ns: U64s,
    /// Largest response time (ns).
    pub max_ns: U64s,
    /// First arrival to last completion (s; 0 when the group finished nothing later).
    pub span_s: F64s,
}

/// Quantiles of every group summary, in the order of `GroupSummaries`' fields.
const QUANTILES: [f64; 5] = [0.50, 0.90, 0.95, 0.99, 0.999];

impl GroupSummaries {
    fn new(py: Python<'_>, groups: &[GroupSummary]) -> Self {
        let ids: Vec<u32> = (0..groups.len() as u32).filter(|&i| groups[i as usize].completed > 0).collect();
        let sel: Vec<&GroupSummary> = ids.iter().map(|&i| &groups[i as usize]).collect();
        let f64s = |f: &dyn Fn(&GroupSummary) -> f64| col(py, sel.iter().map(|g| f(g)).collect());
        let u64s = |f: &dyn Fn(&GroupSummary) -> u64| col(py, sel.iter().map(|g| f(g)).collect());
        let qs: Vec<[u64; 5]> = sel.iter().map(|g| g.quantiles(QUANTILES)).collect();
        let q = |k: usize| col(py, qs.iter().map(|v| v[k]).collect());
        let span = |g: &GroupSummary| {
            if g.last_finish > g.first_arrival {
                (g.last_finish - g.first_arrival) as f64 / 1e9
            } else {
                0.0
            }
        };
        Self {
            completed: u64s(&|g| g.completed),
            bytes: u64s(&|g| g.bytes),
            mean_ns: f64s(&|g| g.mean_response()),
            mean_wait_ns: f64s(&|g| g.mean_wait()),
            p50_ns: q(0),
            p90_ns: q(1),
            p95_ns: q(2),
            p99_ns: q(3),
            p999_ns: q(4),
            max_ns: u64s(&|g| g.max_response),
            span_s: f64s(&span),
            id: col(py, ids),
        }
    }
}

/// Response-time CDF per tenant from the histograms: one point per histogram bucket
/// step that holds values.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct ResponseCdf {
    /// Tenant of the point.
    pub tenant: U32s,
    /// Response time (ns; at most the tenant's largest).
    pub response_ns: U64s,
    /// Fraction of the tenant's requests at or below it.
    pub fraction: F64s,
}

/// CDF points of a group's response-time histogram: (value_ns, cumulative fraction).
fn cdf_points(g: &GroupSummary) -> (Vec<u64>, Vec<f64>) {
    if g.completed == 0 {
        return (Vec::new(), Vec::new());
    }
    let (mut xs, ys) = g.hist.cdf();
    for x in &mut xs {
        *x = (*x).min(g.max_response);
    }
    (xs, ys)
}

impl ResponseCdf {
    fn new(py: Python<'_>, tenants: &[GroupSummary]) -> Self {
        let (mut ct, mut cx, mut cy) = (Vec::new(), Vec::new(), Vec::new());
        for (t, g) in tenants.iter().enumerate() {
            let (x, y) = cdf_points(g);
            ct.extend(std::iter::repeat_n(t as u32, x.len()));
            cx.extend(x);
            cy.extend(y);
        }
        Self { tenant: col(py, ct), response_ns: col(py, cx), fraction: col(py, cy) }
    }
}

/// The per-window, per-tenant series: one row per (window, tenant) with activity.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct SimWindows {
    /// Window start (ns).
    pub start_ns: U64s,
    /// Tenant.
    pub tenant: U32s,
    /// Requests that arrived in the window.
    pub arrivals: U64s,
    /// Requests completed in the window.
    pub completed: U64s,
    /// Their bytes.
    pub bytes: U64s,
    /// Mean response time (ns).
    pub mean_ns: F64s,
    /// Median response time (ns).
    pub p50_ns: U64s,
    /// 95th percentile (ns).
    pub p95_ns: U64s,
    /// 99th percentile (ns).
    pub p99_ns: U64s,
    /// Largest response time (ns).
    pub max_ns: U64s,
}

impl SimWindows {
    /// The core's series as numpy columns (moved, not copied).
    pub(crate) fn new(py: Python<'_>, w: WindowSeries) -> Self {
        Self {
            start_ns: col(py, w.start),
            tenant: col(py, w.tenant),
            arrivals: col(py, w.arrivals),
            completed: col(py, w.completed),
            bytes: col(py, w.bytes),
            mean_ns: col(py, w.mean_response),
            p50_ns: col(py, w.p50_response),
            p95_ns: col(py, w.p95_response),
            p99_ns: col(py, w.p99_response),
            max_ns: col(py, w.max_response),
        }
    }
}

/// The policy's gauges sampled at the end of every window, each name kept once: sample
/// `i` is gauge `names[name_id[i]]`.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct GaugeSamples {
    /// Start of the window the sample closes (ns).
    pub start_ns: U64s,
    /// Index of the sample's name in `names`.
    pub name_id: U32s,
    /// The gauges' names.
    pub names: Vec<String>,
    /// Value.
    pub value: F64s,
}

impl GaugeSamples {
    /// The core's samples as numpy columns (moved, not copied).
    pub(crate) fn new(py: Python<'_>, g: GaugeSeries) -> Self {
        Self { start_ns: col(py, g.start), name_id: col(py, g.name_id), names: g.names, value: col(py, g.value) }
    }
}

/// Every completed request of a run that kept them, in completion order.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct RequestRecords {
    /// Request id (its position in the trace, or the generator's).
    pub id: U64s,
    /// Tenant.
    pub tenant: U32s,
    /// Scheduling class (`class_` in Python, where `class` is a keyword).
    pub class_: U32s,
    /// Arrival time (ns).
    pub arrival_ns: U64s,
    /// Dispatch to the device (ns).
    pub dispatch_ns: U64s,
    /// Completion (ns).
    pub finish_ns: U64s,
    /// Device (server) it was asked of.
    pub target: Py<PyArray1<u8>>,
    /// Size (bytes).
    pub size: U32s,
    /// A read (else a write).
    pub is_read: Py<PyArray1<bool>>,
}

impl RequestRecords {
    fn new(py: Python<'_>, l: RequestLog) -> Self {
        Self {
            id: col(py, l.id),
            tenant: col(py, l.tenant),
            class_: col(py, l.class),
            arrival_ns: col(py, l.arrival),
            dispatch_ns: col(py, l.dispatch),
            finish_ns: col(py, l.finish),
            target: col(py, l.target),
            size: col(py, l.bytes),
            is_read: col(py, l.is_read),
        }
    }
}

/// Everything one simulation produced.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct SimOutput {
    /// Per tenant.
    pub tenants: Py<GroupSummaries>,
    /// Per scheduling class.
    pub classes: Py<GroupSummaries>,
    /// The whole run (one row, id 0, when anything completed).
    pub total: Py<GroupSummaries>,
    /// Response-time CDF per tenant.
    pub cdf: Py<ResponseCdf>,
    /// Per-window, per-tenant series.
    pub windows: Py<SimWindows>,
    /// The policy's gauges per window.
    pub gauges: Py<GaugeSamples>,
    /// Every request, when the run kept them.
    pub requests: Option<Py<RequestRecords>>,
    /// Requests that arrived.
    pub arrived: u64,
    /// Requests that arrived but had not completed (nor been rejected) at the end.
    pub unfinished: u64,
    /// Time of the last event (ns).
    pub end_ns: u64,
    /// Events processed.
    pub events: u64,
    /// Requests the policy rejected at arrival, per tenant (empty when none was).
    pub rejected: Vec<u64>,
}

impl SimOutput {
    /// The core's result as Python objects (its columns moved into numpy arrays).
    pub(crate) fn new(py: Python<'_>, r: SimResult) -> PyResult<Self> {
        Ok(Self {
            tenants: Py::new(py, GroupSummaries::new(py, &r.tenants))?,
            classes: Py::new(py, GroupSummaries::new(py, &r.classes))?,
            total: Py::new(py, GroupSummaries::new(py, std::slice::from_ref(&r.total)))?,
            cdf: Py::new(py, ResponseCdf::new(py, &r.tenants))?,
            windows: Py::new(py, SimWindows::new(py, r.windows))?,
            gauges: Py::new(py, GaugeSamples::new(py, r.gauges))?,
            requests: r.log.map(|l| Py::new(py, RequestRecords::new(py, l))).transpose()?,
            arrived: r.arrived,
            unfinished: r.unfinished,
            end_ns: r.end,
            events: r.events,
            rejected: r.rejected,
        })
    }
}

/// What each server of a cluster run served (its share, as the server sees it), one row
/// per server.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct ServerSummaries {
    /// Server index.
    pub server: U32s,
    /// Sub-requests served (a write once per replica).
    pub completed: U64s,
    /// Their bytes.
    pub bytes: U64s,
    /// Mean response time at the server (ns).
    pub mean_ns: F64s,
    /// Median response time at the server (ns).
    pub p50_ns: U64s,
    /// 99th percentile at the server (ns).
    pub p99_ns: U64s,
    /// Largest response time at the server (ns).
    pub max_ns: U64s,
    /// Served in mClock's reservation phase.
    pub by_reservation: U64s,
    /// Still queued or in service at the end.
    pub unfinished: U64s,
}

impl ServerSummaries {
    fn new(py: Python<'_>, servers: &[ServerSummary]) -> Self {
        let u64s = |f: &dyn Fn(&ServerSummary) -> u64| col(py, servers.iter().map(f).collect());
        Self {
            server: col(py, (0..servers.len() as u32).collect()),
            completed: u64s(&|s| s.served.completed),
            bytes: u64s(&|s| s.served.bytes),
            mean_ns: col(py, servers.iter().map(|s| s.served.mean_response()).collect()),
            p50_ns: u64s(&|s| s.served.quantile(0.5)),
            p99_ns: u64s(&|s| s.served.quantile(0.99)),
            max_ns: u64s(&|s| s.served.max_response),
            by_reservation: u64s(&|s| s.by_reservation),
            unfinished: u64s(&|s| s.unfinished),
        }
    }
}

/// Everything one cluster simulation produced.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct ClusterOutput {
    /// Per tenant, as its client sees its requests (to the last replica's completion).
    pub tenants: Py<GroupSummaries>,
    /// The whole run (one row, id 0, when anything completed).
    pub total: Py<GroupSummaries>,
    /// Response-time CDF per tenant.
    pub cdf: Py<ResponseCdf>,
    /// Per-window, per-tenant series.
    pub windows: Py<SimWindows>,
    /// Per server.
    pub servers: Py<ServerSummaries>,
    /// Requests that arrived.
    pub arrived: u64,
    /// Requests not completed at the end.
    pub unfinished: u64,
    /// Time of the last event (ns).
    pub end_ns: u64,
    /// Events processed.
    pub events: u64,
}

impl ClusterOutput {
    /// The core's result as Python objects (its columns moved into numpy arrays).
    pub(crate) fn new(py: Python<'_>, r: ClusterResult) -> PyResult<Self> {
        Ok(Self {
            tenants: Py::new(py, GroupSummaries::new(py, &r.tenants))?,
            total: Py::new(py, GroupSummaries::new(py, std::slice::from_ref(&r.total)))?,
            cdf: Py::new(py, ResponseCdf::new(py, &r.tenants))?,
            windows: Py::new(py, SimWindows::new(py, r.windows))?,
            servers: Py::new(py, ServerSummaries::new(py, &r.servers))?,
            arrived: r.arrived,
            unfinished: r.unfinished,
            end_ns: r.end,
            events: r.events,
        })
    }
}

/// Add the simulation's result classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GroupSummaries>()?;
    m.add_class::<ResponseCdf>()?;
    m.add_class::<SimWindows>()?;
    m.add_class::<GaugeSamples>()?;
    m.add_class::<RequestRecords>()?;
    m.add_class::<SimOutput>()?;
    m.add_class::<ServerSummaries>()?;
    m.add_class::<ClusterOutput>()
}
