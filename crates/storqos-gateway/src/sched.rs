//! The scheduler loop: one tokio task owns the storqos-core policy ([`AnyScheduler`],
//! built from the same `SchedulerSpec` the simulator uses) and drives it on a wall
//! clock, exactly as the discrete-event simulator drives it in simulated time:
//!
//! 1. a connection submits a [`Job`]; the loop stamps it `now` (monotonic nanoseconds
//!    since the gateway started: the policy never reads a clock) and calls
//!    `enqueue(Request {tenant, class, op, offset, bytes, arrival: parsed}, now)`;
//! 2. while fewer than `depth` I/Os are outstanding it calls `dispatch(now, &DeviceState
//!    {outstanding, free_slots: depth − outstanding})`; the policy's pick is the next
//!    I/O to start. A read of at most [`INLINE_READ_MAX`] that the page cache holds is
//!    done right here ([`Export::read_nowait`], which never blocks); with
//!    [`Backend::ring_reads`], a read of a direct export is submitted to io_uring from
//!    here ([`crate::uring`]), its completion reaped when the ring's eventfd wakes the
//!    loop; every other I/O goes to one of the `depth` dedicated I/O threads
//!    ([`crate::pool`]), which runs the blocking positional read / write (and the
//!    `fdatasync` of a FUA write) and sends [`Msg::Done`] back;
//! 3. when the backend I/O is done, it calls `complete(&Completion {req, dispatch,
//!    finish}, now)`, records the response time and hands the reply (cookie, error,
//!    data) to the connection's writer task;
//! 4. it sleeps until the next message or `next_timer()`, then calls `on_timer(now)`
//!    (deadlines within 3 ms also go to a [`Waker`] thread: tokio's timer is a
//!    millisecond coarse);
//!    messages already waiting are handled as one batch (up to [`BATCH`]) before it
//!    dispatches again. With a statistics window it also wakes at each window's end,
//!    closes the window and samples the policy's `gauges` ([`crate::stats`]).
//!
//! **Emulated capacity** (`iops`): the backend then behaves as a constant-rate server
//! of C IOPS (the simulator's `constant` device, [`crate::emulate`]) in front of the
//! real file: requests are served one after another, each taking 1/C s, and a
//! request's slot is released at `max(real I/O done, emulated finish)`.
//!
//! **Tiered exports** ([`crate::tier`]): when the loop starts a request of a tiered
//! export it asks the export's block map for the route (a read hit: the fast file; a
//! miss or a write: the slow file), sets the request's `target` to that tier (the
//! policy's `complete` sees it: BAA's monitor counts hits from it), charges the tier's
//! own emulated device (`tiers.fast` / `tiers.slow`) instead of `iops`, and gives the
//! route back to the map when the I/O is done. The `depth` slots are then the array's
//! (both tiers together, as in the simulator's tiered device).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use storqos_core::device::DeviceState;
use storqos_core::devices::tiered::FAST;
use storqos_core::request::{Completion, Op, Request, TARGET_ANY};
use storqos_core::scheduler::Scheduler;
use storqos_core::spec::AnyScheduler;
use storqos_core::time::Nanos;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use crate::emulate::Emulated;
use crate::export::Export;
use crate::pool::{Pool, Task};
use crate::protocol::{EIO, ENOMEM, ESHUTDOWN};
use crate::stats::Recorder;
use crate::tier::{Plan, TiersConfig};
use crate::waker::Waker;

pub use crate::emulate::TIMER_SLACK_NS;
/// Deadlines closer than this (3 ms) also go to the [`Waker`]: tokio's timer would fire
/// them up to a millisecond late.
pub const PRECISE_WAKE_NS: Nanos = 3_000_000;
/// Most messages handled before the loop dispatches again.
pub const BATCH: usize = 256;
/// Reads up to this size (64 KiB) that the page cache holds are done in the loop itself
/// (`preadv2(RWF_NOWAIT)`); larger ones, and ones the cache cannot serve, go to an I/O
/// thread.
pub const INLINE_READ_MAX: u32 = 64 << 10;

/// Monotonic nanoseconds since the gateway started.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock reading 0 now.
    pub fn start() -> Self {
        Clock { start: Instant::now() }
    }
    /// Nanoseconds since the start.
    pub fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }
    /// The instant of clock time `t`.
    pub fn std_instant(&self, t: Nanos) -> Instant {
        self.start + Duration::from_nanos(t)
    }
    /// The tokio instant of clock time `t`.
    pub fn instant(&self, t: Nanos) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.start + Duration::from_nanos(t))
    }
}

/// A request's charge to the in-flight budgets, its connection's and its tenant's
/// ([`crate::budget`]): taken before its data is read, given back once its reply is
/// written to the client (so a client that does not read its replies cannot make the
/// gateway buffer more).
pub use crate::budget::Inflight;

/// A reply for a connection's writer: the cookie, an NBD error value (0 = success),
/// for a successful read the data, and the request's in-flight share (released when
/// the writer has written it).
#[derive(Debug)]
pub struct Reply {
    /// The request's cookie.
    pub cookie: u64,
    /// 0 or an NBD error value.
    pub error: u32,
    /// Data of a successful read (empty otherwise).
    pub data: Vec<u8>,
    /// The in-flight share of the request.
    pub permit: Inflight,
    /// A read or write that succeeded, to be accounted once its reply is written (its
    /// response time runs from the request parsed to the reply written).
    pub done: Option<Completion>,
    /// How it is framed on the wire.
    pub form: Form,
}

/// How a reply is framed on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// A simple reply: the header, then the data of a successful read.
    Simple,
    /// A structured reply to a read of the export at `offset` (structured replies
    /// negotiated): data and hole chunks, or an error chunk.
    Read {
        /// Where the read starts in the export.
        offset: u64,
    },
    /// `data` is a whole structured reply, written as it is (block status).
    Raw,
}

impl Reply {
    /// An answer without data: `error` (0: success) framed as `form` asks.
    pub fn bare(cookie: u64, error: u32, permit: Inflight, form: Form) -> Reply {
        Reply { cookie, error, data: Vec::new(), permit, done: None, form }
    }
}

/// The I/O of a job.
#[derive(Debug)]
pub enum Io {
    /// Read this many bytes.
    Read(u32),
    /// Write these bytes (with FUA: durable before the reply).
    Write {
        /// The data.
        data: Vec<u8>,
        /// Force unit access.
        fua: bool,
    },
    /// Discard this many bytes (`NBD_CMD_TRIM`): the policy sees a write of 0 bytes.
    Trim {
        /// Length in bytes.
        len: u32,
        /// Force unit access.
        fua: bool,
    },
    /// Zero this many bytes (`NBD_CMD_WRITE_ZEROES`): the policy sees a write of `len`
    /// bytes.
    Zeroes {
        /// Length in bytes.
        len: u32,
        /// Write the zeroes rather than punch a hole (`NBD_CMD_FLAG_NO_HOLE`).
        no_hole: bool,
        /// Force unit access.
        fua: bool,
    },
}

/// A read or write a connection submits to the scheduler loop.
pub struct Job {
    /// The export it targets (its tenant and class).
    pub export: Arc<Export>,
    /// Byte offset (already checked to lie in the export).
    pub offset: u64,
    /// What to do.
    pub io: Io,
    /// The client's cookie.
    pub cookie: u64,
    /// Where the reply goes.
    pub reply: UnboundedSender<Reply>,
    /// The request's in-flight share, released once its reply is written.
    pub permit: Inflight,
    /// When the connection parsed it (gateway clock, ns): its arrival.
    pub parsed: Nanos,
    /// How its reply is framed.
    pub form: Form,
}

impl Job {
    /// Answer the job with NBD error `error` (its in-flight share goes with the reply).
    pub fn refuse(self, error: u32) {
        let _ = self.reply.send(Reply::bare(self.cookie, error, self.permit, self.form));
    }

    fn bytes(&self) -> u32 {
        match &self.io {
            Io::Read(n) => *n,
            Io::Write { data, .. } => data.len() as u32,
            Io::Trim { .. } => 0,
            Io::Zeroes { len, .. } => *len,
        }
    }
    fn op(&self) -> Op {
        match self.io {
            Io::Read(_) => Op::Read,
            Io::Write { .. } | Io::Trim { .. } | Io::Zeroes { .. } => Op::Write,
        }
    }
}

/// Messages to the scheduler loop.
pub enum Msg {
    /// A new request.
    Submit(Job),
    /// The backend finished request `id` on I/O thread `worker`, which is idle again.
    Done {
        /// Request id.
        id: u64,
        /// The I/O thread that ran it.
        worker: usize,
        /// Read data (empty for a write) or an NBD error value.
        result: Result<Vec<u8>, u32>,
    },
    /// Stop: dispatch nothing more, wait for the outstanding I/Os, return.
    Stop,
    /// A deadline given to the [`Waker`] has come (nothing else to do).
    Wake,
    /// Report the loop's state now (for a metrics scrape).
    Probe(tokio::sync::oneshot::Sender<Probe>),
    /// Replace the policy by this one (built, so known to be valid): dispatch pauses
    /// until the backend is empty, then the requests the old policy held move to the
    /// new one with their arrival times, and `done` gets the new policy's name.
    Reconfigure {
        /// The new policy.
        sched: Box<AnyScheduler>,
        /// Told once it is in place.
        done: tokio::sync::oneshot::Sender<String>,
    },
}

/// The scheduler loop's state at one instant.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    /// Requests held by the policy (not yet on the backend).
    pub queued: usize,
    /// Requests on the backend (or waiting for their emulated finish).
    pub on_backend: usize,
    /// Requests in the gateway per tenant: `(tenant, queued + on the backend)`.
    pub inflight: Vec<(u32, usize)>,
    /// The policy's gauges (`Scheduler::gauges`: credits, thresholds, tags…).
    pub gauges: Vec<(String, f64)>,
}

struct InFlight {
    req: Request,
    dispatch: Nanos,
    emulated_finish: Nanos,
    cookie: u64,
    reply: UnboundedSender<Reply>,
    permit: Inflight,
    result: Option<Result<Vec<u8>, u32>>,
    form: Form,
    /// A tiered export's route, given back to its map when the I/O is done.
    plan: Option<(Arc<Export>, Arc<Plan>)>,
}

/// The ring's eventfd registered with the runtime ([`watch_ring`]).
#[cfg(target_os = "linux")]
type RingReady = Option<tokio::io::unix::AsyncFd<std::os::fd::RawFd>>;
#[cfg(not(target_os = "linux"))]
type RingReady = Option<()>;

/// The ring's eventfd registered with the current runtime's reactor, for
/// [`ring_completed`].
#[cfg(target_os = "linux")]
fn watch_ring(ring: &crate::uring::Ring) -> std::io::Result<tokio::io::unix::AsyncFd<std::os::fd::RawFd>> {
    use tokio::io::{unix::AsyncFd, Interest};
    // SAFETY: the eventfd is the ring's, open until the ring is dropped, and the
    // `AsyncFd` is dropped first: a field of the loop declared before the ring, or a
    // local of `SchedLoop::run`, which owns the ring.
    unsafe { AsyncFd::register_with_interest(ring.event_fd(), Interest::READABLE) }.map_err(|e| e.into_parts().1)
}

/// Resolves when the ring has completions to reap (its readiness cleared); never
/// without a ring.
async fn ring_completed(ready: &RingReady) {
    #[cfg(target_os = "linux")]
    if let Some(fd) = ready {
        if let Ok(mut guard) = fd.readable().await {
            guard.clear_ready();
            return;
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = ready;
    std::future::pending::<()>().await
}

/// The loop's state; [`SchedLoop::run`] consumes it.
pub struct SchedLoop {
    sched: AnyScheduler,
    clock: Clock,
    depth: usize,
    /// The emulated device (`iops`) of plain exports.
    emulated: Option<Emulated>,
    /// The emulated devices of the tiers (indexed by `Request::target`: fast, slow).
    tier_devices: [Option<Emulated>; 2],
    /// Requests completed by each tier (fast, slow), for the gauges.
    tier_ops: [u64; 2],
    next_id: u64,
    /// Requests the policy holds, with the request it was given.
    queued: HashMap<u64, (Request, Job)>,
    /// A policy waiting for the backend to empty before it takes over.
    pending: Option<(AnyScheduler, tokio::sync::oneshot::Sender<String>)>,
    inflight: HashMap<u64, InFlight>,
    /// I/Os done on the backend, waiting for their emulated finish: (time, id).
    waiting: BinaryHeap<Reverse<(Nanos, u64)>>,
    stats: Arc<Mutex<Recorder>>,
    /// The recorder keeps a per-window series (checked once: no lock per request without).
    windows: bool,
    pool: Pool,
    /// Indices of the idle I/O threads.
    idle: Vec<usize>,
    /// The ring's eventfd in the runtime's reactor, until [`SchedLoop::run`] takes it
    /// (declared before `ring`: dropped before the ring closes the eventfd).
    ring_ready: RingReady,
    /// Reads of direct exports, submitted from this loop ([`crate::uring`]) when
    /// [`Backend::ring_reads`] asks for it and the kernel allows; `None`: the I/O
    /// threads do them.
    #[cfg(target_os = "linux")]
    ring: Option<crate::uring::Ring>,
    /// Why there is no ring though [`Backend::ring_reads`] asked for one.
    ring_refused: Option<String>,
    /// The backend's cost model (`None` with an emulated capacity: its slots decide).
    cost: Option<CostModel>,
    /// Cost (ns of backend time) of the I/Os in flight.
    inflight_cost: Nanos,
    /// Wakes the loop at deadlines finer than tokio's millisecond timer.
    waker: Waker,
    /// Requests the policy chose that wait for the cost budget (oldest first).
    held: std::collections::VecDeque<Request>,
}

/// Most requests held for the cost budget at once; past it the policy is not asked for
/// more until one starts. Far above what tenants blocked on the budget have outstanding
/// (each holds its client's queue depth at most), it bounds the scan of the held list.
pub const HELD_MAX: usize = 1024;

/// What an I/O costs the backend, as blk-iocost models a device: a fixed time per
/// operation (a seek, the request overheads) plus its bytes over the bandwidth. The
/// gateway keeps the cost of what is in flight under a budget of `depth` I/Os of
/// [`CostModel::SMALL_BYTES`]: small requests are limited by the slots only, a large
/// one that does not fit waits (held, with its tenant's later requests, in the order
/// the policy chose) while other tenants' requests that fit go on, as blk-iocost
/// throttles a cgroup over its budget. A tenant of large requests then cannot fill
/// every slot: the others wait in the policy's queue, not behind its I/O.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostModel {
    /// Time per operation (ns).
    pub op_ns: f64,
    /// Bandwidth (bytes per second).
    pub bytes_per_s: f64,
}

impl CostModel {
    /// A request of at most this size costs no more than the budget allows for each
    /// slot: limited by the slots alone.
    pub const SMALL_BYTES: u32 = 64 << 10;

    /// The default: 100 µs per operation, 1 GiB/s.
    pub const DEFAULT: CostModel = CostModel { op_ns: 100_000.0, bytes_per_s: (1u64 << 30) as f64 };

    /// The cost of an I/O of `bytes` (ns).
    pub fn of(&self, bytes: u32) -> Nanos {
        (self.op_ns + f64::from(bytes) / self.bytes_per_s * 1e9) as Nanos
    }
}

/// What the scheduler loop drives: the backend's slots and how it is emulated or
/// modelled.
#[derive(Clone, Debug, Default)]
pub struct Backend {
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

impl SchedLoop {
    /// A loop over `sched` in front of `backend` (its slots, emulated capacities and
    /// cost model). Starts the `depth` I/O threads ([`crate::pool`]), which report on
    /// `done_tx`; it must send to the receiver later passed to [`SchedLoop::run`]. Called
    /// inside the runtime that runs the loop (its reactor watches the ring's eventfd).
    pub fn new(
        sched: AnyScheduler,
        clock: Clock,
        backend: &Backend,
        stats: Arc<Mutex<Recorder>>,
        done_tx: UnboundedSender<Msg>,
    ) -> std::io::Result<Self> {
        let Backend { depth, iops, cost, tiers, ring_reads } = backend;
        let (depth, iops, cost, ring_reads) = (*depth, *iops, *cost, *ring_reads);
        let depth = depth.max(1);
        let waker = Waker::new(done_tx.clone(), || Msg::Wake)?;
        let pool = Pool::new(depth, done_tx)?;
        #[cfg(target_os = "linux")]
        let (ring, ring_ready, ring_refused) = match ring_reads.then(|| crate::uring::Ring::new(depth)) {
            None => (None, None, None),
            Some(Err(e)) => (None, None, Some(e.to_string())),
            Some(Ok(r)) => match watch_ring(&r) {
                Ok(ready) => (Some(r), Some(ready), None),
                Err(e) => (None, None, Some(format!("cannot watch its eventfd: {e}"))),
            },
        };
        #[cfg(not(target_os = "linux"))]
        let (ring_ready, ring_refused) = (None, ring_reads.then(|| "io_uring is Linux's".to_string()));
        Ok(SchedLoop {
            waker,
            sched,
            clock,
            depth,
            emulated: iops.map(|c| Emulated::new(c, 1)),
            tier_devices: [0u8, 1].map(|t| tiers.device(t).iops.map(|c| Emulated::new(c, tiers.device(t).depth))),
            tier_ops: [0, 0],
            next_id: 0,
            queued: HashMap::new(),
            pending: None,
            inflight: HashMap::new(),
            waiting: BinaryHeap::new(),
            windows: stats.lock().is_ok_and(|s| s.window_end().is_some()),
            stats,
            idle: (0..pool.len()).rev().collect(),
            ring_ready,
            #[cfg(target_os = "linux")]
            ring,
            ring_refused,
            pool,
            cost: if iops.is_none() { cost } else { None },
            inflight_cost: 0,
            held: std::collections::VecDeque::new(),
        })
    }

    /// Why there is no io_uring instance though [`Backend::ring_reads`] asked for one
    /// (the kernel refused it; the I/O threads then read); `None` if it was not asked
    /// for or is there.
    pub fn ring_refused(&self) -> Option<&str> {
        self.ring_refused.as_deref()
    }

    /// Run until [`Msg::Stop`] (or every sender is gone) and the outstanding I/Os have
    /// completed on the backend (an emulated device's remaining delay is not waited
    /// for). Requests still queued in the policy are answered `ESHUTDOWN`.
    pub async fn run(mut self, mut rx: UnboundedReceiver<Msg>) {
        let mut stopping = false;
        let ring_ready = self.ring_ready.take();
        loop {
            let mut now = self.clock.now();
            self.roll_windows(now);
            if let Some(t) = self.sched.next_timer() {
                if t <= now {
                    self.sched.on_timer(now);
                }
            }
            while let Some(&Reverse((t, id))) = self.waiting.peek() {
                // Stopping, an I/O the backend has done is answered now: an emulated
                // finish of a slow device (one request per 100 s at 0.01 IOPS) held the
                // gateway's stop until it came.
                if t > now && !stopping {
                    break;
                }
                self.waiting.pop();
                self.finish(id, now);
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
                break;
            }
            // Sleep until the next message, policy timer, emulated completion or the end
            // of the statistics window.
            now = self.clock.now();
            let timer = self.sched.next_timer().map(|t| if t <= now { now + 1_000_000 } else { t });
            let emu = self.waiting.peek().map(|r| r.0 .0);
            let window = if self.windows { self.stats.lock().ok().and_then(|s| s.window_end()) } else { None };
            let wake = [timer, emu, window].into_iter().flatten().min();
            if let Some(w) = wake.filter(|&w| w.saturating_sub(now) < PRECISE_WAKE_NS) {
                self.waker.wake_at(self.clock.std_instant(w));
            }
            let sleep = tokio::time::sleep_until(self.clock.instant(wake.unwrap_or(now)));
            tokio::select! {
                msg = rx.recv() => {
                    let Some(msg) = msg else { stopping = true; continue };
                    stopping |= self.handle(msg, stopping);
                    for _ in 0..BATCH {
                        match rx.try_recv() {
                            Ok(m) => stopping |= self.handle(m, stopping),
                            Err(_) => break,
                        }
                    }
                }
                _ = sleep, if wake.is_some() => {}
                _ = ring_completed(&ring_ready), if ring_ready.is_some() => self.reap_ring(),
            }
            if stopping {
                // Nothing more will be dispatched: answer what the policy still holds.
                self.held.clear();
                for (_, (_, job)) in self.queued.drain() {
                    job.refuse(ESHUTDOWN);
                }
            }
        }
    }

    /// Handle one message; true if it asks to stop.
    fn handle(&mut self, msg: Msg, stopping: bool) -> bool {
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
                if !self.sched.admit(&req, now) {
                    // Rejected at the tenant's limit (mClock `at_limit = "reject"`): NBD has
                    // no EAGAIN; ENOMEM is its "out of resources for now", to retry.
                    if let Ok(mut s) = self.stats.lock() {
                        s.rejected(req.tenant);
                    }
                    job.refuse(ENOMEM);
                    return false;
                }
                self.queued.insert(id, (req, job));
                self.sched.enqueue(req, now);
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
        }
    }

    /// Finish the ring's reads that completed.
    fn reap_ring(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(ring) = self.ring.as_mut() {
            let done = ring.reap();
            let now = self.clock.now();
            for (id, worker, result) in done {
                self.slot_done(id, worker, result, now);
            }
        }
    }

    /// Request `id` ended on backend slot `worker` (an I/O thread's, or a ring read's),
    /// which is free again.
    fn slot_done(&mut self, id: u64, worker: usize, result: Result<Vec<u8>, u32>, now: Nanos) {
        if worker < self.pool.len() {
            self.idle.push(worker);
        }
        self.backend_done(id, result, now);
    }

    /// Request `id`'s backend I/O ended: finish it now or at its emulated finish.
    fn backend_done(&mut self, id: u64, result: Result<Vec<u8>, u32>, now: Nanos) {
        if let Some(f) = self.inflight.get_mut(&id) {
            if let Some((export, plan)) = f.plan.take() {
                if let Some(t) = &export.tier {
                    t.release(&plan);
                }
            }
            f.result = Some(result);
            if f.emulated_finish > now {
                self.waiting.push(Reverse((f.emulated_finish, id)));
            } else {
                self.finish(id, now);
            }
        }
    }

    /// Start what the slots and the cost budget allow: held requests first (in the
    /// policy's order), then the policy's next picks; a pick too costly for the budget
    /// now is held, and the policy is asked again, so that a tenant blocked on the
    /// budget never keeps the others' requests in the policy's queue while slots are
    /// free (up to [`HELD_MAX`] held).
    fn dispatch_ready(&mut self, now: Nanos) {
        while self.inflight.len() < self.depth && !self.idle.is_empty() {
            if let Some(i) = self.first_held_that_fits() {
                if let Some(req) = self.held.remove(i) {
                    self.start_io(req, now);
                }
                continue;
            }
            if self.held.len() >= HELD_MAX {
                break;
            }
            let state = DeviceState { outstanding: self.inflight.len(), free_slots: self.depth - self.inflight.len() };
            match self.sched.dispatch(now, &state) {
                // A tenant's requests keep the policy's order among themselves; another
                // tenant's that fit go on while one waits for the budget.
                Some(req) if self.fits(&req) && !self.held.iter().any(|h| h.tenant == req.tenant) => {
                    self.start_io(req, now)
                }
                Some(req) => self.held.push_back(req),
                None => break,
            }
        }
    }

    /// The first held request that fits now and is its tenant's first held one.
    fn first_held_that_fits(&self) -> Option<usize> {
        if self.held.is_empty() {
            return None;
        }
        let mut seen = std::collections::HashSet::new();
        self.held.iter().position(|r| seen.insert(r.tenant) && self.fits(r))
    }

    /// Whether `req` may start now under the cost budget (always without a cost model,
    /// when nothing is in flight, or when it is small).
    fn fits(&self, req: &Request) -> bool {
        let Some(c) = self.cost else { return true };
        req.bytes <= CostModel::SMALL_BYTES
            || self.inflight.is_empty()
            || self.inflight_cost + c.of(req.bytes) <= self.depth as Nanos * c.of(CostModel::SMALL_BYTES)
    }

    fn start_io(&mut self, mut req: Request, now: Nanos) {
        let Some((_, job)) = self.queued.remove(&req.id) else {
            // Not a request of ours (cannot happen): keep the policy consistent.
            self.sched.complete(&Completion { req, dispatch: now, finish: now }, now);
            return;
        };
        let Job { export, offset, io, cookie, reply, permit, form, .. } = job;
        // A tiered export: the block map routes it, and its tier's device serves it.
        let plan = export.tier.as_ref().map(|t| {
            let len = match &io {
                Io::Read(n) | Io::Trim { len: n, .. } | Io::Zeroes { len: n, .. } => *n,
                Io::Write { data, .. } => data.len() as u32,
            };
            Arc::new(t.route(!matches!(io, Io::Read(_)), offset, len))
        });
        let device = match &plan {
            Some(p) => {
                req.target = p.target;
                self.tier_devices[usize::from(p.target != FAST)].as_mut()
            }
            None => self.emulated.as_mut(),
        };
        let emulated_finish = device.map_or(0, |d| d.start(now, req.arrival));
        if let Some(c) = self.cost {
            self.inflight_cost += c.of(req.bytes);
        }
        let id = req.id;
        let tiered = plan.as_ref().map(|p| (export.clone(), p.clone()));
        let f =
            InFlight { req, dispatch: now, emulated_finish, cookie, reply, permit, result: None, form, plan: tiered };
        self.inflight.insert(id, f);
        // A small read the page cache holds completes right here: no thread hand-off.
        // (A tiered export's too: a hit from the fast file, a miss that copies nothing in.)
        if let Io::Read(n) = io {
            if n <= INLINE_READ_MAX {
                let data = match (&plan, &export.tier) {
                    (Some(p), Some(t)) => t.read_nowait(p, offset, n, &|o, k| export.read_nowait(o, k)),
                    _ => export.read_nowait(offset, n),
                };
                if let Some(data) = data {
                    self.backend_done(id, Ok(data), now);
                    return;
                }
            }
        }
        // `dispatch` runs only while a thread is idle.
        let worker = self.idle.pop().unwrap_or(0);
        // A read of a direct export (the ring refuses others): submitted from here, its
        // slot's thread left idle.
        #[cfg(target_os = "linux")]
        if let (Io::Read(n), None, Some(ring)) = (&io, &plan, self.ring.as_mut()) {
            if ring.read(id, worker, &export, offset, *n).is_ok() {
                return;
            }
        }
        if self.pool.submit(worker, Task { id, export, offset, io, plan }).is_err() {
            // The thread is gone (cannot happen: I/O does not panic): fail the request.
            self.backend_done(id, Err(EIO), now);
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
    fn probe(&self) -> Probe {
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
        (self.tier_devices.iter().any(Option::is_some) || self.tier_ops != [0, 0]).then_some(self.tier_ops)
    }

    fn finish(&mut self, id: u64, now: Nanos) {
        let Some(f) = self.inflight.remove(&id) else { return };
        if let Some(c) = self.cost {
            self.inflight_cost = self.inflight_cost.saturating_sub(c.of(f.req.bytes));
        }
        let result = f.result.unwrap_or(Err(EIO));
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
            Ok(data) => Reply { cookie: f.cookie, error: 0, data, permit: f.permit, done: Some(done), form: f.form },
            Err(e) => Reply::bare(f.cookie, e, f.permit, f.form),
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
