//! Tier routing as a [`Backend`]: a [`TieredBackend`] asks a tiered export's block map
//! ([`TierStore::route`](crate::tier::TierStore::route), [`crate::tier`]) where each of
//! its requests goes (a read hit: the fast file; a miss or a write: the slow file),
//! hands the route on with the task (the backend it wraps runs the I/O along it, an
//! emulated one charges the tier's device), gives the route back to the map when the
//! I/O ends, and names the tier in the answer: the engine sets the request's `target`
//! from it, so the policy's `complete` sees it (BAA's monitor counts hits from it).
//! Requests of plain exports pass through untouched.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use storqos_core::time::Nanos;

use crate::backend::{Backend, Done, IoResult, Task};
use crate::export::Export;
use crate::io::Io;
use crate::tier::Plan;

/// A routed request: its tier, and its route until the I/O ends.
struct Route {
    target: u8,
    plan: Option<(Arc<Export>, Arc<Plan>)>,
}

/// A backend that routes tiered exports' requests to their fast or slow file.
pub struct TieredBackend<B> {
    inner: B,
    /// The routed requests not yet answered.
    routes: HashMap<u64, Route>,
}

impl<B: Backend> TieredBackend<B> {
    /// Route in front of `inner`.
    pub fn new(inner: B) -> Self {
        TieredBackend { inner, routes: HashMap::new() }
    }

    /// `done` with the tier that served it, its route forgotten.
    fn named(&mut self, mut done: Done) -> Done {
        if let Some(r) = self.routes.remove(&done.id) {
            done.target = Some(r.target);
        }
        done
    }
}

impl<B: Backend> Backend for TieredBackend<B> {
    fn has_free_slot(&self) -> bool {
        self.inner.has_free_slot()
    }

    fn start(&mut self, mut task: Task) -> Option<IoResult> {
        if let Some(t) = &task.export.tier {
            let len = match &task.io {
                Io::Read(n) | Io::Trim { len: n, .. } | Io::Zeroes { len: n, .. } => *n,
                Io::Write { data, .. } => data.len() as u32,
            };
            let plan = Arc::new(t.route(!matches!(task.io, Io::Read(_)), task.offset, len));
            let route = Route { target: plan.target, plan: Some((task.export.clone(), plan.clone())) };
            self.routes.insert(task.id, route);
            task.plan = Some(plan);
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
        // The I/O is over: its fast-file slots are free for others (an emulated
        // backend may still hold the answer).
        if let Some((export, plan)) = self.routes.get_mut(&id).and_then(|r| r.plan.take()) {
            if let Some(t) = &export.tier {
                t.release(&plan);
            }
        }
        let done = self.inner.complete(id, result, now)?;
        Some(self.named(done))
    }

    fn due(&mut self, until: Nanos) -> Vec<Done> {
        let due = self.inner.due(until);
        due.into_iter().map(|d| self.named(d)).collect()
    }

    fn next_due(&self) -> Option<Nanos> {
        self.inner.next_due()
    }
}

/// The wrapped backend's own methods (the local backend's ring) stay reachable.
impl<B> Deref for TieredBackend<B> {
    type Target = B;
    fn deref(&self) -> &B {
        &self.inner
    }
}

impl<B> DerefMut for TieredBackend<B> {
    fn deref_mut(&mut self) -> &mut B {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use storqos_core::devices::tiered::{FAST, SLOW};
    use storqos_core::time::NS_PER_MS;
    use tempfile::TempPath;

    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::config::ExportConfig;
    use crate::emulated_backend::EmulatedBackend;
    use crate::tier::{TierDevice, TiersConfig};

    const MS: Nanos = NS_PER_MS;

    /// A backend of unbounded slots that records each task's tier; its I/Os end when
    /// the test says.
    #[derive(Default)]
    struct Manual {
        started: Vec<(u64, Option<u8>)>,
    }

    impl Backend for Manual {
        fn has_free_slot(&self) -> bool {
            true
        }
        fn start(&mut self, task: Task) -> Option<IoResult> {
            self.started.push((task.id, task.plan.map(|p| p.target)));
            None
        }
        fn release(&mut self, _: usize) {}
        fn reap(&mut self) -> Vec<(u64, usize, IoResult)> {
            Vec::new()
        }
    }

    /// A 64 KiB export (16 blocks of 4 KiB) with half its blocks placed on a fast file
    /// of 8 blocks: block `b` is placed iff ⌊(b+1)/2⌋ > ⌊b/2⌋, i.e. the odd blocks.
    fn tiered() -> (Arc<Export>, [TempPath; 2]) {
        let slow = crate::scratch::file("tiered-backend-slow", 64 << 10);
        let fast = crate::scratch::file("tiered-backend-fast", 32 << 10);
        let cfg: ExportConfig = serde_json::from_value(json!({
            "name": "t", "path": slow.to_str().unwrap(), "tenant": 0,
            "tier": {"fast": fast.to_str().unwrap(), "block_bytes": 4096, "pin": 0.5, "lru": false},
        }))
        .unwrap();
        (Arc::new(Export::open(&cfg, "exports[0]").unwrap()), [slow, fast])
    }

    fn task(export: &Arc<Export>, id: u64, offset: u64, io: Io, clock: &ManualClock) -> Task {
        Task { id, export: export.clone(), offset, io, plan: None, arrival: clock.now(), dispatch: clock.now() }
    }

    #[test]
    fn hits_go_fast_misses_and_writes_slow_each_on_its_tiers_device() {
        // Fast tier 1,000 IOPS (1 ms a request), slow 100 IOPS (10 ms). At 0: a read of
        // block 1 (placed: a hit, fast, done at 1 ms), a read of block 0 (a miss, slow,
        // done at 10 ms) and a write of block 1 (write-through: slow, after the miss,
        // done at 20 ms). Every I/O ends at 0.5 ms; each answer comes at its tier's
        // finish, naming its tier.
        let clock = ManualClock::at(0);
        let (e, _files) = tiered();
        let tiers = TiersConfig {
            fast: TierDevice { iops: Some(1000.0), depth: 1 },
            slow: TierDevice { iops: Some(100.0), depth: 1 },
        };
        let mut b = TieredBackend::new(EmulatedBackend::new(Manual::default(), None, &tiers));
        b.start(task(&e, 0, 4096, Io::Read(4096), &clock));
        b.start(task(&e, 1, 0, Io::Read(4096), &clock));
        b.start(task(&e, 2, 4096, Io::Write { data: vec![1; 4096], fua: false }, &clock));
        assert_eq!(b.started, [(0, Some(FAST)), (1, Some(SLOW)), (2, Some(SLOW))]);
        clock.set(MS / 2);
        for id in 0..3 {
            assert_eq!(b.complete(id, Ok(vec![]), clock.now()), None);
        }
        assert_eq!(b.next_due(), Some(MS));
        let got = |d: Vec<Done>| d.into_iter().map(|d| (d.id, d.target)).collect::<Vec<_>>();
        clock.set(MS);
        assert_eq!(got(b.due(clock.now())), [(0, Some(FAST))]);
        clock.set(10 * MS);
        assert_eq!(got(b.due(clock.now())), [(1, Some(SLOW))]);
        assert_eq!(b.next_due(), Some(20 * MS));
        clock.set(20 * MS);
        assert_eq!(got(b.due(clock.now())), [(2, Some(SLOW))]);
    }

    #[test]
    fn a_plain_exports_request_passes_through_unrouted() {
        let clock = ManualClock::at(3 * MS);
        let f = crate::scratch::file("tiered-backend-plain", 1 << 16);
        let cfg: ExportConfig =
            serde_json::from_value(json!({"name": "p", "path": f.to_str().unwrap(), "tenant": 0})).unwrap();
        let e = Arc::new(Export::open(&cfg, "exports[0]").unwrap());
        let mut b = TieredBackend::new(Manual::default());
        b.start(task(&e, 4, 0, Io::Read(4096), &clock));
        assert_eq!(b.started, [(4, None)]);
        assert_eq!(b.complete(4, Ok(vec![9]), clock.now()), Some(Done { id: 4, target: None, result: Ok(vec![9]) }));
    }
}
