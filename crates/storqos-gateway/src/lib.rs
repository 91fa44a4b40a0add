//! # storqos-gateway
//!
//! The live QoS gateway: an NBD server (fixed newstyle negotiation, structured replies
//! with holes and `base:allocation` block status, TLS)
//! that puts a storqos-core scheduling policy — the very `SchedulerSpec` the simulator
//! replays traces through — in front of real files, on a wall clock. Every export
//! belongs to a tenant; all tenants share one scheduler and one backend queue of
//! `depth` slots, which is where QoS between clients of shared storage happens.
//!
//! A request's path: NBD `READ`/`WRITE` → [`server`] (parse, range check) →
//! [`sched`] (`Request {tenant, op, offset, bytes, arrival: now}` → `enqueue` →
//! `dispatch` when a slot is free) → [`export`] (positional read / write on one of
//! the `depth` I/O threads of [`pool`], or in the loop itself for a small read the page
//! cache holds) → `complete` → [`stats`] → the NBD reply.
//!
//! Modules:
//! - [`protocol`]: the NBD wire format, pure parse / encode with typed errors;
//! - [`config`]: the JSON configuration and its validation;
//! - [`admission`]: seed 003's admission control at connect time (an `fclb` policy);
//! - [`budget`]: the in-flight budgets of the tenants and connections, and what a request is charged;
//! - [`deadline`]: the deadlines on a connection's reads and writes while it transmits;
//! - [`peer_limits`]: connection limits per client address, and who makes room when full;
//! - [`export`]: exports and their backing files;
//! - [`fault`]: requests an export fails on purpose (EIO, ENOSPC, short writes);
//! - [`pool`]: the `depth` threads that run the blocking backend I/O;
//! - [`sched`]: the task that owns the policy and drives it with injected time;
//! - [`metrics`]: Prometheus metrics at `GET /metrics`;
//! - [`notices`]: log lines that could repeat without end, said once a minute or
//!   rate-limited per client address;
//! - [`control`]: the control socket (`storqos ctl`): stats, live policy changes, drain;
//! - [`server`]: accept loop, connections, and the run API;
//! - [`stats`]: per-tenant operations, bytes and latency histograms;
//! - [`transport`]: TCP or Unix sockets, plain or TLS;
//! - [`tls`]: `NBD_OPT_STARTTLS` with rustls (x509 certificates).
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
pub mod budget;
pub mod config;
pub mod control;
pub mod deadline;
pub mod direct;
pub mod emulate;
pub mod export;
pub mod fault;
pub mod metrics;
pub mod notices;
pub mod peer_limits;
pub mod pool;
pub mod protocol;
pub mod sched;
#[cfg(test)]
mod scratch;
pub mod server;
pub mod stats;
pub mod tier;
pub mod tls;
pub mod transport;
#[cfg(target_os = "linux")]
pub mod uring;
pub mod waker;

pub use config::{Config, Error, ExportConfig, Result};
pub use server::{check, run, start, start_with, ExportInfo, Handle, Logger, Options, ReadyInfo};
pub use stats::{GaugeRow, Stats, TenantStats, WindowRow};
