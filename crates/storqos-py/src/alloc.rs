//! `storqos._core.allocate` and `baa_scenario`: multi-device throughput allocation
//! (seed 004: BAA, DRF, FQ) and its tiered SSD + HDD simulation.

use pyo3::prelude::*;

use storqos_core::Error;

use crate::errors::err;

/// Device throughput allocated among backlogged clients by one policy.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct Allocation {
    /// The policy's name.
    pub policy: String,
    /// Total throughput allocated (IOPS).
    pub total: f64,
    /// Per client: its fair share (IOPS) under the policy.
    pub fair_share: Vec<f64>,
    /// Per client: the index of its bottleneck device.
    pub bottleneck: Vec<usize>,
    /// Per client: its throughput (IOPS).
    pub throughput: Vec<f64>,
    /// Per client, per device: its throughput on the device (IOPS).
    pub per_device: Vec<Vec<f64>>,
    /// Per device: the load allocated to it (IOPS).
    pub device_iops: Vec<f64>,
    /// Per device: that load over its capacity.
    pub utilisation: Vec<f64>,
    /// Per device: the policy's amplification (None for an empty set or another policy).
    pub amplification: Vec<Option<f64>>,
}

/// The tiered scenario's samples.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct TieredSeries {
    /// Sample start (ns).
    pub start_ns: Vec<u64>,
    /// Per sample, per client: throughput (IOPS).
    pub throughput: Vec<Vec<f64>>,
    /// Per sample: the HDD's utilisation (fraction of capacity).
    pub hdd_utilisation: Vec<f64>,
    /// Per sample: the SSD's utilisation (fraction of capacity).
    pub ssd_utilisation: Vec<f64>,
    /// Re-allocations made.
    pub recomputations: u64,
}

/// Allocate device throughput among backlogged clients (seed 004: BAA, DRF, FQ).
///
/// `capacities[k]` IOPS of device k; `fractions[i][k]` share of client i's requests on
/// device k; optional `weights`; `policy` is `baa`, `drf` or `fq`. Returns the
/// `Allocation`.
#[pyfunction]
#[pyo3(signature = (capacities, fractions, policy, weights=None))]
fn allocate(
    py: Python<'_>,
    capacities: Vec<f64>,
    fractions: Vec<Vec<f64>>,
    policy: &str,
    weights: Option<Vec<f64>>,
) -> PyResult<Allocation> {
    use storqos_core::alloc;
    let policy = alloc::Policy::parse(policy).map_err(err)?;
    let mut problem = alloc::Problem::new(capacities, fractions).map_err(err)?;
    if let Some(w) = weights {
        problem = problem.with_weights(w).map_err(err)?;
    }
    let a = py.detach(|| alloc::allocate(&problem, policy)).map_err(err)?;
    Ok(Allocation {
        policy: a.policy.name().to_string(),
        total: a.total(),
        fair_share: a.fair_share,
        bottleneck: a.bottleneck,
        throughput: a.throughput,
        per_device: a.per_device,
        device_iops: a.device_iops,
        utilisation: a.utilisation,
        amplification: a.amplification,
    })
}

/// Seed 004 §5.1 simulation: backlogged clients with hit-ratio phases on an SSD + HDD
/// array through BAA / DRF / FQ weights over WF2Q+. `hit_phases[i]` is a list of
/// `(from_ns, hit_ratio)`. Returns the per-sample `TieredSeries` (see
/// `storqos_core::alloc::scenario`).
#[pyfunction]
#[pyo3(signature = (hdd_iops, ssd_iops, hit_phases, policy, window_ns, period_ns, duration_ns, sample_ns,
                    outstanding=64, depth=64, seed=1, initial_allocation=true, alarm_threshold=None, alarm_check_ns=None))]
#[allow(clippy::too_many_arguments)]
fn baa_scenario(
    py: Python<'_>,
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
) -> PyResult<TieredSeries> {
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
    Ok(TieredSeries {
        start_ns: r.start,
        throughput: r.throughput,
        hdd_utilisation: r.utilisation.iter().map(|u| u[0]).collect(),
        ssd_utilisation: r.utilisation.iter().map(|u| u[1]).collect(),
        recomputations: r.recomputations,
    })
}

/// Add `allocate` and `baa_scenario` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Allocation>()?;
    m.add_class::<TieredSeries>()?;
    m.add_function(wrap_pyfunction!(allocate, m)?)?;
    m.add_function(wrap_pyfunction!(baa_scenario, m)?)
}
