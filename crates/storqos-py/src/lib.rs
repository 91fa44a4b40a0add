//! PyO3 bindings of storqos-core, imported in Python as `storqos._core`.
//!
//! Thin by design: Python passes numpy columns and JSON specs (the schema of
//! `storqos_core::spec`), Rust runs with the GIL released and hands back typed results
//! (frozen classes, `*_results` and each area's own), their tables numpy columns that
//! `storqos.model.sim` wraps into polars DataFrames. Configuration and input
//! errors become the exceptions of `storqos.base.errors` with the core's one-line message.
//! One module per area; this file only registers them.

mod alloc;
mod errors;
mod fclb;
mod fclb_results;
mod gateway;
mod gateway_results;
mod generate;
mod live_path;
mod local_replay;
mod registry;
mod shaping;
mod sim;
mod sim_results;
mod specs;
mod spread_replay;

use pyo3::prelude::*;

use storqos_core::request::MAX_TENANTS;

/// The compiled core.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The core's bounds, so that Python checks flags against them without restating them.
    m.add("MAX_TENANTS", MAX_TENANTS)?;
    m.add("MAX_OUTSTANDING", storqos_core::sim::workload::MAX_OUTSTANDING)?;
    m.add("MAX_SERVERS", storqos_core::devices::array::MAX_SERVERS)?;
    m.add("MAX_CLUSTER_SERVERS", storqos_core::sim::cluster::MAX_SERVERS)?;
    m.add("MAX_REPLICAS", storqos_core::sim::cluster::MAX_REPLICAS)?;
    sim::register(m)?;
    sim_results::register(m)?;
    generate::register(m)?;
    live_path::register(m)?;
    specs::register(m)?;
    fclb::register(m)?;
    fclb_results::register(m)?;
    shaping::register(m)?;
    alloc::register(m)?;
    gateway::register(m)?;
    gateway_results::register(m)?;
    registry::register(m)?;
    local_replay::register(m)?;
    spread_replay::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
