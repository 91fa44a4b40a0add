//! # storqos-gateway
//!
//! The live QoS gateway: an NBD server (fixed newstyle negotiation, structured replies
//! with holes and `base:allocation` block status, TLS)
//! that puts a storqos-core scheduling policy — the very `SchedulerSpec` the simulator
//! replays traces through — in front of real files, on a wall clock. Every export
//! belongs to a tenant; all tenants share one scheduler and one backend queue of
//! `depth` slots, which is where QoS between clients of shared storage happens.
//!
//! A request's path: NBD `READ`/`WRITE` → [`server`] (parse; [`request_check`]: flags,
//! range) → [`engine`] (`Request {tenant, op, offset, bytes, arrival: now}` → `enqueue` →
//! `dispatch` when a slot is free) → [`tiered_backend`] (a tiered export's route) →
//! [`emulated_backend`] (an emulated device's service) → [`local_backend`] (positional
//! read / write on one of the `depth` I/O threads of [`pool`], or in the loop itself for
//! a small read the page cache holds) → `complete` → [`stats`] → the NBD reply.
//!
//! Modules, lowest first (a module uses only the ones above it; `tests/module_graph.rs`
//! checks that no two modules import each other in a circle):
//! - [`error`]: the gateway's error; [`clock`]: the engine's clock (wall or manual);
//!   [`protocol`]: the NBD wire format, pure parse / encode with typed errors;
//! - [`cost`]: what an I/O costs the backend; [`emulate`]: emulated device capacity;
//!   [`io`]: the I/O a request asks for; [`positional`]: positional reads, errno mapping;
//! - [`transport`]: TCP or Unix sockets, plain or TLS; [`deadline`]: the deadlines on a
//!   connection's reads and writes; [`peer_limits`]: connection limits per client
//!   address; [`notices`]: the log sink and lines said once a minute or rate-limited;
//! - [`budget`]: the in-flight budgets of the tenants and connections;
//!   [`stats`]: per-tenant operations, bytes and latency histograms;
//! - [`fault`]: requests an export fails on purpose; [`direct`]: `O_DIRECT` files;
//!   [`tier`]: tiered exports' block map; [`export`]: exports and their backing files;
//! - [`tenant_values`]: the ranges of tenants' weights and rates; [`admission`]: seed
//!   003's admission control at connect time; [`tls`]: `NBD_OPT_STARTTLS` with rustls;
//!   [`config`]: the JSON configuration and its validation;
//! - [`message`]: the engine's messages (jobs, replies, probes); [`backend`]: the
//!   [`Backend`](backend::Backend) trait; [`pool`], [`uring`], [`waker`] and
//!   [`local_backend`]: the I/O threads, io_uring reads, fine wake-ups, and the backend
//!   made of them; [`emulated_backend`] and [`tiered_backend`]: the backends in front
//!   of it that hold answers until an emulated device's finish and route tiered
//!   exports' requests;
//! - [`engine`]: the task that owns the policy and drives it with injected time;
//! - [`request_check`]: the checks of a parsed request, a pure function;
//! - [`metrics`]: Prometheus metrics at `GET /metrics`; [`control`]: the control socket
//!   (`storqos ctl`): stats, live policy changes, drain;
//! - [`server`]: start and reload, negotiation, transmission.
//!
//! ```no_run
//! let cfg = storqos_gateway::Config::from_json(
//!     r#"{"listen": "127.0.0.1:0",
//!         "exports": [{"name": "a", "path": "/tmp/a.img", "tenant": 0},
//!                     {"name": "b", "path": "/tmp/b.img", "tenant": 1}],
//!         "policy": {"kind": "wf2q", "weights": [2, 1]}, "depth": 4, "iops": 2000}"#,
//! )?;
//! let gw = storqos_gateway::start(cfg)?;
//! println!("serving on nbd://{}/a", gw.info().listen);
//! let stats = gw.shutdown();
//! println!("tenant 0 did {} ops", stats.tenants[0].ops);
//! # Ok::<(), storqos_gateway::Error>(())
//! ```
#![deny(missing_docs)]

pub mod admission;
pub mod backend;
pub mod budget;
pub mod clock;
pub mod config;
pub mod control;
pub mod cost;
pub mod deadline;
pub mod direct;
pub mod dmclock_wire;
pub mod emulate;
pub mod emulated_backend;
pub mod engine;
pub mod error;
pub mod export;
pub mod fault;
pub mod io;
pub mod local_backend;
pub mod local_replay;
pub mod message;
pub mod metrics;
pub mod nbd_client;
pub mod notices;
pub mod peer_limits;
pub mod pool;
pub mod positional;
pub mod protocol;
pub mod request_check;
#[cfg(test)]
mod scratch;
pub mod server;
pub mod spread_replay;
pub mod stats;
pub mod tenant_values;
pub mod tier;
pub mod tiered_backend;
pub mod tls;
pub mod transport;
#[cfg(target_os = "linux")]
pub mod uring;
pub mod waker;

pub use config::{Config, ExportConfig};
pub use error::{Error, Result};
pub use server::{check, run, start, start_with, ExportInfo, Handle, Logger, Options, ReadyInfo};
pub use stats::{GaugeRow, Stats, TenantStats, WindowRow};
