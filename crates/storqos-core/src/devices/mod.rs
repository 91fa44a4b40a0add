//! Storage models implementing [`crate::Device`] (spec "Device models"). One model per
//! file, each opening with the seed it stands for:
//!
//! - [`constant`]: one deterministic server of C IOPS (seed 000).
//! - [`exponential`]: one server with Exp(1/C) service (seed 004; M/M/1 checks).
//! - [`array`](mod@array): k servers, internal queues, shared or striped assignment, throughput
//!   rising with depth (seed 001's RAID-5; M/M/k and M/D/k checks).
//! - [`disk`]: the mechanical disk model (seek, rotation, transfer; FIFO / SCAN / SPTF
//!   queue) and its named profiles (seeds 001, 003).
//! - [`disk_device`]: a single disk as a device, an array of one server of that model.
//! - [`service`]: the per-server service-time models an array is built from.
//! - [`measured`]: service times measured on real storage (`storqos calibrate`).
//! - [`cache`]: an LRU cache tier over blocks with explicit warm-up (seed 002).
//! - [`tiered`]: a fast and a slow device with per-request targets or hit ratios
//!   (seeds 002, 004).

pub mod array;
pub mod cache;
pub mod constant;
pub mod disk;
pub mod disk_device;
pub mod exponential;
pub mod measured;
pub mod service;
pub mod tiered;

pub use array::{Assign, Parallel};
pub use cache::CacheTier;
pub use constant::ConstantRate;
pub use disk::{DiskProfile, QueuePolicy};
pub use disk_device::Disk;
pub use exponential::Exponential;
pub use measured::{MeasuredClass, MeasuredService};
pub use service::ServiceModel;
pub use tiered::Tiered;
