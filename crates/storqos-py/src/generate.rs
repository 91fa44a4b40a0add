//! `storqos._core.generate`: generator specs materialised into numpy trace columns.

use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use storqos_core::request::{Op, Request};
use storqos_core::spec::{from_json, merge_streams, GeneratorSpec};

use crate::errors::err;

/// Materialise generator specs (JSON list) into numpy columns, merged by time.
#[pyfunction]
fn generate<'py>(py: Python<'py>, generators_json: &str) -> PyResult<Bound<'py, PyDict>> {
    let gens: Vec<GeneratorSpec> = from_json("generators", generators_json).map_err(err)?;
    let mut streams = Vec::with_capacity(gens.len());
    for g in &gens {
        streams.push(g.build().map_err(err)?);
    }
    let reqs: Vec<Request> = py.detach(move || merge_streams(streams).collect());
    let d = dict!(py, {
        "arrival_ns" => reqs.iter().map(|r| r.arrival).collect::<Vec<_>>().into_pyarray(py),
        "is_read" => reqs.iter().map(|r| r.op == Op::Read).collect::<Vec<_>>().into_pyarray(py),
        "offset" => reqs.iter().map(|r| r.offset).collect::<Vec<_>>().into_pyarray(py),
        "size" => reqs.iter().map(|r| r.bytes).collect::<Vec<_>>().into_pyarray(py),
        "tenant" => reqs.iter().map(|r| r.tenant).collect::<Vec<_>>().into_pyarray(py),
    });
    Ok(d)
}

/// Add `generate` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(generate, m)?)
}
