//! # storqos-core
//!
//! The pure core of storqos: requests, the [`Scheduler`] and [`Device`] traits, device
//! models, scheduling policies and a deterministic discrete-event simulator.
//!
//! Nothing in this crate performs I/O, spawns threads or reads a clock: time is always
//! passed in as [`Nanos`], so the very same policy values run inside the simulator
//! ([`sim::simulate`]) and inside the live gateway, and tests drive them with explicit
//! times.
//!
//! Layers (see `docs/architecture.md`):
//! - [`time`], [`request`]: the vocabulary (integer nanoseconds, requests, completions).
//! - [`scheduler`], [`device`]: the two traits every policy and storage model implements.
//! - [`schedulers`], [`devices`]: the policies and the storage models.
//! - [`sim`]: the event loop, workloads (open-loop replay, closed-loop clients) and
//!   streaming summaries.
//! - [`shaping`]: workload shaping (seed 000): RTT, Cmin planning, recombiners, RTD, power.
//! - [`twolevel`]: seed 001's two-level scheduler: SARC over AVATAR, Facade, FIXED, ADAPTIVE.
//! - [`spec`]: serde descriptions of policies and devices, the one config schema shared by
//!   the CLI, Python and the gateway.
#![deny(missing_docs)]

pub mod alloc;
pub mod device;
pub mod devices;
pub mod error;
pub mod fclb;
pub mod request;
pub mod rng;
pub mod scheduler;
pub mod schedulers;
pub mod shaping;
pub mod sim;
pub mod spec;
pub mod stacks;
pub mod time;
pub mod twolevel;

pub use device::{Device, DeviceState};
pub use error::{Error, Result};
pub use request::{Completion, Op, Request, TARGET_ANY};
pub use rng::SimRng;
pub use scheduler::Scheduler;
pub use time::Nanos;
