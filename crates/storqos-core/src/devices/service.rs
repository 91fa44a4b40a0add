//! Service-time models of one server of a [`crate::devices::Parallel`] array (spec
//! "Device models"): deterministic (seed 000's constant-rate capacity, M/D/k),
//! exponential (seed 004's simulation, M/M/k) or the mechanical [`DiskProfile`] model
//! (seeds 001 and 003) with its queue order, or times measured on real storage
//! ([`crate::devices::measured`], `storqos calibrate`'s device profile).

use std::sync::Arc;

use crate::devices::disk::{DiskProfile, Head, Mechanics, QueuePolicy};
use crate::devices::measured::MeasuredService;
use crate::error::{config, Result};
use crate::request::Op;
use crate::rng::SimRng;
use crate::sim::generate::round_ns;
use crate::time::{per_op, Nanos, NS_PER_SEC};

/// How long one server takes for one request.
#[derive(Clone, Debug, PartialEq)]
pub enum ServiceModel {
    /// Every request takes exactly 1 / `iops` seconds.
    Constant {
        /// Capacity of one server (IOPS).
        iops: f64,
    },
    /// Service time exponentially distributed with mean 1 / `iops` seconds.
    Exponential {
        /// Capacity of one server (IOPS).
        iops: f64,
    },
    /// The mechanical disk model: seek + rotation + transfer, queue served by `queue`.
    Disk {
        /// Mechanical parameters.
        profile: DiskProfile,
        /// Order in which waiting requests are served.
        queue: QueuePolicy,
    },
    /// Service times measured per class of request (a device profile).
    Measured(Arc<MeasuredService>),
}

impl ServiceModel {
    /// Deterministic service of `iops` IOPS per server (> 0).
    pub fn constant(iops: f64) -> Result<Self> {
        let s = ServiceModel::Constant { iops };
        s.validate()?;
        Ok(s)
    }

    /// Exponential service of mean 1/`iops` per server (> 0).
    pub fn exponential(iops: f64) -> Result<Self> {
        let s = ServiceModel::Exponential { iops };
        s.validate()?;
        Ok(s)
    }

    /// The disk model of `profile`, queue served by `queue`.
    pub fn disk(profile: DiskProfile, queue: QueuePolicy) -> Result<Self> {
        let s = ServiceModel::Disk { profile, queue };
        s.validate()?;
        Ok(s)
    }

    /// Check the parameters, naming the bad one.
    pub fn validate(&self) -> Result<()> {
        match self {
            ServiceModel::Constant { iops } | ServiceModel::Exponential { iops } => {
                if !(*iops > 0.0 && iops.is_finite()) {
                    return config(format!("{} service: iops must be > 0, got {iops}", self.kind()));
                }
                Ok(())
            }
            ServiceModel::Disk { profile, .. } => profile.validate(),
            ServiceModel::Measured(_) => Ok(()), // checked when built
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            ServiceModel::Constant { .. } => "constant",
            ServiceModel::Exponential { .. } => "exponential",
            ServiceModel::Disk { .. } => "disk",
            ServiceModel::Measured(_) => "measured",
        }
    }

    /// Short description (`"exp(250 IOPS)"`, `"disk(enterprise-10k, sptf)"`).
    pub fn name(&self) -> String {
        match self {
            ServiceModel::Constant { iops } => format!("const({iops} IOPS)"),
            ServiceModel::Exponential { iops } => format!("exp({iops} IOPS)"),
            ServiceModel::Disk { profile, queue } => format!("disk({}, {})", profile.name, queue.as_str()),
            ServiceModel::Measured(m) => m.name(),
        }
    }

    /// Mean service time of a random `bytes`-sized request served FIFO (ns).
    pub fn mean_service(&self, bytes: u32) -> f64 {
        match self {
            ServiceModel::Constant { iops } | ServiceModel::Exponential { iops } => NS_PER_SEC as f64 / iops,
            ServiceModel::Disk { profile, .. } => profile.mean_random_service(bytes),
            ServiceModel::Measured(m) => m.mean_random_read(bytes),
        }
    }

    /// The order waiting requests are served in (FIFO unless a disk says otherwise).
    pub fn queue_policy(&self) -> QueuePolicy {
        match self {
            ServiceModel::Disk { queue, .. } => *queue,
            _ => QueuePolicy::Fifo,
        }
    }

    /// The model with its per-request constants computed once, for serving.
    pub(crate) fn prepare(&self) -> PreparedService {
        match self {
            ServiceModel::Constant { iops } => PreparedService::Constant { service: per_op(*iops) },
            ServiceModel::Exponential { iops } => PreparedService::Exponential { mean: NS_PER_SEC as f64 / iops },
            ServiceModel::Disk { profile, .. } => PreparedService::Disk(Mechanics::new(profile)),
            ServiceModel::Measured(m) => PreparedService::Measured(Arc::clone(m)),
        }
    }
}

/// A [`ServiceModel`] ready to serve: what every request would recompute (the constant
/// service time, the exponential mean, the disk's derived constants) computed once by
/// the same expressions, so the draws and times are the model's, bit for bit.
#[derive(Clone, Debug)]
pub(crate) enum PreparedService {
    /// [`ServiceModel::Constant`]: the fixed service time (ns).
    Constant { service: Nanos },
    /// [`ServiceModel::Exponential`]: the mean service time (ns).
    Exponential { mean: f64 },
    /// [`ServiceModel::Disk`].
    Disk(Mechanics),
    /// [`ServiceModel::Measured`].
    Measured(Arc<MeasuredService>),
}

impl PreparedService {
    /// Position (bytes) on the server that a server-local offset lands at (the key of
    /// positional queues; the offset itself for measured models, which tell sequential
    /// requests by it; 0 for the others, whose service ignores position).
    #[inline]
    pub fn position(&self, local_offset: u64) -> u64 {
        match self {
            PreparedService::Disk(m) => m.position(local_offset),
            PreparedService::Measured(_) => local_offset,
            _ => 0,
        }
    }

    /// Draw the service time (ns, ≥ 1) of an `op` of `bytes` at position `pos` for a
    /// server whose head is `head` (moved by disks; by measured models, to the end of
    /// the request, so the next one there is sequential).
    #[inline]
    pub fn serve(&self, head: &mut Head, pos: u64, op: Op, bytes: u32, rng: &mut SimRng) -> Nanos {
        match self {
            PreparedService::Measured(m) => {
                let sequential = pos == head.pos && pos != 0;
                head.pos = pos + u64::from(bytes);
                m.draw(op, sequential, bytes, rng)
            }
            PreparedService::Constant { service } => *service,
            PreparedService::Exponential { mean } => round_ns(rng.exp(*mean)).max(1),
            PreparedService::Disk(m) => m.serve(head, pos, bytes, rng),
        }
    }
}
