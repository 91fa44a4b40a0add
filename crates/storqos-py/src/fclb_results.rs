//! What the `fclb_*` functions hand Python, typed: the profiled IOPS → p95 curve,
//! the admission report, the controller's tuning and the section 4 experiments' setup
//! and runs (seed 003, the feedback-controlled leaky bucket over YFQ).

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use storqos_core::fclb::experiment::{CaseResult, Derivation, Setup, WorkloadOutcome};
use storqos_core::fclb::{AdmissionReport, ProfilePoint};

use crate::sim_results::{GaugeSamples, SimWindows};

/// Profiled points of the storage's IOPS → p95 curve, one per offered rate.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct ProfileCurve {
    /// Offered rate (IOPS).
    pub offered_iops: Vec<f64>,
    /// Achieved rate (IOPS).
    pub achieved_iops: Vec<f64>,
    /// 95th percentile response time over all workloads (ns).
    pub p95_ns: Vec<u64>,
    /// Mean response time (ns).
    pub mean_ns: Vec<f64>,
    /// Per point, per workload: 95th percentile (ns).
    pub p95_by_workload_ns: Vec<Vec<u64>>,
}

impl ProfileCurve {
    fn new(curve: &[ProfilePoint]) -> Self {
        Self {
            offered_iops: curve.iter().map(|p| p.offered_iops).collect(),
            achieved_iops: curve.iter().map(|p| p.achieved_iops).collect(),
            p95_ns: curve.iter().map(|p| p.p95_all_ns).collect(),
            mean_ns: curve.iter().map(|p| p.mean_ns).collect(),
            p95_by_workload_ns: curve.iter().map(|p| p.p95_ns.clone()).collect(),
        }
    }
}

/// The admission report's rows, one per workload (Table 3).
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct AdmissionRows {
    /// Workload name.
    pub name: Vec<String>,
    /// Its rate (IOPS).
    pub iops: Vec<f64>,
    /// The response time it demands (ns).
    pub rt_ns: Vec<u64>,
    /// RT′: its p95 measured at the total rate (ns).
    pub rt_measured_ns: Vec<u64>,
    /// RT″ = 1.2·RT′ (ns).
    pub rt_target_ns: Vec<u64>,
    /// The controller's reference (ns).
    pub reference_ns: Vec<u64>,
    /// Admitted.
    pub ok: Vec<bool>,
}

/// Seed 003 §2 admission control of a mix of workloads.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct Admission {
    /// T = Σ IOPS_i.
    pub target_iops: f64,
    /// The rate achieved at T.
    pub achieved_iops: f64,
    /// Every workload admitted.
    pub admitted: bool,
    /// End of the storage's stable area (None without a curve).
    pub stable_limit_iops: Option<f64>,
    /// Per workload.
    pub rows: Py<AdmissionRows>,
    /// The IOPS → p95 curve.
    pub curve: Py<ProfileCurve>,
}

impl Admission {
    pub(crate) fn new(py: Python<'_>, a: &AdmissionReport) -> PyResult<Self> {
        let rows = AdmissionRows {
            name: a.rows.iter().map(|r| r.name.clone()).collect(),
            iops: a.rows.iter().map(|r| r.iops).collect(),
            rt_ns: a.rows.iter().map(|r| r.rt_ns).collect(),
            rt_measured_ns: a.rows.iter().map(|r| r.rt_measured_ns).collect(),
            rt_target_ns: a.rows.iter().map(|r| r.rt_target_ns).collect(),
            reference_ns: a.rows.iter().map(|r| r.reference_ns()).collect(),
            ok: a.rows.iter().map(|r| r.ok).collect(),
        };
        Ok(Self {
            target_iops: a.target_iops,
            achieved_iops: a.achieved_iops,
            admitted: a.admitted,
            stable_limit_iops: a.stable_limit_iops,
            rows: Py::new(py, rows)?,
            curve: Py::new(py, ProfileCurve::new(&a.curve))?,
        })
    }
}

/// Seed 003 §3 tuning: the plant gain G profiled around an operating rate and the
/// controller gain K that places the closed-loop pole.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct Tuning {
    /// G (ms/IOPS).
    pub plant_gain_ms_per_iops: f64,
    /// The closed-loop pole.
    pub pole: f64,
    /// K = (1 − pole)/G (IOPS/ms).
    pub gain_iops_per_ms: f64,
    /// The stability bound 2/G (IOPS/ms).
    pub bound_iops_per_ms: f64,
    /// The operating rate profiled around (IOPS).
    pub operating_iops: f64,
    /// The response time at the operating rate (ms).
    pub rt0_ms: f64,
    /// The profiled points.
    pub probes: Py<ProfileCurve>,
}

impl Tuning {
    pub(crate) fn new(
        py: Python<'_>,
        t: &storqos_core::fclb::Tuning,
        est: &storqos_core::fclb::tuning::GainEstimate,
    ) -> PyResult<Self> {
        Ok(Self {
            plant_gain_ms_per_iops: t.plant_gain_ms_per_iops,
            pole: t.pole,
            gain_iops_per_ms: t.gain_iops_per_ms,
            bound_iops_per_ms: t.bound_iops_per_ms,
            operating_iops: est.operating_iops,
            rt0_ms: est.rt0_ms,
            probes: Py::new(py, ProfileCurve::new(&est.points))?,
        })
    }
}

/// The section 4 experiments' setup, derived the paper's way (admission → references,
/// profiled G → K).
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct ExperimentSetup {
    /// K (IOPS/ms).
    pub gain_iops_per_ms: f64,
    /// G (ms/IOPS).
    pub plant_gain_ms_per_iops: f64,
    /// The closed-loop pole.
    pub pole: f64,
    /// The stability bound 2/G (IOPS/ms).
    pub bound_iops_per_ms: f64,
    /// The operating rate G was profiled around (IOPS).
    pub operating_iops: f64,
    /// Per workload: the controller's reference (ns).
    pub reference_ns: Vec<u64>,
    /// The admission that set the references.
    pub admission: Py<Admission>,
    /// The points G was profiled from.
    pub probes: Py<ProfileCurve>,
}

impl ExperimentSetup {
    fn new(py: Python<'_>, setup: &Setup, deriv: &Derivation) -> PyResult<Self> {
        Ok(Self {
            gain_iops_per_ms: setup.gain_iops_per_ms,
            plant_gain_ms_per_iops: deriv.tuning.plant_gain_ms_per_iops,
            pole: deriv.tuning.pole,
            bound_iops_per_ms: deriv.tuning.bound_iops_per_ms,
            operating_iops: deriv.gain.operating_iops,
            reference_ns: setup.workloads.iter().map(|w| w.ref_ns.unwrap_or(w.rt_ns)).collect(),
            admission: Py::new(py, Admission::new(py, &deriv.admission)?)?,
            probes: Py::new(py, ProfileCurve::new(&deriv.gain.points))?,
        })
    }
}

/// Per workload present in a run, one entry each.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct WorkloadOutcomes {
    /// Workload index (0 for W1).
    pub workload: Vec<u32>,
    /// Requests completed.
    pub completed: Vec<u64>,
    /// Throughput over the run (IOPS).
    pub throughput_iops: Vec<f64>,
    /// Throughput in the steady part (IOPS).
    pub steady_iops: Vec<f64>,
    /// Share of windows over the reference (%).
    pub violation_pct: Vec<f64>,
    /// 95th percentile response time (ms).
    pub p95_ms: Vec<f64>,
    /// The bucket's rate at the end (IOPS).
    pub final_rate_iops: Vec<f64>,
}

/// One case under one policy.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct ExperimentRun {
    /// The case's name.
    pub case: String,
    /// The policy's name.
    pub policy: String,
    /// Total throughput (IOPS).
    pub total_iops: f64,
    /// W1 : W2 throughput over the run (None with one workload).
    pub throughput_ratio: Option<f64>,
    /// Per workload present.
    pub workloads: Py<WorkloadOutcomes>,
    /// Per-window, per-workload series.
    pub windows: Py<SimWindows>,
    /// The policy's gauges per window.
    pub gauges: Py<GaugeSamples>,
}

impl ExperimentRun {
    fn new(py: Python<'_>, r: CaseResult) -> PyResult<Self> {
        let present: Vec<(usize, &WorkloadOutcome)> =
            r.workloads.iter().enumerate().filter_map(|(i, o)| o.as_ref().map(|o| (i, o))).collect();
        let of = |f: &dyn Fn(&WorkloadOutcome) -> f64| present.iter().map(|(_, o)| f(o)).collect::<Vec<f64>>();
        let workloads = WorkloadOutcomes {
            workload: present.iter().map(|(i, _)| *i as u32).collect(),
            completed: present.iter().map(|(_, o)| o.completed).collect(),
            throughput_iops: of(&|o| o.throughput_iops),
            steady_iops: of(&|o| o.steady_iops),
            violation_pct: of(&|o| o.violation_pct),
            p95_ms: of(&|o| o.p95_ms),
            final_rate_iops: of(&|o| o.final_rate_iops),
        };
        Ok(Self {
            case: r.case.name(),
            policy: r.policy.name().to_string(),
            total_iops: r.total_iops,
            throughput_ratio: r.throughput_ratio,
            workloads: Py::new(py, workloads)?,
            windows: Py::new(py, SimWindows::new(py, r.windows))?,
            gauges: Py::new(py, GaugeSamples::new(py, r.gauges))?,
        })
    }
}

/// The section 4 experiments: their setup and every (case, policy) run.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct Experiment {
    /// The derived setup.
    pub setup: Py<ExperimentSetup>,
    /// The runs, each case under each policy in the order asked.
    pub runs: Py<PyTuple>,
}

impl Experiment {
    pub(crate) fn new(py: Python<'_>, setup: &Setup, deriv: &Derivation, runs: Vec<CaseResult>) -> PyResult<Self> {
        let runs: Vec<ExperimentRun> = runs.into_iter().map(|r| ExperimentRun::new(py, r)).collect::<PyResult<_>>()?;
        Ok(Self {
            setup: Py::new(py, ExperimentSetup::new(py, setup, deriv)?)?,
            runs: PyTuple::new(py, runs)?.unbind(),
        })
    }
}

/// Add the `fclb_*` result classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ProfileCurve>()?;
    m.add_class::<AdmissionRows>()?;
    m.add_class::<Admission>()?;
    m.add_class::<Tuning>()?;
    m.add_class::<ExperimentSetup>()?;
    m.add_class::<WorkloadOutcomes>()?;
    m.add_class::<ExperimentRun>()?;
    m.add_class::<Experiment>()
}
