//! Device specs: `{"kind": "...", ...}` → a boxed [`Device`].

use serde::Deserialize;

use crate::device::Device;
use crate::devices::ConstantRate;
use crate::error::Result;

/// A storage model and its parameters.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum DeviceSpec {
    /// One deterministic server of `iops` IOPS, plus `bytes / bandwidth` when given.
    Constant {
        /// Capacity (IOPS).
        iops: f64,
        /// Optional transfer bandwidth (bytes/s) for a size-dependent cost.
        #[serde(default)]
        bandwidth: Option<f64>,
    },
}

impl DeviceSpec {
    /// Build the device model.
    pub fn build(&self) -> Result<Box<dyn Device + Send>> {
        Ok(match self {
            DeviceSpec::Constant { iops, bandwidth } => {
                let d = ConstantRate::new(*iops)?;
                match bandwidth {
                    Some(bw) => Box::new(d.with_bandwidth(*bw)?),
                    None => Box::new(d),
                }
            }
        })
    }
}
