//! `storqos._core.simulate`: one simulation over numpy trace columns, generator specs and
//! closed-loop clients; its results (`sim_results`) are numpy columns.

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;

use storqos_core::request::{Op, Request, MAX_TENANTS, TARGET_ANY};
use storqos_core::sim::{
    simulate_cluster as simulate_cluster_core, simulate_spec, ClosedClient, ClusterSpec, SimConfig,
};
use storqos_core::spec::generator::Generator;
use storqos_core::spec::{from_json, merge_streams, DeviceSpec, GeneratorSpec, SchedulerSpec};
use storqos_core::time::Nanos;
use storqos_core::Error;

use crate::errors::err;
use crate::sim_results::{ClusterOutput, SimOutput};

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

/// A trace's numpy columns, checked: one length, tenants below the bound, no empty request.
struct Columns<'a> {
    a: &'a [u64],
    t: &'a [u32],
    s: &'a [u32],
    o: &'a [u64],
    r: &'a [bool],
    tg: Option<&'a [u8]>,
}

impl<'a> Columns<'a> {
    fn new(
        arrival_ns: &'a PyReadonlyArray1<'_, u64>,
        tenant: &'a PyReadonlyArray1<'_, u32>,
        size: &'a PyReadonlyArray1<'_, u32>,
        offset: &'a PyReadonlyArray1<'_, u64>,
        is_read: &'a PyReadonlyArray1<'_, bool>,
        target: Option<&'a PyReadonlyArray1<'_, u8>>,
    ) -> PyResult<Self> {
        let (a, t, s, o, r) =
            (arrival_ns.as_slice()?, tenant.as_slice()?, size.as_slice()?, offset.as_slice()?, is_read.as_slice()?);
        let tg = match target {
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
        Ok(Columns { a, t, s, o, r, tg })
    }

    fn len(&self) -> usize {
        self.a.len()
    }

    /// The requests, in trace order, ids their positions.
    fn requests(&self) -> impl Iterator<Item = Request> + '_ {
        let n = self.a.len();
        // Lengths were checked; re-slicing to `n` lets the compiler drop the per-element
        // bounds checks.
        let (a, o, s, t, r, tg) = (&self.a[..n], &self.o[..n], &self.s[..n], &self.t[..n], &self.r[..n], self.tg);
        (0..n).map(move |i| Request {
            id: i as u64,
            arrival: a[i],
            offset: o[i],
            bytes: s[i],
            tenant: t[i],
            class: t[i],
            op: if r[i] { Op::Read } else { Op::Write },
            target: tg.map_or(TARGET_ANY, |x| x[i]),
        })
    }
}

/// The closed-loop clients and the built generator streams of a run (JSON lists).
fn workload(closed_json: &str, generators_json: &str) -> PyResult<(Vec<ClosedClient>, Vec<Generator>)> {
    let closed: Vec<ClosedSpec> = from_json("closed-loop clients", closed_json).map_err(err)?;
    let gens: Vec<GeneratorSpec> = from_json("generators", generators_json).map_err(err)?;
    let streams = gens.iter().map(|g| g.build().map_err(err)).collect::<PyResult<Vec<_>>>()?;
    Ok((closed.into_iter().map(ClosedSpec::into_client).collect(), streams))
}

/// Run one simulation.
///
/// Open-loop requests come from the numpy columns (all the same length, arrival-ordered)
/// and/or from `generators_json` (a JSON list of generator specs, merged by time and
/// streamed: never materialised). `closed_json` is a JSON list of closed-loop clients.
/// Returns a `SimOutput` of numpy columns (see `storqos.model.sim`).
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
) -> PyResult<SimOutput> {
    let policy: SchedulerSpec = from_json("policy", policy_json).map_err(err)?;
    let device: DeviceSpec = from_json("device", device_json).map_err(err)?;
    let (closed, mut streams) = workload(closed_json, generators_json)?;
    let mut sched = policy.build().map_err(err)?;
    let mut dev = device.build().map_err(err)?;
    let cols = Columns::new(&arrival_ns, &tenant, &size, &offset, &is_read, target.as_ref())?;
    let cfg = SimConfig { seed, window: window_ns, keep_requests, until: until_ns };
    let res = py.detach(move || {
        let trace = cols.requests();
        if streams.is_empty() {
            simulate_spec(trace, &closed, &mut sched, &mut dev, &cfg)
        } else if cols.len() == 0 {
            simulate_spec(merge_streams(streams), &closed, &mut sched, &mut dev, &cfg)
        } else {
            // Trace and generators together: the trace is one more stream.
            streams.insert(0, Generator::Boxed(Box::new(trace.collect::<Vec<_>>().into_iter())));
            simulate_spec(merge_streams(streams), &closed, &mut sched, &mut dev, &cfg)
        }
    });
    let res = res.map_err(err)?;
    SimOutput::new(py, res)
}

/// Run one simulation of a cluster: the trace's requests (and generators' and closed
/// clients') placed on `cluster_json`'s servers, each a `device_json` behind its own
/// `policy_json`. `server` gives each trace request's server when the placement is
/// `given`. Returns a `ClusterOutput` of numpy columns (see `storqos.model.cluster`).
#[pyfunction]
#[pyo3(signature = (arrival_ns, tenant, size, offset, is_read, server, policy_json, device_json, cluster_json,
                    closed_json="[]", generators_json="[]", seed=1, window_ns=1_000_000_000, until_ns=None))]
#[allow(clippy::too_many_arguments)]
fn simulate_cluster<'py>(
    py: Python<'py>,
    arrival_ns: PyReadonlyArray1<'py, u64>,
    tenant: PyReadonlyArray1<'py, u32>,
    size: PyReadonlyArray1<'py, u32>,
    offset: PyReadonlyArray1<'py, u64>,
    is_read: PyReadonlyArray1<'py, bool>,
    server: Option<PyReadonlyArray1<'py, u32>>,
    policy_json: &str,
    device_json: &str,
    cluster_json: &str,
    closed_json: &str,
    generators_json: &str,
    seed: u64,
    window_ns: u64,
    until_ns: Option<u64>,
) -> PyResult<ClusterOutput> {
    let policy: SchedulerSpec = from_json("policy", policy_json).map_err(err)?;
    let device: DeviceSpec = from_json("device", device_json).map_err(err)?;
    let cluster: ClusterSpec = from_json("cluster", cluster_json).map_err(err)?;
    let (closed, mut streams) = workload(closed_json, generators_json)?;
    let cols = Columns::new(&arrival_ns, &tenant, &size, &offset, &is_read, None)?;
    let given = match &server {
        Some(x) => Some(x.as_slice()?),
        None => None,
    };
    if given.is_some_and(|g| g.len() != cols.len()) {
        return Err(err(Error::InvalidInput("trace columns have different lengths (server)".into())));
    }
    if given.is_some() && !streams.is_empty() {
        return Err(err(Error::InvalidConfig(
            "cluster: generators have no server column: use hash placement with them".into(),
        )));
    }
    let cfg = SimConfig { seed, window: window_ns, keep_requests: false, until: until_ns };
    let res = py.detach(move || {
        let trace = cols.requests();
        if streams.is_empty() {
            simulate_cluster_core(trace, given, &closed, &policy, &device, &cluster, &cfg)
        } else {
            streams.insert(0, Generator::Boxed(Box::new(trace.collect::<Vec<_>>().into_iter())));
            simulate_cluster_core(merge_streams(streams), None, &closed, &policy, &device, &cluster, &cfg)
        }
    });
    let res = res.map_err(err)?;
    ClusterOutput::new(py, res)
}

/// One server's share of a tenant's global reservation or limit under the `split`
/// allocator (the cluster simulator's rule, which live gateways use too): `demand` is
/// what each server saw of the tenant in the last period, `server` the one asked about.
#[pyfunction]
fn split_share(total: f64, demand: Vec<f64>, server: usize) -> PyResult<f64> {
    if !(total.is_finite() && total >= 0.0) {
        return Err(err(Error::InvalidConfig(format!("split: total {total} is not a rate >= 0"))));
    }
    let Some(&d) = demand.get(server) else {
        return Err(err(Error::InvalidConfig(format!("split: server {server} of {}", demand.len()))));
    };
    if demand.iter().any(|x| !(x.is_finite() && *x >= 0.0)) {
        return Err(err(Error::InvalidConfig("split: demands are counts >= 0".into())));
    }
    let servers =
        u32::try_from(demand.len()).map_err(|_| err(Error::InvalidConfig("split: too many servers".into())))?;
    Ok(storqos_core::sim::split_share(total, servers, d, demand.iter().sum()))
}

/// Each request's primary server under the cluster's hash placement (`servers` > 0,
/// `object_bytes` > 0): what `simulate_cluster` places with `{"kind": "hash"}`, for a
/// live replay spread over as many gateways.
#[pyfunction]
#[pyo3(signature = (tenant, offset, servers, *, object_bytes=storqos_core::sim::cluster::DEFAULT_OBJECT_BYTES, seed=0))]
fn hash_placement<'py>(
    py: Python<'py>,
    tenant: numpy::PyReadonlyArray1<'py, u32>,
    offset: numpy::PyReadonlyArray1<'py, u64>,
    servers: u32,
    object_bytes: u64,
    seed: u64,
) -> PyResult<Bound<'py, numpy::PyArray1<u32>>> {
    use numpy::IntoPyArray;
    if servers == 0 || object_bytes == 0 {
        return Err(err(Error::InvalidConfig("placement: servers and object_bytes must be > 0".into())));
    }
    let (t, o) = (tenant.as_slice()?, offset.as_slice()?);
    if t.len() != o.len() {
        return Err(err(Error::InvalidInput(format!("placement: {} tenants for {} offsets", t.len(), o.len()))));
    }
    let out: Vec<u32> =
        t.iter().zip(o).map(|(&t, &o)| storqos_core::sim::hash_primary(t, o, object_bytes, seed, servers)).collect();
    Ok(out.into_pyarray(py))
}

/// Add `simulate`, `simulate_cluster`, `split_share` and `hash_placement` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_cluster, m)?)?;
    m.add_function(wrap_pyfunction!(split_share, m)?)?;
    m.add_function(wrap_pyfunction!(hash_placement, m)?)
}
