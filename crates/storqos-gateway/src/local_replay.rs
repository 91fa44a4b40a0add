//! Replay of a trace against a local file or block device (`storqos replay TRACE
//! /dev/loop0`): each tenant's requests issued by a thread of its own, from inside the
//! tenant's cgroup when asked. This is what checks the models of Linux's blk-cgroup
//! controllers (blk-throttle, BFQ), which charge a bio to the cgroup of the task that
//! submits it; the NBD replay (`python/storqos/live/replay.py`) cannot, as every bio there
//! comes from the gateway's threads.
//!
//! **Timing.** Open loop: request `i` is due `at_ns[i]` after a start instant all tenants
//! share. Every tenant thread first sets itself up (cgroup, file, ring or worker threads)
//! and says so; once the last has, the replay starts [`START_MARGIN`] later. A thread waits
//! until [`SPIN_NS`] before its next request's time in the kernel — in `io_uring_enter`
//! with a timeout, or for its workers' answers — so that completions are reaped (and timed)
//! as they come, with its timer slack at 1 ns; then it spins, yielding its CPU at each
//! turn, and submits the request at its time whatever is in flight, up to `depth` requests
//! per tenant. A request due while `depth` are in flight waits for one to complete; one
//! submitted more than [`LATE_NS`] after its time counts in [`LocalLog::late`]. A tenant's
//! requests are issued in trace order (one due before the previous goes right after it).
//!
//! **Cgroups.** A tenant given a cgroup v1 directory (`/sys/fs/cgroup/blkio/a`): its thread
//! writes its thread id to `<dir>/tasks` before anything else — before it opens the file
//! and builds its ring — so that the bios it submits, and those of the io_uring workers it
//! creates (which inherit its cgroup), are charged to that cgroup; each worker thread of the
//! fallback joins it too. A tenant without one stays in the caller's cgroup. Buffered
//! writes (`direct: false`) reach the disk from the kernel's flusher threads, which cgroup
//! v1 charges to the root cgroup: write models need direct I/O.
//!
//! **O_DIRECT** (`direct`, the default) wants offsets and lengths on the device's blocks:
//! each request's offset is rounded down, and its size up, to [`ALIGN`] (4 KiB) — a
//! 512-byte read at byte 6144 reads bytes 4096..8192, and its result counts 4096 bytes. A
//! file system that refuses `O_DIRECT` is an error asking for `direct: false`.
//!
//! **Offsets** wrap into the file or device, whose size is `lseek(SEEK_END)`'s (a block
//! device answers with its own; with `O_DIRECT`, rounded down to [`ALIGN`]): a request that
//! would end past it moves to its offset modulo the size, and back so that it ends inside
//! ([`LocalLog::wrapped`] counts them). Writes write the byte `0xA5` and are refused unless
//! [`LocalOptions::writes`], so that a trace does not overwrite a device by accident.
//!
//! **Engines.** `io_uring` (Linux 5.11 or later, for the waits with a timeout): a ring per
//! tenant. Where the kernel refuses io_uring (before 5.11, `kernel.io_uring_disabled`, a
//! seccomp filter), each tenant gets a pool of `min(depth, its requests)` threads doing
//! blocking `pread`/`pwrite` instead; [`LocalLog::engine`] says which ran (and
//! `io_uring+threads` if some tenants could not build a ring where others could).
//!
//! ```no_run
//! use storqos_gateway::local_replay::{replay_local, LocalOptions, LocalRequests};
//! let reqs = LocalRequests {
//!     at_ns: vec![0, 1_000_000],
//!     tenant: vec![0, 1],
//!     offset: vec![0, 1 << 20],
//!     size: vec![4096, 4096],
//!     is_read: vec![true, true],
//! };
//! let cgroups = vec![Some("/sys/fs/cgroup/blkio/a".into()), None];
//! let log = replay_local("/dev/loop0".as_ref(), &reqs, &LocalOptions { cgroups, ..Default::default() })?;
//! println!("{} ran; request 1 took {} ns", log.engine, log.finish_ns[1] - log.issue_ns[1]);
//! # Ok::<(), storqos_gateway::local_replay::LocalError>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
#[cfg(target_os = "linux")]
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[cfg(target_os = "linux")]
use io_uring::{opcode, types, IoUring};

use crate::direct::ALIGN;

/// A thread spins (instead of waiting in the kernel) this long before an issue time (ns).
pub const SPIN_NS: u64 = 50_000;
/// A request submitted later than this after its time counts as late (ns).
pub const LATE_NS: u64 = 1_000_000;
/// The replay starts this long after the last tenant thread is ready.
pub const START_MARGIN: Duration = Duration::from_millis(5);
/// Most tenants (threads) in one replay.
pub const MAX_TENANTS: usize = 1024;
/// Most requests in flight per tenant (`depth`).
pub const MAX_DEPTH: usize = 4096;
/// Largest request (bytes); a larger one must be split first.
pub const MAX_REQUEST: u32 = 64 << 20;
/// Longest wait in the kernel before a tenant's thread looks at the others again.
const MAX_WAIT: Duration = Duration::from_millis(100);
/// Latest issue time (ns from the start; about 36 years).
const MAX_AT_NS: u64 = 1 << 60;
/// The byte writes write.
const PATTERN: u8 = 0xA5;

/// The requests to replay: parallel columns in trace order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalRequests {
    /// When to issue it (ns after the start).
    pub at_ns: Vec<u64>,
    /// Its tenant (any `u32`; each tenant that has requests gets a thread).
    pub tenant: Vec<u32>,
    /// Its byte offset (wrapped into the file; rounded down to [`ALIGN`] with `O_DIRECT`).
    pub offset: Vec<u64>,
    /// Its length in bytes (1 ..= [`MAX_REQUEST`]; rounded up to [`ALIGN`] with `O_DIRECT`).
    pub size: Vec<u32>,
    /// A read (`true`) or a write.
    pub is_read: Vec<bool>,
}

impl LocalRequests {
    /// The number of requests (of the `at_ns` column).
    pub fn len(&self) -> usize {
        self.at_ns.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.at_ns.is_empty()
    }
}

/// How to replay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalOptions {
    /// Open with `O_DIRECT` (default `true`), past the page cache; offsets and sizes are
    /// then rounded to [`ALIGN`].
    pub direct: bool,
    /// Per tenant (indexed by tenant id): a cgroup v1 directory whose `tasks` file the
    /// tenant's thread writes its thread id into before it opens the file (and each of its
    /// worker threads, with the fallback engine, before its first request); `None`, or no
    /// entry: the tenant stays in the caller's cgroup.
    pub cgroups: Vec<Option<PathBuf>>,
    /// Most requests in flight per tenant (1 ..= [`MAX_DEPTH`], default 256).
    pub depth: usize,
    /// With requests in flight and none completing for this long (ns, default 10 s), the
    /// replay fails.
    pub stall_ns: u64,
    /// Replay the trace's writes (default `false`: a trace with writes is refused).
    pub writes: bool,
    /// Use the worker threads even where io_uring works (default `false`): to compare the
    /// engines or test the fallback.
    pub force_threads: bool,
}

impl Default for LocalOptions {
    fn default() -> Self {
        LocalOptions {
            direct: true,
            cgroups: Vec::new(),
            depth: 256,
            stall_ns: 10_000_000_000,
            writes: false,
            force_threads: false,
        }
    }
}

/// What the replay did: per request, in trace order, when it was submitted and completed
/// (ns after the start) and its result; then the run's figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocalLog {
    /// When the request was submitted (to io_uring, or by a worker thread's `pread` or
    /// `pwrite`), ns after the start.
    pub issue_ns: Vec<u64>,
    /// When its completion was seen, ns after the start.
    pub finish_ns: Vec<u64>,
    /// Bytes transferred (of the rounded request with `O_DIRECT`), or a negative errno.
    pub result: Vec<i64>,
    /// The engine that ran: `io_uring`, `threads`, or `io_uring+threads`.
    pub engine: &'static str,
    /// Requests submitted more than [`LATE_NS`] after their time.
    pub late: u64,
    /// Requests whose offset was moved to end inside the file.
    pub wrapped: u64,
}

/// Why a replay could not run or did not finish. Displayed on one line that begins with
/// the replayed file's path.
#[derive(Debug)]
pub enum LocalError {
    /// The requests or options cannot be replayed (the message says which and why).
    Invalid {
        /// The file or device.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The file or device could not be opened (or its size read).
    Open {
        /// The file or device.
        path: PathBuf,
        /// The system's error.
        error: io::Error,
    },
    /// `O_DIRECT` was refused (`EINVAL` opening or reading): the file system does not
    /// take it.
    DirectRefused {
        /// The file or device.
        path: PathBuf,
    },
    /// A tenant's thread could not join its cgroup (write its `tasks` file).
    Cgroup {
        /// The file or device.
        path: PathBuf,
        /// The tenant.
        tenant: u32,
        /// Its cgroup directory.
        cgroup: PathBuf,
        /// The system's error.
        error: io::Error,
    },
    /// A tenant had requests in flight and none completed for `stall_ns`.
    Stall {
        /// The file or device.
        path: PathBuf,
        /// The tenant.
        tenant: u32,
        /// Its requests in flight.
        in_flight: usize,
        /// How long it waited (ns).
        stall_ns: u64,
    },
    /// Anything else the system refused (a thread, a ring, a submission).
    Io {
        /// The file or device.
        path: PathBuf,
        /// What failed.
        what: String,
        /// The system's error.
        error: io::Error,
    },
}

impl fmt::Display for LocalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LocalError::Invalid { path, message } => write!(f, "{}: {message}", path.display()),
            LocalError::Open { path, error } => write!(f, "{}: cannot open: {error}", path.display()),
            LocalError::DirectRefused { path } => {
                write!(f, "{}: the file system does not take O_DIRECT; give direct=false", path.display())
            }
            LocalError::Cgroup { path, tenant, cgroup, error } => write!(
                f,
                "{}: tenant {tenant} cannot join cgroup {}: cannot write {}: {error}",
                path.display(),
                cgroup.display(),
                cgroup.join("tasks").display()
            ),
            LocalError::Stall { path, tenant, in_flight, stall_ns } => write!(
                f,
                "{}: tenant {tenant}: no completion for {:.1} s with {in_flight} requests in flight",
                path.display(),
                *stall_ns as f64 / 1e9
            ),
            LocalError::Io { path, what, error } => write!(f, "{}: {what}: {error}", path.display()),
        }
    }
}

impl std::error::Error for LocalError {}

/// Replay `requests` against the file or block device at `path` (see the module's doc):
/// one thread per tenant, open loop, every request at its time after a common start.
/// Returns the log of every request, or the first error (of the lowest tenant when several
/// fail setting up).
pub fn replay_local(path: &Path, requests: &LocalRequests, options: &LocalOptions) -> Result<LocalLog, LocalError> {
    let invalid = |message: String| LocalError::Invalid { path: path.to_path_buf(), message };
    check(requests, options).map_err(invalid)?;
    let writes = requests.is_read.iter().any(|r| !r);
    let span = {
        let mut file = open(path, options.direct, writes).map_err(|e| open_error(path, options.direct, e))?;
        let size = file.seek(SeekFrom::End(0)).map_err(|error| LocalError::Open { path: path.to_path_buf(), error })?;
        if options.direct {
            size / ALIGN as u64 * ALIGN as u64
        } else {
            size
        }
    };
    let (tenants, wrapped) = plan(requests, options.direct, span).map_err(invalid)?;
    let ctx = Arc::new(Ctx {
        path: path.to_path_buf(),
        direct: options.direct,
        writes,
        depth: options.depth,
        stall: Duration::from_nanos(options.stall_ns),
        uring: !options.force_threads && uring_usable(),
        abort: AtomicBool::new(false),
    });
    let (engine, outcomes) = run_tenants(&ctx, &tenants, &options.cgroups)?;
    let n = requests.len();
    let mut log =
        LocalLog { issue_ns: vec![0; n], finish_ns: vec![0; n], result: vec![0; n], engine, late: 0, wrapped };
    for (jobs, outs) in tenants.values().zip(&outcomes) {
        for (job, o) in jobs.iter().zip(outs) {
            log.issue_ns[job.pos] = o.issue_ns;
            log.finish_ns[job.pos] = o.finish_ns;
            log.result[job.pos] = o.result;
            if o.issue_ns > job.at.saturating_add(LATE_NS) {
                log.late += 1;
            }
        }
    }
    Ok(log)
}

/// The columns' lengths and values, and the options: a message if they cannot be replayed.
fn check(r: &LocalRequests, o: &LocalOptions) -> Result<(), String> {
    let n = r.at_ns.len();
    let lens = [r.tenant.len(), r.offset.len(), r.size.len(), r.is_read.len()];
    if lens.iter().any(|&l| l != n) {
        return Err(format!(
            "the trace's columns differ in length (at_ns {n}, tenant {}, offset {}, size {}, is_read {})",
            lens[0], lens[1], lens[2], lens[3]
        ));
    }
    if !(1..=MAX_DEPTH).contains(&o.depth) {
        return Err(format!("depth {} is not between 1 and {MAX_DEPTH}", o.depth));
    }
    if o.stall_ns == 0 {
        return Err("the stall timeout must be above 0".into());
    }
    if let Some(i) = r.size.iter().position(|&s| s == 0 || s > MAX_REQUEST) {
        return Err(format!(
            "request {i} has size {} bytes; sizes must be between 1 and {MAX_REQUEST} (split larger ones)",
            r.size[i]
        ));
    }
    if let Some(i) = r.at_ns.iter().position(|&t| t > MAX_AT_NS) {
        return Err(format!("request {i} is due {} ns after the start, too far", r.at_ns[i]));
    }
    if !o.writes {
        if let Some(i) = r.is_read.iter().position(|r| !r) {
            let count = r.is_read.iter().filter(|r| !**r).count();
            let writes = if count == 1 { "a write".to_string() } else { format!("{count} writes") };
            return Err(format!(
                "the trace has {writes} (the first is request {i}), which would overwrite it; \
                 give writes=true to replay them"
            ));
        }
    }
    Ok(())
}

/// One request as a tenant's thread issues it: placed, rounded.
#[derive(Clone, Copy, Debug)]
struct Job {
    /// Its position in the trace.
    pos: usize,
    /// When it is due (ns after the start).
    at: u64,
    offset: u64,
    len: u32,
    read: bool,
}

/// Each tenant's requests in trace order, placed inside `span` bytes (rounded to [`ALIGN`]
/// when `direct`), and how many were wrapped.
fn plan(r: &LocalRequests, direct: bool, span: u64) -> Result<(BTreeMap<u32, Vec<Job>>, u64), String> {
    let a = ALIGN as u64;
    let mut tenants: BTreeMap<u32, Vec<Job>> = BTreeMap::new();
    let mut wrapped = 0;
    for i in 0..r.at_ns.len() {
        let (mut offset, len) = if direct {
            (r.offset[i] / a * a, u64::from(r.size[i]).div_ceil(a) * a)
        } else {
            (r.offset[i], u64::from(r.size[i]))
        };
        if len > span {
            let what = if direct { " (rounded to 4 KiB blocks)" } else { "" };
            return Err(format!("request {i} of {len} bytes{what} is larger than the file ({span} bytes)"));
        }
        if offset.saturating_add(len) > span {
            wrapped += 1;
            offset %= span;
            if offset + len > span {
                let unit = if direct { a } else { 512 };
                offset = (span - len) / unit * unit;
            }
        }
        let job = Job { pos: i, at: r.at_ns[i], offset, len: len as u32, read: r.is_read[i] };
        tenants.entry(r.tenant[i]).or_default().push(job);
    }
    if tenants.len() > MAX_TENANTS {
        return Err(format!("the trace has {} tenants, more than the {MAX_TENANTS} a replay runs", tenants.len()));
    }
    Ok((tenants, wrapped))
}

/// What every tenant's thread shares.
struct Ctx {
    path: PathBuf,
    direct: bool,
    /// Open for writing (the trace has writes).
    writes: bool,
    depth: usize,
    stall: Duration,
    /// Whether to try io_uring.
    uring: bool,
    /// Set by a tenant that failed: the others stop.
    abort: AtomicBool,
}

impl Ctx {
    /// Something that went wrong without an error of the system's.
    fn failed(&self, what: &str) -> LocalError {
        LocalError::Io { path: self.path.clone(), what: what.into(), error: io::Error::other("internal error") }
    }

    fn io(&self, tenant: u32, what: &str, error: io::Error) -> LocalError {
        LocalError::Io { path: self.path.clone(), what: format!("tenant {tenant}: {what}"), error }
    }
}

/// What a request's thread reports: its times (ns after the start) and result.
#[derive(Clone, Copy, Debug, Default)]
struct Outcome {
    issue_ns: u64,
    finish_ns: u64,
    result: i64,
}

/// A value every thread waits for, set once.
struct Gate<T> {
    value: Mutex<Option<T>>,
    set: Condvar,
}

impl<T: Clone> Gate<T> {
    fn new() -> Self {
        Gate { value: Mutex::new(None), set: Condvar::new() }
    }

    fn open(&self, v: T) {
        *self.value.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
        self.set.notify_all();
    }

    fn wait(&self) -> T {
        let mut g = self.value.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(v) = g.as_ref() {
                return v.clone();
            }
            g = self.set.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A tenant thread's word once set up: its engine's name, or why it cannot run.
type Ready = (u32, Result<&'static str, LocalError>);
/// A tenant thread's last word (with its index in the tenants' order): its requests'
/// outcomes, or why it stopped (an empty list if it stopped for another's failure).
type Finished = (usize, Result<Vec<Outcome>, LocalError>);

/// Run every tenant's thread: set up, start together, replay. The engine's name and each
/// tenant's outcomes (in the order of `tenants`).
///
/// The threads send their outcomes before they end, and are joined only if all went
/// well: a thread with requests still in the kernel's hands (a stall) waits for them as
/// it exits (Linux cancels or waits for a task's io_uring requests then), which a hung
/// device makes forever; the replay reports the stall all the same.
fn run_tenants(
    ctx: &Arc<Ctx>,
    tenants: &BTreeMap<u32, Vec<Job>>,
    cgroups: &[Option<PathBuf>],
) -> Result<(&'static str, Vec<Vec<Outcome>>), LocalError> {
    let go: Arc<Gate<Option<Instant>>> = Arc::new(Gate::new());
    let (ready_tx, ready_rx) = mpsc::channel::<Ready>();
    let (done_tx, done_rx) = mpsc::channel::<Finished>();
    let mut handles = Vec::with_capacity(tenants.len());
    let mut failed: Option<(u32, LocalError)> = None;
    for (k, (&tenant, jobs)) in tenants.iter().enumerate() {
        let cgroup = cgroups.get(tenant as usize).cloned().flatten();
        let (shared, go, ready, done, jobs) =
            (ctx.clone(), go.clone(), ready_tx.clone(), done_tx.clone(), jobs.clone());
        let spawned = std::thread::Builder::new().name(format!("storqos-replay-{tenant}")).spawn(move || {
            let r = tenant_main(&shared, tenant, cgroup.as_deref(), &jobs, ready, &go);
            if r.is_err() {
                shared.abort.store(true, Ordering::Relaxed);
            }
            let _ = done.send((k, r));
        });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                failed = Some((tenant, ctx.io(tenant, "cannot start its thread", e)));
                break;
            }
        }
    }
    drop((ready_tx, done_tx));
    // Every thread says once (or ends without saying, if it panicked).
    let mut engines = Vec::with_capacity(handles.len());
    for (tenant, said) in ready_rx.iter() {
        match said {
            Ok(engine) => engines.push(engine),
            Err(e) => {
                if failed.as_ref().is_none_or(|(t, _)| tenant < *t) {
                    failed = Some((tenant, e));
                }
            }
        }
    }
    let all_ready = failed.is_none() && engines.len() == handles.len();
    go.open(all_ready.then(|| Instant::now() + START_MARGIN));
    let mut outcomes: Vec<Option<Vec<Outcome>>> = (0..handles.len()).map(|_| None).collect();
    let mut first_err: Option<(usize, LocalError)> = None;
    for (k, r) in done_rx.iter() {
        match r {
            Ok(o) => outcomes[k] = Some(o),
            Err(e) if first_err.as_ref().is_none_or(|(j, _)| k < *j) => first_err = Some((k, e)),
            Err(_) => {}
        }
    }
    if let Some((_, e)) = failed {
        return Err(e);
    }
    if let Some((_, e)) = first_err {
        return Err(e);
    }
    let Some(outcomes) = outcomes.into_iter().collect::<Option<Vec<_>>>() else {
        return Err(ctx.failed("a replay thread panicked"));
    };
    for h in handles {
        let _ = h.join();
    }
    let engine = if engines.iter().all(|&e| e == "io_uring") && ctx.uring {
        "io_uring"
    } else if engines.iter().all(|&e| e == "threads") {
        "threads"
    } else {
        "io_uring+threads"
    };
    Ok((engine, outcomes))
}

/// A tenant's thread: set up (cgroup, file, engine), say so, wait for the start, replay.
fn tenant_main(
    ctx: &Ctx,
    tenant: u32,
    cgroup: Option<&Path>,
    jobs: &[Job],
    ready: mpsc::Sender<Ready>,
    go: &Gate<Option<Instant>>,
) -> Result<Vec<Outcome>, LocalError> {
    let slots = ctx.depth.min(jobs.len()).max(1);
    let max_len = jobs.iter().map(|j| j.len as usize).max().unwrap_or(ALIGN);
    let mut engine = match setup(ctx, tenant, cgroup, slots, max_len) {
        Ok(e) => {
            let _ = ready.send((tenant, Ok(e.name())));
            drop(ready);
            e
        }
        Err(e) => {
            let _ = ready.send((tenant, Err(e)));
            drop(ready);
            go.wait();
            return Ok(Vec::new());
        }
    };
    let Some(start) = go.wait() else { return Ok(Vec::new()) };
    match &mut engine {
        #[cfg(target_os = "linux")]
        Engine::Ring(ring) => run(ring.as_mut(), ctx, tenant, jobs, start, slots),
        Engine::Pool(pool) => run(pool, ctx, tenant, jobs, start, slots),
    }
}

/// How a tenant's requests reach the file.
enum Engine {
    #[cfg(target_os = "linux")]
    Ring(Box<RingTenant>),
    Pool(Pool),
}

impl Engine {
    fn name(&self) -> &'static str {
        match self {
            #[cfg(target_os = "linux")]
            Engine::Ring(_) => "io_uring",
            Engine::Pool(_) => "threads",
        }
    }
}

/// Join the cgroup, open the file, build the ring (or the worker threads).
fn setup(ctx: &Ctx, tenant: u32, cgroup: Option<&Path>, slots: usize, max_len: usize) -> Result<Engine, LocalError> {
    precise_timers();
    if let Some(dir) = cgroup {
        join_cgroup(dir).map_err(|error| cgroup_error(ctx, tenant, dir, error))?;
    }
    let file = open(&ctx.path, ctx.direct, ctx.writes).map_err(|e| open_error(&ctx.path, ctx.direct, e))?;
    // Buffers made now, not at the first requests: large ones only when first needed.
    let buf_len = if max_len <= 1 << 20 { max_len } else { ALIGN };
    #[cfg(target_os = "linux")]
    if ctx.uring {
        if let Ok(ring) = uring_ring(slots.next_power_of_two() as u32) {
            let ring = RingTenant::new(ring, file, slots, buf_len);
            return ring
                .map(|r| Engine::Ring(Box::new(r)))
                .map_err(|e| ctx.io(tenant, "cannot allocate its buffers", e));
        }
    }
    Pool::new(ctx, tenant, file, cgroup, slots, buf_len).map(Engine::Pool)
}

fn cgroup_error(ctx: &Ctx, tenant: u32, dir: &Path, error: io::Error) -> LocalError {
    LocalError::Cgroup { path: ctx.path.clone(), tenant, cgroup: dir.to_path_buf(), error }
}

fn open_error(path: &Path, direct: bool, error: io::Error) -> LocalError {
    if direct && error.raw_os_error() == Some(EINVAL) {
        LocalError::DirectRefused { path: path.to_path_buf() }
    } else {
        LocalError::Open { path: path.to_path_buf(), error }
    }
}

#[cfg(target_os = "linux")]
const EINVAL: i32 = libc::EINVAL;
#[cfg(not(target_os = "linux"))]
const EINVAL: i32 = 22;

/// Open `path` for reading (and writing if `write`), with `O_DIRECT` if `direct`.
fn open(path: &Path, direct: bool, write: bool) -> io::Result<File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true).write(write);
    if direct {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.custom_flags(libc::O_DIRECT);
        }
        #[cfg(not(target_os = "linux"))]
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    o.open(path)
}

/// Move the calling thread into the cgroup v1 directory `dir`: its thread id into
/// `dir/tasks` (opened for writing only: never created where there is no cgroup).
fn join_cgroup(dir: &Path) -> io::Result<()> {
    let tid = gettid()?;
    let mut tasks = std::fs::OpenOptions::new().write(true).open(dir.join("tasks"))?;
    tasks.write_all(format!("{tid}\n").as_bytes())
}

#[cfg(target_os = "linux")]
fn gettid() -> io::Result<i64> {
    // SAFETY: gettid takes no arguments and cannot fail.
    Ok(unsafe { libc::syscall(libc::SYS_gettid) })
}

#[cfg(not(target_os = "linux"))]
fn gettid() -> io::Result<i64> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// Timer slack of 1 ns for the calling thread (Linux's default, 50 µs, would let each
/// timed wait end up to that much late).
fn precise_timers() {
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments, on the calling thread.
    unsafe {
        let one_ns: libc::c_ulong = 1;
        libc::prctl(libc::PR_SET_TIMERSLACK, one_ns);
    }
}

/// Whether this kernel lets the process use io_uring for this replay: a ring, the read
/// and write opcodes, waits with a timeout (`IORING_FEAT_EXT_ARG`, Linux 5.11).
fn uring_usable() -> bool {
    #[cfg(target_os = "linux")]
    {
        uring_ring(2).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// A finished request: its index among the tenant's, when it was submitted and seen
/// complete, its result.
struct Completion {
    job: usize,
    issue: Instant,
    finish: Instant,
    result: i64,
}

/// The engine under the timing loop ([`run`]).
trait Issuer {
    /// Queue job `k` (a free slot is there: the loop keeps at most the slots in flight).
    fn queue(&mut self, k: usize, job: &Job) -> io::Result<()>;
    /// Submit what was queued.
    fn flush(&mut self) -> io::Result<()>;
    /// The completions there are, without waiting.
    fn reap(&mut self, out: &mut Vec<Completion>);
    /// Wait up to `d` for a completion (one may come sooner, or none at all).
    fn wait(&mut self, d: Duration) -> io::Result<()>;
}

fn ns_since(start: Instant, t: Instant) -> u64 {
    t.saturating_duration_since(start).as_nanos() as u64
}

/// The open-loop timing of one tenant, whatever the engine: issue what is due (up to
/// `slots` in flight), reap, wait in the kernel until [`SPIN_NS`] before the next time,
/// spin the rest.
fn run<I: Issuer>(
    io: &mut I,
    ctx: &Ctx,
    tenant: u32,
    jobs: &[Job],
    start: Instant,
    slots: usize,
) -> Result<Vec<Outcome>, LocalError> {
    let spin = Duration::from_nanos(SPIN_NS);
    let due = |k: usize| start + Duration::from_nanos(jobs[k].at);
    let mut out = vec![Outcome::default(); jobs.len()];
    let mut done = Vec::with_capacity(slots);
    let (mut next, mut in_flight) = (0usize, 0usize);
    // The last completion, or the first issue after none was in flight.
    let mut progress = start;
    let mut refused = false;
    loop {
        if ctx.abort.load(Ordering::Relaxed) {
            return Ok(Vec::new());
        }
        let now = Instant::now();
        let before = in_flight;
        while next < jobs.len() && in_flight < slots && due(next) <= now {
            io.queue(next, &jobs[next]).map_err(|e| ctx.io(tenant, "cannot queue a request", e))?;
            next += 1;
            in_flight += 1;
        }
        if in_flight > before {
            if before == 0 {
                progress = now;
            }
            io.flush().map_err(|e| ctx.io(tenant, "cannot submit requests", e))?;
        }
        io.reap(&mut done);
        if !done.is_empty() {
            progress = Instant::now();
            for c in done.drain(..) {
                out[c.job] = Outcome {
                    issue_ns: ns_since(start, c.issue),
                    finish_ns: ns_since(start, c.finish),
                    result: c.result,
                };
                refused |= c.result == -i64::from(EINVAL);
                in_flight -= 1;
            }
        }
        let now = Instant::now();
        let stall_at = if in_flight > 0 { progress.checked_add(ctx.stall) } else { None };
        if stall_at.is_some_and(|s| now >= s) {
            let stall_ns = ctx.stall.as_nanos() as u64;
            return Err(LocalError::Stall { path: ctx.path.clone(), tenant, in_flight, stall_ns });
        }
        let wake = if next < jobs.len() && in_flight < slots {
            let d = due(next);
            if d <= now {
                continue;
            }
            if d - now <= spin {
                std::thread::yield_now();
                continue;
            }
            Some(d - spin)
        } else if in_flight > 0 {
            stall_at
        } else {
            break;
        };
        let until = match (wake, stall_at) {
            (Some(w), Some(s)) => Some(w.min(s)),
            (w, s) => w.or(s),
        };
        // At most [`MAX_WAIT`], to see another tenant's failure soon.
        let d = until.map_or(MAX_WAIT, |u| u.saturating_duration_since(now).min(MAX_WAIT));
        io.wait(d).map_err(|e| ctx.io(tenant, "cannot wait for completions", e))?;
    }
    if refused && ctx.direct {
        return Err(LocalError::DirectRefused { path: ctx.path.clone() });
    }
    Ok(out)
}

/// A zeroed heap buffer aligned to [`ALIGN`] (as `crate::direct`'s, which is private to
/// it), freed on drop.
struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn new(len: usize) -> io::Result<AlignedBuf> {
        let layout = std::alloc::Layout::from_size_align(len.max(ALIGN), ALIGN)
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the layout's size is at least ALIGN, never zero.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(ptr).ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        Ok(AlignedBuf { ptr, layout })
    }

    fn len(&self) -> usize {
        self.layout.size()
    }

    fn as_mut(&mut self) -> &mut [u8] {
        // SAFETY: `layout.size()` bytes allocated (and zeroed) by `new`, owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }

    /// At least `len` bytes: this buffer, or a larger one in its place.
    fn ensure(&mut self, len: usize) -> io::Result<()> {
        if self.len() < len {
            *self = AlignedBuf::new(len)?;
        }
        Ok(())
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

// SAFETY: the buffer is plain memory owned by one value.
unsafe impl Send for AlignedBuf {}

/// A request handed to a worker thread.
struct Work {
    job: usize,
    offset: u64,
    len: u32,
    read: bool,
}

/// The fallback engine: worker threads doing blocking `pread` / `pwrite`, as many as the
/// tenant may have in flight.
struct Pool {
    work: Option<mpsc::Sender<Work>>,
    done: mpsc::Receiver<Completion>,
    /// Completions [`Pool::wait`] received.
    held: Vec<Completion>,
    workers: Vec<std::thread::JoinHandle<()>>,
    /// Sent and not answered.
    in_flight: usize,
}

impl Pool {
    /// `n` workers over `file`, each in `cgroup` (if any) before it takes work, each with
    /// a buffer of `buf_len` bytes to start with.
    fn new(
        ctx: &Ctx,
        tenant: u32,
        file: File,
        cgroup: Option<&Path>,
        n: usize,
        buf_len: usize,
    ) -> Result<Pool, LocalError> {
        let file = Arc::new(file);
        let (work_tx, work_rx) = mpsc::channel::<Work>();
        let work_rx = Arc::new(Mutex::new(work_rx));
        let (done_tx, done) = mpsc::channel::<Completion>();
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let mut pool =
            Pool { work: Some(work_tx), done, held: Vec::new(), workers: Vec::with_capacity(n), in_flight: 0 };
        for i in 0..n {
            let (file, work, done, ready) = (file.clone(), work_rx.clone(), done_tx.clone(), ready_tx.clone());
            let cgroup = cgroup.map(Path::to_path_buf);
            let spawned = std::thread::Builder::new()
                .name(format!("storqos-replay-{tenant}.{i}"))
                .stack_size(256 << 10)
                .spawn(move || worker(&file, cgroup.as_deref(), &work, &done, ready, buf_len));
            match spawned {
                Ok(h) => pool.workers.push(h),
                Err(e) => return Err(ctx.io(tenant, "cannot start a worker thread", e)),
            }
        }
        drop(ready_tx);
        for said in ready_rx.iter().take(n) {
            if let Err(error) = said {
                return Err(match cgroup {
                    Some(dir) => cgroup_error(ctx, tenant, dir, error),
                    None => ctx.io(tenant, "a worker thread failed", error),
                });
            }
        }
        Ok(pool)
    }
}

/// A worker: join the cgroup, say so, then do requests until the sender goes.
fn worker(
    file: &File,
    cgroup: Option<&Path>,
    work: &Mutex<mpsc::Receiver<Work>>,
    done: &mpsc::Sender<Completion>,
    ready: mpsc::Sender<io::Result<()>>,
    buf_len: usize,
) {
    use std::os::unix::fs::FileExt;
    precise_timers();
    let set_up = cgroup.map_or(Ok(()), join_cgroup).and_then(|()| AlignedBuf::new(buf_len));
    let mut buf = match set_up {
        Ok(b) => {
            let _ = ready.send(Ok(()));
            b
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    drop(ready);
    loop {
        let w = {
            let Ok(rx) = work.lock() else { return };
            match rx.recv() {
                Ok(w) => w,
                Err(_) => return,
            }
        };
        let len = w.len as usize;
        let mut issue = Instant::now();
        let result = match buf.ensure(len) {
            Err(e) => -i64::from(e.raw_os_error().unwrap_or(12)),
            Ok(()) => {
                let b = &mut buf.as_mut()[..len];
                if !w.read {
                    b.fill(PATTERN);
                }
                loop {
                    issue = Instant::now();
                    let r = if w.read { file.read_at(b, w.offset) } else { file.write_at(b, w.offset) };
                    match r {
                        Ok(n) => break n as i64,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => break -i64::from(e.raw_os_error().unwrap_or(5)),
                    }
                }
            }
        };
        let c = Completion { job: w.job, issue, finish: Instant::now(), result };
        if done.send(c).is_err() {
            return;
        }
    }
}

impl Issuer for Pool {
    fn queue(&mut self, k: usize, job: &Job) -> io::Result<()> {
        let w = Work { job: k, offset: job.offset, len: job.len, read: job.read };
        let sent = self.work.as_ref().map(|tx| tx.send(w));
        match sent {
            Some(Ok(())) => {
                self.in_flight += 1;
                Ok(())
            }
            _ => Err(io::Error::new(io::ErrorKind::BrokenPipe, "the worker threads ended")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<Completion>) {
        let before = out.len();
        out.append(&mut self.held);
        while let Ok(c) = self.done.try_recv() {
            out.push(c);
        }
        self.in_flight -= out.len() - before;
    }

    fn wait(&mut self, d: Duration) -> io::Result<()> {
        match self.done.recv_timeout(d) {
            Ok(c) => {
                self.held.push(c);
                Ok(())
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(()),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(io::Error::new(io::ErrorKind::BrokenPipe, "the worker threads ended"))
            }
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // The workers end once the sender is gone and they have finished what they hold;
        // with requests still in flight (a stall), they are left to end on their own.
        self.work = None;
        if self.in_flight == 0 {
            for h in self.workers.drain(..) {
                let _ = h.join();
            }
        }
    }
}

// The io_uring engine: a ring per tenant, a buffer per slot.

/// A ring of at least `entries` entries, if the kernel has what the replay needs.
#[cfg(target_os = "linux")]
fn uring_ring(entries: u32) -> io::Result<IoUring> {
    let ring = IoUring::new(entries)?;
    if !ring.params().is_feature_ext_arg() {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    let mut probe = io_uring::Probe::new();
    ring.submitter().register_probe(&mut probe)?;
    if !probe.is_supported(opcode::Read::CODE) || !probe.is_supported(opcode::Write::CODE) {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    }
    Ok(ring)
}

/// One slot's request in the kernel's hands.
#[cfg(target_os = "linux")]
struct InFlight {
    /// Its index among the tenant's requests.
    job: usize,
    offset: u64,
    len: u32,
    read: bool,
    /// When it was first submitted (set by `flush`).
    issue: Option<Instant>,
}

/// A tenant's ring, file and slots.
#[cfg(target_os = "linux")]
struct RingTenant {
    ring: IoUring,
    file: File,
    bufs: Vec<AlignedBuf>,
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    /// Slots queued since the last `flush`.
    queued: Vec<usize>,
}

#[cfg(target_os = "linux")]
impl RingTenant {
    /// `ring` (of [`uring_ring`], at least `slots` entries) over `file`, with `slots`
    /// slots, each with a buffer of `buf_len` bytes to start with.
    fn new(ring: IoUring, file: File, slots: usize, buf_len: usize) -> io::Result<RingTenant> {
        let mut bufs = Vec::with_capacity(slots);
        for _ in 0..slots {
            bufs.push(AlignedBuf::new(buf_len)?);
        }
        Ok(RingTenant {
            ring,
            file,
            bufs,
            slots: (0..slots).map(|_| None).collect(),
            free: (0..slots).rev().collect(),
            queued: Vec::with_capacity(slots),
        })
    }

    /// Put slot `s`'s request in the submission queue.
    fn push(&mut self, s: usize) -> io::Result<()> {
        let Some(f) = self.slots[s].as_ref() else { return Err(io::Error::from(io::ErrorKind::NotFound)) };
        let fd = types::Fd(self.file.as_raw_fd());
        let ptr = self.bufs[s].as_mut().as_mut_ptr();
        let sqe = if f.read {
            opcode::Read::new(fd, ptr, f.len).offset(f.offset).build()
        } else {
            opcode::Write::new(fd, ptr.cast_const(), f.len).offset(f.offset).build()
        };
        // SAFETY: the buffer (at least `len` bytes) and the descriptor stay valid until
        // the request completes: both are owned by self, which waits for nothing but
        // leaks its buffers if dropped with requests in flight (Drop below).
        unsafe { self.ring.submission().push(&sqe.user_data(s as u64)) }
            .map_err(|_| io::Error::from(io::ErrorKind::WouldBlock))?;
        self.queued.push(s);
        Ok(())
    }

    fn busy(&self) -> bool {
        self.free.len() < self.slots.len()
    }
}

#[cfg(target_os = "linux")]
impl Issuer for RingTenant {
    fn queue(&mut self, k: usize, job: &Job) -> io::Result<()> {
        let s = self.free.pop().ok_or_else(|| io::Error::from(io::ErrorKind::WouldBlock))?;
        let filled = self.bufs[s].ensure(job.len as usize).map(|()| {
            if !job.read {
                self.bufs[s].as_mut()[..job.len as usize].fill(PATTERN);
            }
        });
        if let Err(e) = filled {
            self.free.push(s);
            return Err(e);
        }
        self.slots[s] = Some(InFlight { job: k, offset: job.offset, len: job.len, read: job.read, issue: None });
        if let Err(e) = self.push(s) {
            self.slots[s] = None;
            self.free.push(s);
            return Err(e);
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        let now = Instant::now();
        for s in self.queued.drain(..) {
            if let Some(f) = self.slots[s].as_mut() {
                f.issue.get_or_insert(now);
            }
        }
        // One the kernel does not take now stays queued for the next call.
        for _ in 0..3 {
            match self.ring.submit() {
                Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) => {}
                Err(e) => return Err(e),
                Ok(_) => return Ok(()),
            }
        }
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<Completion>) {
        if self.ring.completion().is_empty() {
            return;
        }
        let finish = Instant::now();
        let cqes: Vec<(u64, i32)> = self.ring.completion().map(|c| (c.user_data(), c.result())).collect();
        let mut again = false;
        for (s, res) in cqes {
            let s = s as usize;
            if s >= self.slots.len() || self.slots[s].is_none() {
                continue;
            }
            if (res == -libc::EAGAIN || res == -libc::EINTR) && self.push(s).is_ok() {
                again = true;
                continue;
            }
            let Some(f) = self.slots[s].take() else { continue };
            self.free.push(s);
            out.push(Completion { job: f.job, issue: f.issue.unwrap_or(finish), finish, result: i64::from(res) });
        }
        if again {
            let _ = self.flush();
        }
    }

    fn wait(&mut self, d: Duration) -> io::Result<()> {
        let ts = types::Timespec::from(d);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EAGAIN | libc::EBUSY)) => {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(target_os = "linux")]
impl Drop for RingTenant {
    fn drop(&mut self) {
        if self.busy() {
            // Requests still in the kernel's hands (a stall): it may yet write into
            // their buffers, which are therefore never freed.
            std::mem::forget(std::mem::take(&mut self.bufs));
        }
    }
}
