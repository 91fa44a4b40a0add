//! Starting a gateway: check the configuration, open the exports, build the policy,
//! bind the listeners, start the engine and the accept loop on a runtime of its own
//! ([`start`], [`start_with`], [`run`], [`check`]), and what it reports once it listens
//! ([`ReadyInfo`]).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use storqos_core::scheduler::Scheduler;
use tokio::net::TcpListener;
use tokio::sync::mpsc::unbounded_channel;
use tokio::sync::{watch, Semaphore};

use super::accept::serve;
use super::handle::{empty_stats, Finished, Handle};
use super::options::Options;
use super::ready::{ready_info, ReadyInfo};
use super::shared::{Shared, MAX_CONCURRENT_FLUSHES};
use super::signals::Signals;
use crate::admission::Admission;
use crate::budget::Budgets;
use crate::clock::SystemClock;
use crate::config::{Config, TlsMode};
use crate::engine::{BackendConfig, Engine};
use crate::error::{Error, Result};
use crate::export::{Export, Exports};
use crate::local_backend::LocalBackend;
use crate::message::Msg;
use crate::notices::{Notices, PeerLog};
use crate::peer_limits::{PeerLimits, PeerLimitsConfig};
use crate::stats::{Recorder, Stats};
use crate::transport::Listener;
use crate::waker::Waker;

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
pub(crate) fn check_sockets(config: &Config) -> Result<Vec<String>> {
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
pub(crate) fn listen_error(config: &Config, e: &std::io::Error) -> Error {
    Error::Config(format!("listen: cannot listen on {}: {}", config.listen, bind_reason(e)))
}

/// The start's refusal of its control socket.
pub(crate) fn control_error(path: &std::path::Path, e: &std::io::Error) -> Error {
    Error::Config(format!("control: cannot create the socket {}: {e}", path.display()))
}

/// The exports, the policy and the admission control a configuration prepares.
pub(crate) type Prepared = (Vec<Arc<Export>>, storqos_core::spec::AnyScheduler, Option<Arc<Admission>>);

/// Validate `config`, open its exports and build its policy (with seed 003's admission
/// control, an `fclb` policy reading its references from the admission's board).
pub(crate) fn prepare(config: &Config) -> Result<Prepared> {
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

/// [`start`] with explicit [`Options`].
pub fn start_with(config: Config, options: Options) -> Result<Handle> {
    let (exports, sched, admission) = prepare(&config)?;
    let policy = sched.name();
    let at = config.listen_at()?;
    let tls = crate::tls::acceptor(&config.tls)?;
    // One runtime thread for the connections and the engine: hand-offs between
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
    let clock = SystemClock::start();
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
    let backend = BackendConfig {
        depth: config.depth,
        iops: config.iops,
        cost: config.cost.model(),
        tiers: config.tiers.clone(),
        ring_reads,
    };
    // Both register with the runtime's reactor: the signals, and the ring's eventfd.
    let (signals, engine, waker) = {
        let _in_runtime = runtime.enter();
        let signals = Signals::register(&options)?;
        let threads = |e: std::io::Error| Error::Io(format!("cannot start the I/O threads: {e}"));
        let waker = Waker::new(sched_tx.clone(), || Msg::Wake).map_err(threads)?;
        let local = LocalBackend::new(backend.depth, ring_reads, sched_tx.clone()).map_err(threads)?;
        (signals, Engine::new(sched, clock, &backend, stats.clone(), local), waker)
    };
    if let Some(why) = engine.backend().ring_refused() {
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
        background: Mutex::new(None),
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
        let sched_task = tokio::spawn(engine.run(sched_rx, waker));
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
pub(crate) struct OpenFiles {
    /// Why it cannot start: its exports' files alone do not fit.
    refused: Option<String>,
    /// What it would lack: room for `max_connections` connections.
    tight: Option<String>,
}

/// Check the exports' files (one each, two for a tiered export) and the connections
/// against the limit of open files.
pub(crate) fn open_files(config: &Config) -> OpenFiles {
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
pub(crate) fn open_files_limit() -> Option<u64> {
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
pub(crate) fn raise_open_files_limit() {
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
pub(crate) fn ignore_file_size_signal() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

pub(crate) fn bind_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => "the address is already in use".into(),
        std::io::ErrorKind::AddrNotAvailable => "no such local address".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied (ports below 1024 need privileges)".into(),
        _ => e.to_string(),
    }
}
