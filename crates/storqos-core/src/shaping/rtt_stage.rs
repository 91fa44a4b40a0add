//! RTT as a reusable scheduler stage (seed 000 §3.3.2, SPEC "Algorithm notes →
//! Recombiners"): [`RttStage`] wraps *any* [`Scheduler`]; on arrival it runs RTT
//! ([`Rtt::admit`]) and stamps the request's `class` ([`PRIMARY`] = 0, [`SECONDARY`] = 1),
//! optionally also its device `target` (for a device that routes by target, as
//! [`super::split`] does), then hands it to the inner scheduler. The same value runs in
//! the simulator and in the live gateway (time is injected).

use crate::device::DeviceState;
use crate::request::{Completion, Request};
use crate::scheduler::Scheduler;
use crate::shaping::rtt::{Rtt, PRIMARY, SECONDARY};
use crate::time::Nanos;

/// RTT decomposition in front of any scheduler.
#[derive(Clone, Debug)]
pub struct RttStage<S> {
    rtt: Rtt,
    inner: S,
    route_target: bool,
}

impl<S: Scheduler> RttStage<S> {
    /// Classify arrivals with `rtt`, then queue them in `inner`.
    pub fn new(rtt: Rtt, inner: S) -> Self {
        RttStage { rtt, inner, route_target: false }
    }

    /// Also set each request's device `target` to its class (0 primary, 1 secondary),
    /// for devices that route by target (Split's two servers).
    pub fn routing_target(mut self, yes: bool) -> Self {
        self.route_target = yes;
        self
    }

    /// The RTT classifier (its counts of admitted and overflowed requests).
    pub fn rtt(&self) -> &Rtt {
        &self.rtt
    }

    /// The inner scheduler.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: Scheduler> Scheduler for RttStage<S> {
    fn name(&self) -> String {
        format!(
            "rtt({} IOPS, δ {} ms) > {}",
            self.rtt.capacity().iops(),
            self.rtt.deadline() as f64 / 1e6,
            self.inner.name()
        )
    }
    #[inline]
    fn enqueue(&mut self, mut req: Request, now: Nanos) {
        req.class = if self.rtt.admit(now) { PRIMARY } else { SECONDARY };
        if self.route_target {
            req.target = req.class as u8;
        }
        self.inner.enqueue(req, now);
    }
    #[inline]
    fn dispatch(&mut self, now: Nanos, dev: &DeviceState) -> Option<Request> {
        self.inner.dispatch(now, dev)
    }
    #[inline]
    fn complete(&mut self, done: &Completion, now: Nanos) {
        self.inner.complete(done, now)
    }
    fn next_timer(&self) -> Option<Nanos> {
        self.inner.next_timer()
    }
    fn on_timer(&mut self, now: Nanos) {
        self.inner.on_timer(now)
    }
    #[inline]
    fn queued(&self) -> usize {
        self.inner.queued()
    }
    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("rtt_admitted", self.rtt.admitted() as f64);
        sink("rtt_overflowed", self.rtt.overflowed() as f64);
        self.inner.gauges(sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::Fcfs;
    use crate::shaping::rtt::Capacity;
    use crate::time::NS_PER_MS;

    #[test]
    fn stage_classifies_in_front_of_any_scheduler() {
        let cap = Capacity::from_iops(1000.0).unwrap();
        let mut s = RttStage::new(Rtt::new(cap, 3 * NS_PER_MS).unwrap(), Fcfs::new()).routing_target(true);
        for i in 0..5 {
            s.enqueue(Request::new(i, 7, 0, 4096), 0);
        }
        let dev = DeviceState { outstanding: 0, free_slots: 1 };
        let got: Vec<(u32, u8)> = std::iter::from_fn(|| s.dispatch(0, &dev)).map(|r| (r.class, r.target)).collect();
        assert_eq!(got, [(0, 0), (0, 0), (0, 0), (1, 1), (1, 1)]);
        assert_eq!((s.rtt().admitted(), s.rtt().overflowed()), (3, 2));
        assert!(s.name().starts_with("rtt(1000 IOPS"));
    }
}
