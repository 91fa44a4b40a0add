//! `storqos._core.simulate`: one simulation over numpy trace columns, generator specs and
//! closed-loop clients, its per-tenant, per-class and windowed results as numpy columns.

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use storqos_core::request::{Op, Request, MAX_TENANTS, TARGET_ANY};
use storqos_core::sim::summary::GroupSummary;
use storqos_core::sim::{simulate_spec, ClosedClient, SimConfig, SimResult};
use storqos_core::spec::generator::Generator;
use storqos_core::spec::{from_json, merge_streams, DeviceSpec, GeneratorSpec, SchedulerSpec};
use storqos_core::time::Nanos;
use storqos_core::Error;

use crate::errors::err;

/// Quantiles reported for every group summary.
const QUANTILES: [(&str, f64); 5] =
    [("p50_ns", 0.50), ("p90_ns", 0.90), ("p95_ns", 0.95), ("p99_ns", 0.99), ("p999_ns", 0.999)];

fn groups_to_dict<'py>(py: Python<'py>, key: &str, groups: &[GroupSummary]) -> PyResult<Bound<'py, PyDict>> {
    let ids: Vec<u32> = (0..groups.len() as u32).filter(|&i| groups[i as usize].completed > 0).collect();
    let sel: Vec<&GroupSummary> = ids.iter().map(|&i| &groups[i as usize]).collect();
    // One numpy column of `f` over the groups that completed requests.
    let col = |f: &dyn Fn(&GroupSummary) -> f64| sel.iter().map(|g| f(g)).collect::<Vec<f64>>().into_pyarray(py);
    let col_u64 = |f: &dyn Fn(&GroupSummary) -> u64| sel.iter().map(|g| f(g)).collect::<Vec<u64>>().into_pyarray(py);
    let d = dict!(py, {
        key => ids.into_pyarray(py),
        "completed" => col_u64(&|g| g.completed),
        "bytes" => col_u64(&|g| g.bytes),
        "mean_ns" => col(&|g| g.mean_response()),
        "mean_wait_ns" => col(&|g| g.mean_wait()),
    });
    let qs: Vec<[u64; 5]> = sel.iter().map(|g| g.quantiles(QUANTILES.map(|(_, q)| q))).collect();
    for (k, (name, _)) in QUANTILES.iter().enumerate() {
        d.set_item(name, qs.iter().map(|v| v[k]).collect::<Vec<u64>>().into_pyarray(py))?;
    }
    d.set_item("max_ns", col_u64(&|g| g.max_response))?;
    let span = |g: &GroupSummary| {
        if g.last_finish > g.first_arrival {
            (g.last_finish - g.first_arrival) as f64 / 1e9
        } else {
            0.0
        }
    };
    d.set_item("span_s", col(&span))?;
    Ok(d)
}

/// CDF points of a group's response-time histogram: (value_ns, cumulative fraction),
/// one point per histogram bucket step that holds values.
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

fn result_to_dict<'py>(py: Python<'py>, r: SimResult) -> PyResult<Bound<'py, PyDict>> {
    let out = dict!(py, {
        "tenants" => groups_to_dict(py, "tenant", &r.tenants)?,
        "classes" => groups_to_dict(py, "class", &r.classes)?,
        "total" => groups_to_dict(py, "all", std::slice::from_ref(&r.total))?,
    });
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
    let wd = dict!(py, {
        "start_ns" => w.start.into_pyarray(py),
        "tenant" => w.tenant.into_pyarray(py),
        "arrivals" => w.arrivals.into_pyarray(py),
        "completed" => w.completed.into_pyarray(py),
        "bytes" => w.bytes.into_pyarray(py),
        "mean_ns" => w.mean_response.into_pyarray(py),
        "p50_ns" => w.p50_response.into_pyarray(py),
        "p95_ns" => w.p95_response.into_pyarray(py),
        "p99_ns" => w.p99_response.into_pyarray(py),
        "max_ns" => w.max_response.into_pyarray(py),
    });
    out.set_item("windows", wd)?;

    let g = r.gauges;
    let gd = dict!(py, {
        "start_ns" => g.start.into_pyarray(py),
        "name_id" => g.name_id.into_pyarray(py),
        "names" => g.names,
        "value" => g.value.into_pyarray(py),
    });
    out.set_item("gauges", gd)?;

    match r.log {
        None => out.set_item("requests", py.None())?,
        Some(l) => {
            let ld = dict!(py, {
                "id" => l.id.into_pyarray(py),
                "tenant" => l.tenant.into_pyarray(py),
                "class" => l.class.into_pyarray(py),
                "arrival_ns" => l.arrival.into_pyarray(py),
                "dispatch_ns" => l.dispatch.into_pyarray(py),
                "finish_ns" => l.finish.into_pyarray(py),
                "target" => l.target.into_pyarray(py),
                "size" => l.bytes.into_pyarray(py),
                "is_read" => l.is_read.into_pyarray(py),
            });
            out.set_item("requests", ld)?;
        }
    }
    for (k, v) in [("arrived", r.arrived), ("unfinished", r.unfinished), ("end_ns", r.end), ("events", r.events)] {
        out.set_item(k, v)?;
    }
    out.set_item("rejected", r.rejected)?;
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
/// The request size of a spec that gives none: 4 KiB.
pub(crate) fn four_k() -> u32 {
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
/// Returns a dict of numpy columns (see `storqos.model.sim`).
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
    let (a, t, s, o, r) =
        (arrival_ns.as_slice()?, tenant.as_slice()?, size.as_slice()?, offset.as_slice()?, is_read.as_slice()?);
    let tg = match &target {
        Some(x) => Some(x.as_slice()?),
        None => None,
    };
    let n = a.len();
    if t.len() != n || s.len() != n || o.len() != n || r.len() != n || tg.is_some_and(|x| x.len() != n) {
        return Err(err(Error::InvalidInput("trace columns have different lengths".into())));
    }
    // A max / min first (vectorised), the position only for the message.
    if t.iter().copied().max().unwrap_or(0) >= MAX_TENANTS {
        let i = t.iter().position(|&x| x >= MAX_TENANTS).unwrap_or(0);
        return Err(err(Error::InvalidInput(format!(
            "request {i} has tenant {}, tenants must be below {MAX_TENANTS}",
            t[i]
        ))));
    }
    if s.iter().copied().min() == Some(0) {
        let i = s.iter().position(|&b| b == 0).unwrap_or(0);
        return Err(err(Error::InvalidInput(format!("request {i} has size 0 bytes"))));
    }
    let cfg = SimConfig { seed, window: window_ns, keep_requests, until: until_ns };
    let res = py.detach(move || {
        // Lengths were checked above; re-slicing to `n` lets the compiler drop the
        // per-element bounds checks.
        let (a, o, s, t, r) = (&a[..n], &o[..n], &s[..n], &t[..n], &r[..n]);
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
            simulate_spec(trace, &closed, &mut sched, &mut dev, &cfg)
        } else if n == 0 {
            simulate_spec(merge_streams(streams), &closed, &mut sched, &mut dev, &cfg)
        } else {
            // Trace and generators together: the trace is one more stream.
            streams.insert(0, Generator::Boxed(Box::new(trace.collect::<Vec<_>>().into_iter())));
            simulate_spec(merge_streams(streams), &closed, &mut sched, &mut dev, &cfg)
        }
    });
    let res = res.map_err(err)?;
    result_to_dict(py, res)
}

/// Add `simulate` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)
}
