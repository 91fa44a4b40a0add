//! `storqos._core.replay_spread`: replay trace columns over several NBD servers, each
//! tenant's requests spread over them, with dmClock's client side
//! (`storqos_gateway::spread_replay`); the request log comes back as numpy columns.

use std::time::Duration;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use storqos_gateway::spread_replay::{replay_spread as replay, SpreadOptions, SpreadRequests, Target};

use crate::errors::typed_error;

/// What `replay_spread` did: per request, in trace order, numpy columns of when it was
/// sent and answered (ns after the start), its NBD error and whether the server served it
/// in the reservation phase; per tenant and server whether that server took storqos'
/// dmClock extension; the counts of late and wrapped requests.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct SpreadReplay {
    /// When each request was sent (ns after the start).
    pub issue_ns: Py<PyArray1<u64>>,
    /// When its reply was read (ns after the start).
    pub finish_ns: Py<PyArray1<u64>>,
    /// Its NBD error (0: none).
    pub error: Py<PyArray1<u32>>,
    /// Served in the reservation phase, as the server said (dmClock extension only).
    pub reservation: Py<PyArray1<bool>>,
    /// `dmclock[tenant][server]`: that server took the extension (None: not used).
    pub dmclock: Vec<Vec<Option<bool>>>,
    /// Requests sent more than 1 ms after their time.
    pub late: u64,
    /// Requests whose offset was moved to end inside the export.
    pub wrapped: u64,
}

#[pymethods]
impl SpreadReplay {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "SpreadReplay({} requests, late={}, wrapped={})",
            self.issue_ns.bind(py).len().unwrap_or(0),
            self.late,
            self.wrapped
        )
    }
}

/// Replay requests (numpy columns of one length, in trace order) over NBD servers:
/// `targets[tenant][server]` is `(HOST:PORT, export)`, and each request goes to its
/// `server` of its tenant's. One connection per (tenant, server) used, open loop, each
/// request sent `at_ns` after a common start, up to `depth` in flight per connection.
/// With `dmclock`, each server is asked for storqos' dmClock extension and those that
/// take it get each request's δ and ρ. No reply for `timeout_s` fails. Runs with the GIL
/// released; every error raises `storqos.base.errors.InputError`.
#[pyfunction]
#[pyo3(signature = (targets, at_ns, tenant, server, offset, size, is_read, *, dmclock=true, depth=64,
                    timeout_s=60.0))]
#[allow(clippy::too_many_arguments)]
fn replay_spread<'py>(
    py: Python<'py>,
    targets: Vec<Vec<(String, String)>>,
    at_ns: PyReadonlyArray1<'py, u64>,
    tenant: PyReadonlyArray1<'py, u32>,
    server: PyReadonlyArray1<'py, u32>,
    offset: PyReadonlyArray1<'py, u64>,
    size: PyReadonlyArray1<'py, u32>,
    is_read: PyReadonlyArray1<'py, bool>,
    dmclock: bool,
    depth: usize,
    timeout_s: f64,
) -> PyResult<SpreadReplay> {
    let input_error = |m: String| typed_error("InputError", m);
    if !(timeout_s.is_finite() && timeout_s > 0.0) {
        return Err(input_error("timeout_s must be a positive number of seconds".into()));
    }
    let targets: Vec<Vec<Target>> =
        targets.into_iter().map(|v| v.into_iter().map(|(addr, export)| Target { addr, export }).collect()).collect();
    let requests = SpreadRequests {
        at_ns: at_ns.as_slice()?.to_vec(),
        tenant: tenant.as_slice()?.to_vec(),
        server: server.as_slice()?.to_vec(),
        offset: offset.as_slice()?.to_vec(),
        size: size.as_slice()?.to_vec(),
        is_read: is_read.as_slice()?.to_vec(),
    };
    let options = SpreadOptions { dmclock, depth, timeout: Duration::from_secs_f64(timeout_s) };
    let log = py.detach(|| replay(&targets, &requests, &options)).map_err(input_error)?;
    Ok(SpreadReplay {
        issue_ns: log.issue_ns.into_pyarray(py).unbind(),
        finish_ns: log.finish_ns.into_pyarray(py).unbind(),
        error: log.error.into_pyarray(py).unbind(),
        reservation: log.reservation.into_pyarray(py).unbind(),
        dmclock: log.dmclock,
        late: log.late,
        wrapped: log.wrapped,
    })
}

/// Add `replay_spread` and `SpreadReplay` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<SpreadReplay>()?;
    m.add_function(wrap_pyfunction!(replay_spread, m)?)
}
