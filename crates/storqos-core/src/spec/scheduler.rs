//! Scheduler specs: `{"kind": "...", ...}` → a boxed [`Scheduler`].

use serde::Deserialize;

use crate::error::Result;
use crate::scheduler::Scheduler;
use crate::schedulers::Fcfs;

/// A scheduling policy and its parameters.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SchedulerSpec {
    /// First-come first-served.
    Fcfs,
}

impl SchedulerSpec {
    /// Build the policy value.
    pub fn build(&self) -> Result<Box<dyn Scheduler + Send>> {
        Ok(match self {
            SchedulerSpec::Fcfs => Box::new(Fcfs::new()),
        })
    }
}
