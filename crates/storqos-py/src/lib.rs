//! PyO3 bindings of storqos-core, imported in Python as `storqos._core`.
//!
//! Thin by design: Python passes numpy columns and JSON specs (the schema of
//! `storqos_core::spec`), Rust runs with the GIL released and hands back numpy
//! columns that `storqos.sim` wraps into polars DataFrames. Configuration and input
//! errors become `ValueError` with the core's one-line message.

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use storqos_core::request::{Op, Request, TARGET_ANY};
use storqos_core::sim::summary::GroupSummary;
use storqos_core::sim::{simulate as core_simulate, ClosedClient, SimConfig, SimResult};
use storqos_core::spec::{from_json, merge_streams, DeviceSpec, GeneratorSpec, SchedulerSpec};
use storqos_core::time::Nanos;
use storqos_core::{Device, Error, Scheduler};

fn err(e: Error) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Quantiles reported for every group summary.
const QUANTILES: [(&str, f64); 5] =
    [("p50_ns", 0.50), ("p90_ns", 0.90), ("p95_ns", 0.95), ("p99_ns", 0.99), ("p999_ns", 0.999)];

fn groups_to_dict<'py>(py: Python<'py>, key: &str, groups: &[GroupSummary]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let ids: Vec<u32> = (0..groups.len() as u32).filter(|&i| groups[i as usize].completed > 0).collect();
    let sel: Vec<&GroupSummary> = ids.iter().map(|&i| &groups[i as usize]).collect();
    d.set_item(key, ids.into_pyarray(py))?;
    d.set_item("completed", sel.iter().map(|g| g.completed).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("bytes", sel.iter().map(|g| g.bytes).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("mean_ns", sel.iter().map(|g| g.mean_response()).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("mean_wait_ns", sel.iter().map(|g| g.mean_wait()).collect::<Vec<_>>().into_pyarray(py))?;
    for (name, q) in QUANTILES {
        d.set_item(name, sel.iter().map(|g| g.quantile(q)).collect::<Vec<_>>().into_pyarray(py))?;
    }
    d.set_item("max_ns", sel.iter().map(|g| g.max_response).collect::<Vec<_>>().into_pyarray(py))?;
    let span: Vec<f64> = sel
        .iter()
        .map(|g| if g.last_finish > g.first_arrival { (g.last_finish - g.first_arrival) as f64 / 1e9 } else { 0.0 })
        .collect();
    d.set_item("span_s", span.into_pyarray(py))?;
    Ok(d)
}

/// CDF points of a group's response-time histogram: (value_ns, cumulative fraction),
/// one point per histogram bucket step that holds values.
fn cdf_points(g: &GroupSummary) -> (Vec<u64>, Vec<f64>) {
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    if g.completed == 0 {
        return (xs, ys);
    }
    let total = g.hist.len() as f64;
    let mut cum = 0u64;
    for v in g.hist.iter_recorded() {
        cum += v.count_since_last_iteration();
        xs.push(g.hist.highest_equivalent(v.value_iterated_to()).min(g.max_response));
        ys.push(cum as f64 / total);
    }
    (xs, ys)
}

fn result_to_dict<'py>(py: Python<'py>, r: SimResult) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("tenants", groups_to_dict(py, "tenant", &r.tenants)?)?;
    out.set_item("classes", groups_to_dict(py, "class", &r.classes)?)?;
    out.set_item("total", groups_to_dict(py, "all", std::slice::from_ref(&r.total))?)?;
    // Response-time CDF per tenant from the histograms (summary mode plots).
    let cdf = PyDict::new(py);
    let (mut ct, mut cx, mut cy) = (Vec::new(), Vec::new(), Vec::new());
    for (t, g) in r.tenants.iter().enumerate() {
        let (x, y) = cdf_points(g);
        ct.extend(std::iter::repeat_n(t as u32, x.len()));
        cx.extend(x);
        cy.extend(y);
    }
    cdf.set_item("tenant", ct.into_pyarray(py))?;
    cdf.set_item("response_ns", cx.into_pyarray(py))?;
    cdf.set_item("fraction", cy.into_pyarray(py))?;
    out.set_item("cdf", cdf)?;

    let w = r.windows;
    let wd = PyDict::new(py);
    wd.set_item("start_ns", w.start.into_pyarray(py))?;
    wd.set_item("tenant", w.tenant.into_pyarray(py))?;
    wd.set_item("arrivals", w.arrivals.into_pyarray(py))?;
    wd.set_item("completed", w.completed.into_pyarray(py))?;
    wd.set_item("bytes", w.bytes.into_pyarray(py))?;
    wd.set_item("mean_ns", w.mean_response.into_pyarray(py))?;
    wd.set_item("p50_ns", w.p50_response.into_pyarray(py))?;
    wd.set_item("p95_ns", w.p95_response.into_pyarray(py))?;
    wd.set_item("p99_ns", w.p99_response.into_pyarray(py))?;
    wd.set_item("max_ns", w.max_response.into_pyarray(py))?;
    out.set_item("windows", wd)?;

    let g = r.gauges;
    let gd = PyDict::new(py);
    gd.set_item("start_ns", g.start.into_pyarray(py))?;
    gd.set_item("name", g.name)?;
    gd.set_item("value", g.value.into_pyarray(py))?;
    out.set_item("gauges", gd)?;

    match r.log {
        None => out.set_item("requests", py.None())?,
        Some(l) => {
            let ld = PyDict::new(py);
            ld.set_item("id", l.id.into_pyarray(py))?;
            ld.set_item("tenant", l.tenant.into_pyarray(py))?;
            ld.set_item("class", l.class.into_pyarray(py))?;
            ld.set_item("arrival_ns", l.arrival.into_pyarray(py))?;
            ld.set_item("dispatch_ns", l.dispatch.into_pyarray(py))?;
            ld.set_item("finish_ns", l.finish.into_pyarray(py))?;
            ld.set_item("target", l.target.into_pyarray(py))?;
            ld.set_item("size", l.bytes.into_pyarray(py))?;
            ld.set_item("is_read", l.is_read.into_pyarray(py))?;
            out.set_item("requests", ld)?;
        }
    }
    out.set_item("arrived", r.arrived)?;
    out.set_item("unfinished", r.unfinished)?;
    out.set_item("end_ns", r.end)?;
    out.set_item("events", r.events)?;
    Ok(out)
}

/// One closed-loop client as Python describes it (JSON list element).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ClosedSpec {
    tenant: u32,
    #[serde(default = "one")]
    outstanding: u32,
    #[serde(default)]
    think_ns: Nanos,
    #[serde(default)]
    think_exponential: bool,
    #[serde(default = "four_k")]
    bytes: u32,
    #[serde(default = "one_f")]
    read_fraction: f64,
    #[serde(default)]
    span_bytes: u64,
    #[serde(default)]
    start_ns: Nanos,
    #[serde(default)]
    stop_ns: Option<Nanos>,
    #[serde(default)]
    on_ns: Option<Nanos>,
    #[serde(default)]
    off_ns: Option<Nanos>,
    #[serde(default)]
    target: Option<u8>,
}
fn one() -> u32 {
    1
}
fn one_f() -> f64 {
    1.0
}
fn four_k() -> u32 {
    4096
}

impl ClosedSpec {
    fn into_client(self) -> ClosedClient {
        ClosedClient {
            tenant: self.tenant,
            outstanding: self.outstanding,
            think: self.think_ns,
            think_exponential: self.think_exponential,
            bytes: self.bytes,
            read_fraction: self.read_fraction,
            span_bytes: self.span_bytes,
            start: self.start_ns,
            stop: self.stop_ns.unwrap_or(Nanos::MAX),
            on_off: self.on_ns.map(|on| (on, self.off_ns.unwrap_or(0))),
            target: self.target.unwrap_or(TARGET_ANY),
        }
    }
}

/// Run one simulation.
///
/// Open-loop requests come from the numpy columns (all the same length, arrival-ordered)
/// and/or from `generators_json` (a JSON list of generator specs, merged by time and
/// streamed: never materialised). `closed_json` is a JSON list of closed-loop clients.
/// Returns a dict of numpy columns (see `storqos.sim`).
#[pyfunction]
#[pyo3(signature = (arrival_ns, tenant, size, offset, is_read, target, policy_json, device_json,
                    closed_json="[]", generators_json="[]", seed=1, window_ns=1_000_000_000,
                    keep_requests=false, until_ns=None))]
#[allow(clippy::too_many_arguments)]
fn simulate<'py>(
    py: Python<'py>,
    arrival_ns: PyReadonlyArray1<'py, u64>,
    tenant: PyReadonlyArray1<'py, u32>,
    size: PyReadonlyArray1<'py, u32>,
    offset: PyReadonlyArray1<'py, u64>,
    is_read: PyReadonlyArray1<'py, bool>,
    target: Option<PyReadonlyArray1<'py, u8>>,
    policy_json: &str,
    device_json: &str,
    closed_json: &str,
    generators_json: &str,
    seed: u64,
    window_ns: u64,
    keep_requests: bool,
    until_ns: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let policy: SchedulerSpec = from_json("policy", policy_json).map_err(err)?;
    let device: DeviceSpec = from_json("device", device_json).map_err(err)?;
    let closed: Vec<ClosedSpec> = from_json("closed-loop clients", closed_json).map_err(err)?;
    let gens: Vec<GeneratorSpec> = from_json("generators", generators_json).map_err(err)?;
    let closed: Vec<ClosedClient> = closed.into_iter().map(ClosedSpec::into_client).collect();
    let mut sched = policy.build().map_err(err)?;
    let mut dev = device.build().map_err(err)?;
    let mut streams = Vec::with_capacity(gens.len());
    for g in &gens {
        streams.push(g.build().map_err(err)?);
    }
    let (a, t, s, o, r) = (arrival_ns.as_slice()?, tenant.as_slice()?, size.as_slice()?, offset.as_slice()?, is_read.as_slice()?);
    let tg = match &target {
        Some(x) => Some(x.as_slice()?),
        None => None,
    };
    let n = a.len();
    if t.len() != n || s.len() != n || o.len() != n || r.len() != n || tg.is_some_and(|x| x.len() != n) {
        return Err(PyValueError::new_err("trace columns have different lengths"));
    }
    if let Some(i) = s.iter().position(|&b| b == 0) {
        return Err(PyValueError::new_err(format!("invalid input: request {i} has size 0 bytes")));
    }
    let cfg = SimConfig { seed, window: window_ns, keep_requests, until: until_ns };
    let res = py.detach(move || {
        let trace = (0..n).map(move |i| Request {
            id: i as u64,
            arrival: a[i],
            offset: o[i],
            bytes: s[i],
            tenant: t[i],
            class: t[i],
            op: if r[i] { Op::Read } else { Op::Write },
            target: tg.map_or(TARGET_ANY, |x| x[i]),
        });
        if streams.is_empty() {
            core_simulate(trace, &closed, &mut sched, &mut dev, &cfg)
        } else if n == 0 {
            core_simulate(merge_streams(streams), &closed, &mut sched, &mut dev, &cfg)
        } else {
            // Trace and generators together: the trace is one more stream.
            let boxed: Box<dyn Iterator<Item = Request> + Send> = Box::new(trace.collect::<Vec<_>>().into_iter());
            streams.insert(0, boxed);
            core_simulate(merge_streams(streams), &closed, &mut sched, &mut dev, &cfg)
        }
    });
    let res = res.map_err(err)?;
    result_to_dict(py, res)
}

/// Materialise generator specs (JSON list) into numpy columns, merged by time.
#[pyfunction]
fn generate<'py>(py: Python<'py>, generators_json: &str) -> PyResult<Bound<'py, PyDict>> {
    let gens: Vec<GeneratorSpec> = from_json("generators", generators_json).map_err(err)?;
    let mut streams = Vec::with_capacity(gens.len());
    for g in &gens {
        streams.push(g.build().map_err(err)?);
    }
    let reqs: Vec<Request> = py.detach(move || merge_streams(streams).collect());
    let d = PyDict::new(py);
    d.set_item("arrival_ns", reqs.iter().map(|r| r.arrival).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("is_read", reqs.iter().map(|r| r.op == Op::Read).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("offset", reqs.iter().map(|r| r.offset).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("size", reqs.iter().map(|r| r.bytes).collect::<Vec<_>>().into_pyarray(py))?;
    d.set_item("tenant", reqs.iter().map(|r| r.tenant).collect::<Vec<_>>().into_pyarray(py))?;
    Ok(d)
}

/// Specialised FCFS + constant-rate kernel (the Lindley recursion): completion times.
#[pyfunction]
fn lindley_fcfs<'py>(py: Python<'py>, arrival_ns: PyReadonlyArray1<'py, u64>, service_ns: u64) -> PyResult<Bound<'py, numpy::PyArray1<u64>>> {
    let a = arrival_ns.as_slice()?;
    let out = py.detach(|| storqos_core::sim::lindley::fcfs_constant(a, service_ns));
    Ok(out.into_pyarray(py))
}

/// Specialised FCFS + constant-rate kernel keeping the event loop's summaries (one
/// tenant): returns (mean response ns, p99 ns, number of windows).
#[pyfunction]
fn lindley_fcfs_summary<'py>(py: Python<'py>, arrival_ns: PyReadonlyArray1<'py, u64>, service_ns: u64, window_ns: u64) -> PyResult<(f64, u64, usize)> {
    let a = arrival_ns.as_slice()?;
    let (g, w) = py.detach(|| storqos_core::sim::lindley::fcfs_constant_summary(a, service_ns, window_ns));
    Ok((g.mean_response(), g.quantile(0.99), w.start.len()))
}

/// Validate a policy spec (JSON) and return its display name.
#[pyfunction]
fn check_policy(policy_json: &str) -> PyResult<String> {
    let p: SchedulerSpec = from_json("policy", policy_json).map_err(err)?;
    Ok(p.build().map_err(err)?.name())
}

/// Validate a device spec (JSON) and return its display name.
#[pyfunction]
fn check_device(device_json: &str) -> PyResult<String> {
    let d: DeviceSpec = from_json("device", device_json).map_err(err)?;
    Ok(d.build().map_err(err)?.name())
}

/// The compiled core.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(generate, m)?)?;
    m.add_function(wrap_pyfunction!(lindley_fcfs, m)?)?;
    m.add_function(wrap_pyfunction!(lindley_fcfs_summary, m)?)?;
    m.add_function(wrap_pyfunction!(check_policy, m)?)?;
    m.add_function(wrap_pyfunction!(check_device, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
