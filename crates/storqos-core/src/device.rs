//! The [`Device`] trait: a storage model (or, in the gateway, the real backend).
//!
//! A device accepts up to some number of outstanding requests (its slots: a disk's
//! queue, an array's aggregate queue), serves them by its own internal discipline, and
//! reports completion events. The simulator asks for the time of the next completion
//! and pops completions in time order; devices break ties deterministically
//! (by submission order).

use crate::request::{Completion, Request};
use crate::rng::SimRng;
use crate::time::Nanos;

/// What a scheduler may know about the device when it dispatches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceState {
    /// Requests submitted and not yet completed.
    pub outstanding: usize,
    /// How many more requests the device accepts now.
    pub free_slots: usize,
}

/// A storage model driven with injected time.
pub trait Device {
    /// Short description for reports (e.g. `"constant(500 IOPS)"`).
    fn name(&self) -> String;

    /// Outstanding requests and free slots.
    fn state(&self) -> DeviceState;

    /// Accept a request at time `now` (only called when `state().free_slots > 0`).
    fn submit(&mut self, req: Request, now: Nanos, rng: &mut SimRng);

    /// Time of the earliest pending completion, if any.
    fn next_completion(&self) -> Option<Nanos>;

    /// Remove and return the earliest pending completion. Freed internal servers may
    /// start queued requests at that completion's time, drawing from `rng`.
    fn pop_completion(&mut self, rng: &mut SimRng) -> Option<Completion>;
}

impl<D: Device + ?Sized> Device for Box<D> {
    fn name(&self) -> String {
        (**self).name()
    }
    #[inline]
    fn state(&self) -> DeviceState {
        (**self).state()
    }
    #[inline]
    fn submit(&mut self, req: Request, now: Nanos, rng: &mut SimRng) {
        (**self).submit(req, now, rng)
    }
    #[inline]
    fn next_completion(&self) -> Option<Nanos> {
        (**self).next_completion()
    }
    #[inline]
    fn pop_completion(&mut self, rng: &mut SimRng) -> Option<Completion> {
        (**self).pop_completion(rng)
    }
}
