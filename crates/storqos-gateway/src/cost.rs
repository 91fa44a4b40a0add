//! What an I/O costs the backend, as blk-iocost models a device (Linux
//! `block/blk-iocost.c`): a fixed time per operation plus its bytes over the bandwidth.
//! The engine keeps the cost of what is in flight under a budget ([`crate::engine`]).

use storqos_core::time::Nanos;

/// What an I/O costs the backend, as blk-iocost models a device: a fixed time per
/// operation (a seek, the request overheads) plus its bytes over the bandwidth. The
/// gateway keeps the cost of what is in flight under a budget of `depth` I/Os of
/// [`CostModel::SMALL_BYTES`]: small requests are limited by the slots only, a large
/// one that does not fit waits (held, with its tenant's later requests, in the order
/// the policy chose) while other tenants' requests that fit go on, as blk-iocost
/// throttles a cgroup over its budget. A tenant of large requests then cannot fill
/// every slot: the others wait in the policy's queue, not behind its I/O.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// Time per operation (ns).
    pub op_ns: f64,
    /// Bandwidth (bytes per second).
    pub bytes_per_s: f64,
}

impl CostModel {
    /// A request of at most this size costs no more than the budget allows for each
    /// slot: limited by the slots alone.
    pub const SMALL_BYTES: u32 = 64 << 10;

    /// The default: 100 µs per operation, 1 GiB/s.
    pub const DEFAULT: CostModel = CostModel { op_ns: 100_000.0, bytes_per_s: (1u64 << 30) as f64 };

    /// The cost of an I/O of `bytes` (ns).
    pub fn of(&self, bytes: u32) -> Nanos {
        (self.op_ns + f64::from(bytes) / self.bytes_per_s * 1e9) as Nanos
    }
}
