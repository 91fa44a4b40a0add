//! `storqos._core.replay_local`: replay trace columns against a local file or block
//! device, each tenant from its own thread and, if given, its own cgroup
//! (`storqos_gateway::local_replay`); the request log comes back as numpy columns.

use std::path::{Path, PathBuf};

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

use storqos_gateway::local_replay::{replay_local as replay, LocalLog, LocalOptions, LocalRequests};

use crate::errors::typed_error;

/// What `replay_local` did: per request, in trace order, numpy columns of when it was
/// submitted and completed (ns after the start) and its result; the engine that ran and
/// the counts of late and wrapped requests.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct LocalReplay {
    /// When each request was submitted (ns after the start).
    pub issue_ns: Py<PyArray1<u64>>,
    /// When its completion was seen (ns after the start).
    pub finish_ns: Py<PyArray1<u64>>,
    /// Bytes transferred (the request rounded to 4 KiB with `direct`) or a negative errno.
    pub result: Py<PyArray1<i64>>,
    /// `io_uring`, `threads` (the kernel refused io_uring) or `io_uring+threads`.
    pub engine: String,
    /// Requests submitted more than 1 ms after their time.
    pub late: u64,
    /// Requests whose offset was moved to end inside the file.
    pub wrapped: u64,
}

impl LocalReplay {
    fn new(py: Python<'_>, log: LocalLog) -> Self {
        LocalReplay {
            issue_ns: log.issue_ns.into_pyarray(py).unbind(),
            finish_ns: log.finish_ns.into_pyarray(py).unbind(),
            result: log.result.into_pyarray(py).unbind(),
            engine: log.engine.to_string(),
            late: log.late,
            wrapped: log.wrapped,
        }
    }
}

#[pymethods]
impl LocalReplay {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "LocalReplay({} requests, engine={:?}, late={}, wrapped={})",
            self.issue_ns.bind(py).len().unwrap_or(0),
            self.engine,
            self.late,
            self.wrapped
        )
    }
}

/// Replay requests (numpy columns of one length, in trace order) against the file or
/// block device `path`: one thread per tenant, open loop, each request issued
/// `at_ns` after a common start (with up to `depth` in flight per tenant; one issued more
/// than 1 ms late counts in `late`). With `direct` (`O_DIRECT`), offsets are rounded down
/// and sizes up to 4 KiB; offsets wrap into the file. `cgroups[t]` is a cgroup v1
/// directory (`/sys/fs/cgroup/blkio/a`) whose `tasks` tenant `t`'s threads join before
/// they open the file, or None. A trace with writes is refused unless `writes`. With
/// requests in flight and none completing for `stall_s`, the replay fails. Runs with
/// the GIL released; every error (a missing file, a cgroup that cannot be joined, a file
/// system refusing `O_DIRECT`, a stall) raises `storqos.base.errors.InputError`.
#[pyfunction]
#[pyo3(signature = (path, at_ns, tenant, offset, size, is_read, *, direct=true, cgroups=None, depth=256,
                    stall_s=10.0, writes=false))]
#[allow(clippy::too_many_arguments)]
fn replay_local<'py>(
    py: Python<'py>,
    path: PathBuf,
    at_ns: PyReadonlyArray1<'py, u64>,
    tenant: PyReadonlyArray1<'py, u32>,
    offset: PyReadonlyArray1<'py, u64>,
    size: PyReadonlyArray1<'py, u32>,
    is_read: PyReadonlyArray1<'py, bool>,
    direct: bool,
    cgroups: Option<Vec<Option<PathBuf>>>,
    depth: usize,
    stall_s: f64,
    writes: bool,
) -> PyResult<LocalReplay> {
    let input_error = |m: String| typed_error("InputError", m);
    if !(stall_s.is_finite() && stall_s > 0.0) {
        return Err(input_error(format!("{}: stall_s must be a positive number of seconds", path.display())));
    }
    let requests = LocalRequests {
        at_ns: at_ns.as_slice()?.to_vec(),
        tenant: tenant.as_slice()?.to_vec(),
        offset: offset.as_slice()?.to_vec(),
        size: size.as_slice()?.to_vec(),
        is_read: is_read.as_slice()?.to_vec(),
    };
    let options = LocalOptions {
        direct,
        cgroups: cgroups.unwrap_or_default(),
        depth,
        stall_ns: (stall_s * 1e9).min(u64::MAX as f64) as u64,
        writes,
        ..LocalOptions::default()
    };
    let p: &Path = &path;
    let log = py.detach(|| replay(p, &requests, &options)).map_err(|e| input_error(e.to_string()))?;
    Ok(LocalReplay::new(py, log))
}

/// Add `replay_local` and `LocalReplay` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LocalReplay>()?;
    m.add_function(wrap_pyfunction!(replay_local, m)?)
}
