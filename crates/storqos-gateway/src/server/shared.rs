//! What every connection of a gateway shares (`Shared`): the exports, the engine's
//! channel, the statistics, the limits and budgets, the log; and the guards that count
//! a connection while it is open.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::Semaphore;

use crate::admission::{Admission, TenantGuard};
use crate::budget::Budgets;
use crate::clock::SystemClock;
use crate::config::{Limits, TlsMode};
use crate::export::{Export, Exports};
use crate::message::Msg;
use crate::notices::{Logger, Notices, PeerLog};
use crate::peer_limits::PeerLimits;
use crate::stats::Recorder;

pub(crate) struct Shared {
    pub(crate) exports: Arc<Exports>,
    pub(crate) sched_tx: UnboundedSender<Msg>,
    pub(crate) stats: Arc<Mutex<Recorder>>,
    pub(crate) log: Logger,
    /// Connections accepted since the start.
    pub(crate) connections: Arc<AtomicU64>,
    /// Connections open now (handshakes included).
    pub(crate) open: Arc<AtomicUsize>,
    pub(crate) protocol_errors: AtomicU64,
    pub(crate) limits: Limits,
    /// The in-flight budget, divided among the tenants ([`crate::budget`]).
    pub(crate) budgets: Budgets,
    /// The connections open by client address ([`crate::peer_limits`]).
    pub(crate) peers: Arc<PeerLimits>,
    /// Flushes running at once (each holds a blocking thread).
    pub(crate) flushes: Arc<Semaphore>,
    pub(crate) notices: Notices,
    /// Lines about what one client did, rate-limited per client address.
    pub(crate) peer_log: PeerLog,
    /// Set by the control socket's `drain`: no new connection; stop once none is open.
    pub(crate) draining: Arc<AtomicBool>,
    /// Set by SIGHUP, taken by [`Handle::take_hangup`].
    pub(crate) hangup: Arc<AtomicBool>,
    /// The gateway's clock (response times end when the reply is written).
    pub(crate) clock: SystemClock,
    /// TLS, when it is on.
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    pub(crate) tls_mode: TlsMode,
    /// Seed 003's admission control at connect time (an `fclb` policy), if configured.
    pub(crate) admission: Option<Arc<Admission>>,
}

/// Most flushes running at once: each `fdatasync` holds a blocking thread, so 4,000
/// flushes in flight must not start 4,000 threads.
pub const MAX_CONCURRENT_FLUSHES: usize = 4;

/// Counts a connection as open until dropped.
pub(crate) struct OpenGuard(pub(crate) Arc<Shared>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts a connection to an export until dropped (and holds its tenant's admission).
pub(crate) struct ExportGuard(pub(crate) Arc<Export>, pub(crate) Option<TenantGuard>);

impl Drop for ExportGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}
