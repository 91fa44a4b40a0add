//! The [`Scheduler`] trait: every QoS policy is a value implementing it.
//!
//! A scheduler owns the queues in front of a device. The driver (the simulator, or the
//! live gateway on a wall clock) calls, always with the current time:
//!
//! 1. [`Scheduler::enqueue`] when a request arrives;
//! 2. [`Scheduler::dispatch`] repeatedly while the device has a free slot, until it
//!    returns `None` (a policy may hold requests back even with free slots: a token
//!    bucket without tokens, AVATAR above its queue-depth threshold);
//! 3. [`Scheduler::complete`] when the device finishes a request;
//! 4. [`Scheduler::on_timer`] at the time [`Scheduler::next_timer`] asked for (credit
//!    replenishment, control periods, token refills), after which it tries to dispatch
//!    again.
//!
//! Policies never read a clock. Composite policies (a rate controller over a deadline
//! queue, a decomposer feeding a recombiner, periodically recomputed weights over a fair
//! queue) are built by wrapping one scheduler value in another.

use crate::device::DeviceState;
use crate::request::{Completion, Request};
use crate::time::Nanos;

/// A queueing / dispatching policy driven with injected time.
pub trait Scheduler {
    /// Short policy name for reports (e.g. `"fcfs"`, `"wf2q+"`).
    fn name(&self) -> String;

    /// A request arrives at time `now`: may it be queued? `false` rejects it at once
    /// (the caller answers it with an error the client may retry, and does not call
    /// [`Scheduler::enqueue`]). Default: every request is admitted; mClock rejects at a
    /// tenant's limit when asked to (dmclock's `AtLimit::Reject`).
    #[inline]
    fn admit(&mut self, _req: &Request, _now: Nanos) -> bool {
        true
    }

    /// A request arrives at time `now`.
    fn enqueue(&mut self, req: Request, now: Nanos);

    /// The device has at least one free slot (`dev.free_slots > 0`): return the next
    /// request to send to it, or `None` to send nothing now.
    fn dispatch(&mut self, now: Nanos, dev: &DeviceState) -> Option<Request>;

    /// The device completed a request this scheduler dispatched.
    fn complete(&mut self, _done: &Completion, _now: Nanos) {}

    /// The earliest time at which this scheduler wants [`Scheduler::on_timer`] called,
    /// if any. Must not be earlier than the `now` of the last call it received.
    fn next_timer(&self) -> Option<Nanos> {
        None
    }

    /// Called at (or just after) the time returned by [`Scheduler::next_timer`].
    fn on_timer(&mut self, _now: Nanos) {}

    /// Requests waiting in this scheduler (not yet dispatched).
    fn queued(&self) -> usize;

    /// Report internal state for time series (sampled at every summary window), e.g.
    /// `("queue_depth_limit", 12.0)`. Default: nothing.
    fn gauges(&self, _sink: &mut dyn FnMut(&str, f64)) {}
}

impl<S: Scheduler + ?Sized> Scheduler for Box<S> {
    fn name(&self) -> String {
        (**self).name()
    }
    #[inline]
    fn admit(&mut self, req: &Request, now: Nanos) -> bool {
        (**self).admit(req, now)
    }
    #[inline]
    fn enqueue(&mut self, req: Request, now: Nanos) {
        (**self).enqueue(req, now)
    }
    #[inline]
    fn dispatch(&mut self, now: Nanos, dev: &DeviceState) -> Option<Request> {
        (**self).dispatch(now, dev)
    }
    #[inline]
    fn complete(&mut self, done: &Completion, now: Nanos) {
        (**self).complete(done, now)
    }
    #[inline]
    fn next_timer(&self) -> Option<Nanos> {
        (**self).next_timer()
    }
    #[inline]
    fn on_timer(&mut self, now: Nanos) {
        (**self).on_timer(now)
    }
    #[inline]
    fn queued(&self) -> usize {
        (**self).queued()
    }
    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        (**self).gauges(sink)
    }
}
