//! A single disk as a [`Device`]: a [`Parallel`] array of one server with the disk
//! service model ([`crate::devices::disk`]: seek, rotation, transfer, and the order its
//! queue is served in), so it has its own queue of up to `depth` requests.

use crate::device::{Device, DeviceState};
use crate::devices::array::{Assign, Parallel};
use crate::devices::disk::{DiskProfile, QueuePolicy};
use crate::devices::service::ServiceModel;
use crate::error::Result;
use crate::request::{Completion, Request};
use crate::rng::SimRng;
use crate::time::Nanos;

/// A single disk as a [`Device`]: one server with the disk service model and its own
/// queue of up to `depth` requests, served in the [`QueuePolicy`] order. Seed 003's
/// shared storage is `Disk::new(DiskProfile::desktop_7200(), QueuePolicy::Fifo)`.
#[derive(Clone, Debug)]
pub struct Disk {
    inner: Parallel,
}

impl Disk {
    /// A disk of `profile` serving its queue by `queue`, accepting up to
    /// [`crate::devices::array::DEFAULT_DEPTH`] outstanding requests.
    pub fn new(profile: DiskProfile, queue: QueuePolicy) -> Result<Self> {
        let service = ServiceModel::disk(profile, queue)?;
        Ok(Disk { inner: Parallel::new(1, Assign::Shared, service)? })
    }

    /// Limit the outstanding requests (queue + in service) to `depth` (≥ 1).
    pub fn with_depth(self, depth: usize) -> Result<Self> {
        Ok(Disk { inner: self.inner.with_depth(depth)? })
    }

    /// Requests waiting in the disk's queue (not in service).
    pub fn queued(&self) -> usize {
        self.inner.queued()
    }
}

impl Device for Disk {
    fn name(&self) -> String {
        match self.inner.service() {
            ServiceModel::Disk { profile, queue } => format!("disk({}, {})", profile.name, queue.as_str()),
            s => s.name(),
        }
    }
    #[inline]
    fn state(&self) -> DeviceState {
        self.inner.state()
    }
    #[inline]
    fn submit(&mut self, req: Request, now: Nanos, rng: &mut SimRng) {
        self.inner.submit(req, now, rng)
    }
    #[inline]
    fn next_completion(&self) -> Option<Nanos> {
        self.inner.next_completion()
    }
    #[inline]
    fn pop_completion(&mut self, rng: &mut SimRng) -> Option<Completion> {
        self.inner.pop_completion(rng)
    }
}
