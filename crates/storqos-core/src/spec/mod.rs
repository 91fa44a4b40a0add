//! Serde descriptions of policies, devices and generators: the one configuration schema
//! shared by the CLI, the Python API, experiment files and the gateway.
//!
//! JSON form: `{"kind": "wf2q", "weights": [2, 1]}`. Times are integer nanoseconds,
//! rates are IOPS, sizes bytes (the Python layer parses `10ms`, `1.5k`, `4KiB`).
//! Unknown kinds and unknown fields are errors that name them.

pub mod device;
pub mod dispatch;
pub mod generator;
pub mod registry;
pub mod scheduler;

pub use device::DeviceSpec;
pub use dispatch::{AnyDevice, AnyScheduler};
pub use generator::{merge_streams, GeneratorSpec};
pub use scheduler::SchedulerSpec;

use crate::error::{Error, Result};

/// Parse a JSON spec, mapping serde's message to a one-line [`Error::InvalidConfig`]
/// that names `what` ("policy", "device").
pub fn from_json<T: serde::de::DeserializeOwned>(what: &str, json: &str) -> Result<T> {
    serde_json::from_str(json).map_err(|e| Error::InvalidConfig(format!("{what}: {e}")))
}
