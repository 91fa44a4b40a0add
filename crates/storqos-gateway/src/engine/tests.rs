//! The engine fed explicit times: a [`ManualClock`] the test sets, a backend whose I/Os
//! complete when the test says, no sockets, threads or sleeps. Each expectation is
//! derived by hand from the policy's rule or the emulated device's service time.

use std::sync::{Arc, Mutex};

use serde_json::json;
use storqos_core::schedulers::dmclock::DistParams;
use storqos_core::spec::SchedulerSpec;
use storqos_core::time::NS_PER_MS;
use tempfile::TempPath;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::{BackendConfig, Engine, Turn};
use crate::backend::{Backend, IoResult, Task};
use crate::budget::{Budgets, ConnectionBudget};
use crate::clock::ManualClock;
use crate::config::ExportConfig;
use crate::export::Export;
use crate::io::Io;
use crate::message::{Form, Job, Msg, Reply, Share};
use crate::protocol::ESHUTDOWN;
use crate::stats::Recorder;

const MS: u64 = NS_PER_MS;

/// Slots the test frees: every I/O stays on the backend until [`Rig::complete`].
struct Slots {
    free: Vec<usize>,
    /// (request id, slot) in the order they were started.
    started: Vec<(u64, usize)>,
}

impl Backend for Slots {
    fn has_free_slot(&self) -> bool {
        !self.free.is_empty()
    }
    fn start(&mut self, task: Task) -> Option<IoResult> {
        let slot = self.free.pop().expect("started without a free slot");
        self.started.push((task.id, slot));
        None
    }
    fn release(&mut self, slot: usize) {
        self.free.push(slot);
    }
    fn reap(&mut self) -> Vec<(u64, usize, IoResult)> {
        Vec::new()
    }
}

/// An engine over two tenants' exports, its clock, and the replies it sends.
struct Rig {
    engine: Engine<Slots, ManualClock>,
    clock: ManualClock,
    exports: Vec<Arc<Export>>,
    budgets: Vec<ConnectionBudget>,
    tx: UnboundedSender<Reply>,
    rx: UnboundedReceiver<Reply>,
    next_cookie: u64,
    runtime: tokio::runtime::Runtime,
    _files: Vec<TempPath>,
}

fn rig(policy: serde_json::Value, config: BackendConfig, slots: usize) -> Rig {
    let clock = ManualClock::at(0);
    let sched = serde_json::from_value::<SchedulerSpec>(policy).unwrap().build().unwrap();
    let mut files = Vec::new();
    let mut exports = Vec::new();
    for tenant in 0..2u32 {
        let f = crate::scratch::file("engine", 1 << 20);
        let cfg: ExportConfig = serde_json::from_value(
            json!({"name": format!("t{tenant}"), "path": f.to_str().unwrap(), "tenant": tenant}),
        )
        .unwrap();
        exports.push(Arc::new(Export::open(&cfg, "exports[0]").unwrap()));
        files.push(f);
    }
    let budgets = Budgets::new(64 << 20);
    let budgets = (0..2).map(|t| budgets.connection(t, [0, 1]).0).collect();
    let stats = Arc::new(Mutex::new(Recorder::new([(0, "t0"), (1, "t1")])));
    let backend = Slots { free: (0..slots).rev().collect(), started: Vec::new() };
    let engine = Engine::new(sched, clock.clone(), &config, stats, backend);
    let (tx, rx) = unbounded_channel();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    Rig { engine, clock, exports, budgets, tx, rx, next_cookie: 0, runtime, _files: files }
}

fn depth(depth: usize) -> BackendConfig {
    BackendConfig { depth, ..BackendConfig::default() }
}

impl Rig {
    /// A 4 KiB read of `tenant`'s export parsed now; its cookie is the engine's request id
    /// (both count submissions from 0).
    fn submit(&mut self, tenant: usize) -> u64 {
        self.submit_with(tenant, None)
    }

    /// [`Rig::submit`] from a client of the dmClock extension reporting `dist`.
    fn submit_with(&mut self, tenant: usize, dist: Option<DistParams>) -> u64 {
        let cookie = self.next_cookie;
        self.next_cookie += 1;
        let permit = self.runtime.block_on(self.budgets[tenant].take(4096, || {})).unwrap();
        let job = Job {
            export: self.exports[tenant].clone(),
            offset: 0,
            io: Io::Read(4096),
            cookie,
            reply: self.tx.clone(),
            permit,
            parsed: self.clock.now_ns(),
            form: Form::Simple,
            dist,
        };
        assert!(!self.engine.handle(Msg::Submit(job), false));
        cookie
    }

    /// The backend finished request `id` now.
    fn complete(&mut self, id: u64) {
        let slot = self.engine.backend.started.iter().find(|s| s.0 == id).expect("not started").1;
        self.engine.handle(Msg::Done { id, worker: slot, result: Ok(vec![0; 4096]) }, false);
    }

    /// The ids started on the backend so far, in order.
    fn started(&self) -> Vec<u64> {
        self.engine.backend.started.iter().map(|s| s.0).collect()
    }

    /// The replies sent so far: (cookie, NBD error).
    fn replies(&mut self) -> Vec<(u64, u32)> {
        std::iter::from_fn(|| self.rx.try_recv().ok()).map(|r| (r.cookie, r.error)).collect()
    }

    fn wake(&mut self) -> Option<u64> {
        match self.engine.turn(false) {
            Turn::Wait { wake, .. } => wake,
            Turn::Finished => panic!("finished while not stopping"),
        }
    }
}

impl ManualClock {
    fn now_ns(&self) -> u64 {
        crate::clock::Clock::now(self)
    }
}

#[test]
fn dispatch_follows_the_policys_order_one_slot_at_a_time() {
    // EDF, tenant 0's deadline 10 ms after arrival, tenant 1's 1 ms: arrivals at 0 (t0,
    // due 10), 1 (t0, due 11), 2 (t1, due 3) and 5 ms (t1, due 6) leave in the order
    // of their deadlines, 3, 6, 10, 11: ids 2, 3, 0, 1.
    let mut r =
        rig(json!({"kind": "edf", "deadlines_ns": [10 * MS, MS], "default_deadline_ns": 100 * MS}), depth(1), 1);
    for (t, tenant) in [(0, 0), (MS, 0), (2 * MS, 1), (5 * MS, 1)] {
        r.clock.set(t);
        r.submit(tenant);
    }
    r.engine.turn(false);
    assert_eq!(r.started(), [2], "one slot: one request on the backend");
    for id in [2, 3, 0] {
        r.clock.advance(MS);
        r.complete(id);
        r.engine.turn(false);
    }
    assert_eq!(r.started(), [2, 3, 0, 1]);
    r.complete(1);
    assert_eq!(r.replies(), [(2, 0), (3, 0), (0, 0), (1, 0)]);
}

#[test]
fn at_most_depth_requests_are_on_the_backend() {
    // Depth 2 over 4 free slots: of 5 requests, 2 start; each completion starts one more.
    let mut r = rig(json!({"kind": "fcfs"}), depth(2), 4);
    for _ in 0..5 {
        r.submit(0);
    }
    r.engine.turn(false);
    let p = r.engine.probe();
    assert_eq!((p.on_backend, p.queued), (2, 3));
    assert_eq!(p.inflight, [(0, 5)]);
    r.complete(0);
    r.engine.turn(false);
    assert_eq!(r.started(), [0, 1, 2]);
    assert_eq!(r.engine.probe().on_backend, 2);
}

#[test]
fn free_backend_slots_bound_dispatch_below_depth() {
    // Depth 8 but the backend has one free slot: one request at a time.
    let mut r = rig(json!({"kind": "fcfs"}), depth(8), 1);
    for _ in 0..3 {
        r.submit(1);
    }
    r.engine.turn(false);
    assert_eq!(r.started(), [0]);
    r.complete(0);
    r.engine.turn(false);
    assert_eq!(r.started(), [0, 1]);
}

#[test]
fn a_policy_timer_wakes_the_engine_when_a_limited_tenant_may_go_on() {
    // mClock, tenant 0 limited to 1,000 IOPS: limit tags L = max(L_prev + 1 ms, arrival).
    // Three requests arriving at 100 ms get L = 100, 101, 102 ms: one may start at
    // 100 ms, the next at 101 ms, the last at 102 ms, though 4 slots are free.
    let mut r = rig(json!({"kind": "mclock", "limits": [1000.0]}), depth(4), 4);
    r.clock.set(100 * MS);
    for _ in 0..3 {
        r.submit(0);
    }
    assert_eq!(r.wake(), Some(101 * MS));
    assert_eq!(r.started(), [0]);
    // Woken early (another message): nothing new starts, the timer stays.
    r.clock.set(100 * MS + MS / 2);
    assert_eq!(r.wake(), Some(101 * MS));
    assert_eq!(r.started(), [0]);
    r.clock.set(101 * MS);
    assert_eq!(r.wake(), Some(102 * MS));
    assert_eq!(r.started(), [0, 1]);
    r.clock.set(102 * MS);
    assert_eq!(r.wake(), None, "nothing left to wait for");
    assert_eq!(r.started(), [0, 1, 2]);
}

#[test]
fn dmclock_reports_move_a_limited_tenants_tags_and_replies_say_the_phase() {
    // mClock, tenant 0 reserved 500 IOPS (2 ms spacing), limited to 1,000 (1 ms). At
    // 100 ms request A reports nothing: R = L = 100 ms, started at once in the
    // reservation phase. Request B reports δ = 4, ρ = 2 (served at the other gateways
    // since A). Reports are charged at arrival: the ledger owes 4 and 2, and expects as
    // much again per own request from now on (the ratio of the first report to the one
    // own request before it), so B's head costs 1 + 4 + 4 = 9 on the limit tag and
    // 1 + 2 + 2 = 5 on the reservation tag: L = 109 ms, R = 110 ms. Without the
    // report B would be due at 101 ms. The replies say A's phase (reservation).
    let mut r = rig(json!({"kind": "mclock", "reservations": [500.0], "limits": [1000.0]}), depth(4), 4);
    r.clock.set(100 * MS);
    r.submit_with(0, Some(DistParams { delta: 0, rho: 0 }));
    assert_eq!(r.wake(), None);
    assert_eq!(r.started(), [0]);
    r.submit_with(0, Some(DistParams { delta: 4, rho: 2 }));
    assert_eq!(r.wake(), Some(109 * MS));
    r.complete(0);
    let replies: Vec<Reply> = std::iter::from_fn(|| r.rx.try_recv().ok()).collect();
    assert_eq!(replies.len(), 1);
    assert!(replies[0].reservation, "A was served in the reservation phase");
    r.clock.set(109 * MS);
    r.wake();
    assert_eq!(r.started(), [0, 1]);
    r.complete(1);
    let replies: Vec<Reply> = std::iter::from_fn(|| r.rx.try_recv().ok()).collect();
    assert!(!replies[0].reservation, "B went in the weight phase at 109 ms, before its reservation tag (110 ms)");
    // The gateway's demand names the tenant as reporting (a cluster gives it its whole
    // promise).
    assert_eq!(r.engine.demand().reported, [0]);
}

#[test]
fn shares_change_a_limit_in_place_and_report_the_demand() {
    // mClock, tenant 0 limited to 1,000 IOPS; three requests at 100 ms: one starts, the
    // next is due at 101 ms. A share of 100 IOPS set at 100 ms rescales the waiting
    // head's 1 ms to the new 10 ms spacing: due at 110 ms, then 120 ms; no pause, and the
    // reply counts tenant 0's three arrivals, all still in the gateway.
    let mut r = rig(json!({"kind": "mclock", "limits": [1000.0]}), depth(4), 4);
    r.clock.set(100 * MS);
    for _ in 0..3 {
        r.submit(0);
    }
    assert_eq!(r.wake(), Some(101 * MS));
    let (done, mut rx) = tokio::sync::oneshot::channel();
    r.engine.handle(
        Msg::Shares {
            cluster: None,
            shares: vec![Share { tenant: 0, reservation: 0.0, weight: None, limit: Some(100.0) }],
            done,
        },
        false,
    );
    let demand = rx.try_recv().unwrap().unwrap();
    assert_eq!(demand.arrived, [(0, 3)]);
    assert_eq!(demand.inflight, [(0, 3)]);
    assert_eq!(r.wake(), Some(110 * MS));
    r.clock.set(110 * MS);
    assert_eq!(r.wake(), Some(120 * MS));
    assert_eq!(r.started(), [0, 1]);
    // A reservation above the limit is refused and changes nothing.
    let (done, mut rx) = tokio::sync::oneshot::channel();
    r.engine.handle(
        Msg::Shares {
            cluster: None,
            shares: vec![Share { tenant: 0, reservation: 500.0, weight: None, limit: Some(100.0) }],
            done,
        },
        false,
    );
    assert!(rx.try_recv().unwrap().unwrap_err().contains("tenant 0: reservation 500 IOPS exceeds its limit"));
    assert_eq!(r.wake(), Some(120 * MS));
}

#[test]
fn shares_need_mclock() {
    let mut r = rig(json!({"kind": "fcfs"}), depth(1), 1);
    let (done, mut rx) = tokio::sync::oneshot::channel();
    r.engine.handle(
        Msg::Shares {
            cluster: None,
            shares: vec![Share { tenant: 0, reservation: 10.0, weight: None, limit: None }],
            done,
        },
        false,
    );
    let err = rx.try_recv().unwrap().unwrap_err();
    assert!(err.contains("need the mclock policy") && err.contains("fcfs"), "{err}");
}

#[test]
fn emulated_capacity_releases_each_request_at_its_service_time() {
    // 1,000 IOPS emulated: one request per ms, one after another. Three requests at
    // 0 start at once (depth 4) and finish at 1, 2 and 3 ms, however soon the real
    // I/O is done (here at 0.1 ms).
    let mut r = rig(json!({"kind": "fcfs"}), BackendConfig { depth: 4, iops: Some(1000.0), ..Default::default() }, 4);
    for _ in 0..3 {
        r.submit(0);
    }
    r.engine.turn(false);
    assert_eq!(r.started(), [0, 1, 2]);
    r.clock.set(MS / 10);
    for id in 0..3 {
        r.complete(id);
    }
    assert_eq!(r.wake(), Some(MS), "the first emulated finish");
    assert_eq!(r.replies(), []);
    r.clock.set(MS);
    assert_eq!(r.wake(), Some(2 * MS));
    assert_eq!(r.replies(), [(0, 0)]);
    r.clock.set(3 * MS);
    assert_eq!(r.wake(), None);
    assert_eq!(r.replies(), [(1, 0), (2, 0)]);
    assert_eq!(r.engine.probe().on_backend, 0);
}

#[test]
fn a_late_start_loses_no_emulated_time_within_the_slack() {
    // 50 IOPS emulated: 20 ms a request. One arriving at 0 that starts at 5 ms (the
    // loop woke late) is served from its arrival, done at 20 ms, not 25. One arriving
    // at 20 ms that starts at 50 ms starts at most the 10 ms slack in the past: at 40 ms,
    // done at 60 ms.
    let mut r = rig(json!({"kind": "fcfs"}), BackendConfig { depth: 1, iops: Some(50.0), ..Default::default() }, 1);
    r.submit(0);
    r.clock.set(5 * MS);
    r.engine.turn(false);
    r.complete(0);
    assert_eq!(r.wake(), Some(20 * MS));
    r.clock.set(20 * MS);
    r.engine.turn(false);
    assert_eq!(r.replies(), [(0, 0)]);
    r.submit(0);
    r.clock.set(50 * MS);
    r.engine.turn(false);
    r.complete(1);
    assert_eq!(r.wake(), Some(60 * MS));
    assert_eq!(r.replies(), []);
}

#[test]
fn a_stop_drains_the_backend_and_refuses_what_the_policy_holds() {
    let mut r = rig(json!({"kind": "fcfs"}), depth(1), 1);
    for _ in 0..3 {
        r.submit(0);
    }
    r.engine.turn(false);
    assert!(r.engine.handle(Msg::Stop, false), "stop asks to stop");
    // Stopping: nothing more starts; the one on the backend is waited for.
    assert!(matches!(r.engine.turn(true), Turn::Wait { .. }));
    r.engine.refuse_queued();
    let mut refused = r.replies();
    refused.sort_unstable();
    assert_eq!(refused, [(1, ESHUTDOWN), (2, ESHUTDOWN)]);
    // A request arriving now is refused at once.
    let permit = r.runtime.block_on(r.budgets[0].take(1, || {})).unwrap();
    let late = Job {
        export: r.exports[0].clone(),
        offset: 0,
        io: Io::Read(4096),
        cookie: 9,
        reply: r.tx.clone(),
        permit,
        parsed: 0,
        form: Form::Simple,
        dist: None,
    };
    r.engine.handle(Msg::Submit(late), true);
    assert_eq!(r.replies(), [(9, ESHUTDOWN)]);
    r.complete(0);
    assert_eq!(r.replies(), [(0, 0)], "the request on the backend is answered");
    assert_eq!(r.engine.turn(true), Turn::Finished);
    assert_eq!(r.started(), [0]);
}

#[test]
fn a_reload_waits_for_the_backend_then_the_new_policy_orders_the_queue() {
    // FCFS with one slot: request 0 on the backend, 1 (t0) and 2 (t1) queued. The new
    // policy, EDF giving tenant 1 the nearer deadline, takes over once 0 is done and
    // starts 2 before 1.
    let mut r = rig(json!({"kind": "fcfs"}), depth(1), 1);
    r.submit(0);
    r.clock.set(MS);
    r.submit(0);
    r.clock.set(2 * MS);
    r.submit(1);
    r.engine.turn(false);
    assert_eq!(r.started(), [0]);
    let edf = serde_json::from_value::<SchedulerSpec>(
        json!({"kind": "edf", "deadlines_ns": [100 * MS, MS], "default_deadline_ns": 100 * MS}),
    )
    .unwrap()
    .build()
    .unwrap();
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
    r.engine.handle(Msg::Reconfigure { sched: Box::new(edf), done: done_tx }, false);
    r.engine.turn(false);
    assert!(done_rx.try_recv().is_err(), "not in place while a request is on the backend");
    assert_eq!(r.started(), [0], "dispatch pauses until the swap");
    r.complete(0);
    // The next turn finds the backend empty: the swap, then dispatch under EDF.
    r.engine.turn(false);
    assert_eq!(done_rx.try_recv().unwrap(), "edf");
    assert_eq!(r.started(), [0, 2]);
    r.complete(2);
    r.engine.turn(false);
    assert_eq!(r.started(), [0, 2, 1]);
}
