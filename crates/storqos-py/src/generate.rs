//! `storqos._core.generate`: generator specs materialised into numpy trace columns.

use numpy::{IntoPyArray, PyArray1};
use pyo3::prelude::*;

use storqos_core::request::{Op, Request};
use storqos_core::spec::{from_json, merge_streams, GeneratorSpec};

use crate::errors::err;

/// Generated requests in arrival order, as numpy columns of one length.
#[pyclass(module = "storqos._core", frozen, get_all)]
pub struct GeneratedRequests {
    /// Arrival time (ns).
    pub arrival_ns: Py<PyArray1<u64>>,
    /// A read (else a write).
    pub is_read: Py<PyArray1<bool>>,
    /// Byte offset.
    pub offset: Py<PyArray1<u64>>,
    /// Size (bytes).
    pub size: Py<PyArray1<u32>>,
    /// Tenant.
    pub tenant: Py<PyArray1<u32>>,
}

/// Materialise generator specs (JSON list) into numpy columns, merged by time.
#[pyfunction]
fn generate(py: Python<'_>, generators_json: &str) -> PyResult<GeneratedRequests> {
    let gens: Vec<GeneratorSpec> = from_json("generators", generators_json).map_err(err)?;
    let mut streams = Vec::with_capacity(gens.len());
    for g in &gens {
        streams.push(g.build().map_err(err)?);
    }
    let reqs: Vec<Request> = py.detach(move || merge_streams(streams).collect());
    Ok(GeneratedRequests {
        arrival_ns: reqs.iter().map(|r| r.arrival).collect::<Vec<_>>().into_pyarray(py).unbind(),
        is_read: reqs.iter().map(|r| r.op == Op::Read).collect::<Vec<_>>().into_pyarray(py).unbind(),
        offset: reqs.iter().map(|r| r.offset).collect::<Vec<_>>().into_pyarray(py).unbind(),
        size: reqs.iter().map(|r| r.bytes).collect::<Vec<_>>().into_pyarray(py).unbind(),
        tenant: reqs.iter().map(|r| r.tenant).collect::<Vec<_>>().into_pyarray(py).unbind(),
    })
}

/// Add `generate` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GeneratedRequests>()?;
    m.add_function(wrap_pyfunction!(generate, m)?)
}
