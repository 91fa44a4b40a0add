//! `storqos._core.fclb_*`: feedback-controlled load balancing (seed 003): admission,
//! tuning of the controller gain, and the section 4 experiments.

use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use storqos_core::spec::{from_json, DeviceSpec, SchedulerSpec};
use storqos_core::Error;

use crate::errors::err;
use crate::sim::four_k;

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

/// Add the `fclb_*` functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fclb_admit, m)?)?;
    m.add_function(wrap_pyfunction!(fclb_tune, m)?)?;
    m.add_function(wrap_pyfunction!(fclb_check_gain, m)?)?;
    m.add_function(wrap_pyfunction!(fclb_experiment, m)?)
}
