//! The engine: one tokio task owns the storqos-core policy ([`AnyScheduler`],
//! built from the same `SchedulerSpec` the simulator uses) and drives it on a wall
//! clock, exactly as the discrete-event simulator drives it in simulated time:
//!
//! 1. a connection submits a [`Job`]; the loop stamps it `now` (monotonic nanoseconds
//!    since the gateway started: the policy never reads a clock) and calls
//!    `enqueue(Request {tenant, class, op, offset, bytes, arrival: parsed}, now)`;
//! 2. while fewer than `depth` I/Os are outstanding it calls `dispatch(now, &DeviceState
//!    {outstanding, free_slots: depth − outstanding})`; the policy's pick is the next
//!    I/O to start, and the [`Backend`] starts it ([`crate::local_backend`]: a read the
//!    page cache holds done at once, a direct read through io_uring, every other I/O
//!    on one of the `depth` I/O threads, which sends [`Msg::Done`] back);
//! 3. when the backend I/O is done, it calls `complete(&Completion {req, dispatch,
//!    finish}, now)`, records the response time and hands the reply (cookie, error,
//!    data) to the connection's writer task;
//! 4. it sleeps until the next message or `next_timer()`, then calls `on_timer(now)`
//!    (deadlines within 3 ms also go to a [`crate::waker::Waker`] thread: tokio's timer
//!    is a millisecond coarse; [`run`](mod@run));
//!    messages already waiting are handled as one batch (up to [`BATCH`](run::BATCH)) before it
//!    dispatches again. With a statistics window it also wakes at each window's end,
//!    closes the window and samples the policy's `gauges` ([`crate::stats`]).
//!
//! The backend the engine talks to is composed when it is built ([`Layered`]):
//!
//! - **tiered exports** ([`crate::tiered_backend`]): a request of a tiered export is
//!   routed by the export's block map (a read hit: the fast file; a miss or a write: the
//!   slow file), and its answer names the tier, which the engine sets as the request's
//!   `target` (the policy's `complete` sees it: BAA's monitor counts hits from it). The
//!   `depth` slots are then the array's (both tiers together, as in the simulator's
//!   tiered device);
//! - **emulated capacity** (`iops`, `tiers.fast` / `tiers.slow`;
//!   [`crate::emulated_backend`]): a constant-rate server of C IOPS (the simulator's
//!   `constant` device, [`crate::emulate`]) in front of the real file, a tier's own for
//!   a tiered export's request: requests are served one after another, each taking
//!   1/C s, and a request is answered at `max(real I/O done, emulated finish)`;
//! - the I/O itself, the backend given to [`Engine::new`].
//!
//! The engine reads time through a [`Clock`] and starts I/O through a [`Backend`]:
//! everything but the waiting ([`run`](mod@run)) is a step at the clock's `now`, which the
//! unit tests set by hand (`engine/tests.rs`), without sockets, threads or sleeps.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use storqos_core::device::DeviceState;
use storqos_core::request::{Completion, Request, TARGET_ANY};
use storqos_core::scheduler::Scheduler;
use storqos_core::schedulers::dmclock::{DistParams, ServedBy};
use storqos_core::spec::AnyScheduler;
use storqos_core::time::Nanos;
use tokio::sync::mpsc::UnboundedSender;

use crate::backend::{Backend, Done, IoResult, Task};
use crate::clock::Clock;
use crate::cost::CostModel;
use crate::emulated_backend::EmulatedBackend;
use crate::message::{BackgroundState, ClusterState, Demand, Form, Inflight, Job, Msg, Probe, Reply, Share};
use crate::protocol::{ENOMEM, ESHUTDOWN};
use crate::stats::Recorder;
use crate::tier::TiersConfig;
use crate::tiered_backend::TieredBackend;

pub mod run;
#[cfg(test)]
mod tests;

pub use crate::emulate::TIMER_SLACK_NS;

/// A policy timer already due is retried this much later (1 ms) rather than at once: a
/// policy whose timer stays in the past would otherwise spin the loop.
pub const DUE_TIMER_RETRY_NS: Nanos = 1_000_000;

/// Most requests held for the cost budget at once; past it the policy is not asked for
/// more until one starts. Far above what tenants blocked on the budget have outstanding
/// (each holds its client's queue depth at most), it bounds the scan of the held list.
pub const HELD_MAX: usize = 1024;

/// What the engine drives: the backend's slots and how it is emulated or modelled.
#[derive(Clone, Debug, Default)]
pub struct BackendConfig {
    /// I/Os outstanding at once (the device's slots; at least 1).
    pub depth: usize,
    /// Emulated capacity of plain exports (IOPS; `None`: the file's speed).
    pub iops: Option<f64>,
    /// The cost model of real storage (not used with an emulated capacity, whose
    /// one-at-a-time server is the model).
    pub cost: Option<CostModel>,
    /// The emulated devices of the tiered exports' tiers.
    pub tiers: TiersConfig,
    /// Submit direct exports' reads through io_uring from the loop ([`crate::uring`])
    /// where the kernel offers it; `false` (the default): on the I/O threads.
    pub ring_reads: bool,
}

/// The backend the engine talks to: `B`'s I/O behind the emulated devices, behind the
/// tiers' routing (see the module documentation). It dereferences to `B`.
pub type Layered<B> = TieredBackend<EmulatedBackend<B>>;

struct InFlight {
    req: Request,
    dispatch: Nanos,
    cookie: u64,
    reply: UnboundedSender<Reply>,
    permit: Inflight,
    form: Form,
    /// Chosen in mClock's reservation phase.
    reservation: bool,
}

/// What the loop does after a turn ([`Engine::turn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// Wait for the next message, or until `wake` (clock time) if there is one; `now`
    /// is when the turn ended.
    Wait {
        /// The clock's reading at the end of the turn.
        now: Nanos,
        /// The next policy timer, emulated completion or window end.
        wake: Option<Nanos>,
    },
    /// Stopped and nothing is on the backend: the loop ends.
    Finished,
}

/// The engine's state: the policy, what it holds, what is on the backend.
pub struct Engine<B, C> {
    sched: AnyScheduler,
    clock: C,
    depth: usize,
    /// Requests completed by each tier (fast, slow), for the gauges.
    tier_ops: [u64; 2],
    next_id: u64,
    /// Requests the policy holds, with the request it was given.
    queued: HashMap<u64, (Request, Job)>,
    /// A policy waiting for the backend to empty before it takes over.
    pending: Option<(AnyScheduler, tokio::sync::oneshot::Sender<String>)>,
    /// Requests on the backend (or held there until their emulated finish).
    inflight: HashMap<u64, InFlight>,
    stats: Arc<Mutex<Recorder>>,
    /// The recorder keeps a per-window series (checked once: no lock per request without).
    windows: bool,
    backend: Layered<B>,
    /// The backend's cost model (`None` with an emulated capacity: its slots decide).
    cost: Option<CostModel>,
    /// Cost (ns of backend time) of the I/Os in flight.
    inflight_cost: Nanos,
    /// Requests the policy chose that wait for the cost budget (oldest first).
    /// Each with whether mClock chose it in its reservation phase.
    held: VecDeque<(Request, bool)>,
    /// Tenants whose requests have come with dmClock reports ([`Demand::reported`]).
    reporting: HashSet<u32>,
    /// Requests that arrived per tenant (index: tenant id), admitted or not.
    arrived: Vec<u64>,
    /// The cluster member's state its agent last reported.
    cluster: Option<ClusterState>,
    /// The background job's state it last reported.
    background: Option<BackgroundState>,
}

impl<B: Backend, C: Clock> Engine<B, C> {
    /// An engine running `sched` on `clock` in front of `backend`, with the slots,
    /// emulated capacities and cost model of `config` (the backend composed as
    /// [`Layered`]).
    pub fn new(sched: AnyScheduler, clock: C, config: &BackendConfig, stats: Arc<Mutex<Recorder>>, backend: B) -> Self {
        let BackendConfig { depth, iops, cost, tiers, .. } = config;
        let (depth, iops, cost) = ((*depth).max(1), *iops, *cost);
        Engine {
            sched,
            clock,
            depth,
            tier_ops: [0, 0],
            next_id: 0,
            queued: HashMap::new(),
            pending: None,
            inflight: HashMap::new(),
            windows: stats.lock().is_ok_and(|s| s.window_end().is_some()),
            stats,
            backend: TieredBackend::new(EmulatedBackend::new(backend, iops, tiers)),
            cost: if iops.is_none() { cost } else { None },
            inflight_cost: 0,
            held: VecDeque::new(),
            reporting: HashSet::new(),
            arrived: Vec::new(),
            cluster: None,
            background: None,
        }
    }

    /// The backend given to [`Engine::new`].
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// One turn at the clock's `now`: close a statistics window that `now` passed, fire
    /// a due policy timer, finish the I/Os whose emulated finish came (stopping: all of
    /// them), put a pending policy in place once the backend is empty, then start what
    /// the slots and the cost budget allow (nothing once `stopping`). Says when to come
    /// back: the next policy timer (one already due: [`DUE_TIMER_RETRY_NS`] later), the
    /// next emulated finish or the window's end.
    pub fn turn(&mut self, stopping: bool) -> Turn {
        let now = self.clock.now();
        self.roll_windows(now);
        if let Some(t) = self.sched.next_timer() {
            if t <= now {
                self.sched.on_timer(now);
            }
        }
        // Stopping, an I/O the backend has done is answered now: an emulated finish of
        // a slow device (one request per 100 s at 0.01 IOPS) held the gateway's stop
        // until it came.
        for done in self.backend.due(if stopping { Nanos::MAX } else { now }) {
            self.finish(done, now);
        }
        self.swap_when_idle();
        if !stopping && self.pending.is_none() {
            self.dispatch_ready(now);
        } else if self.inflight.is_empty() {
            let now = self.clock.now();
            if let Ok(mut s) = self.stats.lock() {
                let sched = &self.sched;
                let tiers = self.tier_gauges();
                s.finish_windows(now, &mut |sink| gauges(sched, tiers, sink));
            }
            return Turn::Finished;
        }
        let now = self.clock.now();
        let timer = self.sched.next_timer().map(|t| if t <= now { now + DUE_TIMER_RETRY_NS } else { t });
        let emu = self.backend.next_due();
        let window = if self.windows { self.stats.lock().ok().and_then(|s| s.window_end()) } else { None };
        Turn::Wait { now, wake: [timer, emu, window].into_iter().flatten().min() }
    }

    /// Nothing more will be dispatched: answer `ESHUTDOWN` to what the policy still holds.
    pub fn refuse_queued(&mut self) {
        self.held.clear();
        for (_, (_, job)) in self.queued.drain() {
            job.refuse(ESHUTDOWN);
        }
    }

    /// Handle one message at the clock's `now`; true if it asks to stop.
    pub fn handle(&mut self, msg: Msg, stopping: bool) -> bool {
        match msg {
            Msg::Submit(job) => {
                if stopping {
                    job.refuse(ESHUTDOWN);
                    return false;
                }
                let now = self.clock.now();
                let id = self.next_id;
                self.next_id += 1;
                let req = Request {
                    id,
                    arrival: job.parsed.min(now),
                    offset: job.offset,
                    bytes: job.bytes(),
                    tenant: job.export.tenant,
                    class: job.export.class,
                    op: job.op(),
                    target: TARGET_ANY,
                };
                let t = req.tenant as usize;
                if self.arrived.len() <= t {
                    self.arrived.resize(t + 1, 0);
                }
                self.arrived[t] += 1;
                if !self.sched.admit(&req, now) {
                    // Rejected at the tenant's limit (mClock `at_limit = "reject"`): NBD has
                    // no EAGAIN; ENOMEM is its "out of resources for now", to retry.
                    if let Ok(mut s) = self.stats.lock() {
                        s.rejected(req.tenant);
                    }
                    job.refuse(ENOMEM);
                    return false;
                }
                let dist = job.dist;
                if dist.is_some() {
                    self.reporting.insert(req.tenant);
                }
                self.queued.insert(id, (req, job));
                match (&mut self.sched, dist) {
                    (AnyScheduler::Mclock(m), Some(d)) => m.enqueue_dist(req, now, d),
                    // A plain client of a tenant whose other clients report: it received
                    // nothing elsewhere (else the server would go on charging it the
                    // service elsewhere the reports led it to expect).
                    (AnyScheduler::Mclock(m), None) if self.reporting.contains(&req.tenant) => {
                        m.enqueue_dist(req, now, DistParams::default())
                    }
                    (sched, _) => sched.enqueue(req, now),
                }
                false
            }
            Msg::Done { id, worker, result } => {
                self.slot_done(id, worker, result, self.clock.now());
                false
            }
            Msg::Stop => true,
            Msg::Wake => false,
            Msg::Probe(tx) => {
                let _ = tx.send(self.probe());
                false
            }
            Msg::Reconfigure { sched, done } => {
                self.pending = Some((*sched, done));
                self.swap_when_idle();
                false
            }
            Msg::Background(state) => {
                self.background = Some(state);
                false
            }
            Msg::Shares { shares, cluster, done } => {
                if cluster.is_some() {
                    self.cluster = cluster;
                }
                let _ = done.send(self.set_shares(&shares));
                false
            }
        }
    }

    /// Set `shares` in the running mClock now; the demand so far. Each is checked
    /// before any is set: a wrong one changes nothing.
    fn set_shares(&mut self, shares: &[Share]) -> Result<Demand, String> {
        let now = self.clock.now();
        let AnyScheduler::Mclock(m) = &mut self.sched else {
            return Err(format!("shares need the mclock policy (running: {})", self.sched.name()));
        };
        for s in shares {
            if let Some(l) = s.limit.filter(|&l| s.reservation > l) {
                return Err(format!(
                    "tenant {}: reservation {} IOPS exceeds its limit ({l} IOPS)",
                    s.tenant, s.reservation
                ));
            }
        }
        for s in shares {
            m.set_reservation_limit(s.tenant, s.reservation, s.limit, now).map_err(|e| e.to_string())?;
            if let Some(w) = s.weight {
                m.set_weight(s.tenant, w, now).map_err(|e| e.to_string())?;
            }
        }
        Ok(self.demand())
    }

    /// What each tenant has asked of the gateway so far ([`Demand`]).
    pub fn demand(&self) -> Demand {
        let arrived = (0..).zip(self.arrived.iter().copied()).filter(|&(_, n)| n > 0).collect();
        let mut reported: Vec<u32> = self.reporting.iter().copied().collect();
        reported.sort_unstable();
        Demand { arrived, inflight: self.probe().inflight, reported }
    }

    /// Finish the backend's completions that no message reports (the ring's reads).
    pub fn reap(&mut self) {
        let done = self.backend.reap();
        if done.is_empty() {
            return;
        }
        let now = self.clock.now();
        for (id, worker, result) in done {
            self.slot_done(id, worker, result, now);
        }
    }

    /// Request `id` ended on backend slot `worker` (an I/O thread's, or a ring read's),
    /// which is free again.
    fn slot_done(&mut self, id: u64, worker: usize, result: IoResult, now: Nanos) {
        self.backend.release(worker);
        self.backend_done(id, result, now);
    }

    /// Request `id`'s backend I/O ended: answer it now, unless the backend holds the
    /// answer (until its emulated finish: [`Backend::due`]).
    fn backend_done(&mut self, id: u64, result: IoResult, now: Nanos) {
        if !self.inflight.contains_key(&id) {
            return;
        }
        if let Some(done) = self.backend.complete(id, result, now) {
            self.finish(done, now);
        }
    }

    /// Start what the slots and the cost budget allow: held requests first (in the
    /// policy's order), then the policy's next picks; a pick too costly for the budget
    /// now is held, and the policy is asked again, so that a tenant blocked on the
    /// budget never keeps the others' requests in the policy's queue while slots are
    /// free (up to [`HELD_MAX`] held).
    fn dispatch_ready(&mut self, now: Nanos) {
        while self.inflight.len() < self.depth && self.backend.has_free_slot() {
            if let Some(i) = self.first_held_that_fits() {
                if let Some((req, reservation)) = self.held.remove(i) {
                    self.start_io(req, reservation, now);
                }
                continue;
            }
            if self.held.len() >= HELD_MAX {
                break;
            }
            let state = DeviceState { outstanding: self.inflight.len(), free_slots: self.depth - self.inflight.len() };
            let Some(req) = self.sched.dispatch(now, &state) else { break };
            let reservation = matches!(&self.sched, AnyScheduler::Mclock(m)
                if m.last_served_by() == Some(ServedBy::Reservation));
            // A tenant's requests keep the policy's order among themselves; another
            // tenant's that fit go on while one waits for the budget.
            if self.fits(&req) && !self.held.iter().any(|(h, _)| h.tenant == req.tenant) {
                self.start_io(req, reservation, now)
            } else {
                self.held.push_back((req, reservation));
            }
        }
    }

    /// The first held request that fits now and is its tenant's first held one.
    fn first_held_that_fits(&self) -> Option<usize> {
        if self.held.is_empty() {
            return None;
        }
        let mut seen = HashSet::new();
        self.held.iter().position(|(r, _)| seen.insert(r.tenant) && self.fits(r))
    }

    /// Whether `req` may start now under the cost budget (always without a cost model,
    /// when nothing is in flight, or when it is small).
    fn fits(&self, req: &Request) -> bool {
        let Some(c) = self.cost else { return true };
        req.bytes <= CostModel::SMALL_BYTES
            || self.inflight.is_empty()
            || self.inflight_cost + c.of(req.bytes) <= self.depth as Nanos * c.of(CostModel::SMALL_BYTES)
    }

    /// Start `req` on the backend; `reservation`: mClock chose it in its reservation phase.
    fn start_io(&mut self, req: Request, reservation: bool, now: Nanos) {
        let Some((_, job)) = self.queued.remove(&req.id) else {
            // Not a request of ours (cannot happen): keep the policy consistent.
            self.sched.complete(&Completion { req, dispatch: now, finish: now }, now);
            return;
        };
        let Job { export, offset, io, cookie, reply, permit, form, .. } = job;
        if let Some(c) = self.cost {
            self.inflight_cost += c.of(req.bytes);
        }
        let (id, arrival) = (req.id, req.arrival);
        self.inflight.insert(id, InFlight { req, dispatch: now, cookie, reply, permit, form, reservation });
        let task = Task { id, export, offset, io, plan: None, arrival, dispatch: now };
        if let Some(result) = self.backend.start(task) {
            self.backend_done(id, result, now);
        }
    }

    /// Put the pending policy in place if the backend is empty: the old policy's
    /// queue moves to it, oldest first, with the original arrival times.
    fn swap_when_idle(&mut self) {
        if !self.inflight.is_empty() || self.pending.is_none() {
            return;
        }
        let Some((sched, done)) = self.pending.take() else { return };
        self.sched = sched;
        // Held requests are still queued requests: the new policy takes them with the rest.
        self.held.clear();
        let now = self.clock.now();
        let mut held: Vec<Request> = self.queued.values().map(|(r, _)| *r).collect();
        held.sort_by_key(|r| r.id);
        for r in held {
            self.sched.enqueue(r, now);
        }
        let _ = done.send(self.sched.name());
    }

    /// The state reported to a metrics scrape.
    pub fn probe(&self) -> Probe {
        let mut per: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
        for (_, job) in self.queued.values() {
            *per.entry(job.export.tenant).or_default() += 1;
        }
        for f in self.inflight.values() {
            *per.entry(f.req.tenant).or_default() += 1;
        }
        let mut gauge_list = Vec::new();
        gauges(&self.sched, self.tier_gauges(), &mut |name, v| gauge_list.push((name.to_string(), v)));
        Probe {
            queued: self.sched.queued(),
            on_backend: self.inflight.len(),
            inflight: per.into_iter().collect(),
            gauges: gauge_list,
            cluster: self.cluster.clone(),
            background: self.background.clone(),
        }
    }

    /// Close the statistics window if `now` is past it, sampling the policy's gauges.
    fn roll_windows(&mut self, now: Nanos) {
        if self.windows {
            if let Ok(mut s) = self.stats.lock() {
                roll(&mut s, &self.sched, self.tier_gauges(), now);
            }
        }
    }

    /// The tiers' completion counts, once a tier is configured or has served.
    fn tier_gauges(&self) -> Option<[u64; 2]> {
        (self.backend.tiers_emulated() || self.tier_ops != [0, 0]).then_some(self.tier_ops)
    }

    /// Answer the request the backend is done with.
    fn finish(&mut self, done: Done, now: Nanos) {
        let Done { id, target, result } = done;
        let Some(mut f) = self.inflight.remove(&id) else { return };
        if let Some(t) = target {
            f.req.target = t;
        }
        if let Some(c) = self.cost {
            self.inflight_cost = self.inflight_cost.saturating_sub(c.of(f.req.bytes));
        }
        if f.req.target <= 1 {
            self.tier_ops[usize::from(f.req.target)] += 1;
        }
        let done = Completion { req: f.req, dispatch: f.dispatch, finish: now };
        self.sched.complete(&done, now);
        // Close the window if `now` is past it; an error is accounted here, a success
        // by the connection's writer once its reply is written.
        if self.windows || result.is_err() {
            let tiers = self.tier_gauges();
            if let Ok(mut s) = self.stats.lock() {
                if self.windows {
                    roll(&mut s, &self.sched, tiers, now);
                }
                if result.is_err() {
                    s.error(f.req.tenant);
                }
            }
        }
        let reply = match result {
            Ok(data) => Reply {
                cookie: f.cookie,
                error: 0,
                data,
                permit: f.permit,
                done: Some(done),
                form: f.form,
                reservation: f.reservation,
            },
            Err(e) => Reply { reservation: f.reservation, ..Reply::bare(f.cookie, e, f.permit, f.form) },
        };
        let _ = f.reply.send(reply);
    }
}

/// [`Recorder::roll`] with `sched`'s gauges (a no-op until `now` passes the window).
fn roll(stats: &mut Recorder, sched: &AnyScheduler, tiers: Option<[u64; 2]>, now: Nanos) {
    stats.roll(now, &mut |sink| gauges(sched, tiers, sink));
}

/// The policy's gauges, then (with tiered exports) the requests each tier completed so
/// far: `tier_fast_ops`, `tier_slow_ops`.
fn gauges(sched: &AnyScheduler, tiers: Option<[u64; 2]>, sink: &mut dyn FnMut(&str, f64)) {
    sched.gauges(sink);
    if let Some([fast, slow]) = tiers {
        sink("tier_fast_ops", fast as f64);
        sink("tier_slow_ops", slow as f64);
    }
}
