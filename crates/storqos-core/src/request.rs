//! Requests and completions: the values that flow through schedulers and devices.

use crate::time::Nanos;

/// Read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Op {
    /// A read.
    #[default]
    Read = 0,
    /// A write.
    Write = 1,
}

/// `Request::target` value meaning "the device decides" (e.g. a tiered device draws the
/// tier from its hit ratio).
pub const TARGET_ANY: u8 = u8::MAX;

/// Bound on tenant ids: a tenant is `0..MAX_TENANTS`. Schedulers and statistics keep
/// per-tenant state in vectors indexed by the tenant id, so an id is a size: the bound
/// keeps a stray id (4294967295) an input error instead of an allocation of hundreds of
/// gigabytes that aborts the process.
pub const MAX_TENANTS: u32 = 65_536;

/// One block I/O request.
///
/// `tenant` is who issued it (a trace's device, host, ASU, a closed-loop client);
/// `class` is the scheduling class a policy assigned (e.g. RTT's primary = 0 /
/// secondary = 1); by default it equals the tenant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Request {
    /// Unique id within one run (position in the trace for open-loop replay).
    pub id: u64,
    /// Arrival time at the scheduler.
    pub arrival: Nanos,
    /// Byte offset on the volume.
    pub offset: u64,
    /// Size in bytes (> 0).
    pub bytes: u32,
    /// Issuing tenant, dense index from 0.
    pub tenant: u32,
    /// Scheduling class assigned by a policy (defaults to the tenant).
    pub class: u32,
    /// Read or write.
    pub op: Op,
    /// Device target (tier index for tiered devices) or [`TARGET_ANY`].
    pub target: u8,
}

impl Request {
    /// A request with the given id, tenant, arrival and size; class = tenant, read,
    /// offset 0, any target.
    pub fn new(id: u64, tenant: u32, arrival: Nanos, bytes: u32) -> Self {
        Request { id, arrival, offset: 0, bytes, tenant, class: tenant, op: Op::Read, target: TARGET_ANY }
    }
}

/// A request the device has finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The request (its `target` set to where the device actually served it).
    pub req: Request,
    /// When the scheduler handed it to the device.
    pub dispatch: Nanos,
    /// When the device completed it.
    pub finish: Nanos,
}

impl Completion {
    /// Response time seen by the client: finish − arrival.
    #[inline]
    pub fn response(&self) -> Nanos {
        self.finish - self.req.arrival
    }
    /// Time spent in the scheduler's queues: dispatch − arrival.
    #[inline]
    pub fn wait(&self) -> Nanos {
        self.dispatch - self.req.arrival
    }
    /// Time spent in the device (its queue and service): finish − dispatch.
    #[inline]
    pub fn device_time(&self) -> Nanos {
        self.finish - self.dispatch
    }
}
