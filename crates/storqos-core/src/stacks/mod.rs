//! Models of the QoS that operators already run, one module per system, each the
//! system's own algorithm with its named constants, opening with the version and the
//! source file it follows:
//!
//! - [`qemu`]: QEMU's throttle groups (`util/throttle.c`, `block/throttle-groups.c`).
//! - [`blk_throttle`]: Linux blk-throttle (cgroup v1 `blkio.throttle.*`, v2 `io.max`).
//! - [`bfq`]: Linux BFQ with cgroup weights (`block/bfq-*.c`).
//! - [`nbdkit`]: nbdkit's rate filter (`filters/rate`).
//! - [`spdk`]: SPDK's bdev QoS (`lib/bdev/bdev.c`).
//! - [`ceph`]: Ceph's mClock profiles (`src/osd/scheduler/mClockScheduler.cc`).
//! - [`librbd`]: librbd's QoS (`src/librbd/io/ImageDispatch`, `common/Throttle.cc`).
//!
//! The rate limiters share [`throttled`]: lanes held back by a [`Throttle`] until their
//! head may pass, then served first come first served.

pub mod bfq;
pub mod blk_throttle;
pub mod ceph;
pub mod librbd;
pub mod nbdkit;
pub mod qemu;
pub mod spdk;
pub mod throttled;

pub use throttled::{Throttle, Throttled};
