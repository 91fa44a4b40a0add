//! The messages of the engine ([`crate::engine`]): the [`Job`] a connection submits, the
//! [`Reply`] its writer gets back, and every [`Msg`] the engine's channel carries (from
//! the connections, the I/O threads, the waker, the metrics and control sockets).

use std::sync::Arc;

use storqos_core::request::{Completion, Op};
use storqos_core::schedulers::dmclock::DistParams;
use storqos_core::spec::AnyScheduler;
use storqos_core::time::Nanos;
use tokio::sync::mpsc::UnboundedSender;

pub use crate::budget::Inflight;
use crate::export::Export;
pub use crate::io::Io;

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
    /// Served in mClock's reservation phase (said to clients of the dmClock extension,
    /// [`crate::dmclock_wire`]).
    pub reservation: bool,
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
        Reply { cookie, error, data: Vec::new(), permit, done: None, form, reservation: false }
    }
}

/// A read or write a connection submits to the engine.
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
    /// The service its tenant received at other gateways, sent by a client of the
    /// dmClock extension ([`crate::dmclock_wire`]); `None` from a plain client.
    pub dist: Option<DistParams>,
}

impl Job {
    /// Answer the job with NBD error `error` (its in-flight share goes with the reply).
    pub fn refuse(self, error: u32) {
        let _ = self.reply.send(Reply::bare(self.cookie, error, self.permit, self.form));
    }

    /// Bytes the policy sees: a read's or write's length, a write-zeroes' length, 0 for
    /// a trim.
    pub fn bytes(&self) -> u32 {
        match &self.io {
            Io::Read(n) => *n,
            Io::Write { data, .. } => data.len() as u32,
            Io::Trim { .. } => 0,
            Io::Zeroes { len, .. } => *len,
        }
    }
    /// The operation the policy sees (trim and write-zeroes are writes).
    pub fn op(&self) -> Op {
        match self.io {
            Io::Read(_) => Op::Read,
            Io::Write { .. } | Io::Trim { .. } | Io::Zeroes { .. } => Op::Write,
        }
    }
}

/// Messages to the engine.
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
    /// A deadline given to the [`crate::waker::Waker`] has come (nothing else to do).
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
    /// The gateway's background job reports its state (for `stats` and the metrics).
    Background(BackgroundState),
    /// Set tenants' reservations, weights and limits in the running mClock in place (a
    /// cluster's allocator handing this gateway its shares of the global promises; no
    /// pause): a backlogged tenant's head keeps its place, rescaled to its new spacing
    /// (`Mclock::set_reservation_limit`, `Mclock::set_weight`). `done` gets the demand seen so far, or why not.
    Shares {
        /// The shares to set.
        shares: Vec<Share>,
        /// The cluster member's state as its agent last saw it (for the metrics).
        cluster: Option<ClusterState>,
        /// Told once they are in place.
        done: tokio::sync::oneshot::Sender<Result<Demand, String>>,
    },
}

/// One tenant's share of its cluster-wide promises at this gateway.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Share {
    /// The tenant.
    pub tenant: u32,
    /// Its reservation here (IOPS, 0: none).
    pub reservation: f64,
    /// Its weight here (`None`: unchanged).
    pub weight: Option<f64>,
    /// Its limit here (IOPS, `None`: none).
    pub limit: Option<f64>,
}

/// A cluster member's view of its control plane, as its agent reports it with each
/// `shares` command (the gateway exports it as `storqos_cluster_*` metrics).
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterState {
    /// Whether the last exchange with etcd succeeded (else the last shares stand).
    pub etcd_up: bool,
    /// Live gateways in the cluster, this one included.
    pub members: u32,
    /// Exchanges with etcd that failed since the start.
    pub etcd_failures: u64,
    /// Conflicts seen while running (an export claimed by another gateway, a tenant's
    /// spec the running policy refused).
    pub conflicts: u64,
}

/// The state of a gateway's background job (`[background]`: a scrub in the periods its
/// day model predicts Low), as the job reports it.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct BackgroundState {
    /// Whether the job runs now.
    pub running: bool,
    /// Whether the fast tier is being warmed now (before a predicted High).
    pub warming: bool,
    /// The users' state as detected now: 1 High, 0 Low.
    pub high: bool,
    /// Minutes (of the model's clock) until the predicted next change; negative: none.
    pub next_change_min: f64,
    /// Whether a day model is in use (learned or loaded).
    pub model: bool,
    /// The job's requests done so far.
    pub done: u64,
    /// Warm-up requests done so far.
    pub warmed: u64,
    /// Where the day model came from: the model file's path, `learned` (from the
    /// gateway's own counts) or empty (none yet: feedback alone).
    #[serde(default)]
    pub model_source: String,
    /// Days the model was learned from (0 for a loaded model).
    #[serde(default)]
    pub model_days: u32,
    /// The model's day classes.
    #[serde(default)]
    pub model_classes: u32,
    /// The High/Low threshold in the users' requests per interval; negative: none yet.
    #[serde(default = "none_yet")]
    pub threshold: f64,
    /// The job's interval (the model's minute), in seconds.
    #[serde(default)]
    pub interval_s: f64,
    /// Intervals counted so far (the job's calendar: interval 0 is its first start).
    #[serde(default)]
    pub intervals: u64,
    /// How far the current pass over the job's export has gone, 0 to 1.
    #[serde(default)]
    pub progress: f64,
    /// Passes over the job's export completed.
    #[serde(default)]
    pub passes: u64,
    /// The lead before a predicted High at which the job stops and warms (intervals).
    #[serde(default)]
    pub lead: f64,
}

fn none_yet() -> f64 {
    -1.0
}

/// What each tenant has asked of a gateway: requests that arrived since it started
/// (admitted or refused at a limit) and those in it now (held by the policy or on the
/// backend), per tenant id, in id order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Demand {
    /// `(tenant, requests arrived so far)`.
    pub arrived: Vec<(u32, u64)>,
    /// `(tenant, requests in the gateway now)`.
    pub inflight: Vec<(u32, usize)>,
    /// Tenants whose clients have sent dmClock reports here ([`crate::dmclock_wire`]):
    /// a cluster gives them their whole promise at every gateway, not a share.
    pub reported: Vec<u32>,
}

/// The engine's state at one instant.
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
    /// The cluster member's state, in a cluster.
    pub cluster: Option<ClusterState>,
    /// The background job's state, with a `[background]` job.
    pub background: Option<BackgroundState>,
}
