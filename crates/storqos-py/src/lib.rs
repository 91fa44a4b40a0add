//! PyO3 bindings of storqos-core, imported in Python as `storqos._core`.
//!
//! Thin by design: Python passes numpy columns and JSON specs (the schema of
//! `storqos_core::spec`), Rust runs with the GIL released and hands back numpy
//! columns that `storqos.sim` wraps into polars DataFrames. Configuration and input
//! errors become `ValueError` with the core's one-line message.

mod gateway;
mod registry;

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use storqos_core::request::{Op, Request, MAX_TENANTS, TARGET_ANY};
use storqos_core::sim::summary::GroupSummary;
use storqos_core::sim::{simulate_spec, ClosedClient, SimConfig, SimResult};
use storqos_core::spec::generator::Generator;
use storqos_core::spec::{from_json, merge_streams, DeviceSpec, GeneratorSpec, SchedulerSpec};
use storqos_core::time::Nanos;
use storqos_core::{Device, Error, Scheduler};

/// A core error as the Python exception of its kind (`storqos.errors.ConfigError` or
/// `DataError`, subclasses of `InputError`) carrying the core's message.
fn err(e: Error) -> PyErr {
    match e {
        Error::InvalidConfig(m) => typed_error("ConfigError", m),
        Error::InvalidInput(m) => typed_error("DataError", m),
    }
}

/// An instance of `storqos.errors.<class>` with `message`; a `ValueError` with the message
/// if that module cannot be imported (the extension used without its package).
pub(crate) fn typed_error(class: &str, message: String) -> PyErr {
    Python::attach(|py| {
        let ty = py.import("storqos.errors").and_then(|m| m.getattr(class));
        match ty {
            Ok(ty) => match ty.call1((message.as_str(),)) {
                Ok(instance) => PyErr::from_value(instance),
                Err(e) => e,
            },
            Err(_) => PyValueError::new_err(message),
        }
    })
}

/// A Python dict from `key => value` pairs, each value converted by PyO3
/// (`dict!(py, { "completed" => n, "p99_ns" => v.into_pyarray(py) })`): the result tables
/// read as tables instead of one `set_item` call per column.
macro_rules! dict {
    ($py:expr, { $($k:expr => $v:expr),* $(,)? }) => {{
        let d = PyDict::new($py);
        $( d.set_item($k, $v)?; )*
        d
    }};
}

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

/// Materialise generator specs (JSON list) into numpy columns, merged by time.
#[pyfunction]
fn generate<'py>(py: Python<'py>, generators_json: &str) -> PyResult<Bound<'py, PyDict>> {
    let gens: Vec<GeneratorSpec> = from_json("generators", generators_json).map_err(err)?;
    let mut streams = Vec::with_capacity(gens.len());
    for g in &gens {
        streams.push(g.build().map_err(err)?);
    }
    let reqs: Vec<Request> = py.detach(move || merge_streams(streams).collect());
    let d = dict!(py, {
        "arrival_ns" => reqs.iter().map(|r| r.arrival).collect::<Vec<_>>().into_pyarray(py),
        "is_read" => reqs.iter().map(|r| r.op == Op::Read).collect::<Vec<_>>().into_pyarray(py),
        "offset" => reqs.iter().map(|r| r.offset).collect::<Vec<_>>().into_pyarray(py),
        "size" => reqs.iter().map(|r| r.bytes).collect::<Vec<_>>().into_pyarray(py),
        "tenant" => reqs.iter().map(|r| r.tenant).collect::<Vec<_>>().into_pyarray(py),
    });
    Ok(d)
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

/// Allocate device throughput among backlogged clients (seed 004: BAA, DRF, FQ).
///
/// `capacities[k]` IOPS of device k; `fractions[i][k]` share of client i's requests on
/// device k; optional `weights`; `policy` is `baa`, `drf` or `fq`. Returns a dict of
/// lists: fair_share, bottleneck, throughput, per_device (per client), device_iops,
/// utilisation, amplification (None for empty sets / other policies), total.
#[pyfunction]
#[pyo3(signature = (capacities, fractions, policy, weights=None))]
fn allocate<'py>(
    py: Python<'py>,
    capacities: Vec<f64>,
    fractions: Vec<Vec<f64>>,
    policy: &str,
    weights: Option<Vec<f64>>,
) -> PyResult<Bound<'py, PyDict>> {
    use storqos_core::alloc;
    let policy = alloc::Policy::parse(policy).map_err(err)?;
    let mut problem = alloc::Problem::new(capacities, fractions).map_err(err)?;
    if let Some(w) = weights {
        problem = problem.with_weights(w).map_err(err)?;
    }
    let a = py.detach(|| alloc::allocate(&problem, policy)).map_err(err)?;
    let d = dict!(py, {
        "policy" => a.policy.name(),
        "total" => a.total(),
        "fair_share" => a.fair_share,
        "bottleneck" => a.bottleneck,
        "throughput" => a.throughput,
        "per_device" => a.per_device,
        "device_iops" => a.device_iops,
        "utilisation" => a.utilisation,
        "amplification" => a.amplification,
    });
    Ok(d)
}

/// Seed 004 §5.1 simulation: backlogged clients with hit-ratio phases on an SSD + HDD
/// array through BAA / DRF / FQ weights over WF2Q+. `hit_phases[i]` is a list of
/// `(from_ns, hit_ratio)`. Returns per-sample series (see `storqos_core::alloc::scenario`).
#[pyfunction]
#[pyo3(signature = (hdd_iops, ssd_iops, hit_phases, policy, window_ns, period_ns, duration_ns, sample_ns,
                    outstanding=64, depth=64, seed=1, initial_allocation=true, alarm_threshold=None, alarm_check_ns=None))]
#[allow(clippy::too_many_arguments)]
fn baa_scenario<'py>(
    py: Python<'py>,
    hdd_iops: f64,
    ssd_iops: f64,
    hit_phases: Vec<Vec<(u64, f64)>>,
    policy: &str,
    window_ns: u64,
    period_ns: u64,
    duration_ns: u64,
    sample_ns: u64,
    outstanding: u32,
    depth: usize,
    seed: u64,
    initial_allocation: bool,
    alarm_threshold: Option<f64>,
    alarm_check_ns: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    use storqos_core::alloc::{scenario, Policy};
    use storqos_core::schedulers::baa_sched::Alarm;
    let alarm = match (alarm_threshold, alarm_check_ns) {
        (Some(threshold), Some(check)) => Some(Alarm { threshold, check }),
        (None, None) => None,
        _ => return Err(err(Error::InvalidConfig("alarm needs both a threshold and a check interval".into()))),
    };
    let sc = scenario::TieredScenario {
        hdd_iops,
        ssd_iops,
        hit_phases,
        policy: Policy::parse(policy).map_err(err)?,
        window: window_ns,
        period: period_ns,
        alarm,
        initial_allocation,
        outstanding,
        depth,
        duration: duration_ns,
        sample: sample_ns,
        seed,
    };
    let r = py.detach(|| scenario::run(&sc)).map_err(err)?;
    let d = dict!(py, {
        "start_ns" => r.start,
        "throughput" => r.throughput,
        "hdd_utilisation" => r.utilisation.iter().map(|u| u[0]).collect::<Vec<_>>(),
        "ssd_utilisation" => r.utilisation.iter().map(|u| u[1]).collect::<Vec<_>>(),
        "recomputations" => r.recomputations,
    });
    Ok(d)
}

fn sorted_arrivals<'a>(arrival_ns: &'a PyReadonlyArray1<'_, u64>) -> PyResult<&'a [u64]> {
    Ok(arrival_ns.as_slice()?)
}

/// Capacity table Cmin(f, δ) (seed 000 Table 4.1) over arrival times (ns, sorted).
/// `method` is "fast" (the planner search) or "bisect" (per-cell bisection, for
/// comparison). Returns {"cmin_iops": [[...] per deadline], "needed", "requests",
/// "passes", "probes", "closed_form_sweeps", "sample_requests", "sample_probes",
/// "lane_steps"} (the search's cost; see `CapacityTable`). With `fcfs`, also the
/// capacity plain FCFS needs per cell ("fcfs_iops", "fcfs_probes", "fcfs_steps"; see
/// `shaping::fcfs_capacity`), and Cmin lowered where FCFS meets the target below it.
#[pyfunction]
#[pyo3(signature = (arrival_ns, deadlines_ns, fractions, method="fast", fcfs=false))]
fn capacity_table<'py>(
    py: Python<'py>,
    arrival_ns: PyReadonlyArray1<'py, u64>,
    deadlines_ns: Vec<u64>,
    fractions: Vec<f64>,
    method: &str,
    fcfs: bool,
) -> PyResult<Bound<'py, PyDict>> {
    use storqos_core::shaping::{capacity_table as fast, capacity_table_bisect as bisect, fcfs_capacity_table};
    let a = sorted_arrivals(&arrival_ns)?;
    let f = match method {
        "fast" => fast,
        "bisect" => bisect,
        other => return Err(err(Error::InvalidConfig(format!("unknown method {other:?} (fast or bisect)")))),
    };
    let (t, ft) = py
        .detach(|| {
            let mut t = f(a, &deadlines_ns, &fractions)?;
            let ft = if fcfs { Some(fcfs_capacity_table(a, &t)?) } else { None };
            if let Some(ft) = &ft {
                ft.tighten(&mut t);
            }
            Ok::<_, Error>((t, ft))
        })
        .map_err(err)?;
    let rows: Vec<Vec<f64>> = t.cmin.iter().map(|r| r.iter().map(|c| c.iops()).collect()).collect();
    let d = dict!(py, {
        "cmin_iops" => rows,
        "needed" => t.needed,
        "requests" => t.requests,
        "passes" => t.passes,
        "probes" => t.probes,
        "closed_form_sweeps" => t.closed_form_sweeps,
        "sample_requests" => t.sample_requests,
        "sample_probes" => t.sample_probes,
        "lane_steps" => t.lane_steps,
    });
    if let Some(ft) = ft {
        let fcfs_rows: Vec<Vec<f64>> = ft.capacity.iter().map(|r| r.iter().map(|c| c.iops()).collect()).collect();
        d.set_item("fcfs_iops", fcfs_rows)?;
        d.set_item("fcfs_probes", ft.probes)?;
        d.set_item("fcfs_steps", ft.steps)?;
    }
    Ok(d)
}

/// RTT class of every request (true = primary) at `capacity_iops` and `deadline_ns`.
#[pyfunction]
fn rtt_classify<'py>(
    py: Python<'py>,
    arrival_ns: PyReadonlyArray1<'py, u64>,
    capacity_iops: f64,
    deadline_ns: u64,
) -> PyResult<Bound<'py, numpy::PyArray1<bool>>> {
    use storqos_core::shaping::{rtt::classify, Capacity};
    let a = sorted_arrivals(&arrival_ns)?;
    let cap = Capacity::from_iops(capacity_iops).map_err(err)?;
    let out = py.detach(|| classify(a, cap, deadline_ns)).map_err(err)?;
    Ok(out.into_pyarray(py))
}

/// Recursive RTD decomposition: tiers (fractions[i], deadlines_ns[i]). Returns
/// {"capacity_iops": [per tier, 0 when the tier needed nothing], "admitted", "tier"}.
#[pyfunction]
fn rtd_plan<'py>(
    py: Python<'py>,
    arrival_ns: PyReadonlyArray1<'py, u64>,
    fractions: Vec<f64>,
    deadlines_ns: Vec<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    use storqos_core::shaping::rtd::{plan_rtd, Tier};
    if fractions.len() != deadlines_ns.len() {
        return Err(err(Error::InvalidConfig("rtd: as many fractions as deadlines are needed".into())));
    }
    let tiers: Vec<Tier> =
        fractions.iter().zip(&deadlines_ns).map(|(&fraction, &deadline)| Tier { fraction, deadline }).collect();
    let a = sorted_arrivals(&arrival_ns)?;
    let plan = py.detach(|| plan_rtd(a, &tiers)).map_err(err)?;
    let d = dict!(py, {
        "capacity_iops" => plan.capacities.iter().map(|c| c.map_or(0.0, |c| c.iops())).collect::<Vec<_>>(),
        "admitted" => plan.admitted.clone(),
        "tier" => plan.tier_of.into_pyarray(py),
    });
    Ok(d)
}

/// Power of provisioning `capacity_iops` for `requests` requests over `span_ns` with
/// pools of `pool_iops` and `disks_per_pool` disks (seed 000 §3.2.3).
#[pyfunction]
#[pyo3(signature = (capacity_iops, requests, span_ns, pool_iops=200.0, disks_per_pool=4, total_pools=None,
                    active_w=13.5, idle_w=10.2, sleep_w=0.0))]
#[allow(clippy::too_many_arguments)]
fn power_estimate<'py>(
    py: Python<'py>,
    capacity_iops: f64,
    requests: u64,
    span_ns: u64,
    pool_iops: f64,
    disks_per_pool: u32,
    total_pools: Option<u32>,
    active_w: f64,
    idle_w: f64,
    sleep_w: f64,
) -> PyResult<Bound<'py, PyDict>> {
    use storqos_core::shaping::power::PoolModel;
    let m = PoolModel { pool_iops, disks_per_pool, total_pools, active_w, idle_w, sleep_w };
    let e = m.estimate(capacity_iops, requests, span_ns).map_err(err)?;
    let d = dict!(py, {
        "capacity_iops" => e.capacity_iops,
        "on_pools" => e.on_pools,
        "on_disks" => e.on_disks,
        "busy_disk_s" => e.busy_disk_s,
        "span_s" => e.span_s,
        "energy_j" => e.energy_j,
        "power_w" => e.power_w,
    });
    Ok(d)
}

/// Seed 003 profiling runs: device and back end specs (JSON), run length and seed.
fn fclb_profile_config(
    device_json: &str,
    backend_json: &str,
    duration_ns: u64,
    seed: u64,
    span_bytes: Option<u64>,
) -> PyResult<storqos_core::fclb::ProfileConfig> {
    let device: DeviceSpec = from_json("device", device_json).map_err(err)?;
    let backend: SchedulerSpec = from_json("policy", backend_json).map_err(err)?;
    if duration_ns == 0 {
        return Err(err(Error::InvalidConfig("profile duration must be > 0".into())));
    }
    let span = span_bytes.unwrap_or(storqos_core::devices::disk::SEED_DISK_CAPACITY_BYTES);
    let mut cfg = storqos_core::fclb::ProfileConfig::new(device, backend, span);
    cfg.duration = duration_ns;
    cfg.seed = seed;
    Ok(cfg)
}

fn profile_points_to_dict<'py>(
    py: Python<'py>,
    curve: &[storqos_core::fclb::ProfilePoint],
) -> PyResult<Bound<'py, PyDict>> {
    let d = dict!(py, {
        "offered_iops" => curve.iter().map(|p| p.offered_iops).collect::<Vec<_>>(),
        "achieved_iops" => curve.iter().map(|p| p.achieved_iops).collect::<Vec<_>>(),
        "p95_ns" => curve.iter().map(|p| p.p95_all_ns).collect::<Vec<_>>(),
        "mean_ns" => curve.iter().map(|p| p.mean_ns).collect::<Vec<_>>(),
        "p95_by_workload_ns" => curve.iter().map(|p| p.p95_ns.clone()).collect::<Vec<_>>(),
    });
    Ok(d)
}

fn admission_to_dict<'py>(py: Python<'py>, a: &storqos_core::fclb::AdmissionReport) -> PyResult<Bound<'py, PyDict>> {
    let d = dict!(py, {
        "target_iops" => a.target_iops,
        "achieved_iops" => a.achieved_iops,
        "admitted" => a.admitted,
        "stable_limit_iops" => a.stable_limit_iops,
    });
    let rows = dict!(py, {
        "name" => a.rows.iter().map(|r| r.name.clone()).collect::<Vec<_>>(),
        "iops" => a.rows.iter().map(|r| r.iops).collect::<Vec<_>>(),
        "rt_ns" => a.rows.iter().map(|r| r.rt_ns).collect::<Vec<_>>(),
        "rt_measured_ns" => a.rows.iter().map(|r| r.rt_measured_ns).collect::<Vec<_>>(),
        "rt_target_ns" => a.rows.iter().map(|r| r.rt_target_ns).collect::<Vec<_>>(),
        "reference_ns" => a.rows.iter().map(|r| r.reference_ns()).collect::<Vec<_>>(),
        "ok" => a.rows.iter().map(|r| r.ok).collect::<Vec<_>>(),
    });
    d.set_item("rows", rows)?;
    d.set_item("curve", profile_points_to_dict(py, &a.curve)?)?;
    Ok(d)
}

/// Seed 003 admission control: workloads as a JSON list of `{"name", "iops", "rt_ns",
/// "bytes"}`, the storage (`device_json`) behind a back end (`backend_json`). Profiles
/// the IOPS → p95 curve at `curve_rates` too. Returns the Table 3-style report.
#[pyfunction]
#[pyo3(signature = (workloads_json, device_json, backend_json, curve_rates=Vec::new(), duration_ns=60_000_000_000, seed=1, span_bytes=None))]
#[allow(clippy::too_many_arguments)]
fn fclb_admit<'py>(
    py: Python<'py>,
    workloads_json: &str,
    device_json: &str,
    backend_json: &str,
    curve_rates: Vec<f64>,
    duration_ns: u64,
    seed: u64,
    span_bytes: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct W {
        name: String,
        iops: f64,
        rt_ns: u64,
        #[serde(default = "four_k")]
        bytes: u32,
    }
    let ws: Vec<W> = from_json("workloads", workloads_json).map_err(err)?;
    let cands: Vec<storqos_core::fclb::Candidate> = ws
        .into_iter()
        .map(|w| storqos_core::fclb::Candidate { name: w.name, iops: w.iops, rt_ns: w.rt_ns, bytes: w.bytes })
        .collect();
    let cfg = fclb_profile_config(device_json, backend_json, duration_ns, seed, span_bytes)?;
    let report = py.detach(|| storqos_core::fclb::admit(&cfg, &cands, &curve_rates)).map_err(err)?;
    admission_to_dict(py, &report)
}

/// Seed 003 tuning: profile the plant gain G of the mix (`[{"iops", "bytes"}]`) around
/// `operating_iops` and place the closed-loop pole. Returns G, K, the bound 2/G, probes.
#[pyfunction]
#[pyo3(signature = (mix_json, device_json, backend_json, operating_iops, pole, duration_ns=60_000_000_000, seed=1, span_bytes=None))]
#[allow(clippy::too_many_arguments)]
fn fclb_tune<'py>(
    py: Python<'py>,
    mix_json: &str,
    device_json: &str,
    backend_json: &str,
    operating_iops: f64,
    pole: f64,
    duration_ns: u64,
    seed: u64,
    span_bytes: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct M {
        iops: f64,
        #[serde(default = "four_k")]
        bytes: u32,
    }
    let mix: Vec<M> = from_json("mix", mix_json).map_err(err)?;
    let mix: Vec<storqos_core::fclb::MixEntry> =
        mix.into_iter().map(|m| storqos_core::fclb::MixEntry { iops: m.iops, bytes: m.bytes }).collect();
    let cfg = fclb_profile_config(device_json, backend_json, duration_ns, seed, span_bytes)?;
    let (t, est) = py.detach(|| storqos_core::fclb::tune(&cfg, &mix, operating_iops, pole)).map_err(err)?;
    let d = dict!(py, {
        "plant_gain_ms_per_iops" => t.plant_gain_ms_per_iops,
        "pole" => t.pole,
        "gain_iops_per_ms" => t.gain_iops_per_ms,
        "bound_iops_per_ms" => t.bound_iops_per_ms,
        "operating_iops" => est.operating_iops,
        "rt0_ms" => est.rt0_ms,
        "probes" => profile_points_to_dict(py, &est.points)?,
    });
    Ok(d)
}

/// Check a controller gain K (IOPS/ms) against a plant gain G (ms/IOPS): returns the
/// closed-loop pole, or raises ValueError stating the bound 0 < K < 2/G.
#[pyfunction]
fn fclb_check_gain(gain_iops_per_ms: f64, plant_gain_ms_per_iops: f64) -> PyResult<f64> {
    storqos_core::fclb::check_gain(gain_iops_per_ms, plant_gain_ms_per_iops).map_err(err)?;
    Ok(storqos_core::fclb::closed_loop_pole(gain_iops_per_ms, plant_gain_ms_per_iops))
}

/// Seed 003 §4 experiments: derive the setup (admission → references, profiled G →
/// K for `pole`), then run each of `cases` (names like `both`, `inactive-w2`,
/// `step-w2`, `pulse-w1`) under each of `policies` (`fclb`, `fixed-bucket`, `yfq`).
#[pyfunction]
#[pyo3(signature = (cases, policies, pole=None, seed=1))]
fn fclb_experiment<'py>(
    py: Python<'py>,
    cases: Vec<String>,
    policies: Vec<String>,
    pole: Option<f64>,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    use storqos_core::fclb::experiment::{run_case, Case, Policy, Setup};
    let cases: Vec<Case> = cases.iter().map(|c| Case::parse(c)).collect::<Result<_, _>>().map_err(err)?;
    let policies: Vec<Policy> = policies.iter().map(|p| Policy::parse(p)).collect::<Result<_, _>>().map_err(err)?;
    let pole = pole.unwrap_or(storqos_core::fclb::tuning::DEFAULT_POLE);
    let (setup, deriv, runs) = py
        .detach(move || -> storqos_core::Result<_> {
            let (mut setup, deriv) = Setup::derive(pole)?;
            setup.seed = seed;
            let mut runs = Vec::new();
            for &c in &cases {
                for &p in &policies {
                    runs.push(run_case(c, p, &setup)?);
                }
            }
            Ok((setup, deriv, runs))
        })
        .map_err(err)?;
    let out = PyDict::new(py);
    let s = dict!(py, {
        "gain_iops_per_ms" => setup.gain_iops_per_ms,
        "plant_gain_ms_per_iops" => deriv.tuning.plant_gain_ms_per_iops,
        "pole" => deriv.tuning.pole,
        "bound_iops_per_ms" => deriv.tuning.bound_iops_per_ms,
        "operating_iops" => deriv.gain.operating_iops,
        "reference_ns" => setup.workloads.iter().map(|w| w.ref_ns.unwrap_or(w.rt_ns)).collect::<Vec<_>>(),
        "admission" => admission_to_dict(py, &deriv.admission)?,
        "probes" => profile_points_to_dict(py, &deriv.gain.points)?,
    });
    out.set_item("setup", s)?;
    let list = pyo3::types::PyList::empty(py);
    for r in runs {
        let d = dict!(py, {
            "case" => r.case.name(),
            "policy" => r.policy.name(),
            "total_iops" => r.total_iops,
            "throughput_ratio" => r.throughput_ratio,
        });
        let present: Vec<(usize, &storqos_core::fclb::experiment::WorkloadOutcome)> =
            r.workloads.iter().enumerate().filter_map(|(i, o)| o.as_ref().map(|o| (i, o))).collect();
        let of = |f: &dyn Fn(&storqos_core::fclb::experiment::WorkloadOutcome) -> f64| {
            present.iter().map(|(_, o)| f(o)).collect::<Vec<f64>>()
        };
        let w = dict!(py, {
            "workload" => present.iter().map(|(i, _)| *i as u32).collect::<Vec<_>>(),
            "completed" => present.iter().map(|(_, o)| o.completed).collect::<Vec<_>>(),
            "throughput_iops" => of(&|o| o.throughput_iops),
            "steady_iops" => of(&|o| o.steady_iops),
            "violation_pct" => of(&|o| o.violation_pct),
            "p95_ms" => of(&|o| o.p95_ms),
            "final_rate_iops" => of(&|o| o.final_rate_iops),
        });
        d.set_item("workloads", w)?;
        let wd = dict!(py, {
            "start_ns" => r.windows.start.into_pyarray(py),
            "tenant" => r.windows.tenant.into_pyarray(py),
            "completed" => r.windows.completed.into_pyarray(py),
            "p95_ns" => r.windows.p95_response.into_pyarray(py),
        });
        d.set_item("windows", wd)?;
        let gd = dict!(py, {
            "start_ns" => r.gauges.start.into_pyarray(py),
            "name_id" => r.gauges.name_id.into_pyarray(py),
            "names" => r.gauges.names,
            "value" => r.gauges.value.into_pyarray(py),
        });
        d.set_item("gauges", gd)?;
        list.append(d)?;
    }
    out.set_item("runs", list)?;
    Ok(out)
}

/// The compiled core.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The core's bounds, so that Python checks flags against them without restating them.
    m.add("MAX_TENANTS", MAX_TENANTS)?;
    m.add("MAX_OUTSTANDING", storqos_core::sim::workload::MAX_OUTSTANDING)?;
    m.add("MAX_SERVERS", storqos_core::devices::array::MAX_SERVERS)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(generate, m)?)?;
    m.add_function(wrap_pyfunction!(check_policy, m)?)?;
    m.add_function(wrap_pyfunction!(check_device, m)?)?;
    m.add_function(wrap_pyfunction!(fclb_admit, m)?)?;
    m.add_function(wrap_pyfunction!(fclb_tune, m)?)?;
    m.add_function(wrap_pyfunction!(fclb_check_gain, m)?)?;
    m.add_function(wrap_pyfunction!(fclb_experiment, m)?)?;
    m.add_function(wrap_pyfunction!(capacity_table, m)?)?;
    m.add_function(wrap_pyfunction!(rtt_classify, m)?)?;
    m.add_function(wrap_pyfunction!(rtd_plan, m)?)?;
    m.add_function(wrap_pyfunction!(power_estimate, m)?)?;
    m.add_function(wrap_pyfunction!(allocate, m)?)?;
    m.add_function(wrap_pyfunction!(baa_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(gateway::serve, m)?)?;
    m.add_function(wrap_pyfunction!(gateway::check_gateway, m)?)?;
    registry::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
