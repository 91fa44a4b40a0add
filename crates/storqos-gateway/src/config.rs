//! Gateway configuration: the JSON document `storqos serve` builds (and any embedder
//! can write by hand), parsed with unknown fields rejected and validated so that every
//! error is one line naming the field.
//!
//! ```json
//! {"listen": "127.0.0.1:10809",
//!  "exports": [{"name": "web", "path": "/srv/web.img", "tenant": 0},
//!              {"name": "batch", "path": "/srv/batch.img", "tenant": 1, "class": 1}],
//!  "policy": {"kind": "wf2q", "weights": [2, 1]},
//!  "depth": 8, "iops": null, "duration_s": null}
//! ```
//! `policy` is the same `SchedulerSpec` JSON the simulator takes
//! (`storqos_core::spec::SchedulerSpec`); it defaults to FCFS.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

pub use crate::transport::ListenAt;
use storqos_core::request::MAX_TENANTS;
use storqos_core::spec::SchedulerSpec;

use crate::error::{Error, Result};

fn bad<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::Config(msg.into()))
}

/// One export: an NBD export name served from an existing regular file, on behalf of
/// one tenant.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExportConfig {
    /// NBD export name (non-empty, at most 4096 bytes, unique).
    pub name: String,
    /// Backing file: must exist, be a regular file and not be empty.
    pub path: PathBuf,
    /// Tenant the export's requests belong to (the scheduler's flow by default), below
    /// [`MAX_TENANTS`].
    pub tenant: u32,
    /// Scheduling class of its requests (default: the tenant).
    #[serde(default)]
    pub class: Option<u32>,
    /// Serve it read-only: the handshake says so, and writes, trims and write-zeroes
    /// are answered with `EPERM`.
    #[serde(default)]
    pub read_only: bool,
    /// Client addresses allowed to use it (`127.0.0.1`, `10.0.0.0/8`, `::1`); empty:
    /// every client that reaches the gateway. A client not allowed is refused at the
    /// handshake (`NBD_REP_ERR_POLICY`).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Requests to fail on purpose (testing what clients see of a failing disk; see
    /// [`crate::fault`]). Empty: none.
    #[serde(default)]
    pub faults: Vec<crate::fault::Fault>,
    /// A fast tier in front of the file (`path` is then the slow tier's file; see
    /// [`crate::tier`]). `None`: a plain export.
    #[serde(default)]
    pub tier: Option<crate::tier::TierConfig>,
    /// The name of an earlier tiered export whose file and block map this export serves
    /// too, on behalf of its own tenant: another tenant's view of the same volume (a
    /// scrub or backup job in a background class, seed 002). The two files must be the
    /// same; the export has no `tier` of its own. `None`: its own backend.
    #[serde(default)]
    pub shares: Option<String>,
    /// Read and write the file with `O_DIRECT`, past the gateway host's page cache (see
    /// [`crate::direct`]): the device's own times, as `qemu-nbd --cache=none`. Plain
    /// exports only (not with `tier` or `shares`). `false`: through the page cache.
    #[serde(default)]
    pub direct: bool,
}

#[cfg(test)]
impl ExportConfig {
    /// A plain export `name` of `path` for tenant `tenant`, every option off (tests).
    pub(crate) fn plain(name: &str, path: PathBuf, tenant: u32) -> ExportConfig {
        ExportConfig {
            name: name.into(),
            path,
            tenant,
            class: None,
            read_only: false,
            allow: Vec::new(),
            faults: Vec::new(),
            tier: None,
            shares: None,
            direct: false,
        }
    }
}

impl ExportConfig {
    /// Check the entry's own fields (`field` names it in errors: `"exports[0]"`); the
    /// file is checked when it is opened ([`crate::export::Export::open`]).
    pub fn check(&self, field: &str) -> Result<()> {
        if self.name.is_empty() {
            return bad(format!("{field}.name: must not be empty"));
        }
        if self.tenant >= MAX_TENANTS {
            return bad(format!("{field}.tenant: must be below {MAX_TENANTS}, got {}", self.tenant));
        }
        if let Some(c) = self.class.filter(|&c| c >= MAX_TENANTS) {
            return bad(format!("{field}.class: must be below {MAX_TENANTS}, got {c}"));
        }
        if self.name.len() > crate::protocol::MAX_NAME_BYTES {
            return bad(format!("{field}.name: longer than the NBD limit of 4096 bytes"));
        }
        self.allowed().map_err(|m| Error::Config(format!("{field}.{m}")))?;
        for (j, f) in self.faults.iter().enumerate() {
            f.check().map_err(|m| Error::Config(format!("{field}.faults[{j}].{m}")))?;
        }
        if let Some(t) = &self.tier {
            t.check(&format!("{field}.tier"))?;
        }
        if self.shares.is_some() && self.tier.is_some() {
            return bad(format!("{field}.shares: an export that shares another's tier has no tier of its own"));
        }
        if self.direct && (self.tier.is_some() || self.shares.is_some()) {
            return bad(format!(
                "{field}.direct: a tiered export goes through the page cache; direct I/O is for plain exports"
            ));
        }
        Ok(())
    }

    /// The allow-list as networks, or what is wrong with an entry (checked by
    /// [`Config::validate`]).
    pub fn allowed(&self) -> std::result::Result<Vec<ipnet::IpNet>, String> {
        self.allow
            .iter()
            .map(|a| {
                a.parse::<ipnet::IpNet>()
                    .or_else(|_| a.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| format!("allow: {a:?} is not an address or a network such as 10.0.0.0/8"))
            })
            .collect()
    }
}

/// Bounds that keep a shared gateway serving when clients misbehave: how many
/// connections (in all and per client address), how long a handshake, the rest of a
/// request, a reply or an idle connection may take, how many bytes of requests may be
/// in flight. docs/gateway.md ("Limits") gives the attack each one answers.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Connections at once, handshakes included; when it is reached, a newcomer takes
    /// the place of an idle connection of the address holding the most, if one can give
    /// one up, else it is closed ([`crate::peer_limits`]).
    pub max_connections: usize,
    /// Connections at once from one client address (an IPv4 address, an IPv6 /64).
    pub max_connections_per_address: usize,
    /// Handshakes in progress at once from one client address.
    pub max_handshakes_per_address: usize,
    /// Connections at once to one export (`None`: only the global limit).
    pub max_connections_per_export: Option<usize>,
    /// A client that has not finished the handshake within this many seconds is cut off.
    pub handshake_timeout_s: f64,
    /// Once a request's first byte came, a client that sends no further byte of it
    /// (header or write payload) for this many seconds is cut off ([`crate::deadline`]).
    pub request_timeout_s: f64,
    /// A client with replies waiting that takes no byte of them for this many seconds
    /// is cut off, and what its replies held is given back.
    pub reply_timeout_s: f64,
    /// A connection with nothing in flight that sends no request for this many seconds
    /// is closed (`None`: never; NBD clients such as qemu keep idle connections for hours).
    pub idle_timeout_s: Option<f64>,
    /// Bytes of requests in flight (queued, on the backend, or replies not yet taken by
    /// the client) over all connections, divided into equal shares among the tenants
    /// ([`crate::budget`]).
    pub max_inflight_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: crate::peer_limits::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            max_handshakes_per_address: crate::peer_limits::DEFAULT_MAX_HANDSHAKES_PER_ADDRESS,
            max_connections_per_export: None,
            handshake_timeout_s: DEFAULT_HANDSHAKE_TIMEOUT_S,
            request_timeout_s: crate::deadline::DEFAULT_REQUEST_TIMEOUT_S,
            reply_timeout_s: crate::deadline::DEFAULT_REPLY_TIMEOUT_S,
            idle_timeout_s: None,
            max_inflight_bytes: DEFAULT_MAX_INFLIGHT_BYTES,
        }
    }
}

/// Default [`Limits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default [`Limits::handshake_timeout_s`].
pub const DEFAULT_HANDSHAKE_TIMEOUT_S: f64 = 10.0;
/// Default [`Limits::max_inflight_bytes`]: 256 MiB.
pub const DEFAULT_MAX_INFLIGHT_BYTES: u64 = 256 << 20;

/// Whether clients use TLS (`NBD_OPT_STARTTLS`).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TlsMode {
    /// No TLS: `NBD_OPT_STARTTLS` is answered "not supported".
    #[default]
    Off,
    /// TLS offered; plain clients are served too.
    On,
    /// TLS only: a client must start TLS before anything but `NBD_OPT_ABORT`.
    Require,
}

/// TLS settings (x509 certificates in PEM files; see [`crate::tls`]).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// Off (the default), on, or require.
    pub mode: TlsMode,
    /// The server's certificate chain (PEM), leaf first.
    pub cert: Option<PathBuf>,
    /// The server's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
    /// Ask clients for a certificate signed by one of these CAs (PEM), and refuse
    /// clients without one (`None`: no client certificates).
    pub client_ca: Option<PathBuf>,
}

/// The backend's cost model ([`crate::cost::CostModel`]): what an I/O costs, to keep
/// a tenant of large requests from filling the backend on real storage.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CostConfig {
    /// Use it (default); off, only the `depth` slots bound what is in flight.
    pub enabled: bool,
    /// Time per operation (s): a seek, the request overheads.
    pub op_time_s: f64,
    /// Bandwidth (bytes per second).
    pub bytes_per_s: f64,
}

impl Default for CostConfig {
    fn default() -> Self {
        let d = crate::cost::CostModel::DEFAULT;
        CostConfig { enabled: true, op_time_s: d.op_ns / 1e9, bytes_per_s: d.bytes_per_s }
    }
}

impl CostConfig {
    /// The model, if enabled.
    pub fn model(&self) -> Option<crate::cost::CostModel> {
        self.enabled.then_some(crate::cost::CostModel { op_ns: self.op_time_s * 1e9, bytes_per_s: self.bytes_per_s })
    }
}

/// How the gateway reads direct exports' files ([`ExportConfig::direct`]).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DirectReads {
    /// On the I/O threads, as writes and flushes (the default).
    #[default]
    Threads,
    /// Submitted through io_uring by the engine itself ([`crate::uring`]), as
    /// `qemu-nbd --aio=native` does with Linux AIO; the I/O threads where the kernel
    /// refuses io_uring.
    IoUring,
}

impl DirectReads {
    /// Its name in the configuration: `threads` or `io_uring`.
    pub fn name(self) -> &'static str {
        match self {
            DirectReads::Threads => "threads",
            DirectReads::IoUring => "io_uring",
        }
    }
}

/// The gateway's configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Where to listen: `HOST:PORT` (port 0 picks a free one) or `unix:/PATH`.
    pub listen: String,
    /// The exports (at least one).
    pub exports: Vec<ExportConfig>,
    /// The scheduling policy shared by all exports' tenants.
    pub policy: SchedulerSpec,
    /// The policy as given (JSON), which live changes edit.
    pub policy_json: serde_json::Value,
    /// Most I/Os outstanding on the backend at once (the device's slots, ≥ 1).
    pub depth: usize,
    /// Emulated device capacity in IOPS (`None`: as fast as the backend goes).
    pub iops: Option<f64>,
    /// Stop after this many seconds (`None`: run until stopped).
    pub duration_s: Option<f64>,
    /// Keep a per-window series (and the policy's gauges) in windows of this many
    /// seconds (`None`: totals only).
    pub window_s: Option<f64>,
    /// Connection, time and memory bounds.
    pub limits: Limits,
    /// Serve Prometheus metrics on this `HOST:PORT` (`None`: no metrics).
    pub metrics: Option<String>,
    /// Latency targets (s) by tenant id, for the SLO metrics.
    pub slos: std::collections::BTreeMap<u32, f64>,
    /// Tenants' names by id (for the control socket; ids work too).
    pub tenant_names: std::collections::BTreeMap<u32, String>,
    /// A Unix socket for live control (`storqos ctl`), created mode 0600.
    pub control: Option<PathBuf>,
    /// TLS.
    pub tls: TlsConfig,
    /// The backend's cost model (ignored with an emulated capacity).
    pub cost: CostConfig,
    /// The emulated devices of the tiered exports' fast and slow tiers
    /// ([`crate::tier`]); default: no emulation.
    pub tiers: crate::tier::TiersConfig,
    /// Seed 003's admission control at connect time, with an `fclb` policy
    /// ([`crate::admission`]); `None`: every tenant is served.
    pub admission: Option<crate::admission::AdmissionConfig>,
    /// How direct exports' files are read.
    pub direct_reads: DirectReads,
}

/// Default listen address (the IANA NBD port on loopback).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:10809";
/// Default dispatch depth.
pub const DEFAULT_DEPTH: usize = 8;
/// Largest dispatch depth accepted.
pub const MAX_DEPTH: usize = 4096;
/// Longest `duration_s` / `window_s` accepted: 2^63 ns (about 292 years), the longest
/// time the clock's nanosecond counters and a `std::time::Duration` both hold.
pub const MAX_SECONDS: f64 = 9_223_372_036.0;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    listen: Option<String>,
    exports: Vec<serde_json::Value>,
    #[serde(default)]
    policy: Option<serde_json::Value>,
    #[serde(default)]
    depth: Option<serde_json::Value>,
    #[serde(default)]
    iops: Option<f64>,
    #[serde(default)]
    duration_s: Option<f64>,
    #[serde(default)]
    window_s: Option<f64>,
    #[serde(default)]
    limits: Option<serde_json::Value>,
    #[serde(default)]
    metrics: Option<String>,
    #[serde(default)]
    slos: std::collections::BTreeMap<u32, f64>,
    #[serde(default)]
    tenant_names: std::collections::BTreeMap<u32, String>,
    #[serde(default)]
    control: Option<PathBuf>,
    #[serde(default)]
    tls: Option<serde_json::Value>,
    #[serde(default)]
    cost: Option<serde_json::Value>,
    #[serde(default)]
    tiers: Option<serde_json::Value>,
    #[serde(default)]
    admission: Option<serde_json::Value>,
    #[serde(default)]
    direct_reads: Option<serde_json::Value>,
}

fn one_line(e: &serde_json::Error) -> String {
    e.to_string().replace('\n', " ")
}

impl Config {
    /// Parse and validate a JSON configuration (see the module documentation).
    /// Export paths are checked when the gateway opens them ([`crate::server::start()`]).
    pub fn from_json(json: &str) -> Result<Config> {
        let raw: RawConfig = serde_json::from_str(json).map_err(|e| Error::Config(one_line(&e)))?;
        let mut exports = Vec::with_capacity(raw.exports.len());
        for (i, v) in raw.exports.into_iter().enumerate() {
            exports.push(
                serde_json::from_value::<ExportConfig>(v)
                    .map_err(|e| Error::Config(format!("exports[{i}]: {}", one_line(&e))))?,
            );
        }
        let policy_json = raw.policy.unwrap_or_else(|| serde_json::json!({"kind": "fcfs"}));
        let policy = serde_json::from_value(policy_json.clone())
            .map_err(|e| Error::Config(format!("policy: {}", one_line(&e))))?;
        let depth = match raw.depth {
            None => DEFAULT_DEPTH,
            Some(v) => match v.as_u64() {
                Some(d) => usize::try_from(d).unwrap_or(usize::MAX),
                None => return bad(format!("depth: must be an integer >= 1, got {v}")),
            },
        };
        let cfg = Config {
            listen: raw.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_string()),
            exports,
            policy,
            policy_json,
            depth,
            iops: raw.iops,
            duration_s: raw.duration_s,
            window_s: raw.window_s,
            limits: match raw.limits {
                None => Limits::default(),
                Some(v) => serde_json::from_value(v).map_err(|e| Error::Config(format!("limits: {}", one_line(&e))))?,
            },
            metrics: raw.metrics,
            slos: raw.slos,
            tenant_names: raw.tenant_names,
            control: raw.control,
            tls: match raw.tls {
                None => TlsConfig::default(),
                Some(v) => serde_json::from_value(v).map_err(|e| Error::Config(format!("tls: {}", one_line(&e))))?,
            },
            cost: match raw.cost {
                None => CostConfig::default(),
                Some(v) => serde_json::from_value(v).map_err(|e| Error::Config(format!("cost: {}", one_line(&e))))?,
            },
            tiers: match raw.tiers {
                None => crate::tier::TiersConfig::default(),
                Some(v) => serde_json::from_value(v).map_err(|e| Error::Config(format!("tiers: {}", one_line(&e))))?,
            },
            admission: match raw.admission {
                None => None,
                Some(v) => {
                    Some(serde_json::from_value(v).map_err(|e| Error::Config(format!("admission: {}", one_line(&e))))?)
                }
            },
            direct_reads: match raw.direct_reads {
                None => DirectReads::default(),
                Some(v) => serde_json::from_value(v.clone())
                    .map_err(|_| Error::Config(format!("direct_reads: give \"threads\" or \"io_uring\", got {v}")))?,
            },
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Check every field (not the files: see [`crate::export::Export::open`]).
    pub fn validate(&self) -> Result<()> {
        self.listen_at()?;
        if self.exports.is_empty() {
            return bad("exports: give at least one export");
        }
        // The earlier exports by name: each export is checked in the same time, however
        // many there are (a scan of the earlier ones made 20,000 exports take a second).
        let mut earlier: std::collections::HashMap<&str, (usize, &ExportConfig)> =
            std::collections::HashMap::with_capacity(self.exports.len());
        for (i, e) in self.exports.iter().enumerate() {
            e.check(&format!("exports[{i}]"))?;
            if let Some((j, _)) = earlier.get(e.name.as_str()) {
                return bad(format!("exports[{i}].name: {:?} is already the name of exports[{j}]", e.name));
            }
            if let Some(s) = &e.shares {
                match earlier.get(s.as_str()).map(|(_, o)| o) {
                    Some(o) if o.tier.is_some() => {}
                    Some(_) => return bad(format!("exports[{i}].shares: export {s:?} has no tier to share")),
                    None => return bad(format!("exports[{i}].shares: no earlier export named {s:?}")),
                }
            }
            earlier.insert(e.name.as_str(), (i, e));
        }
        let l = &self.limits;
        if l.max_connections == 0 {
            return bad("limits.max_connections: must be >= 1");
        }
        for (key, n) in [
            ("max_connections_per_address", l.max_connections_per_address),
            ("max_handshakes_per_address", l.max_handshakes_per_address),
        ] {
            if n == 0 {
                return bad(format!("limits.{key}: must be >= 1"));
            }
        }
        if l.max_connections_per_export == Some(0) {
            return bad("limits.max_connections_per_export: must be >= 1 (or null)");
        }
        if !(l.handshake_timeout_s.is_finite() && l.handshake_timeout_s > 0.0 && l.handshake_timeout_s <= MAX_SECONDS) {
            return bad(format!(
                "limits.handshake_timeout_s: must be a number of seconds > 0, got {}",
                l.handshake_timeout_s
            ));
        }
        for (key, t) in [("request_timeout_s", l.request_timeout_s), ("reply_timeout_s", l.reply_timeout_s)] {
            if !(t.is_finite() && t > 0.0 && t <= MAX_SECONDS) {
                return bad(format!("limits.{key}: must be a number of seconds > 0 and <= {MAX_SECONDS}, got {t:?}"));
            }
        }
        if let Some(t) = l.idle_timeout_s.filter(|t| !(t.is_finite() && *t > 0.0 && *t <= MAX_SECONDS)) {
            return bad(format!("limits.idle_timeout_s: must be a number of seconds > 0 (or null), got {t}"));
        }
        if l.max_inflight_bytes < u64::from(crate::protocol::MAX_IO_BYTES) {
            return bad(format!(
                "limits.max_inflight_bytes: must be at least 32 MiB (one request of the largest size), got {}",
                l.max_inflight_bytes
            ));
        }
        self.tiers.check(MAX_DEPTH)?;
        if let Some(a) = &self.admission {
            crate::admission::Admission::new(a, &self.policy, &self.tenant_names)?;
        }
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return bad(format!("depth: must be between 1 and {MAX_DEPTH}, got {}", self.depth));
        }
        if let Some(c) = self.iops {
            if !(c.is_finite() && c > 0.0) {
                return bad(format!("iops: the emulated capacity must be a finite number > 0 (or null), got {c}"));
            }
        }
        if let Some(d) = self.duration_s {
            if !(d.is_finite() && d > 0.0 && d <= MAX_SECONDS) {
                return bad(format!(
                    "duration_s: must be a finite number of seconds > 0 and <= {MAX_SECONDS} (about 292 years) (or null), got {d}"
                ));
            }
        }
        if let Some(w) = self.window_s {
            if !(w.is_finite() && (1e-6..=MAX_SECONDS).contains(&w)) {
                return bad(format!(
                    "window_s: must be a finite number of seconds >= 1e-6 and <= {MAX_SECONDS} (about 292 years) (or null), got {w}"
                ));
            }
        }
        if let Some(m) = &self.metrics {
            resolve(m).ok_or_else(|| {
                Error::Config(format!("metrics: expected HOST:PORT such as 127.0.0.1:9101, got {m:?}"))
            })?;
        }
        for (t, s) in &self.slos {
            if !(s.is_finite() && *s > 0.0 && *s <= MAX_SECONDS) {
                return bad(format!("slos.{t}: a latency target must be a number of seconds > 0, got {s}"));
            }
        }
        let c = &self.cost;
        if !(c.op_time_s.is_finite() && c.op_time_s >= 0.0 && c.op_time_s <= 1.0) {
            return bad(format!("cost.op_time_s: must be a time per operation in [0, 1] s, got {}", c.op_time_s));
        }
        if !(c.bytes_per_s.is_finite() && c.bytes_per_s >= 1.0) {
            return bad(format!("cost.bytes_per_s: must be a bandwidth >= 1 byte/s, got {}", c.bytes_per_s));
        }
        if self.tls.mode != TlsMode::Off {
            for (key, v) in [("cert", &self.tls.cert), ("key", &self.tls.key)] {
                if v.is_none() {
                    return bad(format!("tls.{key}: required when TLS is on (a PEM file)"));
                }
            }
        }
        if self.direct_reads == DirectReads::IoUring && !self.exports.iter().any(|e| e.direct) {
            return bad("direct_reads: io_uring reads the files of direct exports, and no export is direct");
        }
        self.policy.validate().map_err(|e| Error::Config(format!("policy: {e}")))?;
        crate::tenant_values::check_tenant_values(&self.policy_json)
            .map_err(|e| Error::Config(format!("policy: {e}")))?;
        Ok(())
    }

    /// Where to listen: `HOST:PORT` (IPv4, `[IPv6]`, or a host name such as
    /// `localhost:10809`, resolved to its first address) or `unix:/PATH`.
    pub fn listen_at(&self) -> Result<ListenAt> {
        if let Some(path) = self.listen.strip_prefix("unix:") {
            if path.is_empty() {
                return bad("listen: unix: needs the socket's path, such as unix:/run/storqos/nbd.sock");
            }
            return Ok(ListenAt::Unix(PathBuf::from(path)));
        }
        resolve(&self.listen).map(ListenAt::Tcp).ok_or_else(|| {
            Error::Config(format!(
                "listen: expected HOST:PORT such as 127.0.0.1:10809 or unix:/PATH, got {:?}",
                self.listen
            ))
        })
    }
}

/// `HOST:PORT` as a socket address (an IP, `[IPv6]`, or a host name resolved to its
/// first address); `None` if it is none of these.
pub fn resolve(hostport: &str) -> Option<SocketAddr> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = hostport.parse() {
        return Some(a);
    }
    hostport.to_socket_addrs().ok()?.next()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(json: &str) -> String {
        match Config::from_json(json) {
            Ok(c) => panic!("{json} accepted: {c:?}"),
            Err(e) => {
                let s = e.to_string();
                assert!(!s.contains('\n'), "one line: {s}");
                s
            }
        }
    }

    #[test]
    fn full_and_default_configs() {
        let c = Config::from_json(
            r#"{"listen":"0.0.0.0:0","exports":[{"name":"a","path":"/x","tenant":3,"class":1}],
                "policy":{"kind":"wf2q","weights":[2,1]},"depth":4,"iops":1500,"duration_s":2.5}"#,
        )
        .unwrap();
        assert_eq!(c.listen, "0.0.0.0:0");
        assert_eq!(c.exports[0].tenant, 3);
        assert_eq!(c.exports[0].class, Some(1));
        assert_eq!((c.depth, c.iops, c.duration_s), (4, Some(1500.0), Some(2.5)));
        assert!(matches!(c.policy, SchedulerSpec::Wf2q { .. }));
        let d = Config::from_json(r#"{"exports":[{"name":"a","path":"/x","tenant":0}]}"#).unwrap();
        assert_eq!((d.listen.as_str(), d.depth, d.iops, d.duration_s), (DEFAULT_LISTEN, DEFAULT_DEPTH, None, None));
        assert_eq!(d.policy, SchedulerSpec::Fcfs);
        assert_eq!(d.direct_reads, DirectReads::Threads);
        // The limits are on by default (docs/gateway.md, "Limits").
        let l = &d.limits;
        assert_eq!((l.max_connections, l.max_connections_per_address, l.max_handshakes_per_address), (1024, 128, 32));
        assert_eq!((l.request_timeout_s, l.reply_timeout_s, l.idle_timeout_s), (10.0, 30.0, None));
        let r = Config::from_json(
            r#"{"exports":[{"name":"a","path":"/x","tenant":0,"direct":true}],"direct_reads":"io_uring"}"#,
        )
        .unwrap();
        assert_eq!((r.direct_reads, r.direct_reads.name()), (DirectReads::IoUring, "io_uring"));
    }

    #[test]
    fn errors_name_the_field() {
        let ex = r#""exports":[{"name":"a","path":"/x","tenant":0}]"#;
        let cases = [
            (format!(r#"{{{ex},"colour":1}}"#), "unknown field `colour`"),
            (r#"{"listen":"x"}"#.to_string(), "missing field `exports`"),
            (format!(r#"{{{ex},"listen":"nowhere"}}"#), "listen: expected HOST:PORT"),
            (r#"{"exports":[]}"#.to_string(), "exports: give at least one export"),
            (r#"{"exports":[{"name":"a","path":"/x"}]}"#.to_string(), "exports[0]: missing field `tenant`"),
            (r#"{"exports":[{"name":"a","path":"/x","tenant":-1}]}"#.to_string(), "exports[0]: invalid value"),
            (
                r#"{"exports":[{"name":"a","path":"/x","tenant":0,"size":5}]}"#.to_string(),
                "exports[0]: unknown field `size`",
            ),
            (r#"{"exports":[{"name":"","path":"/x","tenant":0}]}"#.to_string(), "exports[0].name: must not be empty"),
            (
                r#"{"exports":[{"name":"a","path":"/x","tenant":0},{"name":"a","path":"/y","tenant":1}]}"#.to_string(),
                "exports[1].name: \"a\" is already the name of exports[0]",
            ),
            (format!(r#"{{{ex},"depth":0}}"#), "depth: must be between 1"),
            (format!(r#"{{{ex},"direct_reads":"aio"}}"#), r#"direct_reads: give "threads" or "io_uring", got "aio""#),
            (format!(r#"{{{ex},"direct_reads":1}}"#), r#"direct_reads: give "threads" or "io_uring", got 1"#),
            (
                format!(r#"{{{ex},"direct_reads":"io_uring"}}"#),
                "direct_reads: io_uring reads the files of direct exports, and no export is direct",
            ),
            // A tenant id is an index into per-tenant state: a huge one is an error, not an abort.
            (
                r#"{"exports":[{"name":"a","path":"/x","tenant":4294967295}]}"#.to_string(),
                "exports[0].tenant: must be below 65536, got 4294967295",
            ),
            (format!(r#"{{{ex},"depth":-3}}"#), "depth: must be an integer >= 1, got -3"),
            (format!(r#"{{{ex},"iops":0}}"#), "iops: the emulated capacity must be"),
            (format!(r#"{{{ex},"duration_s":-1}}"#), "duration_s: must be"),
            (format!(r#"{{{ex},"window_s":0}}"#), "window_s: must be a finite number of seconds >= 1e-6"),
            // Beyond what a Duration holds: an error, not a panic in Duration::from_secs_f64.
            (
                format!(r#"{{{ex},"duration_s":1e26}}"#),
                "duration_s: must be a finite number of seconds > 0 and <= 9223372036",
            ),
            (
                format!(r#"{{{ex},"window_s":1e300}}"#),
                "window_s: must be a finite number of seconds >= 1e-6 and <= 9223372036",
            ),
            (format!(r#"{{{ex},"policy":{{"kind":"wfq"}}}}"#), "policy: unknown variant `wfq`"),
            (
                format!(r#"{{{ex},"limits":{{"max_connections_per_address":0}}}}"#),
                "limits.max_connections_per_address: must be >= 1",
            ),
            (
                format!(r#"{{{ex},"limits":{{"max_handshakes_per_address":0}}}}"#),
                "limits.max_handshakes_per_address: must be >= 1",
            ),
            (
                format!(r#"{{{ex},"limits":{{"request_timeout_s":0}}}}"#),
                "limits.request_timeout_s: must be a number of seconds > 0 and <= 9223372036, got 0.0",
            ),
            (
                format!(r#"{{{ex},"limits":{{"reply_timeout_s":1e300}}}}"#),
                "limits.reply_timeout_s: must be a number of seconds > 0 and <= 9223372036, got 1e300",
            ),
            (format!(r#"{{{ex},"limits":{{"reply_timeout":30}}}}"#), "limits: unknown field `reply_timeout`"),
            (format!(r#"{{{ex},"cost":{{"op_time_s":-1}}}}"#), "cost.op_time_s: must be a time per operation"),
            (format!(r#"{{{ex},"cost":{{"bytes_per_s":0}}}}"#), "cost.bytes_per_s: must be a bandwidth"),
            (format!(r#"{{{ex},"cost":{{"seek":1}}}}"#), "cost: unknown field `seek`"),
            (
                format!(r#"{{{ex},"policy":{{"kind":"wf2q","weights":[0]}}}}"#),
                "policy: invalid configuration: wf2q: weights[0]",
            ),
        ];
        for (json, want) in cases {
            let e = err(&json);
            assert!(e.contains(want), "{json}: got {e:?}, want {want:?}");
        }
    }
}
