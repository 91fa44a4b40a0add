//! `storqos._core.capacity_table`, `rtt_classify`, `rtd_plan`, `power_estimate`: workload
//! shaping over a trace's arrival times (seed 000): the capacity each (fraction, deadline)
//! needs, the RTT and RTD decompositions, and the power of provisioning it.

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use storqos_core::Error;

use crate::errors::err;

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

/// Add the shaping functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(capacity_table, m)?)?;
    m.add_function(wrap_pyfunction!(rtt_classify, m)?)?;
    m.add_function(wrap_pyfunction!(rtd_plan, m)?)?;
    m.add_function(wrap_pyfunction!(power_estimate, m)?)
}
