//! The NBD server: the tokio accept loop, one task per connection (fixed newstyle
//! negotiation, then transmission with a reader and a writer half), and the run API
//! ([`start`], [`start_with`], [`run`], [`Handle`]).
//!
//! A connection's reader parses requests and checks them (range, flags, command);
//! reads, writes, trims and write-zeroes go to the scheduler loop ([`crate::sched`])
//! (the policy sees the last two as writes of 0 and of `length` bytes), flushes go straight to
//! the backend (`fdatasync` covers every write completed before it, whichever
//! connection issued it). Replies may leave out of order (NBD matches them by cookie).
//!
//! A malformed packet (bad magic, a length over 32 MiB, a connection ending in the
//! middle of a message, unknown client flags) closes only that connection, with one
//! line logged naming the client address and what was wrong; the server keeps
//! serving the others. Nothing here panics on network input.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde::Serialize;
use storqos_core::scheduler::Scheduler;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpListener;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::admission::{Admission, TenantGuard};
use crate::budget::{charge, Budgets, ConnectionBudget, PAYLOAD_PIECE};
use crate::config::{Config, Error, ExportConfig, Limits, Result, TlsMode};
use crate::deadline::Deadline;
use crate::export::{Export, Exports};
use crate::notices::{Notices, PeerLog};
use crate::peer_limits::{Origin, PeerLimits, PeerLimitsConfig, Ticket};
use crate::protocol::*;
use crate::sched::{Clock, Form, Inflight, Io, Job, Msg, Reply, SchedLoop};
use crate::stats::{GaugeRow, Recorder, Stats, WindowRow};
use crate::transport::{Listener, Peer, Plain, ReadHalf, Stream, WriteHalf};
use storqos_core::request::Completion;

pub use crate::notices::{Logger, NOTICE_EVERY};

/// How [`start_with`] runs the gateway beyond its [`Config`].
#[derive(Clone, Default)]
pub struct Options {
    /// Stop on SIGTERM.
    pub sigterm: bool,
    /// Stop on SIGINT (Ctrl-C). Leave it off when the caller handles SIGINT itself
    /// (the Python binding polls Python's signal handlers instead).
    pub sigint: bool,
    /// Log sink (default: standard error, prefixed `storqos serve:`).
    pub log: Option<Logger>,
}

/// One served export as reported when the gateway is ready.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExportInfo {
    /// NBD export name.
    pub name: String,
    /// Backing file.
    pub path: String,
    /// Tenant.
    pub tenant: u32,
    /// Scheduling class.
    pub class: u32,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Served read-only.
    pub read_only: bool,
    /// Read and written with `O_DIRECT` (past the page cache).
    pub direct: bool,
    /// Client networks allowed (empty: all).
    pub allow: Vec<String>,
}

/// What the gateway serves, known once it listens.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReadyInfo {
    /// The bound address (the real port when the config asked for port 0), or
    /// `unix:/PATH`.
    pub listen: String,
    /// TLS: `off`, `on` or `require`.
    pub tls: String,
    /// Policy name.
    pub policy: String,
    /// Backend slots.
    pub depth: usize,
    /// Emulated capacity (IOPS), if any.
    pub iops: Option<f64>,
    /// Where Prometheus metrics are served (the bound address), if anywhere.
    pub metrics: Option<String>,
    /// How direct exports' files are read: `threads` or `io_uring` (what the gateway
    /// does, which is `threads` where the kernel refused the io_uring asked for).
    pub direct_reads: String,
    /// The exports.
    pub exports: Vec<ExportInfo>,
    /// What [`check`] found doubtful without refusing it (a socket a running gateway
    /// answers on); empty when the gateway starts.
    pub warnings: Vec<String>,
}

struct Shared {
    exports: Arc<Exports>,
    sched_tx: UnboundedSender<Msg>,
    stats: Arc<Mutex<Recorder>>,
    log: Logger,
    /// Connections accepted since the start.
    connections: Arc<AtomicU64>,
    /// Connections open now (handshakes included).
    open: Arc<AtomicUsize>,
    protocol_errors: AtomicU64,
    limits: Limits,
    /// The in-flight budget, divided among the tenants ([`crate::budget`]).
    budgets: Budgets,
    /// The connections open by client address ([`crate::peer_limits`]).
    peers: Arc<PeerLimits>,
    /// Flushes running at once (each holds a blocking thread).
    flushes: Arc<Semaphore>,
    notices: Notices,
    /// Lines about what one client did, rate-limited per client address.
    peer_log: PeerLog,
    /// Set by the control socket's `drain`: no new connection; stop once none is open.
    draining: Arc<AtomicBool>,
    /// Set by SIGHUP, taken by [`Handle::take_hangup`].
    hangup: Arc<AtomicBool>,
    /// The gateway's clock (response times end when the reply is written).
    clock: Clock,
    /// TLS, when it is on.
    tls: Option<tokio_rustls::TlsAcceptor>,
    tls_mode: TlsMode,
    /// Seed 003's admission control at connect time (an `fclb` policy), if configured.
    admission: Option<Arc<Admission>>,
}

/// Most flushes running at once: each `fdatasync` holds a blocking thread, so 4,000
/// flushes in flight must not start 4,000 threads.
pub const MAX_CONCURRENT_FLUSHES: usize = 4;

/// Counts a connection as open until dropped.
struct OpenGuard(Arc<Shared>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts a connection to an export until dropped (and holds its tenant's admission).
struct ExportGuard(Arc<Export>, Option<TenantGuard>);

impl Drop for ExportGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

type Finished = Arc<(Mutex<Option<Stats>>, Condvar)>;

/// A running gateway. Dropping it stops the gateway.
pub struct Handle {
    addr: Option<SocketAddr>,
    info: ReadyInfo,
    stop: watch::Sender<bool>,
    finished: Finished,
    stats: Arc<Mutex<Recorder>>,
    control: Arc<crate::control::Control>,
    hangup: Arc<AtomicBool>,
    /// The configuration being served (what a reload is compared with; the control
    /// socket's export changes are written into it).
    running: Arc<Mutex<Config>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Handle {
    /// Whether a SIGHUP arrived since the last call (the caller reloads its
    /// configuration and hands it to [`Handle::reload`]).
    pub fn take_hangup(&self) -> bool {
        self.hangup.swap(false, Ordering::Relaxed)
    }

    /// Apply a new configuration to the running gateway: its policy (checked, then put
    /// in place without losing a request), its tenants' latency targets, its exports
    /// (new names are opened and served, names no longer there take no new connection).
    /// What cannot change while serving (listen address, an export kept under the same
    /// name, depth, emulated capacity, limits, metrics, control socket, TLS) must stay
    /// the same: a change there is an error and nothing changes. Returns the policy's
    /// name.
    pub fn reload(&self, new: Config) -> std::result::Result<String, String> {
        new.validate().map_err(|e| e.to_string())?;
        let mut running = self.running.lock().map_err(|_| "the gateway's configuration is unavailable")?;
        let changed_export = new
            .exports
            .iter()
            .find_map(|e| running.exports.iter().find(|o| o.name == e.name && *o != e).map(|_| e.name.clone()));
        if let Some(name) = changed_export {
            return Err(format!(
                "export {name:?} changed: an export cannot change while serving (remove it, then add it under \
                 another name, or restart); nothing changed"
            ));
        }
        let fixed = [
            ("listen", running.listen != new.listen),
            ("depth", running.depth != new.depth),
            ("iops", running.iops != new.iops),
            ("limits", running.limits != new.limits),
            ("metrics", running.metrics != new.metrics),
            ("control", running.control != new.control),
            ("cost", running.cost != new.cost),
            ("tiers", running.tiers != new.tiers),
            ("tls", running.tls != new.tls),
            ("direct_reads", running.direct_reads != new.direct_reads),
        ];
        let changed: Vec<&str> = fixed.iter().filter(|(_, c)| *c).map(|(k, _)| *k).collect();
        if !changed.is_empty() {
            return Err(format!(
                "{} cannot change while serving (restart for that); nothing changed",
                changed.join(", ")
            ));
        }
        let rt = self.runtime.as_ref().ok_or("the gateway has stopped")?;
        // New exports first (a file that does not open changes nothing), then the policy.
        let added: Vec<&ExportConfig> =
            new.exports.iter().filter(|e| !running.exports.iter().any(|o| o.name == e.name)).collect();
        let mut opened = Vec::new();
        for e in added {
            match self.control.open_export(e) {
                Ok(()) => opened.push(e.name.clone()),
                Err(why) => {
                    for name in &opened {
                        let _ = self.control.exports.remove(name);
                    }
                    return Err(format!("{why}; nothing changed"));
                }
            }
        }
        let name = match rt.block_on(self.control.apply(new.policy_json.clone())) {
            Ok(name) => name,
            Err(why) => {
                for name in &opened {
                    let _ = self.control.exports.remove(name);
                }
                return Err(why);
            }
        };
        for gone in running.exports.iter().filter(|o| !new.exports.iter().any(|e| e.name == o.name)) {
            let _ = self.control.exports.remove(&gone.name);
        }
        if let Ok(mut r) = self.stats.lock() {
            for (&t, &s) in &new.slos {
                r.set_slo(t, (s * 1e9).round() as u64);
            }
        }
        *running = new;
        Ok(name)
    }
    /// The TCP address the gateway listens on (`None` on a Unix socket).
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// What it serves.
    pub fn info(&self) -> &ReadyInfo {
        &self.info
    }

    /// The per-window rows and gauge samples closed since the last call (empty without
    /// a window length), handed over: the gateway keeps no copy, and the final
    /// [`Stats::windows`](crate::Stats) and `gauges` hold only what was never taken.
    pub fn take_windows(&self) -> (Vec<WindowRow>, Vec<GaugeRow>) {
        self.stats.lock().map(|mut s| s.take_windows()).unwrap_or_default()
    }

    /// Ask the gateway to stop (returns at once; see [`Handle::wait`]).
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }

    /// The final statistics if the gateway has stopped within `timeout`.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<Stats> {
        let (lock, cv) = &*self.finished;
        let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = cv.wait_timeout_while(guard, timeout, |s| s.is_none()).unwrap_or_else(|e| e.into_inner());
        guard.clone()
    }

    /// Block until the gateway stops by itself (duration, signal, [`Handle::stop`]).
    pub fn wait(mut self) -> Stats {
        let (lock, cv) = &*self.finished;
        let guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        let guard = cv.wait_while(guard, |s| s.is_none()).unwrap_or_else(|e| e.into_inner());
        let stats = guard.clone().unwrap_or_else(empty_stats);
        drop(guard);
        self.close();
        stats
    }

    /// Stop the gateway and return its statistics.
    pub fn shutdown(self) -> Stats {
        self.stop();
        self.wait()
    }

    fn close(&mut self) {
        let _ = self.stop.send(true);
        if let Some(rt) = self.runtime.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                // Dropped inside another runtime, where blocking is not allowed.
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(Duration::from_secs(5));
            }
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.close();
    }
}

fn empty_stats() -> Stats {
    Stats {
        policy: String::new(),
        elapsed_s: 0.0,
        connections: 0,
        protocol_errors: 0,
        tenants: Vec::new(),
        windows: Vec::new(),
        gauges: Vec::new(),
    }
}

/// Start the gateway with default [`Options`] (no signal handling, log to stderr):
/// open the exports, build the policy, bind, and serve on a runtime of its own.
/// Configuration problems (a missing file, a bad policy, an address in use) are
/// returned before anything is served.
pub fn start(config: Config) -> Result<Handle> {
    start_with(config, Options::default())
}

/// Check `config` as [`start`] would, short of listening: every field, every export's
/// file (opened for reading and writing, then closed), the policy. Returns what would
/// be served, with `listen` as configured (nothing is bound).
pub fn check(config: &Config) -> Result<ReadyInfo> {
    let (exports, sched, _) = prepare(config)?;
    let mut warnings = check_sockets(config)?;
    warnings.extend(open_files(config).tight);
    Ok(ReadyInfo { warnings, ..ready_info(config, config.listen.clone(), sched.name(), &exports) })
}

/// The sockets [`start_with`] creates, checked as it creates them but binding nothing
/// (`check`): a Unix listen socket and the control socket as
/// [`crate::transport::socket_path`] sees them (what the start refuses is an error, a
/// socket a running gateway answers on a warning: a start would be refused, while that
/// gateway's own reload keeps it), and two of them given one place. A TCP address in
/// use is only found by the start.
fn check_sockets(config: &Config) -> Result<Vec<String>> {
    use crate::transport::{socket_path, ListenAt, SocketPath};
    let at = config.listen_at()?;
    let mut sockets = Vec::new();
    if let ListenAt::Unix(p) = &at {
        sockets.push(("listen", p));
    }
    if let Some(p) = &config.control {
        sockets.push(("control", p));
    }
    if let [(_, listen), ("control", control)] = sockets[..] {
        if listen == control {
            return Err(Error::Config(format!(
                "control: {} is also the listen socket: give the control socket a path of its own",
                control.display()
            )));
        }
    }
    let mut warnings = Vec::new();
    for (key, p) in sockets {
        match socket_path(p) {
            Ok(SocketPath::Live) => warnings.push(format!(
                "{key}: a running gateway answers on {} now: a start would be refused (that gateway's reload keeps it)",
                p.display()
            )),
            Ok(_) => {}
            Err(e) if key == "listen" => return Err(listen_error(config, &e)),
            Err(e) => return Err(control_error(p, &e)),
        }
    }
    if let (Some(m), ListenAt::Tcp(listen)) = (&config.metrics, &at) {
        if crate::config::resolve(m).is_some_and(|m| m == *listen && m.port() != 0) {
            return Err(Error::Config(format!(
                "metrics: {m} is also the listen address: give the metrics a port of their own"
            )));
        }
    }
    Ok(warnings)
}

/// The start's refusal of its listen address.
fn listen_error(config: &Config, e: &std::io::Error) -> Error {
    Error::Config(format!("listen: cannot listen on {}: {}", config.listen, bind_reason(e)))
}

/// The start's refusal of its control socket.
fn control_error(path: &std::path::Path, e: &std::io::Error) -> Error {
    Error::Config(format!("control: cannot create the socket {}: {e}", path.display()))
}

/// The exports, the policy and the admission control a configuration prepares.
type Prepared = (Vec<Arc<Export>>, storqos_core::spec::AnyScheduler, Option<Arc<Admission>>);

/// Validate `config`, open its exports and build its policy (with seed 003's admission
/// control, an `fclb` policy reading its references from the admission's board).
fn prepare(config: &Config) -> Result<Prepared> {
    config.validate()?;
    crate::tls::acceptor(&config.tls)?;
    raise_open_files_limit();
    if let Some(why) = open_files(config).refused {
        return Err(Error::Config(why));
    }
    let mut exports: Vec<Arc<Export>> = Vec::with_capacity(config.exports.len());
    let mut by_name = std::collections::HashMap::with_capacity(config.exports.len());
    for (i, e) in config.exports.iter().enumerate() {
        let shared = e.shares.as_ref().and_then(|s| by_name.get(s.as_str())).map(|&j: &usize| exports[j].as_ref());
        let opened = Arc::new(Export::open_sharing(e, &format!("exports[{i}]"), shared)?);
        by_name.insert(e.name.as_str(), i);
        exports.push(opened);
    }
    if let Some(a) = &config.admission {
        let (admission, board) = Admission::new(a, &config.policy, &config.tenant_names)?;
        let sched = crate::admission::build_policy(&config.policy, &board)?;
        return Ok((exports, sched, Some(admission)));
    }
    let sched = config.policy.build().map_err(|e| Error::Config(format!("policy: {e}")))?;
    Ok((exports, sched, None))
}

fn ready_info(config: &Config, listen: String, policy: String, exports: &[Arc<Export>]) -> ReadyInfo {
    ReadyInfo {
        listen,
        tls: format!("{:?}", config.tls.mode).to_lowercase(),
        policy,
        depth: config.depth,
        iops: config.iops,
        metrics: config.metrics.clone(),
        direct_reads: config.direct_reads.name().to_string(),
        exports: exports
            .iter()
            .map(|e| ExportInfo {
                name: e.name.clone(),
                path: e.path.display().to_string(),
                tenant: e.tenant,
                class: e.class,
                size_bytes: e.size,
                read_only: e.read_only,
                direct: e.is_direct(),
                allow: e.allow.iter().map(|n| n.to_string()).collect(),
            })
            .collect(),
        warnings: Vec::new(),
    }
}

/// [`start`] with explicit [`Options`].
pub fn start_with(config: Config, options: Options) -> Result<Handle> {
    let (exports, sched, admission) = prepare(&config)?;
    let policy = sched.name();
    let at = config.listen_at()?;
    let tls = crate::tls::acceptor(&config.tls)?;
    // One runtime thread for the connections and the scheduler loop: hand-offs between
    // those tasks then wake no other thread. The backend I/O has threads of its own
    // (`crate::pool`); on the 2-CPU benchmark machine one runtime thread gave 4–16 %
    // more 4 KiB write IOPS than two, reads the same within the noise (BENCHMARKS.md).
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        // Flushes are the only blocking calls: their pool is as large as the flushes
        // allowed at once (tokio would otherwise grow it to 512 threads).
        .max_blocking_threads(MAX_CONCURRENT_FLUSHES)
        .thread_name("storqos-gateway")
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Error::Io(format!("cannot start the runtime: {e}")))?;
    let listener = runtime.block_on(Listener::bind(&at)).map_err(|e| listen_error(&config, &e))?;
    let listen = listener.describe().map_err(|e| Error::Io(e.to_string()))?;
    let addr = listener.tcp_addr();
    let metrics_listener = match &config.metrics {
        Some(m) => {
            let at = crate::config::resolve(m).ok_or_else(|| Error::Config(format!("metrics: bad address {m:?}")))?;
            let l = runtime
                .block_on(TcpListener::bind(at))
                .map_err(|e| Error::Config(format!("metrics: cannot listen on {at}: {}", bind_reason(&e))))?;
            Some(l)
        }
        None => None,
    };
    let mut info = ready_info(&config, listen, policy.clone(), &exports);
    if let Some(l) = &metrics_listener {
        info.metrics = l.local_addr().ok().map(|a| a.to_string());
    }
    let log = options.log.clone().unwrap_or_else(|| Arc::new(|m: &str| eprintln!("storqos serve: {m}")));
    let mut recorder = Recorder::new(exports.iter().map(|e| (e.tenant, e.name.as_str())))
        .with_slos(config.slos.iter().map(|(&t, &s)| (t, (s * 1e9).round() as u64)));
    if let Some(w) = config.window_s {
        recorder = recorder.with_window((w * 1e9).round().max(1.0) as u64);
    }
    let stats = Arc::new(Mutex::new(recorder));
    let live_stats = stats.clone();
    let (sched_tx, sched_rx) = unbounded_channel();
    if let Some(addr) = addr.filter(|a| !a.ip().is_loopback() && config.tls.mode != TlsMode::Require) {
        let tls = if config.tls.mode == TlsMode::On { "without requiring TLS" } else { "without TLS" };
        log(&format!(
            "listening on {addr}, not a loopback address, {tls}: any host that reaches it can read and write \
             the exports in the clear (require TLS, and give each export an allow list of client addresses)"
        ));
    }
    if let Some(why) = open_files(&config).tight {
        log(&why);
    }
    ignore_file_size_signal();
    let limits = config.limits.clone();
    let budgets = Budgets::new(limits.max_inflight_bytes);
    if let Some(why) = budgets.divide(exports.iter().map(|e| e.tenant)) {
        log(&why);
    }
    let peers = PeerLimits::new(PeerLimitsConfig {
        max_connections: limits.max_connections,
        per_address: limits.max_connections_per_address,
        handshakes_per_address: limits.max_handshakes_per_address,
    });
    let clock = Clock::start();
    let shared = Arc::new(Shared {
        exports: Arc::new(Exports::new(exports)),
        sched_tx: sched_tx.clone(),
        stats: stats.clone(),
        log,
        connections: Arc::new(AtomicU64::new(0)),
        open: Arc::new(AtomicUsize::new(0)),
        protocol_errors: AtomicU64::new(0),
        budgets,
        peers,
        flushes: Arc::new(Semaphore::new(MAX_CONCURRENT_FLUSHES)),
        limits,
        notices: Notices::default(),
        peer_log: PeerLog::default(),
        draining: Arc::new(AtomicBool::new(false)),
        hangup: Arc::new(AtomicBool::new(false)),
        clock,
        tls,
        tls_mode: config.tls.mode,
        admission,
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let finished: Finished = Arc::new((Mutex::new(None), Condvar::new()));
    let fin = finished.clone();
    let duration = config.duration_s.map(Duration::from_secs_f64);
    let ring_reads = config.direct_reads == crate::config::DirectReads::IoUring;
    let backend = crate::sched::Backend {
        depth: config.depth,
        iops: config.iops,
        cost: config.cost.model(),
        tiers: config.tiers.clone(),
        ring_reads,
    };
    // Both register with the runtime's reactor: the signals, and the ring's eventfd.
    let (signals, sched_loop) = {
        let _in_runtime = runtime.enter();
        let signals = Signals::register(&options)?;
        let sched_loop = SchedLoop::new(sched, clock, &backend, stats.clone(), sched_tx.clone())
            .map_err(|e| Error::Io(format!("cannot start the I/O threads: {e}")))?;
        (signals, sched_loop)
    };
    if let Some(why) = sched_loop.ring_refused() {
        (shared.log)(&format!("direct reads: no io_uring ({why}); the I/O threads read instead"));
        info.direct_reads = crate::config::DirectReads::Threads.name().to_string();
    }
    let control_listener = match &config.control {
        Some(path) => {
            let _in_runtime = runtime.enter();
            Some(crate::control::bind(path).map_err(|e| control_error(path, &e))?)
        }
        None => None,
    };
    let running = Arc::new(Mutex::new(config.clone()));
    let control = Arc::new(crate::control::Control {
        exports: shared.exports.clone(),
        running: running.clone(),
        stats: stats.clone(),
        sched: sched_tx.clone(),
        policy: Mutex::new(config.policy_json.clone()),
        names: config.tenant_names.clone(),
        open: shared.open.clone(),
        draining: shared.draining.clone(),
        clock,
    });
    if let Some(listener) = control_listener {
        runtime.spawn(crate::control::serve(listener, control.clone()));
    }
    let hangup_flag = shared.hangup.clone();
    let control_path = config.control.clone();
    if let Some(listener) = metrics_listener {
        let source = crate::metrics::Source {
            stats: stats.clone(),
            sched: sched_tx.clone(),
            clock,
            bounds: crate::metrics::bounds(config.slos.values().copied()),
            open: shared.open.clone(),
            total: shared.connections.clone(),
        };
        runtime.spawn(crate::metrics::serve(listener, Arc::new(source)));
    }
    // What the client lines' rate limit held back is said as each interval ends.
    let peer_log = Arc::downgrade(&shared);
    runtime.spawn(async move {
        let mut every = tokio::time::interval(crate::notices::PEER_INTERVAL);
        every.tick().await;
        loop {
            every.tick().await;
            let Some(s) = peer_log.upgrade() else { return };
            s.peer_log.flush(&s.log, false);
        }
    });
    runtime.spawn(async move {
        let sched_task = tokio::spawn(sched_loop.run(sched_rx));
        serve(listener, shared.clone(), stop_rx, duration, signals).await;
        shared.peer_log.flush(&shared.log, true);
        let elapsed_s = clock.now() as f64 / 1e9;
        let _ = sched_tx.send(Msg::Stop);
        let _ = sched_task.await;
        let summary = match stats.lock() {
            Ok(s) => s.summary(
                policy,
                elapsed_s,
                shared.connections.load(Ordering::Relaxed),
                shared.protocol_errors.load(Ordering::Relaxed),
            ),
            Err(_) => empty_stats(),
        };
        if let Some(p) = &control_path {
            let _ = std::fs::remove_file(p);
        }
        let (lock, cv) = &*fin;
        if let Ok(mut g) = lock.lock() {
            *g = Some(summary);
        }
        cv.notify_all();
    });
    Ok(Handle {
        addr,
        info,
        stop: stop_tx,
        finished,
        stats: live_stats,
        control,
        hangup: hangup_flag,
        running,
        runtime: Some(runtime),
    })
}

/// Serve `config` until Ctrl-C, SIGTERM or `duration_s`, then return the statistics.
pub fn run(config: Config) -> Result<Stats> {
    Ok(start_with(config, Options { sigterm: true, sigint: true, log: None })?.wait())
}

/// Descriptors a gateway holds beside its exports' files and its connections: the
/// standard streams, the listeners, the runtime's epoll and wake-ups, an io_uring ring,
/// the embedding interpreter's own. A generous count, so that a configuration the
/// limit cannot hold is refused before an export's file fails to open.
pub const OTHER_OPEN_FILES: u64 = 64;

/// What the process's limit of open files (`ulimit -n`, once raised to its hard limit)
/// says of a configuration.
#[derive(Default)]
struct OpenFiles {
    /// Why it cannot start: its exports' files alone do not fit.
    refused: Option<String>,
    /// What it would lack: room for `max_connections` connections.
    tight: Option<String>,
}

/// Check the exports' files (one each, two for a tiered export) and the connections
/// against the limit of open files.
fn open_files(config: &Config) -> OpenFiles {
    let Some(limit) = open_files_limit() else { return OpenFiles::default() };
    let n = config.exports.len();
    let files: u64 = config.exports.iter().map(|e| 1 + u64::from(e.tier.is_some())).sum();
    let mut out = OpenFiles::default();
    if files + OTHER_OPEN_FILES > limit {
        out.refused = Some(format!(
            "exports: {n} export(s) keep {files} file(s) open, and this process may have {limit} open at once \
             (ulimit -n, its hard limit; {OTHER_OPEN_FILES} are for the rest): serve fewer exports, or raise the limit"
        ));
        return out;
    }
    let room = limit - files - OTHER_OPEN_FILES;
    let max = config.limits.max_connections as u64;
    if room < max {
        out.tight = Some(format!(
            "{n} export(s) keep {files} file(s) open: with a limit of {limit} open files (ulimit -n), {room} \
             connection(s) can be open at once, not limits.max_connections = {max}"
        ));
    }
    out
}

/// The process's limit of open files (the soft one), where the platform says.
fn open_files_limit() -> Option<u64> {
    #[cfg(target_os = "linux")]
    // SAFETY: getrlimit with a valid pointer to a local struct.
    unsafe {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur != libc::RLIM_INFINITY {
            return Some(r.rlim_cur);
        }
    }
    None
}

/// Let the process hold as many open files as its hard limit allows (every connection
/// is one): a soft limit of 1,024 would cap the connections below the configured maximum.
fn raise_open_files_limit() {
    #[cfg(target_os = "linux")]
    // SAFETY: getrlimit / setrlimit with a valid pointer to a local struct.
    unsafe {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// A write past the process's file-size limit (`ulimit -f`) then fails with `EFBIG`,
/// answered `ENOSPC` to that request, instead of killing the gateway with SIGXFSZ.
fn ignore_file_size_signal() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

fn bind_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => "the address is already in use".into(),
        std::io::ErrorKind::AddrNotAvailable => "no such local address".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied (ports below 1024 need privileges)".into(),
        _ => e.to_string(),
    }
}

/// The signal streams a gateway listens to, registered before [`start_with`] returns
/// (so a signal that arrives right after the ready message is not lost).
#[derive(Default)]
struct Signals {
    #[cfg(unix)]
    streams: Vec<tokio::signal::unix::Signal>,
    /// SIGHUP, with SIGTERM: it must not end the gateway (its default action would).
    #[cfg(unix)]
    hangup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Register the signals `options` asks for; must run inside the runtime.
    fn register(options: &Options) -> Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut streams = Vec::new();
            let wanted = [(options.sigterm, SignalKind::terminate()), (options.sigint, SignalKind::interrupt())];
            for (on, kind) in wanted {
                if on {
                    streams.push(signal(kind).map_err(|e| Error::Io(format!("cannot handle signals: {e}")))?);
                }
            }
            let hangup = if options.sigterm {
                Some(signal(SignalKind::hangup()).map_err(|e| Error::Io(format!("cannot handle signals: {e}")))?)
            } else {
                None
            };
            Ok(Signals { streams, hangup })
        }
        #[cfg(not(unix))]
        {
            let _ = options;
            Ok(Signals::default())
        }
    }

    /// Resolve when any of the signals arrives (never if there are none).
    async fn recv(&mut self) {
        #[cfg(unix)]
        if !self.streams.is_empty() {
            let polls = self.streams.iter_mut().map(|s| Box::pin(s.recv()));
            let _ = futures_select_all(polls).await;
            return;
        }
        std::future::pending::<()>().await
    }
}

/// Wait for the first of several futures (a tiny `select_all`).
#[cfg(unix)]
async fn futures_select_all<F: std::future::Future + Unpin>(futs: impl Iterator<Item = F>) {
    let mut futs: Vec<F> = futs.collect();
    std::future::poll_fn(|cx| {
        for f in futs.iter_mut() {
            if std::pin::Pin::new(f).poll(cx).is_ready() {
                return std::task::Poll::Ready(());
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Resolve when any enabled stop condition fires.
/// Resolve at each SIGHUP (never without it).
#[cfg(unix)]
async fn hangups(hangup: &mut Option<tokio::signal::unix::Signal>) {
    match hangup {
        Some(h) => {
            h.recv().await;
        }
        None => std::future::pending().await,
    }
}

async fn stop_signal(mut stop: watch::Receiver<bool>, duration: Option<Duration>, mut signals: Signals) {
    let requested = async {
        while !*stop.borrow_and_update() {
            if stop.changed().await.is_err() {
                // The handle is gone: stop.
                return;
            }
        }
    };
    let timed = async {
        match duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = requested => {}
        _ = timed => {}
        _ = signals.recv() => {}
    }
}

/// The accept loop: one task per connection until a stop condition fires, then every
/// connection is closed.
async fn serve(
    listener: Listener,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    duration: Option<Duration>,
    mut signals: Signals,
) {
    #[cfg(unix)]
    let mut hangup = signals.hangup.take();
    let stopped = stop_signal(stop, duration, signals);
    tokio::pin!(stopped);
    let mut conns = JoinSet::new();
    // How often a drain is noticed when nothing else happens.
    let mut drain_tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) if shared.draining.load(Ordering::Relaxed) => drop(stream),
                Ok((stream, peer)) => {
                    let Some(ticket) = take_place(&shared, &peer) else {
                        drop(stream);
                        continue;
                    };
                    shared.connections.fetch_add(1, Ordering::Relaxed);
                    shared.open.fetch_add(1, Ordering::Relaxed);
                    conns.spawn(connection(stream, peer, ticket, shared.clone()));
                }
                Err(e) => {
                    // Out of file descriptors, most often: wait a little, say it once a minute.
                    shared.notices.say(&shared.log, "accept", || format!(
                        "accept failed: {e} (said once a minute while it lasts)"
                    ));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = drain_tick.tick() => {}
            _ = hangups(&mut hangup) => {
                // The embedder (storqos serve) reloads its configuration file and says how it went.
                shared.hangup.store(true, Ordering::Relaxed);
            }
        }
        if conns.is_empty() && shared.draining.load(Ordering::Relaxed) {
            (shared.log)("drained: no connection is open; stopping");
            break;
        }
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
}

/// A newcomer's place among the connections (its address's limits, the gateway's; a
/// full gateway closes an idle connection of the address holding the most to make
/// room), or `None`, said once a minute, when it is refused.
fn take_place(shared: &Shared, peer: &Peer) -> Option<Ticket> {
    use crate::peer_limits::Refused;
    match shared.peers.admit(Origin::of(peer.ip())) {
        Ok((ticket, evicted)) => {
            if let Some(e) = evicted {
                shared.notices.say(&shared.log, "evicted", || {
                    format!(
                        "connection limit of {} reached: closed the newest idle connection of {} (which held {}) \
                         to make room for {peer} (said once a minute while it lasts)",
                        shared.limits.max_connections, e.origin, e.held
                    )
                });
            }
            Some(ticket)
        }
        Err(why) => {
            let key = match why {
                Refused::Address { .. } => "max_connections_per_address",
                Refused::Handshakes { .. } => "max_handshakes_per_address",
                Refused::Full { .. } => "max_connections",
            };
            shared.notices.say(&shared.log, key, || {
                format!("client {peer}: {why}: connection refused (said once a minute while it lasts)")
            });
            None
        }
    }
}

/// Why a connection ended early.
enum ConnError {
    Protocol(ProtocolError),
    Io(std::io::Error),
    /// Refused by the gateway's policy (an address not allowed, a limit), said to the log.
    Refused(String),
    /// Nothing in flight and no request for the idle timeout.
    Idle,
    /// Refused, and the reason already logged (admission control).
    Said,
}

impl From<ProtocolError> for ConnError {
    fn from(e: ProtocolError) -> Self {
        ConnError::Protocol(e)
    }
}
impl From<std::io::Error> for ConnError {
    fn from(e: std::io::Error) -> Self {
        ConnError::Io(e)
    }
}

/// Read exactly `buf.len()` bytes. `Ok(false)` if the peer closed before the first
/// byte and `eof_ok`; a close after it is [`ProtocolError::Truncated`].
async fn read_msg<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut [u8],
    what: &'static str,
    eof_ok: bool,
) -> std::result::Result<bool, ConnError> {
    let mut got = 0;
    while got < buf.len() {
        let n = r.read(&mut buf[got..]).await?;
        if n == 0 {
            if got == 0 && eof_ok {
                return Ok(false);
            }
            return Err(ProtocolError::Truncated { what, needed: buf.len(), got }.into());
        }
        got += n;
    }
    Ok(true)
}

async fn connection(stream: Plain, peer: Peer, ticket: Ticket, shared: Arc<Shared>) {
    let _open = OpenGuard(shared.clone());
    tokio::select! {
        // Closed to make room for a newcomer (said by the accept loop): it was idle.
        () = ticket.evicted() => {}
        () = connected(stream, &peer, &ticket, &shared) => {}
    }
}

/// Aborts its task when dropped (a connection's writer ends with its connection).
struct Aborting<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for Aborting<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A connection from its handshake to its end.
async fn connected(stream: Plain, peer: &Peer, ticket: &Ticket, shared: &Arc<Shared>) {
    let handshake = Duration::from_secs_f64(shared.limits.handshake_timeout_s);
    let (stream, export, _counted, session) =
        match tokio::time::timeout(handshake, negotiate(Stream::Plain(stream), peer, shared)).await {
            Ok(Ok(Some(chosen))) => chosen,
            Ok(Ok(None)) => return,
            Ok(Err(e)) => {
                report(shared, peer, "negotiation", e);
                return;
            }
            Err(_) => {
                shared.notices.say(&shared.log, "handshake_timeout", || {
                    format!(
                    "client {peer}: no handshake within {} s; connection closed (said once a minute while it lasts)",
                    shared.limits.handshake_timeout_s
                )
                });
                return;
            }
        };
    // The connection's share of its tenant's in-flight budget, the tenants' shares
    // divided among those served now.
    let (budget, said) = shared.budgets.connection(export.tenant, shared.exports.all().iter().map(|e| e.tenant));
    if let Some(why) = said {
        (shared.log)(&why);
    }
    let budget = Arc::new(budget);
    ticket.negotiated(budget.clone());
    let (rd, wr) = stream.split();
    let (reply_tx, reply_rx) = unbounded_channel();
    let reply_timeout = Duration::from_secs_f64(shared.limits.reply_timeout_s);
    let wr = Deadline::new(wr, reply_timeout, true);
    let mut writer = Aborting(tokio::spawn(write_replies(wr, reply_rx, shared.stats.clone(), shared.clock)));
    let outcome = tokio::select! {
        r = transmission(rd, reply_tx, export, shared, session, &budget) => r,
        w = &mut writer.0 => {
            // The writer ended first: the client left, or took no byte of its replies
            // for the reply timeout. The reader stops with it.
            if let Ok(Err(e)) = w {
                if e.kind() == std::io::ErrorKind::TimedOut {
                    shared.notices.say(&shared.log, "reply_timeout", || format!(
                        "client {peer}: took no reply for {} s; connection closed (said once a minute while it lasts)",
                        shared.limits.reply_timeout_s
                    ));
                }
            }
            return;
        }
    };
    match outcome {
        Ok(()) => {
            // NBD_CMD_DISC or end of input: finish the outstanding replies, then close.
            let _ = (&mut writer.0).await;
        }
        Err(ConnError::Idle) => {
            shared.notices.say(&shared.log, "idle_timeout", || {
                format!(
                    "client {peer}: idle for {} s; connection closed (said once a minute while it lasts)",
                    shared.limits.idle_timeout_s.unwrap_or(0.0)
                )
            });
        }
        Err(ConnError::Io(e)) if e.kind() == std::io::ErrorKind::TimedOut => {
            // Only the reader's deadline times a read out.
            shared.notices.say(&shared.log, "request_timeout", || {
                format!(
                    "client {peer}: sent part of a request and nothing more for {} s; connection closed (said \
                     once a minute while it lasts)",
                    shared.limits.request_timeout_s
                )
            });
        }
        Err(e) => report(shared, peer, "transmission", e),
    }
}

fn report(shared: &Shared, peer: &Peer, phase: &str, e: ConnError) {
    match e {
        ConnError::Protocol(p) => {
            shared.protocol_errors.fetch_add(1, Ordering::Relaxed);
            shared.peer_log.say(&shared.log, Origin::of(peer.ip()), || {
                format!("client {peer}: {p} during {phase}; connection closed")
            });
        }
        ConnError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionReset => {}
        ConnError::Io(io) => shared.peer_log.say(&shared.log, Origin::of(peer.ip()), || {
            format!("client {peer}: I/O error during {phase}: {io}; connection closed")
        }),
        ConnError::Refused(why) => shared
            .notices
            .say(&shared.log, "refused", || format!("client {peer}: {why}; connection closed (said once a minute)")),
        ConnError::Idle | ConnError::Said => {}
    }
}

fn find_export(shared: &Shared, name: &str) -> Option<Arc<Export>> {
    shared.exports.find(name)
}

async fn send<W: AsyncWrite + Unpin>(w: &mut W, bytes: &[u8]) -> std::result::Result<(), ConnError> {
    w.write_all(bytes).await?;
    Ok(())
}

/// Why a client may not use an export.
enum Refusal {
    /// An address not allowed, a limit: logged by the caller (once a minute).
    Policy(String),
    /// Seed 003's admission control refused the export's tenant: already logged once
    /// by [`Admission::admit`].
    Admission(String),
}

impl Refusal {
    fn message(&self) -> &str {
        match self {
            Refusal::Policy(m) | Refusal::Admission(m) => m,
        }
    }
}

/// May the client at `peer` use `e` now: its allow-list, the per-export connection
/// limit (the slot is taken when it may), then the admission of its tenant (seed 003,
/// with an `fclb` policy). `Err` says why not.
fn admit(e: &Arc<Export>, peer: &Peer, shared: &Shared) -> std::result::Result<ExportGuard, Refusal> {
    if !e.allows(peer.ip()) {
        return Err(Refusal::Policy(not_allowed(e, peer)));
    }
    let max = shared.limits.max_connections_per_export.unwrap_or(usize::MAX);
    let took = e.connections.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < max).then_some(n + 1));
    let mut guard = match took {
        Ok(_) => ExportGuard(e.clone(), None),
        Err(_) => {
            return Err(Refusal::Policy(format!("export {} has its limit of {max} connections", shown_name(&e.name))))
        }
    };
    if let Some(a) = &shared.admission {
        // On refusal the guard drops here and gives the export slot back.
        guard.1 = a.admit(e.tenant, &shared.log).map_err(Refusal::Admission)?;
    }
    Ok(guard)
}

fn not_allowed(e: &Export, peer: &Peer) -> String {
    let who = peer.ip().map_or_else(|| peer.to_string(), |ip| ip.to_string());
    format!("address {who} is not allowed to use export {}", shown_name(&e.name))
}

/// What a client negotiated beyond its export.
#[derive(Clone, Copy, Debug, Default)]
struct Session {
    /// Structured replies (`NBD_OPT_STRUCTURED_REPLY`): reads answered in chunks.
    structured: bool,
    /// `base:allocation` selected for the export: `NBD_CMD_BLOCK_STATUS` answered.
    block_status: bool,
}

/// The negotiated connection: its stream (TLS or not), export, export slot, session.
type Negotiated = (Stream, Arc<Export>, ExportGuard, Session);

/// Fixed newstyle negotiation. `Ok(Some(..))` enters transmission; `Ok(None)` means
/// the client aborted or left.
async fn negotiate(
    mut stream: Stream,
    peer: &Peer,
    shared: &Shared,
) -> std::result::Result<Option<Negotiated>, ConnError> {
    send(&mut stream, &encode_greeting()).await?;
    let mut cf = [0u8; 4];
    if !read_msg(&mut stream, &mut cf, "client flags", true).await? {
        return Ok(None);
    }
    let no_zeroes = decode_client_flags(&cf)? & FLAG_C_NO_ZEROES != 0;
    let mut structured = false;
    // The export `base:allocation` was selected for, if any.
    let mut meta_for: Option<String> = None;
    let session = |e: &Export, structured: bool, meta_for: &Option<String>| Session {
        structured,
        block_status: structured && meta_for.as_deref() == Some(e.name.as_str()),
    };
    loop {
        let mut hb = [0u8; OPTION_HEADER_LEN];
        if !read_msg(&mut stream, &mut hb, "option request", true).await? {
            return Ok(None);
        }
        let h = OptionHeader::decode(&hb)?;
        let mut data = vec![0u8; h.len as usize];
        read_msg(&mut stream, &mut data, "option data", false).await?;
        let tls_wanted = shared.tls_mode == TlsMode::Require && !stream.is_tls();
        match h.option {
            OPT_STARTTLS => {
                let Some(acceptor) = shared.tls.clone() else {
                    let msg = b"TLS is not configured on this gateway";
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_UNSUP, msg)).await?;
                    continue;
                };
                if stream.is_tls() || !data.is_empty() {
                    let msg: &[u8] =
                        if stream.is_tls() { b"TLS is already on" } else { b"NBD_OPT_STARTTLS takes no data" };
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg)).await?;
                    continue;
                }
                send(&mut stream, &encode_option_reply(h.option, REP_ACK, &[])).await?;
                stream = match stream {
                    Stream::Plain(plain) => Stream::Tls(Box::new(
                        acceptor
                            .accept(plain)
                            .await
                            .map_err(|e| ConnError::Refused(format!("TLS handshake failed: {e}")))?,
                    )),
                    tls => tls,
                };
                // Whatever was negotiated in the clear may have been injected by someone
                // on the path (the class of nbdkit's CVE-2021-3716): the client that now
                // speaks TLS negotiates again what it wants.
                structured = false;
                meta_for = None;
            }
            OPT_ABORT => {}
            OPT_EXPORT_NAME if tls_wanted => {
                // No error reply exists for NBD_OPT_EXPORT_NAME: the spec has the server close.
                return Err(ConnError::Refused("NBD_OPT_EXPORT_NAME without TLS, which this gateway requires".into()));
            }
            _ if tls_wanted => {
                let msg = b"this gateway requires TLS: start it with NBD_OPT_STARTTLS first";
                send(&mut stream, &encode_option_reply(h.option, REP_ERR_TLS_REQD, msg)).await?;
                continue;
            }
            _ => {}
        }
        match h.option {
            OPT_STARTTLS => {}
            OPT_EXPORT_NAME => {
                let name = String::from_utf8_lossy(&data).into_owned();
                let Some(e) = find_export(shared, &name) else {
                    return Err(ProtocolError::UnknownExport(name).into());
                };
                // The spec gives NBD_OPT_EXPORT_NAME no error reply: a refusal closes.
                let slot = admit(&e, peer, shared).map_err(|r| match r {
                    Refusal::Policy(why) => ConnError::Refused(why),
                    Refusal::Admission(_) => ConnError::Said,
                })?;
                send(&mut stream, &encode_export_name_reply(e.size, e.transmission_flags(), no_zeroes)).await?;
                let s = session(&e, structured, &meta_for);
                return Ok(Some((stream, e, slot, s)));
            }
            OPT_ABORT => {
                // The spec asks for an ACK; the client may already be gone.
                let _ = stream.write_all(&encode_option_reply(OPT_ABORT, REP_ACK, &[])).await;
                return Ok(None);
            }
            OPT_LIST => {
                if !data.is_empty() {
                    let msg = b"NBD_OPT_LIST takes no data";
                    send(&mut stream, &encode_option_reply(OPT_LIST, REP_ERR_INVALID, msg)).await?;
                    continue;
                }
                let mut out = Vec::new();
                for e in shared.exports.all().iter().filter(|e| e.allows(peer.ip())) {
                    out.extend(encode_option_reply(OPT_LIST, REP_SERVER, &encode_server_entry(&e.name)));
                }
                out.extend(encode_option_reply(OPT_LIST, REP_ACK, &[]));
                send(&mut stream, &out).await?;
            }
            OPT_INFO | OPT_GO => {
                let go = match GoRequest::decode(&data) {
                    Ok(g) => g,
                    Err(msg) => {
                        send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg.as_bytes())).await?;
                        continue;
                    }
                };
                // An export the client's address may not use is answered as one that
                // does not exist (it is not listed to it either): the answer tells
                // nothing of what is served to others.
                let found = find_export(shared, &go.name);
                let Some(e) = found.clone().filter(|e| e.allows(peer.ip())) else {
                    if let Some(hidden) = &found {
                        let why = not_allowed(hidden, peer);
                        shared.notices.say(&shared.log, "refused", || {
                            format!("client {peer}: {why}; answered as an unknown export (said once a minute)")
                        });
                    }
                    let msg = format!("no export named {}", shown_name(&go.name));
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_UNKNOWN, msg.as_bytes())).await?;
                    continue;
                };
                let slot = if h.option == OPT_GO { Some(admit(&e, peer, shared)) } else { None };
                if let Some(Err(why)) = &slot {
                    if let Refusal::Policy(why) = why {
                        shared
                            .notices
                            .say(&shared.log, "refused", || format!("client {peer}: {why} (said once a minute)"));
                    }
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_POLICY, why.message().as_bytes())).await?;
                    continue;
                }
                let flags = e.transmission_flags();
                let mut out = encode_option_reply(h.option, REP_INFO, &encode_info_export(e.size, flags));
                if go.info.contains(&INFO_BLOCK_SIZE) {
                    out.extend(encode_option_reply(h.option, REP_INFO, &encode_info_block_size()));
                }
                out.extend(encode_option_reply(h.option, REP_ACK, &[]));
                send(&mut stream, &out).await?;
                if let Some(Ok(slot)) = slot {
                    let s = session(&e, structured, &meta_for);
                    return Ok(Some((stream, e, slot, s)));
                }
            }
            OPT_STRUCTURED_REPLY => {
                if !data.is_empty() {
                    let msg = b"NBD_OPT_STRUCTURED_REPLY takes no data";
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg)).await?;
                    continue;
                }
                structured = true;
                send(&mut stream, &encode_option_reply(h.option, REP_ACK, &[])).await?;
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                let setting = h.option == OPT_SET_META_CONTEXT;
                if !structured {
                    let msg = b"negotiate structured replies (NBD_OPT_STRUCTURED_REPLY) first";
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg)).await?;
                    continue;
                }
                let q = match MetaContextRequest::decode(&data) {
                    Ok(q) => q,
                    Err(msg) => {
                        send(&mut stream, &encode_option_reply(h.option, REP_ERR_INVALID, msg.as_bytes())).await?;
                        continue;
                    }
                };
                let Some(e) = find_export(shared, &q.name).filter(|e| e.allows(peer.ip())) else {
                    let msg = format!("no export named {}", shown_name(&q.name));
                    send(&mut stream, &encode_option_reply(h.option, REP_ERR_UNKNOWN, msg.as_bytes())).await?;
                    continue;
                };
                let selected = q.selects_base_allocation(!setting);
                let mut out = Vec::new();
                if selected {
                    // Listed contexts carry id 0 (the spec reserves it there).
                    let id = if setting { BASE_ALLOCATION_ID } else { 0 };
                    out.extend(encode_option_reply(
                        h.option,
                        REP_META_CONTEXT,
                        &encode_meta_context(id, BASE_ALLOCATION),
                    ));
                }
                out.extend(encode_option_reply(h.option, REP_ACK, &[]));
                send(&mut stream, &out).await?;
                if setting {
                    meta_for = selected.then(|| e.name.clone());
                }
            }
            other => {
                let msg = format!("option {other} is not supported");
                send(&mut stream, &encode_option_reply(other, REP_ERR_UNSUP, msg.as_bytes())).await?;
            }
        }
    }
}

fn err_reply(cookie: u64, error: u32, permit: Inflight) -> Reply {
    Reply::bare(cookie, error, permit, Form::Simple)
}

/// Take `bytes` of the connection's share, then of its tenant's (said once a minute
/// when the tenant's is spent and the request has to wait for replies to be taken).
async fn take_budget(budget: &ConnectionBudget, bytes: u32, shared: &Shared, tenant: u32) -> Option<Inflight> {
    budget
        .take(bytes, || {
            shared.notices.say(&shared.log, "tenant_inflight", || {
                format!(
                    "tenant {tenant}'s in-flight share of {} MiB is spent: its new requests wait until its clients \
                     take their replies (said once a minute while it lasts)",
                    budget.tenant_share() >> 20
                )
            })
        })
        .await
}

/// The transmission phase's reader: parse, check, submit. Returns `Ok(())` on
/// `NBD_CMD_DISC` or when the client closes between requests.
async fn transmission(
    rd: ReadHalf,
    replies: UnboundedSender<Reply>,
    export: Arc<Export>,
    shared: &Shared,
    session: Session,
    budget: &ConnectionBudget,
) -> std::result::Result<(), ConnError> {
    // Buffered: several small requests arrive in one read, and waiting for the next
    // request's first byte (the idle timeout) takes nothing from the stream. Once that
    // byte has come, the rest of the request must keep coming (`request_timeout`).
    let request_timeout = Duration::from_secs_f64(shared.limits.request_timeout_s);
    let mut rd = BufReader::with_capacity(PAYLOAD_PIECE as usize, Deadline::new(rd, request_timeout, false));
    let tenant = export.tenant;
    let idle = shared.limits.idle_timeout_s.map(Duration::from_secs_f64);
    let count_error = || {
        if let Ok(mut s) = shared.stats.lock() {
            s.error(tenant);
        }
    };
    loop {
        // Wait for the next request's first byte, without a deadline; a connection with
        // nothing in flight that sends nothing for the idle timeout is closed. (fill_buf
        // keeps what it reads, so giving up on it loses no byte.)
        rd.get_mut().disarm();
        let more = match idle {
            Some(idle) => loop {
                match tokio::time::timeout(idle, rd.fill_buf()).await {
                    Ok(r) => break !r?.is_empty(),
                    Err(_) if budget.is_idle() => return Err(ConnError::Idle),
                    Err(_) => {}
                }
            },
            None => !rd.fill_buf().await?.is_empty(),
        };
        if !more {
            // The client closed between requests.
            return Ok(());
        }
        rd.get_mut().arm();
        let mut hb = [0u8; REQUEST_LEN];
        read_msg(&mut rd, &mut hb, "request", false).await?;
        let h = RequestHeader::decode(&hb)?;
        let parsed = shared.clock.now();
        // Charge the request before taking it (a read its length: its reply's data; the
        // length of a READ / WRITE is at most 32 MiB here), and a write's payload piece by
        // piece as it arrives; all of it is given back once the reply is written.
        let data = if h.command == Command::Read { h.length } else { 0 };
        let Some(mut permit) = take_budget(budget, charge(data), shared, tenant).await else { return Ok(()) };
        let mut payload = Vec::new();
        if h.command == Command::Write {
            let len = h.length as usize;
            while payload.len() < len {
                let piece = (len - payload.len()).min(PAYLOAD_PIECE as usize);
                let Some(more) = take_budget(budget, piece as u32, shared, tenant).await else { return Ok(()) };
                permit.merge(more);
                let at = payload.len();
                payload.resize(at + piece, 0);
                read_msg(&mut rd, &mut payload[at..], "write payload", false).await?;
            }
        }
        if h.command == Command::Disc {
            return Ok(());
        }
        let writes = matches!(h.command, Command::Write | Command::Trim | Command::WriteZeroes);
        // Checks that answer with an error and keep the connection.
        let error = match h.command {
            Command::Other(_) => Some(EINVAL),
            Command::WriteZeroes if h.flags & !(CMD_FLAG_FUA | CMD_FLAG_NO_HOLE) != 0 => Some(EINVAL),
            Command::Read | Command::Write | Command::Flush | Command::Trim if h.flags & !CMD_FLAG_FUA != 0 => {
                Some(EINVAL)
            }
            Command::BlockStatus if !session.block_status || h.flags & !CMD_FLAG_REQ_ONE != 0 => Some(EINVAL),
            Command::Read | Command::Write | Command::Trim | Command::WriteZeroes | Command::BlockStatus
                if h.length == 0 =>
            {
                Some(EINVAL)
            }
            _ if writes && export.read_only => Some(EPERM),
            Command::Read | Command::Trim | Command::BlockStatus if !export.contains(h.offset, h.length) => {
                Some(EINVAL)
            }
            Command::Write | Command::WriteZeroes if !export.contains(h.offset, h.length) => Some(ENOSPC),
            _ => None,
        };
        // Once structured replies are negotiated, a read is never answered simply (its
        // errors included).
        let form = match h.command {
            Command::Read if session.structured => Form::Read { offset: h.offset },
            _ => Form::Simple,
        };
        if let Some(e) = error {
            count_error();
            let _ = replies.send(Reply::bare(h.cookie, e, permit, form));
            continue;
        }
        match h.command {
            Command::Flush => {
                let (ex, tx, stats) = (export.clone(), replies.clone(), shared.stats.clone());
                let slots = shared.flushes.clone();
                tokio::spawn(async move {
                    // At most MAX_CONCURRENT_FLUSHES blocking threads flush at once.
                    let r = match slots.acquire_owned().await {
                        Ok(_slot) => tokio::task::spawn_blocking(move || ex.flush()).await.unwrap_or(Err(EIO)),
                        Err(_) => Err(ESHUTDOWN),
                    };
                    if let Ok(mut s) = stats.lock() {
                        match r {
                            Ok(()) => s.flushed(tenant),
                            Err(_) => s.error(tenant),
                        }
                    }
                    let _ = tx.send(err_reply(h.cookie, r.err().unwrap_or(0), permit));
                });
            }
            Command::BlockStatus => {
                // Metadata from the file system (lseek), not I/O: the policy does not see it.
                let extents = export.block_status(h.offset, h.length, h.flags & CMD_FLAG_REQ_ONE != 0);
                let chunk = encode_block_status_chunk(h.cookie, BASE_ALLOCATION_ID, &extents);
                // The reply's size is known now: charge it too.
                let size = u32::try_from(chunk.len()).unwrap_or(u32::MAX).min(MAX_IO_BYTES);
                let Some(more) = take_budget(budget, size, shared, tenant).await else { return Ok(()) };
                permit.merge(more);
                let _ = replies.send(Reply { data: chunk, ..Reply::bare(h.cookie, 0, permit, Form::Raw) });
            }
            Command::Read | Command::Write | Command::Trim | Command::WriteZeroes => {
                let fua = h.flags & CMD_FLAG_FUA != 0;
                let io = match h.command {
                    Command::Read => Io::Read(h.length),
                    Command::Write => Io::Write { data: payload, fua },
                    Command::Trim => Io::Trim { len: h.length, fua },
                    _ => Io::Zeroes { len: h.length, no_hole: h.flags & CMD_FLAG_NO_HOLE != 0, fua },
                };
                let job = Job {
                    export: export.clone(),
                    offset: h.offset,
                    io,
                    cookie: h.cookie,
                    reply: replies.clone(),
                    permit,
                    parsed,
                    form,
                };
                if let Err(e) = shared.sched_tx.send(Msg::Submit(job)) {
                    if let Msg::Submit(job) = e.0 {
                        job.refuse(ESHUTDOWN);
                    }
                }
            }
            Command::Disc | Command::Other(_) => {}
        }
    }
}

/// The transmission phase's writer: send replies as they complete, batching the
/// ones already waiting into one flush; each reply's in-flight share is given back
/// once it is written. A client that takes no byte of its replies for the writer's
/// deadline (`reply_timeout`) ends the connection (`TimedOut`).
async fn write_replies(
    wr: Deadline<WriteHalf>,
    mut rx: UnboundedReceiver<Reply>,
    stats: Arc<Mutex<Recorder>>,
    clock: Clock,
) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(64 << 10, wr);
    let mut written: Vec<Completion> = Vec::new();
    while let Some(r) = rx.recv().await {
        put(&mut w, r, &mut written).await?;
        while let Ok(r) = rx.try_recv() {
            put(&mut w, r, &mut written).await?;
        }
        w.flush().await?;
        // The replies are written: their response times end now.
        if !written.is_empty() {
            let now = clock.now();
            if let Ok(mut s) = stats.lock() {
                for mut c in written.drain(..) {
                    c.finish = now.max(c.finish);
                    s.completed(&c);
                }
            }
        }
    }
    w.shutdown().await
}

/// A reply's header and its data: in one vectored write with the first piece (else a
/// reply larger than the buffer goes out as a 16-byte write, then the data), the rest in
/// pieces of [`WRITE_PIECE`]: one write larger than a loopback segment (64 KiB) leaves a
/// small tail that a pacing congestion control (BBR, Debian's default here) sends a
/// pacing interval later, for every reply. Measured with fio, 64 KiB sequential reads at
/// queue depth 8: 21.5k IOPS in one write, 39-41k in pieces. A payload of more than one
/// piece skips the buffer (what it holds goes first): copying it there would cost more
/// than the write it saves.
async fn write_payload(w: &mut Out, header: &[u8], data: &[u8]) -> std::io::Result<()> {
    let first = data.len().min(WRITE_PIECE);
    if data.len() > WRITE_PIECE {
        w.flush().await?;
        write_all_vectored(w.get_mut(), header, &data[..first]).await?;
        for piece in data[first..].chunks(WRITE_PIECE) {
            // Let the other connections' replies (and the scheduler) run between pieces:
            // one large reply would otherwise hold the runtime's one thread for its whole
            // length (a victim's 4 KiB reads at QD 1 beside 1 MiB reads at QD 8: p99
            // 268 µs without, 140 µs with, 116 µs alone).
            tokio::task::yield_now().await;
            w.get_mut().write_all(piece).await?;
        }
        Ok(())
    } else {
        write_all_vectored(w, header, data).await
    }
}

/// An NBD error value's name, for error chunks.
fn error_name(e: u32) -> &'static str {
    match e {
        EPERM => "EPERM (operation not permitted)",
        EIO => "EIO (input/output error)",
        ENOMEM => "ENOMEM (the tenant is at its limit: retry)",
        EINVAL => "EINVAL (invalid argument)",
        ENOSPC => "ENOSPC (no space left)",
        ESHUTDOWN => "ESHUTDOWN (the gateway is stopping)",
        _ => "error",
    }
}

/// Write `a` then `b`, in vectored writes where the writer takes them.
async fn write_all_vectored<W: AsyncWrite + Unpin>(w: &mut W, a: &[u8], b: &[u8]) -> std::io::Result<()> {
    let mut bufs = [std::io::IoSlice::new(a), std::io::IoSlice::new(b)];
    let mut left: &mut [std::io::IoSlice<'_>] = &mut bufs;
    while !left.is_empty() {
        let n = w.write_vectored(left).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        std::io::IoSlice::advance_slices(&mut left, n);
    }
    Ok(())
}

/// Largest write of a reply's data: bigger replies go out in pieces of this size.
pub const WRITE_PIECE: usize = 32 << 10;

/// A connection's buffered writer, under its reply deadline.
type Out = BufWriter<Deadline<WriteHalf>>;

async fn put(w: &mut Out, r: Reply, written: &mut Vec<Completion>) -> std::io::Result<()> {
    match r.form {
        Form::Simple => {
            let header = SimpleReply { error: r.error, cookie: r.cookie }.encode();
            if r.error == 0 && !r.data.is_empty() {
                write_payload(w, &header, &r.data).await?;
            } else {
                w.write_all(&header).await?;
            }
        }
        Form::Raw => w.write_all(&r.data).await?,
        Form::Read { .. } if r.error != 0 => {
            let msg = format!("read failed: {}", error_name(r.error));
            w.write_all(&encode_error_chunk(r.cookie, r.error, &msg)).await?;
        }
        Form::Read { offset } => {
            // Data and hole chunks (an all-zero 4 KiB block is a hole: no data sent).
            let runs = data_runs(&r.data, PREFERRED_BLOCK as usize);
            for (i, &(at, len, hole)) in runs.iter().enumerate() {
                let flags = if i + 1 == runs.len() { REPLY_FLAG_DONE } else { 0 };
                let start = (offset + at as u64).to_be_bytes();
                if hole {
                    let mut chunk = encode_chunk_header(flags, REPLY_TYPE_OFFSET_HOLE, r.cookie, 12).to_vec();
                    chunk.extend(start);
                    chunk.extend((len as u32).to_be_bytes());
                    w.write_all(&chunk).await?;
                } else {
                    let mut head =
                        encode_chunk_header(flags, REPLY_TYPE_OFFSET_DATA, r.cookie, 8 + len as u32).to_vec();
                    head.extend(start);
                    write_payload(w, &head, &r.data[at..at + len]).await?;
                }
            }
        }
    }
    written.extend(r.done);
    // `r` (its data and its in-flight share) is dropped here, once written.
    Ok(())
}
