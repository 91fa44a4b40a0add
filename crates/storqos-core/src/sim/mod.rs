//! The discrete-event simulator: workloads in, completions through summaries out.
//!
//! - [`workload`]: open-loop sources (trace replay, generators) and closed-loop clients.
//! - [`generate`]: synthetic arrival processes (Poisson, on/off MMPP, diurnal).
//! - [`latency_hist`]: response-time histograms in HDR buckets, sparse while small.
//! - [`quantile`]: exact nearest-rank quantiles of a batch (window and monitor percentiles).
//! - [`summary`]: streaming per-tenant / per-class latency summaries and per-window series.
//! - [`engine`]: the event loop, [`simulate`] (and [`simulate_spec`] over the spec enums).
//! - [`cluster`]: many servers, each a device behind its own scheduler, with requests
//!   placed on them and the tenants' promises kept by dmClock or a periodic split.
//! - [`live_path`]: the live path around a device (a device profile's), applied to a run's
//!   completions: what a client of the gateway sees of each request.

pub mod cluster;
pub mod engine;
pub mod generate;
pub mod latency_hist;
pub mod live_path;
pub mod quantile;
pub mod summary;
pub mod workload;

pub use cluster::{hash_primary, simulate_cluster, split_share, ClusterResult, ClusterSpec};
pub use engine::{simulate, simulate_spec, SimConfig, SimResult};
pub use summary::{GroupSummary, RequestLog, WindowSeries};
pub use workload::ClosedClient;
