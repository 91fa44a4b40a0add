//! The policy registry and the gateway's limits, for the Python layer: one JSON
//! document (`storqos_core::spec::registry`) that `storqos.model.registry` parses into
//! typed values, and the limits the gateway enforces, so that its config file is checked
//! against the same numbers instead of copies.

use pyo3::prelude::*;

/// The registry of policies, their parameters and the options that give them, as JSON
/// (`storqos_core::spec::registry::registry_json`).
#[pyfunction]
fn policy_registry() -> String {
    storqos_core::spec::registry::registry_json()
}

/// Add the registry's function and the gateway's limits to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(policy_registry, m)?)?;
    m.add("GATEWAY_MAX_DEPTH", storqos_gateway::config::MAX_DEPTH)?;
    m.add("GATEWAY_MAX_NAME_BYTES", storqos_gateway::protocol::MAX_NAME_BYTES)?;
    m.add("GATEWAY_MAX_IO_BYTES", storqos_gateway::protocol::MAX_IO_BYTES)?;
    m.add("GATEWAY_MAX_FAULT_DELAY_S", storqos_gateway::fault::MAX_DELAY_S)?;
    Ok(())
}
