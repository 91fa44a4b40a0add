//! What a gateway serves, known once it listens ([`ReadyInfo`]): what `storqos serve`
//! prints as its ready line, and what [`check`](crate::check) reports.

use std::sync::Arc;

use serde::Serialize;

use crate::config::Config;
use crate::export::Export;

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
    /// What [`crate::server::start::check`] found doubtful without refusing it (a socket a running gateway
    /// answers on); empty when the gateway starts.
    pub warnings: Vec<String>,
}

/// What `config` serves on `listen` with the policy named `policy`.
pub(crate) fn ready_info(config: &Config, listen: String, policy: String, exports: &[Arc<Export>]) -> ReadyInfo {
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
