//! Emulated capacity as a [`Backend`]: an [`EmulatedBackend`] serves each task on an
//! [`Emulated`] constant-rate device ([`crate::emulate`]: the simulator's `constant`
//! device) in front of the backend it wraps, and answers a request at
//! `max(real I/O done, emulated finish)` on the engine's clock. A plain export's
//! request goes to the `iops` device; a tiered export's (routed already, its
//! [`Plan`](crate::tier::Plan) in the task) to its tier's device (`tiers.fast`,
//! `tiers.slow`). A request with no device is answered when its I/O ends.
//!
//! The inner backend's slot is freed when the real I/O ends, not at the emulated
//! finish: the engine's `depth` bounds the requests outstanding, held ones included.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::ops::{Deref, DerefMut};

use storqos_core::devices::tiered::FAST;
use storqos_core::time::Nanos;

use crate::backend::{Backend, Done, IoResult, Task};
use crate::emulate::Emulated;
use crate::tier::TiersConfig;

/// A backend whose requests take at least their emulated device's service.
pub struct EmulatedBackend<B> {
    inner: B,
    /// The device of plain exports (`iops`).
    plain: Option<Emulated>,
    /// The devices of the tiers, indexed fast, slow.
    tiers: [Option<Emulated>; 2],
    /// The emulated finish of each request on the inner backend that has a device.
    finish: HashMap<u64, Nanos>,
    /// Requests whose I/O ended before their emulated finish: (finish, id), earliest
    /// first (ties by id: deterministic).
    waiting: BinaryHeap<Reverse<(Nanos, u64)>>,
    /// Their results.
    held: HashMap<u64, IoResult>,
}

impl<B: Backend> EmulatedBackend<B> {
    /// `inner` behind a device of `iops` (one server) for plain exports and the tiers'
    /// devices of `tiers`; with neither, it answers each request when its I/O ends.
    pub fn new(inner: B, iops: Option<f64>, tiers: &TiersConfig) -> Self {
        EmulatedBackend {
            inner,
            plain: iops.map(|c| Emulated::new(c, 1)),
            tiers: [0u8, 1].map(|t| tiers.device(t).iops.map(|c| Emulated::new(c, tiers.device(t).depth))),
            finish: HashMap::new(),
            waiting: BinaryHeap::new(),
            held: HashMap::new(),
        }
    }

    /// Whether a tier has an emulated device.
    pub fn tiers_emulated(&self) -> bool {
        self.tiers.iter().any(Option::is_some)
    }
}

impl<B: Backend> Backend for EmulatedBackend<B> {
    fn has_free_slot(&self) -> bool {
        self.inner.has_free_slot()
    }

    fn start(&mut self, task: Task) -> Option<IoResult> {
        let device = match &task.plan {
            Some(p) => self.tiers[usize::from(p.target != FAST)].as_mut(),
            None => self.plain.as_mut(),
        };
        if let Some(d) = device {
            self.finish.insert(task.id, d.start(task.dispatch, task.arrival));
        }
        self.inner.start(task)
    }

    fn release(&mut self, slot: usize) {
        self.inner.release(slot);
    }

    fn reap(&mut self) -> Vec<(u64, usize, IoResult)> {
        self.inner.reap()
    }

    fn complete(&mut self, id: u64, result: IoResult, now: Nanos) -> Option<Done> {
        let done = self.inner.complete(id, result, now)?;
        match self.finish.remove(&id) {
            Some(f) if f > now => {
                self.waiting.push(Reverse((f, id)));
                self.held.insert(id, done.result);
                None
            }
            _ => Some(done),
        }
    }

    fn due(&mut self, until: Nanos) -> Vec<Done> {
        let mut out = self.inner.due(until);
        while let Some(&Reverse((t, id))) = self.waiting.peek() {
            if t > until {
                break;
            }
            self.waiting.pop();
            if let Some(result) = self.held.remove(&id) {
                out.push(Done { id, target: None, result });
            }
        }
        out
    }

    fn next_due(&self) -> Option<Nanos> {
        let mine = self.waiting.peek().map(|r| r.0 .0);
        [mine, self.inner.next_due()].into_iter().flatten().min()
    }
}

/// The wrapped backend's own methods (the local backend's ring) stay reachable.
impl<B> Deref for EmulatedBackend<B> {
    type Target = B;
    fn deref(&self) -> &B {
        &self.inner
    }
}

impl<B> DerefMut for EmulatedBackend<B> {
    fn deref_mut(&mut self) -> &mut B {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use storqos_core::time::NS_PER_MS;

    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::config::ExportConfig;
    use crate::export::Export;
    use crate::io::Io;
    use crate::tier::TierDevice;

    const MS: Nanos = NS_PER_MS;

    /// A backend of unbounded slots whose I/Os end when the test says.
    #[derive(Default)]
    struct Manual {
        started: Vec<u64>,
    }

    impl Backend for Manual {
        fn has_free_slot(&self) -> bool {
            true
        }
        fn start(&mut self, task: Task) -> Option<IoResult> {
            self.started.push(task.id);
            None
        }
        fn release(&mut self, _: usize) {}
        fn reap(&mut self) -> Vec<(u64, usize, IoResult)> {
            Vec::new()
        }
    }

    fn export() -> (Arc<Export>, tempfile::TempPath) {
        let f = crate::scratch::file("emulated-backend", 1 << 16);
        let cfg: ExportConfig =
            serde_json::from_value(json!({"name": "e", "path": f.to_str().unwrap(), "tenant": 0})).unwrap();
        (Arc::new(Export::open(&cfg, "exports[0]").unwrap()), f)
    }

    fn task(export: &Arc<Export>, id: u64, arrival: Nanos, clock: &ManualClock) -> Task {
        Task { id, export: export.clone(), offset: 0, io: Io::Read(4096), plan: None, arrival, dispatch: clock.now() }
    }

    fn ok(id: u64) -> Option<Done> {
        Some(Done { id, target: None, result: Ok(vec![]) })
    }

    #[test]
    fn a_request_is_answered_at_its_emulated_finish_not_before() {
        // 500 IOPS, one server: 2 ms a request. Two started at 10 ms finish at 12 and
        // 14 ms. The first's I/O ends at 11 ms: held until 12; the second's at 15 ms,
        // past its finish: answered at once.
        let clock = ManualClock::at(10 * MS);
        let (e, _f) = export();
        let mut b = EmulatedBackend::new(Manual::default(), Some(500.0), &TiersConfig::default());
        assert_eq!(b.start(task(&e, 0, 10 * MS, &clock)), None);
        assert_eq!(b.start(task(&e, 1, 10 * MS, &clock)), None);
        assert_eq!(b.started, [0, 1], "the inner backend runs both at once");
        clock.set(11 * MS);
        assert_eq!(b.complete(0, Ok(vec![]), clock.now()), None);
        assert_eq!(b.next_due(), Some(12 * MS));
        assert_eq!(b.due(clock.now()), []);
        clock.set(12 * MS);
        assert_eq!(b.due(clock.now()), [ok(0).unwrap()]);
        assert_eq!(b.next_due(), None);
        clock.set(15 * MS);
        assert_eq!(b.complete(1, Ok(vec![]), clock.now()), ok(1));
    }

    #[test]
    fn held_answers_fall_due_in_finish_order_and_all_when_stopping() {
        // 1,000 IOPS (`iops` is one server): 1 ms a request. Four started at 0 finish at
        // 1, 2, 3 and 4 ms; their I/Os end at 0.5 ms, last one first. At 2.5 ms ids 0
        // and 1 are due, the next at 3 ms; the stop (until = MAX) hands over the other
        // two.
        let clock = ManualClock::at(0);
        let (e, _f) = export();
        let mut b = EmulatedBackend::new(Manual::default(), Some(1000.0), &TiersConfig::default());
        for id in 0..4 {
            b.start(task(&e, id, 0, &clock));
        }
        clock.set(MS / 2);
        for id in [3, 2, 1, 0] {
            assert_eq!(b.complete(id, Ok(vec![]), clock.now()), None);
        }
        clock.set(2 * MS + MS / 2);
        let ids = |d: Vec<Done>| d.into_iter().map(|d| d.id).collect::<Vec<_>>();
        assert_eq!(ids(b.due(clock.now())), [0, 1]);
        assert_eq!(b.next_due(), Some(3 * MS));
        assert_eq!(ids(b.due(Nanos::MAX)), [2, 3]);
        assert_eq!(b.next_due(), None);
    }

    #[test]
    fn a_tiers_servers_share_its_capacity() {
        // A slow tier of 1,000 IOPS over 2 servers: 2 ms a request per server. Three
        // routed to it at 0 finish at 2, 2 and 4 ms.
        let clock = ManualClock::at(0);
        let (e, _f) = export();
        let tiers = TiersConfig { fast: TierDevice::default(), slow: TierDevice { iops: Some(1000.0), depth: 2 } };
        let mut b = EmulatedBackend::new(Manual::default(), None, &tiers);
        let mut plan = crate::tier::Plan::default();
        plan.target = storqos_core::devices::tiered::SLOW;
        let slow = Arc::new(plan);
        for id in 0..3 {
            b.start(Task { plan: Some(slow.clone()), ..task(&e, id, 0, &clock) });
            assert_eq!(b.complete(id, Ok(vec![]), clock.now()), None);
        }
        let due = |b: &mut EmulatedBackend<Manual>, t| b.due(t).into_iter().map(|d| d.id).collect::<Vec<_>>();
        assert_eq!(due(&mut b, 2 * MS), [0, 1]);
        assert_eq!(b.next_due(), Some(4 * MS));
        assert_eq!(due(&mut b, 4 * MS), [2]);
    }

    #[test]
    fn without_a_device_for_it_a_request_is_answered_when_its_io_ends() {
        // Only the tiers are emulated: a plain export's request is not held.
        let clock = ManualClock::at(5 * MS);
        let (e, _f) = export();
        let tiers = TiersConfig { fast: TierDevice { iops: Some(10.0), depth: 1 }, slow: TierDevice::default() };
        let mut b = EmulatedBackend::new(Manual::default(), None, &tiers);
        assert!(b.tiers_emulated());
        b.start(task(&e, 7, 5 * MS, &clock));
        assert_eq!(b.complete(7, Ok(vec![]), clock.now()), ok(7));
        assert_eq!(b.next_due(), None);
    }
}
