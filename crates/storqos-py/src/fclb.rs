//! `storqos._core.fclb_*`: the feedback-controlled leaky bucket over YFQ (seed 003):
//! admission, tuning of the controller gain, and the section 4 experiments; their
//! results are `fclb_results`.

use pyo3::prelude::*;

use storqos_core::spec::{from_json, DeviceSpec, SchedulerSpec};
use storqos_core::Error;

use crate::errors::err;
use crate::fclb_results::{Admission, Experiment, Tuning};
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

/// Seed 003 admission control: workloads as a JSON list of `{"name", "iops", "rt_ns",
/// "bytes"}`, the storage (`device_json`) behind a back end (`backend_json`). Profiles
/// the IOPS → p95 curve at `curve_rates` too. Returns the Table 3-style `Admission`.
#[pyfunction]
#[pyo3(signature = (workloads_json, device_json, backend_json, curve_rates=Vec::new(), duration_ns=60_000_000_000, seed=1, span_bytes=None))]
#[allow(clippy::too_many_arguments)]
fn fclb_admit(
    py: Python<'_>,
    workloads_json: &str,
    device_json: &str,
    backend_json: &str,
    curve_rates: Vec<f64>,
    duration_ns: u64,
    seed: u64,
    span_bytes: Option<u64>,
) -> PyResult<Admission> {
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
    Admission::new(py, &report)
}

/// Seed 003 tuning: profile the plant gain G of the mix (`[{"iops", "bytes"}]`) around
/// `operating_iops` and place the closed-loop pole. Returns the `Tuning`: G, K, the
/// bound 2/G, the probes.
#[pyfunction]
#[pyo3(signature = (mix_json, device_json, backend_json, operating_iops, pole, duration_ns=60_000_000_000, seed=1, span_bytes=None))]
#[allow(clippy::too_many_arguments)]
fn fclb_tune(
    py: Python<'_>,
    mix_json: &str,
    device_json: &str,
    backend_json: &str,
    operating_iops: f64,
    pole: f64,
    duration_ns: u64,
    seed: u64,
    span_bytes: Option<u64>,
) -> PyResult<Tuning> {
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
    Tuning::new(py, &t, &est)
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
/// Returns the `Experiment`.
#[pyfunction]
#[pyo3(signature = (cases, policies, pole=None, seed=1))]
fn fclb_experiment(
    py: Python<'_>,
    cases: Vec<String>,
    policies: Vec<String>,
    pole: Option<f64>,
    seed: u64,
) -> PyResult<Experiment> {
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
    Experiment::new(py, &setup, &deriv, runs)
}

/// Add the `fclb_*` functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fclb_admit, m)?)?;
    m.add_function(wrap_pyfunction!(fclb_tune, m)?)?;
    m.add_function(wrap_pyfunction!(fclb_check_gain, m)?)?;
    m.add_function(wrap_pyfunction!(fclb_experiment, m)?)
}
