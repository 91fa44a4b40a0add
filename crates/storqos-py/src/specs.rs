//! `storqos._core.check_policy` and `check_device`: a spec checked as the simulator would
//! build it, without running anything.

use pyo3::prelude::*;

use storqos_core::spec::{from_json, DeviceSpec, SchedulerSpec};
use storqos_core::{Device, Scheduler};

use crate::errors::err;

/// Validate a policy spec (JSON) and return its display name.
#[pyfunction]
fn check_policy(policy_json: &str) -> PyResult<String> {
    let p: SchedulerSpec = from_json("policy", policy_json).map_err(err)?;
    Ok(p.build().map_err(err)?.name())
}

/// Validate a device spec (JSON) and return its display name.
#[pyfunction]
fn check_device(device_json: &str) -> PyResult<String> {
    let d: DeviceSpec = from_json("device", device_json).map_err(err)?;
    Ok(d.build().map_err(err)?.name())
}

/// Add `check_policy` and `check_device` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_policy, m)?)?;
    m.add_function(wrap_pyfunction!(check_device, m)?)
}
