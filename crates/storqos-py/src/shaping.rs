//! `storqos._core.capacity_table`, `rtt_classify`, `rtd_plan`, `power_estimate`: workload
//! shaping over a trace's arrival times (seed 000): the capacity each (fraction, deadline)
//! needs, the RTT and RTD decompositions, and the power of provisioning it.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use storqos_core::shaping::Capacity;
use storqos_core::Error;

use crate::errors::err;

/// The capacity table Cmin(f, δ) and what its search cost.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct CapacityTable {
    /// Cmin (IOPS), one row per deadline, one column per fraction.
    pub cmin_iops: Vec<Vec<f64>>,
    /// Per fraction: the requests that must meet the deadline.
    pub needed: Vec<u64>,
    /// Requests in the trace.
    pub requests: u64,
    /// Passes over the trace.
    pub passes: u64,
    /// RTT probes run.
    pub probes: u64,
    /// Closed-form sweeps.
    pub closed_form_sweeps: u64,
    /// Requests of the subsample searched first.
    pub sample_requests: u64,
    /// Probes run on the subsample.
    pub sample_probes: u64,
    /// Requests stepped through by all the RTT work.
    pub lane_steps: u64,
    /// With `fcfs`: the capacity (IOPS) plain FCFS needs per cell, laid out as `cmin_iops`.
    pub fcfs_iops: Option<Vec<Vec<f64>>>,
    /// With `fcfs`: FCFS probes run.
    pub fcfs_probes: Option<u64>,
    /// With `fcfs`: requests stepped through by them.
    pub fcfs_steps: Option<u64>,
}

/// A table of capacities as IOPS.
fn iops_rows(rows: &[Vec<Capacity>]) -> Vec<Vec<f64>> {
    rows.iter().map(|r| r.iter().map(|c| c.iops()).collect()).collect()
}

/// A recursive RTD decomposition's tiers.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct RtdPlan {
    /// Per tier: its capacity (IOPS; 0 when the tier needed nothing).
    pub capacity_iops: Vec<f64>,
    /// Per tier: the requests it admitted.
    pub admitted: Vec<u64>,
    /// Per request: its tier.
    pub tier: Py<PyArray1<u32>>,
}

/// The power of provisioning a capacity with pools of disks (seed 000 §3.2.3).
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct PowerEstimate {
    /// The capacity provisioned (IOPS).
    pub capacity_iops: f64,
    /// Pools powered on.
    pub on_pools: u32,
    /// Disks powered on.
    pub on_disks: u32,
    /// Busy disk-seconds.
    pub busy_disk_s: f64,
    /// The span (s).
    pub span_s: f64,
    /// Energy over the span (J).
    pub energy_j: f64,
    /// Mean power (W).
    pub power_w: f64,
}

fn sorted_arrivals<'a>(arrival_ns: &'a PyReadonlyArray1<'_, u64>) -> PyResult<&'a [u64]> {
    Ok(arrival_ns.as_slice()?)
}

/// Capacity table Cmin(f, δ) (seed 000 Table 4.1) over arrival times (ns, sorted).
/// `method` is "fast" (the planner search) or "bisect" (per-cell bisection, for
/// comparison). Returns the `CapacityTable` (Cmin and the search's cost; see
/// `storqos_core::shaping::CapacityTable`). With `fcfs`, also the capacity plain FCFS
/// needs per cell (see `shaping::fcfs_capacity`), and Cmin lowered where FCFS meets the
/// target below it.
#[pyfunction]
#[pyo3(signature = (arrival_ns, deadlines_ns, fractions, method="fast", fcfs=false))]
fn capacity_table<'py>(
    py: Python<'py>,
    arrival_ns: PyReadonlyArray1<'py, u64>,
    deadlines_ns: Vec<u64>,
    fractions: Vec<f64>,
    method: &str,
    fcfs: bool,
) -> PyResult<CapacityTable> {
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
    Ok(CapacityTable {
        cmin_iops: iops_rows(&t.cmin),
        needed: t.needed,
        requests: t.requests,
        passes: t.passes,
        probes: t.probes,
        closed_form_sweeps: t.closed_form_sweeps,
        sample_requests: t.sample_requests,
        sample_probes: t.sample_probes,
        lane_steps: t.lane_steps,
        fcfs_iops: ft.as_ref().map(|ft| iops_rows(&ft.capacity)),
        fcfs_probes: ft.as_ref().map(|ft| ft.probes),
        fcfs_steps: ft.as_ref().map(|ft| ft.steps),
    })
}

/// RTT class of every request (true = primary) at `capacity_iops` and `deadline_ns`.
#[pyfunction]
fn rtt_classify<'py>(
    py: Python<'py>,
    arrival_ns: PyReadonlyArray1<'py, u64>,
    capacity_iops: f64,
    deadline_ns: u64,
) -> PyResult<Bound<'py, numpy::PyArray1<bool>>> {
    use storqos_core::shaping::rtt::classify;
    let a = sorted_arrivals(&arrival_ns)?;
    let cap = Capacity::from_iops(capacity_iops).map_err(err)?;
    let out = py.detach(|| classify(a, cap, deadline_ns)).map_err(err)?;
    Ok(out.into_pyarray(py))
}

/// Recursive RTD decomposition: tiers (fractions[i], deadlines_ns[i]). Returns the
/// `RtdPlan`.
#[pyfunction]
fn rtd_plan<'py>(
    py: Python<'py>,
    arrival_ns: PyReadonlyArray1<'py, u64>,
    fractions: Vec<f64>,
    deadlines_ns: Vec<u64>,
) -> PyResult<RtdPlan> {
    use storqos_core::shaping::rtd::{plan_rtd, Tier};
    if fractions.len() != deadlines_ns.len() {
        return Err(err(Error::InvalidConfig("rtd: as many fractions as deadlines are needed".into())));
    }
    let tiers: Vec<Tier> =
        fractions.iter().zip(&deadlines_ns).map(|(&fraction, &deadline)| Tier { fraction, deadline }).collect();
    let a = sorted_arrivals(&arrival_ns)?;
    let plan = py.detach(|| plan_rtd(a, &tiers)).map_err(err)?;
    Ok(RtdPlan {
        capacity_iops: plan.capacities.iter().map(|c| c.map_or(0.0, |c| c.iops())).collect(),
        admitted: plan.admitted,
        tier: plan.tier_of.into_pyarray(py).unbind(),
    })
}

/// Power of provisioning `capacity_iops` for `requests` requests over `span_ns` with
/// pools of `pool_iops` and `disks_per_pool` disks (seed 000 §3.2.3).
#[pyfunction]
#[pyo3(signature = (capacity_iops, requests, span_ns, pool_iops=200.0, disks_per_pool=4, total_pools=None,
                    active_w=13.5, idle_w=10.2, sleep_w=0.0))]
#[allow(clippy::too_many_arguments)]
fn power_estimate(
    capacity_iops: f64,
    requests: u64,
    span_ns: u64,
    pool_iops: f64,
    disks_per_pool: u32,
    total_pools: Option<u32>,
    active_w: f64,
    idle_w: f64,
    sleep_w: f64,
) -> PyResult<PowerEstimate> {
    use storqos_core::shaping::power::PoolModel;
    let m = PoolModel { pool_iops, disks_per_pool, total_pools, active_w, idle_w, sleep_w };
    let e = m.estimate(capacity_iops, requests, span_ns).map_err(err)?;
    Ok(PowerEstimate {
        capacity_iops: e.capacity_iops,
        on_pools: e.on_pools,
        on_disks: e.on_disks,
        busy_disk_s: e.busy_disk_s,
        span_s: e.span_s,
        energy_j: e.energy_j,
        power_w: e.power_w,
    })
}

/// Add the shaping functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CapacityTable>()?;
    m.add_class::<RtdPlan>()?;
    m.add_class::<PowerEstimate>()?;
    m.add_function(wrap_pyfunction!(capacity_table, m)?)?;
    m.add_function(wrap_pyfunction!(rtt_classify, m)?)?;
    m.add_function(wrap_pyfunction!(rtd_plan, m)?)?;
    m.add_function(wrap_pyfunction!(power_estimate, m)?)
}
