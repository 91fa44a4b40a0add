//! `storqos._core.LivePath`: a device profile's live path (`storqos_core::sim::live_path`)
//! applied to a simulated run's kept requests, as `storqos validate` predicts them and
//! `storqos simulate --device-profile` prints them.
//!
//! The spec comes as Python values (`DeviceProfile.live_path()`), not as JSON: the
//! profile's tables are floats of 17 digits, and the JSON parser's float reading may be
//! one unit in the last place off, which a time rounded to the nanosecond can show.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use storqos_core::sim::live_path::{self as lp, Completions};

use crate::errors::err;

#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct Level {
    idle_us: f64,
    path_us: Vec<(f64, f64)>,
}

#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct Hold {
    requests: u32,
    issue_ns: f64,
    rest_p50_us: f64,
    rest_spread_us: f64,
    first_us: f64,
}

#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct Burst {
    issue_ns: f64,
    finish_ns: f64,
    sequential_finish_ns: Option<f64>,
    hold: Option<Hold>,
}

#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct OpPath {
    rest: Vec<Level>,
    burst: Option<Burst>,
}

#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct Spec {
    read: OpPath,
    write: OpPath,
}

impl OpPath {
    fn into_core(self) -> lp::OpPath {
        lp::OpPath {
            rest: self.rest.into_iter().map(|l| lp::RestLevel { idle_us: l.idle_us, path_us: l.path_us }).collect(),
            burst: self.burst.map(|b| lp::OpBurst {
                issue_ns: b.issue_ns,
                finish_ns: b.finish_ns,
                sequential_finish_ns: b.sequential_finish_ns,
                hold: b.hold.map(|h| lp::HoldEvidence {
                    requests: h.requests,
                    issue_ns: h.issue_ns,
                    rest_p50_us: h.rest_p50_us,
                    rest_spread_us: h.rest_spread_us,
                    first_us: h.first_us,
                }),
            }),
        }
    }
}

/// Columns of i64 handed back to Python.
type Column<'py> = Bound<'py, PyArray1<i64>>;

/// A device profile's live path, its hold shares fitted.
#[pyclass(frozen, module = "storqos._core")]
struct LivePath(lp::LivePath);

#[pymethods]
impl LivePath {
    #[new]
    fn new(spec: Spec) -> PyResult<Self> {
        let spec = lp::LivePathSpec { read: spec.read.into_core(), write: spec.write.into_core() };
        Ok(LivePath(lp::LivePath::new(&spec).map_err(err)?))
    }

    /// Whether the profile measured bursts (the times then count from each issue).
    #[getter]
    fn has_bursts(&self) -> bool {
        self.0.has_bursts()
    }

    /// The hold share of reads (`read=True`) or writes.
    fn hold(&self, read: bool) -> f64 {
        self.0.hold(read)
    }

    /// The requests as the live path's client sees them: (issue, response, reply, wait
    /// left) in ns, the requests given in arrival order. With `tenant`, `offset` and
    /// `size`, a request that continues its tenant's previous one of its op takes the
    /// sequential bursts' time between completions.
    #[pyo3(signature = (arrival_ns, finish_ns, response_ns, wait_ns, is_read, tenant=None, offset=None, size=None))]
    #[allow(clippy::too_many_arguments)]
    fn apply<'py>(
        &self,
        py: Python<'py>,
        arrival_ns: PyReadonlyArray1<'py, i64>,
        finish_ns: PyReadonlyArray1<'py, i64>,
        response_ns: PyReadonlyArray1<'py, i64>,
        wait_ns: PyReadonlyArray1<'py, i64>,
        is_read: PyReadonlyArray1<'py, bool>,
        tenant: Option<PyReadonlyArray1<'py, u32>>,
        offset: Option<PyReadonlyArray1<'py, u64>>,
        size: Option<PyReadonlyArray1<'py, u64>>,
    ) -> PyResult<(Column<'py>, Column<'py>, Column<'py>, Column<'py>)> {
        let is_read = is_read.as_slice()?;
        let sequential = match (&tenant, &offset, &size) {
            (Some(t), Some(o), Some(s)) => {
                let (t, o, s) = (t.as_slice()?, o.as_slice()?, s.as_slice()?);
                if t.len() != is_read.len() || o.len() != is_read.len() || s.len() != is_read.len() {
                    return Err(err(storqos_core::Error::InvalidInput(
                        "live path: the requests' columns have different lengths".into(),
                    )));
                }
                Some(lp::continues(t, is_read, o, s))
            }
            _ => None,
        };
        let c = Completions {
            arrival: arrival_ns.as_slice()?,
            finish: finish_ns.as_slice()?,
            response: response_ns.as_slice()?,
            wait: wait_ns.as_slice()?,
            is_read,
            sequential: sequential.as_deref(),
        };
        let seen = py.detach(|| self.0.apply(&c)).map_err(err)?;
        Ok((
            seen.arrival.into_pyarray(py),
            seen.response.into_pyarray(py),
            seen.finish.into_pyarray(py),
            seen.wait.into_pyarray(py),
        ))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LivePath>()
}
