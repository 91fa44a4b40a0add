//! Static dispatch over the built-in policies and devices.
//!
//! A spec builds an [`AnyScheduler`] / [`AnyDevice`]: an enum with one variant per
//! built-in type (plus a boxed escape hatch). The event loop is generic, so with these
//! enums every call is a `match` the compiler can inline instead of a virtual call —
//! worth about a third of the loop's time on the FCFS benchmark.

use crate::device::{Device, DeviceState};
use crate::devices::{ConstantRate, Disk, Exponential, Parallel, Tiered};
use crate::request::{Completion, Request};
use crate::rng::SimRng;
use crate::scheduler::Scheduler;
use crate::schedulers::{Edf, Fcfs, Sfq, Wf2q};
use crate::shaping::{Miser, RttStage};
use crate::time::Nanos;
use crate::twolevel::{SarcAvatar, SarcFacade};

/// One of the built-in schedulers, or any other boxed one.
pub enum AnyScheduler {
    /// First-come first-served.
    Fcfs(Fcfs),
    /// Earliest deadline first.
    Edf(Edf),
    /// WF2Q+.
    Wf2q(Wf2q),
    /// SFQ(D).
    Sfq(Sfq),
    /// mClock (reservations, weights, limits).
    Mclock(crate::schedulers::Mclock),
    /// RTT decomposition in front of another built-in policy (seed 000).
    Rtt(Box<RttStage<AnyScheduler>>),
    /// Miser recombination (seed 000, Algorithm 2).
    Miser(Miser),
    /// SARC / FIXED / ADAPTIVE over AVATAR (seed 001).
    SarcAvatar(Box<SarcAvatar>),
    /// SARC over Facade (seed 001's E1 baseline).
    SarcFacade(Box<SarcFacade>),
    /// The models of the systems operators run ([`crate::stacks`]), boxed (they are
    /// large) but dispatched statically like the others.
    Stack(Box<StackScheduler>),
    /// Any other policy (composites).
    Boxed(Box<dyn Scheduler + Send>),
}

/// One of the models of [`crate::stacks`], statically dispatched.
pub enum StackScheduler {
    /// QEMU's throttling.
    Qemu(crate::stacks::qemu::QemuThrottle),
    /// Linux blk-throttle.
    BlkThrottle(crate::stacks::blk_throttle::BlkThrottle),
    /// Linux BFQ.
    Bfq(crate::stacks::bfq::Bfq),
    /// nbdkit's rate filter.
    Nbdkit(crate::stacks::Throttled<crate::stacks::nbdkit::NbdkitRate>),
    /// SPDK's bdev QoS.
    Spdk(crate::stacks::spdk::SpdkQos),
    /// Ceph's mClock profiles.
    Ceph(crate::stacks::ceph::CephMclock),
    /// librbd's QoS.
    Rbd(crate::stacks::librbd::RbdQos),
}

macro_rules! each_stack {
    ($self:expr, $s:ident => $e:expr) => {
        match $self {
            StackScheduler::Qemu($s) => $e,
            StackScheduler::BlkThrottle($s) => $e,
            StackScheduler::Bfq($s) => $e,
            StackScheduler::Nbdkit($s) => $e,
            StackScheduler::Spdk($s) => $e,
            StackScheduler::Ceph($s) => $e,
            StackScheduler::Rbd($s) => $e,
        }
    };
}

impl Scheduler for StackScheduler {
    fn name(&self) -> String {
        each_stack!(self, s => s.name())
    }
    #[inline]
    fn admit(&mut self, req: &Request, now: Nanos) -> bool {
        each_stack!(self, s => s.admit(req, now))
    }
    #[inline]
    fn enqueue(&mut self, req: Request, now: Nanos) {
        each_stack!(self, s => s.enqueue(req, now))
    }
    #[inline]
    fn dispatch(&mut self, now: Nanos, dev: &DeviceState) -> Option<Request> {
        each_stack!(self, s => s.dispatch(now, dev))
    }
    #[inline]
    fn complete(&mut self, done: &Completion, now: Nanos) {
        each_stack!(self, s => s.complete(done, now))
    }
    #[inline]
    fn next_timer(&self) -> Option<Nanos> {
        each_stack!(self, s => s.next_timer())
    }
    #[inline]
    fn on_timer(&mut self, now: Nanos) {
        each_stack!(self, s => s.on_timer(now))
    }
    #[inline]
    fn queued(&self) -> usize {
        each_stack!(self, s => s.queued())
    }
    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        each_stack!(self, s => s.gauges(sink))
    }
}

macro_rules! each_scheduler {
    ($self:expr, $s:ident => $e:expr) => {
        match $self {
            AnyScheduler::Fcfs($s) => $e,
            AnyScheduler::Edf($s) => $e,
            AnyScheduler::Wf2q($s) => $e,
            AnyScheduler::Sfq($s) => $e,
            AnyScheduler::Mclock($s) => $e,
            AnyScheduler::Rtt($s) => $e,
            AnyScheduler::Miser($s) => $e,
            AnyScheduler::SarcAvatar($s) => $e,
            AnyScheduler::SarcFacade($s) => $e,
            AnyScheduler::Stack($s) => $e,
            AnyScheduler::Boxed($s) => $e,
        }
    };
}

impl Scheduler for AnyScheduler {
    fn name(&self) -> String {
        each_scheduler!(self, s => s.name())
    }
    #[inline]
    fn admit(&mut self, req: &Request, now: Nanos) -> bool {
        each_scheduler!(self, s => s.admit(req, now))
    }
    #[inline]
    fn enqueue(&mut self, req: Request, now: Nanos) {
        each_scheduler!(self, s => s.enqueue(req, now))
    }
    #[inline]
    fn dispatch(&mut self, now: Nanos, dev: &DeviceState) -> Option<Request> {
        each_scheduler!(self, s => s.dispatch(now, dev))
    }
    #[inline]
    fn complete(&mut self, done: &Completion, now: Nanos) {
        each_scheduler!(self, s => s.complete(done, now))
    }
    // Asked after every event: always inlined into the (monomorphised) event loop.
    #[inline(always)]
    fn next_timer(&self) -> Option<Nanos> {
        each_scheduler!(self, s => s.next_timer())
    }
    #[inline]
    fn on_timer(&mut self, now: Nanos) {
        each_scheduler!(self, s => s.on_timer(now))
    }
    #[inline]
    fn queued(&self) -> usize {
        each_scheduler!(self, s => s.queued())
    }
    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        each_scheduler!(self, s => s.gauges(sink))
    }
}

/// One of the built-in devices, or any other boxed one.
pub enum AnyDevice {
    /// Constant-rate server.
    Constant(ConstantRate),
    /// Exponential server.
    Exponential(Exponential),
    /// Parallel array.
    Parallel(Parallel),
    /// Single disk.
    Disk(Disk),
    /// SSD + HDD tiers.
    Tiered(Box<Tiered>),
    /// Any other device.
    Boxed(Box<dyn Device + Send>),
}

macro_rules! each_device {
    ($self:expr, $d:ident => $e:expr) => {
        match $self {
            AnyDevice::Constant($d) => $e,
            AnyDevice::Exponential($d) => $e,
            AnyDevice::Parallel($d) => $e,
            AnyDevice::Disk($d) => $e,
            AnyDevice::Tiered($d) => $e,
            AnyDevice::Boxed($d) => $e,
        }
    };
}

impl Device for AnyDevice {
    fn name(&self) -> String {
        each_device!(self, d => d.name())
    }
    #[inline]
    fn state(&self) -> DeviceState {
        each_device!(self, d => d.state())
    }
    #[inline]
    fn submit(&mut self, req: Request, now: Nanos, rng: &mut SimRng) {
        each_device!(self, d => d.submit(req, now, rng))
    }
    #[inline]
    fn next_completion(&self) -> Option<Nanos> {
        each_device!(self, d => d.next_completion())
    }
    #[inline]
    fn pop_completion(&mut self, rng: &mut SimRng) -> Option<Completion> {
        each_device!(self, d => d.pop_completion(rng))
    }
}
