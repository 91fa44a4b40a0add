//! Device specs: `{"kind": "...", ...}` → an [`AnyDevice`].
//!
//! ```json
//! {"kind": "constant", "iops": 500}
//! {"kind": "exponential", "iops": 500}
//! {"kind": "array", "servers": 4, "assign": "shared", "service": {"kind": "exponential", "iops": 250}}
//! {"kind": "array", "servers": 8, "assign": "striped", "stripe_bytes": 65536, "depth": 64,
//!  "service": {"kind": "disk", "profile": "enterprise-10k", "queue": "sptf"}}
//! {"kind": "disk", "profile": "desktop-7200", "queue": "fifo"}
//! {"kind": "tiered", "fast": {"kind": "constant", "iops": 20000},
//!  "slow": {"kind": "disk", "profile": "enterprise-10k"}, "hit_ratio": 0.8}
//! {"kind": "tiered", "fast": {"kind": "constant", "iops": 1000},
//!  "slow": {"kind": "constant", "iops": 200}, "tenant_hit_ratios": [0.75, 0.5],
//!  "hits": "spread", "depth": 16}
//! {"kind": "cache", "fast": {"kind": "exponential", "iops": 10000},
//!  "slow": {"kind": "exponential", "iops": 200}, "capacity_bytes": 67108864,
//!  "block_bytes": 4096, "warm_tenants": [2]}
//! ```
//!
//! Every parameter is checked when the device is built; an error is one line naming the
//! parameter (and, inside a tiered device, the tier: `tiered.slow: array: servers must
//! be >= 1, got 0`).

use serde::Deserialize;

use crate::device::Device;
use crate::devices::{
    Assign, ConstantRate, Disk, DiskProfile, Exponential, MeasuredClass, MeasuredService, Parallel, QueuePolicy,
    ServiceModel, Tiered,
};
use crate::error::{config, Error, Result};
use crate::spec::dispatch::AnyDevice;

/// A storage model and its parameters.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum DeviceSpec {
    /// One deterministic server of `iops` IOPS, plus `bytes / bandwidth` when given.
    Constant {
        /// Capacity (IOPS).
        iops: f64,
        /// Optional transfer bandwidth (bytes/s) for a size-dependent cost.
        #[serde(default)]
        bandwidth: Option<f64>,
    },
    /// One server with exponentially distributed service of mean 1/`iops`.
    Exponential {
        /// Mean capacity (IOPS).
        iops: f64,
    },
    /// `servers` servers with internal queues (see [`crate::devices::array`]).
    Array {
        /// Number of servers (disks), ≥ 1.
        servers: usize,
        /// Bound on outstanding requests (default [`crate::devices::array::DEFAULT_DEPTH`]).
        #[serde(default)]
        depth: Option<usize>,
        /// How requests reach servers.
        assign: AssignSpec,
        /// Stripe unit in bytes for `striped` (default
        /// [`crate::devices::array::DEFAULT_STRIPE_BYTES`]); not allowed for `shared`.
        #[serde(default)]
        stripe_bytes: Option<u64>,
        /// Service model of every server.
        service: ServiceSpec,
        /// Service-time factor by the requests in service when one starts (first entry:
        /// alone, second: beside one other…; past the end, the last): a measured
        /// device's time per request rising with its queue depth
        /// ([`crate::devices::array::Parallel::with_slowdown`]). Default: none.
        #[serde(default)]
        slowdown: Vec<f64>,
    },
    /// A single disk with its own queue (see [`crate::devices::disk`]).
    Disk {
        /// Named profile (default `enterprise-10k`).
        #[serde(default)]
        profile: Option<String>,
        /// Queue order (default `fifo`).
        #[serde(default)]
        queue: QueuePolicy,
        /// Bound on outstanding requests (default [`crate::devices::array::DEFAULT_DEPTH`]).
        #[serde(default)]
        depth: Option<usize>,
        /// Capacity in bytes the seek curve spans (default: the profile's).
        #[serde(default)]
        capacity: Option<u64>,
    },
    /// A fast and a slow tier (see [`crate::devices::tiered`]).
    Tiered {
        /// The fast tier (target 0).
        fast: Box<DeviceSpec>,
        /// The slow tier (target 1).
        slow: Box<DeviceSpec>,
        /// Probability that a request without a target goes to the fast tier (default 0:
        /// without a hit ratio, untargeted requests are misses).
        #[serde(default)]
        hit_ratio: Option<f64>,
        /// Per-tenant hit ratios overriding `hit_ratio` for tenants 0, 1, ...
        #[serde(default)]
        tenant_hit_ratios: Option<Vec<f64>>,
        /// How hits are chosen: `random` (default, a draw per request) or `spread`
        /// (each tenant's hits evenly spread over its requests, the gateway's `pin`
        /// placement read sequentially; see [`crate::devices::tiered`]).
        #[serde(default)]
        hits: HitDraw,
        /// Bound on outstanding requests of both tiers (default: the tiers' slots).
        #[serde(default)]
        depth: Option<usize>,
    },
    /// An LRU cache tier with explicit warm-up (see [`crate::devices::cache`]).
    Cache {
        /// Device serving hits.
        fast: Box<DeviceSpec>,
        /// Device serving misses and warm-up reads.
        slow: Box<DeviceSpec>,
        /// Cache capacity in bytes (≥ one block).
        capacity_bytes: u64,
        /// Block size in bytes (default [`crate::devices::cache::DEFAULT_BLOCK_BYTES`]).
        #[serde(default)]
        block_bytes: Option<u64>,
        /// Tenants whose requests are explicit warm-up reads.
        #[serde(default)]
        warm_tenants: Vec<u32>,
        /// Bound on outstanding requests of both tiers (default: the tiers' slots).
        #[serde(default)]
        depth: Option<usize>,
    },
}

/// How a tiered device picks the hits among untargeted requests.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum HitDraw {
    /// Each request hits with its tenant's hit ratio, drawn from the simulator's RNG.
    #[default]
    Random,
    /// Tenant `t`'s `n`-th request hits iff `⌊(n+1)·h_t⌋ > ⌊n·h_t⌋` (deterministic).
    Spread,
}

/// How an array assigns requests to servers.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AssignSpec {
    /// One queue feeding whichever server frees first.
    Shared,
    /// By stripe unit of the offset, one queue per disk.
    Striped,
}

/// Service model of an array's servers.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ServiceSpec {
    /// Deterministic service of `iops` per server.
    Constant {
        /// IOPS per server.
        iops: f64,
    },
    /// Exponential service of mean 1/`iops` per server.
    Exponential {
        /// IOPS per server.
        iops: f64,
    },
    /// The disk model.
    Disk {
        /// Named profile (default `enterprise-10k`).
        #[serde(default)]
        profile: Option<String>,
        /// Queue order of each disk (default `fifo`).
        #[serde(default)]
        queue: QueuePolicy,
        /// Capacity in bytes of each disk (default: the profile's).
        #[serde(default)]
        capacity: Option<u64>,
    },
    /// Service times measured per class of request (a device profile of `storqos
    /// calibrate`).
    Measured {
        /// The measured classes.
        classes: Vec<MeasuredClassSpec>,
    },
}

/// One measured class of a [`ServiceSpec::Measured`]:
/// `{"op": "read", "pattern": "random", "bytes": 4096, "quantiles_ns": [[0, 90000], [0.5, 100000], [1, 250000]]}`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MeasuredClassSpec {
    /// `read` or `write`.
    pub op: OpSpec,
    /// `random` or `sequential`.
    pub pattern: PatternSpec,
    /// Request size (bytes).
    pub bytes: u32,
    /// Points `[q, ns]` of the service time's quantile function, q from 0 to 1.
    pub quantiles_ns: Vec<(f64, f64)>,
}

/// A request's operation in a spec.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OpSpec {
    /// Reads.
    Read,
    /// Writes.
    Write,
}

/// An access pattern in a spec.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PatternSpec {
    /// Each request anywhere.
    Random,
    /// Each request where the previous one ended.
    Sequential,
}

/// Profile used when a disk spec names none: seed 001's array disks spin at 10k RPM.
pub const DEFAULT_DISK_PROFILE: &str = crate::devices::disk::ENTERPRISE_10K;

fn disk_profile(profile: &Option<String>, capacity: Option<u64>) -> Result<DiskProfile> {
    let p = DiskProfile::named(profile.as_deref().unwrap_or(DEFAULT_DISK_PROFILE))?;
    match capacity {
        Some(c) => p.with_capacity(c),
        None => Ok(p),
    }
}

/// Prefix an error's message with where it happened (`tiered.fast`).
fn within<T>(what: &str, r: Result<T>) -> Result<T> {
    r.map_err(|e| match e {
        Error::InvalidConfig(m) => Error::InvalidConfig(format!("{what}: {m}")),
        Error::InvalidInput(m) => Error::InvalidInput(format!("{what}: {m}")),
    })
}

impl ServiceSpec {
    /// Build the service model.
    pub fn build(&self) -> Result<ServiceModel> {
        match self {
            ServiceSpec::Constant { iops } => ServiceModel::constant(*iops),
            ServiceSpec::Exponential { iops } => ServiceModel::exponential(*iops),
            ServiceSpec::Disk { profile, queue, capacity } => {
                ServiceModel::disk(disk_profile(profile, *capacity)?, *queue)
            }
            ServiceSpec::Measured { classes } => {
                let classes = classes
                    .iter()
                    .map(|c| MeasuredClass {
                        read: c.op == OpSpec::Read,
                        sequential: c.pattern == PatternSpec::Sequential,
                        bytes: c.bytes,
                        quantiles: c.quantiles_ns.clone(),
                    })
                    .collect();
                Ok(ServiceModel::Measured(std::sync::Arc::new(MeasuredService::new(classes)?)))
            }
        }
    }
}

impl DeviceSpec {
    /// Build the device model.
    pub fn build(&self) -> Result<AnyDevice> {
        Ok(match self {
            DeviceSpec::Constant { iops, bandwidth } => {
                let d = ConstantRate::new(*iops)?;
                AnyDevice::Constant(match bandwidth {
                    Some(bw) => d.with_bandwidth(*bw)?,
                    None => d,
                })
            }
            DeviceSpec::Exponential { iops } => AnyDevice::Exponential(Exponential::new(*iops)?),
            DeviceSpec::Array { servers, depth, assign, stripe_bytes, service, slowdown } => {
                let assign = match (assign, stripe_bytes) {
                    (AssignSpec::Shared, None) => Assign::Shared,
                    (AssignSpec::Shared, Some(_)) => {
                        return config("array: stripe_bytes applies only to assign \"striped\"")
                    }
                    (AssignSpec::Striped, s) => {
                        Assign::Striped { stripe_bytes: s.unwrap_or(crate::devices::array::DEFAULT_STRIPE_BYTES) }
                    }
                };
                let service = within("array service", service.build())?;
                let a = Parallel::new(*servers, assign, service)?.with_slowdown(slowdown.clone())?;
                AnyDevice::Parallel(match depth {
                    Some(d) => a.with_depth(*d)?,
                    None => a,
                })
            }
            DeviceSpec::Disk { profile, queue, depth, capacity } => {
                let d = Disk::new(disk_profile(profile, *capacity)?, *queue)?;
                AnyDevice::Disk(match depth {
                    Some(n) => d.with_depth(*n)?,
                    None => d,
                })
            }
            DeviceSpec::Tiered { fast, slow, hit_ratio, tenant_hit_ratios, hits, depth } => {
                let f: Box<dyn Device + Send> = Box::new(within("tiered.fast", fast.build())?);
                let s: Box<dyn Device + Send> = Box::new(within("tiered.slow", slow.build())?);
                let mut t = Tiered::new(f, s, hit_ratio.unwrap_or(0.0))?.with_spread_hits(*hits == HitDraw::Spread);
                if let Some(r) = tenant_hit_ratios {
                    t = t.with_tenant_hit_ratios(r.clone())?;
                }
                if let Some(d) = depth {
                    t = t.with_depth(*d)?;
                }
                AnyDevice::Tiered(Box::new(t))
            }
            DeviceSpec::Cache { fast, slow, capacity_bytes, block_bytes, warm_tenants, depth } => {
                let f: Box<dyn Device + Send> = Box::new(within("cache.fast", fast.build())?);
                let s: Box<dyn Device + Send> = Box::new(within("cache.slow", slow.build())?);
                let block = block_bytes.unwrap_or(crate::devices::cache::DEFAULT_BLOCK_BYTES);
                let mut c = crate::devices::CacheTier::new(f, s, *capacity_bytes, block)?
                    .with_warm_tenants(warm_tenants.clone());
                if let Some(d) = depth {
                    c = c.with_depth(*d)?;
                }
                AnyDevice::Boxed(Box::new(c))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::from_json;

    fn build(json: &str) -> Result<AnyDevice> {
        from_json::<DeviceSpec>("device", json)?.build()
    }

    fn err(json: &str) -> String {
        match build(json) {
            Ok(d) => panic!("{json} built {}", d.name()),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn every_kind_builds() {
        for (json, name) in [
            (r#"{"kind": "constant", "iops": 500}"#, "constant(500 IOPS)"),
            (r#"{"kind": "exponential", "iops": 500}"#, "exponential(500 IOPS)"),
            (
                r#"{"kind": "array", "servers": 4, "assign": "shared", "service": {"kind": "exponential", "iops": 250}}"#,
                "array(4 × exp(250 IOPS), shared, depth 1024)",
            ),
            (
                r#"{"kind": "array", "servers": 8, "assign": "striped", "depth": 64,
                    "service": {"kind": "disk", "profile": "enterprise-10k", "queue": "sptf"}}"#,
                "array(8 × disk(enterprise-10k, sptf), striped 64 KiB, depth 64)",
            ),
            (r#"{"kind": "disk", "profile": "desktop-7200", "queue": "fifo"}"#, "disk(desktop-7200, fifo)"),
            (r#"{"kind": "disk"}"#, "disk(enterprise-10k, fifo)"),
            (
                r#"{"kind": "tiered", "fast": {"kind": "constant", "iops": 20000},
                    "slow": {"kind": "disk", "queue": "scan"}, "hit_ratio": 0.8, "depth": 32}"#,
                "tiered(fast constant(20000 IOPS), slow disk(enterprise-10k, scan), hit ratio 0.8)",
            ),
            (
                r#"{"kind": "tiered", "fast": {"kind": "constant", "iops": 1000}, "slow": {"kind": "constant", "iops": 200},
                    "tenant_hit_ratios": [0.75, 0.5], "hits": "spread", "depth": 16}"#,
                "tiered(fast constant(1000 IOPS), slow constant(200 IOPS), hit ratio 0, spread hits)",
            ),
        ] {
            let d = build(json).unwrap_or_else(|e| panic!("{json}: {e}"));
            assert_eq!(d.name(), name);
        }
        let d = build(r#"{"kind": "array", "servers": 2, "assign": "shared", "depth": 3, "service": {"kind": "constant", "iops": 1}}"#)
            .unwrap();
        assert_eq!(d.state().free_slots, 3);
        let d = build(r#"{"kind": "tiered", "fast": {"kind": "constant", "iops": 1}, "slow": {"kind": "exponential", "iops": 1}}"#)
            .unwrap();
        assert_eq!(d.state().free_slots, 2);
    }

    #[test]
    fn bad_specs_name_the_parameter() {
        let cases = [
            (r#"{"kind": "exponential", "iops": 0}"#, "iops must be > 0"),
            (r#"{"kind": "exponential", "iops": 5, "rate": 1}"#, "unknown field `rate`"),
            (
                r#"{"kind": "array", "servers": 0, "assign": "shared", "service": {"kind": "constant", "iops": 1}}"#,
                "servers must be >= 1",
            ),
            (
                r#"{"kind": "array", "servers": 2, "assign": "shared", "depth": 0, "service": {"kind": "constant", "iops": 1}}"#,
                "depth must be >= 1",
            ),
            (
                r#"{"kind": "array", "servers": 2, "assign": "shared", "stripe_bytes": 4096, "service": {"kind": "constant", "iops": 1}}"#,
                "stripe_bytes applies only",
            ),
            (
                r#"{"kind": "array", "servers": 2, "assign": "striped", "stripe_bytes": 0, "service": {"kind": "constant", "iops": 1}}"#,
                "stripe_bytes must be > 0",
            ),
            (
                r#"{"kind": "array", "servers": 2, "assign": "diagonal", "service": {"kind": "constant", "iops": 1}}"#,
                "unknown variant `diagonal`",
            ),
            (r#"{"kind": "array", "servers": 2, "assign": "shared"}"#, "missing field `service`"),
            // A huge count is an error, not an allocation that aborts the process.
            (
                r#"{"kind": "array", "servers": 4294967296, "assign": "shared", "service": {"kind": "constant", "iops": 1}}"#,
                "array: servers must be at most 65536, got 4294967296",
            ),
            (
                // Past u64 serde_json reads a float; inside the tagged enum its message
                // cannot name the field, but it is an error, not a panic.
                r#"{"kind": "array", "servers": 18446744073709551616, "assign": "shared", "service": {"kind": "constant", "iops": 1}}"#,
                "device: invalid type: floating point `1.8446744073709552e+19`, expected usize",
            ),
            (
                r#"{"kind": "array", "servers": 2, "assign": "shared", "service": {"kind": "exponential", "iops": -3}}"#,
                "array service: exponential service: iops must be > 0, got -3",
            ),
            (
                r#"{"kind": "array", "servers": 2, "assign": "shared", "service": {"kind": "disk", "queue": "lifo"}}"#,
                "unknown variant `lifo`",
            ),
            (
                r#"{"kind": "disk", "profile": "floppy"}"#,
                "unknown profile \"floppy\" (known: enterprise-10k, desktop-7200)",
            ),
            (r#"{"kind": "disk", "capacity": 0}"#, "capacity must be > 0"),
            (r#"{"kind": "disk", "rpm": 5400}"#, "unknown field `rpm`"),
            (
                r#"{"kind": "tiered", "fast": {"kind": "constant", "iops": 1}, "slow": {"kind": "constant", "iops": 1}, "hit_ratio": 1.2}"#,
                "hit_ratio must lie in [0, 1], got 1.2",
            ),
            (
                r#"{"kind": "tiered", "fast": {"kind": "constant", "iops": 1}, "slow": {"kind": "array", "servers": 0, "assign": "shared", "service": {"kind": "constant", "iops": 1}}}"#,
                "tiered.slow: array: servers must be >= 1, got 0",
            ),
            (
                r#"{"kind": "tiered", "fast": {"kind": "constant", "iops": 1}, "slow": {"kind": "constant", "iops": 1}, "tenant_hit_ratios": [0.5, 2]}"#,
                "tenant_hit_ratios[1] must lie in [0, 1]",
            ),
            (r#"{"kind": "tiered", "fast": {"kind": "constant", "iops": 1}}"#, "missing field `slow`"),
            (
                r#"{"kind": "tiered", "fast": {"kind": "constant", "iops": 1}, "slow": {"kind": "constant", "iops": 1}, "hits": "even"}"#,
                "unknown variant `even`, expected `random` or `spread`",
            ),
        ];
        for (json, want) in cases {
            let e = err(json);
            assert!(e.contains(want), "{json}\n  gave: {e}\n  want: {want}");
            assert!(!e.contains('\n'), "multi-line error: {e}");
        }
    }
}
