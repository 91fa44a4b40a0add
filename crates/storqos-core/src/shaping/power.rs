//! Power model with storage pools (seed 000, §3.2.3 "Power Model", Fig. 3.7; §4.3,
//! Fig. 4.1, Table 4.2; SPEC "Algorithm notes → Power").
//!
//! Storage is a set of pools, each a replica of the data on `disks_per_pool` disks and
//! able to serve `pool_iops`. For an epoch needing capacity C, ⌈C / pool_iops⌉ pools are
//! ON and the rest sleep. A disk draws [`ACTIVE_W`] while serving, [`IDLE_W`] while on
//! and idle, [`SLEEP_W`] asleep. Every request costs one disk `disks_per_pool /
//! pool_iops` seconds of activity (whichever ON disk serves it), so over an epoch of
//! length T with N requests:
//!
//! ```text
//! E = ON_disks · IDLE_W · T + (ACTIVE_W − IDLE_W) · N · disks_per_pool / pool_iops
//!     + sleeping_disks · SLEEP_W · T
//! ```
//!
//! Provisioning for 100 % of the requests against a decomposed fraction changes only
//! the number of ON pools; the work (second term) is the same, since the overflow is
//! still served.

use crate::error::{config, Result};
use crate::time::{to_secs, Nanos};

/// Active power of one disk (W): IBM Ultrastar 36Z15, seed 000 §4.3.
pub const ACTIVE_W: f64 = 13.5;
/// Idle (spinning, not seeking) power of one disk (W): IBM Ultrastar 36Z15, §4.3.
pub const IDLE_W: f64 = 10.2;
/// Sleep power of one disk (W): "negligible" (§3.2.3).
pub const SLEEP_W: f64 = 0.0;
/// Default pool capacity (IOPS): the 200 IOPS pool of the §3.2.3 example.
pub const DEFAULT_POOL_IOPS: f64 = 200.0;
/// Default disks per pool. The thesis does not give the number; 4 is our choice (a
/// 200 IOPS pool of four ~50 IOPS random-I/O disks).
pub const DEFAULT_DISKS_PER_POOL: u32 = 4;

/// Pools of disks and their power states.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PoolModel {
    /// Capacity of one pool (IOPS).
    pub pool_iops: f64,
    /// Disks in one pool.
    pub disks_per_pool: u32,
    /// Pools in the system (the rest of the ON ones sleep); `None` = only ON pools count.
    pub total_pools: Option<u32>,
    /// Disk power while serving (W).
    pub active_w: f64,
    /// Disk power while idle (W).
    pub idle_w: f64,
    /// Disk power asleep (W).
    pub sleep_w: f64,
}

impl Default for PoolModel {
    fn default() -> Self {
        PoolModel {
            pool_iops: DEFAULT_POOL_IOPS,
            disks_per_pool: DEFAULT_DISKS_PER_POOL,
            total_pools: None,
            active_w: ACTIVE_W,
            idle_w: IDLE_W,
            sleep_w: SLEEP_W,
        }
    }
}

/// Power and energy of one provisioning choice over an epoch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PowerEstimate {
    /// Capacity asked for (IOPS).
    pub capacity_iops: f64,
    /// Pools ON: ⌈capacity / pool_iops⌉.
    pub on_pools: u32,
    /// Disks ON.
    pub on_disks: u32,
    /// Disk-seconds of activity serving the requests.
    pub busy_disk_s: f64,
    /// Epoch length (s).
    pub span_s: f64,
    /// Energy over the epoch (J).
    pub energy_j: f64,
    /// Mean power (W).
    pub power_w: f64,
}

impl PoolModel {
    /// Check the parameters.
    pub fn validate(&self) -> Result<()> {
        if !(self.pool_iops.is_finite() && self.pool_iops > 0.0) {
            return config(format!("power: pool capacity must be > 0 IOPS, got {}", self.pool_iops));
        }
        if self.disks_per_pool == 0 {
            return config("power: disks per pool must be >= 1");
        }
        for (name, w) in [("active", self.active_w), ("idle", self.idle_w), ("sleep", self.sleep_w)] {
            if !(w.is_finite() && w >= 0.0) {
                return config(format!("power: {name} power must be >= 0 W, got {w}"));
            }
        }
        Ok(())
    }

    /// Pools that must be ON for `capacity_iops`.
    pub fn on_pools(&self, capacity_iops: f64) -> u32 {
        (capacity_iops / self.pool_iops - 1e-9).ceil().max(1.0) as u32
    }

    /// Power over an epoch of `span` with `requests` requests at `capacity_iops`.
    pub fn estimate(&self, capacity_iops: f64, requests: u64, span: Nanos) -> Result<PowerEstimate> {
        self.validate()?;
        let on_pools = self.on_pools(capacity_iops);
        if let Some(total) = self.total_pools {
            if on_pools > total {
                return config(format!(
                    "power: {capacity_iops:.0} IOPS needs {on_pools} pools, more than the {total} there are"
                ));
            }
        }
        let on_disks = on_pools * self.disks_per_pool;
        let span_s = to_secs(span);
        let per_request_s = self.disks_per_pool as f64 / self.pool_iops;
        let busy = (requests as f64 * per_request_s).min(on_disks as f64 * span_s);
        let asleep = self.total_pools.map_or(0, |t| (t - on_pools) * self.disks_per_pool);
        let energy = on_disks as f64 * self.idle_w * span_s
            + (self.active_w - self.idle_w) * busy
            + asleep as f64 * self.sleep_w * span_s;
        Ok(PowerEstimate {
            capacity_iops,
            on_pools,
            on_disks,
            busy_disk_s: busy,
            span_s,
            energy_j: energy,
            power_w: if span_s > 0.0 { energy / span_s } else { 0.0 },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_SEC;

    #[test]
    fn thesis_example_eight_pools_against_one() {
        // §3.2.3: 1500 IOPS for 100 % at 10 ms needs 8 pools of 200 IOPS; 200 IOPS for
        // 90 % needs 1.
        let m = PoolModel::default();
        assert_eq!(m.on_pools(1500.0), 8);
        assert_eq!(m.on_pools(200.0), 1);
        assert_eq!(m.on_pools(200.5), 2);
        // 100 s, 10 000 requests: each costs 4/200 = 20 ms of one disk.
        let base = m.estimate(1500.0, 10_000, 100 * NS_PER_SEC).unwrap();
        let dec = m.estimate(200.0, 10_000, 100 * NS_PER_SEC).unwrap();
        assert_eq!((base.on_disks, dec.on_disks), (32, 4));
        assert!((base.busy_disk_s - 200.0).abs() < 1e-9);
        assert!((base.energy_j - (32.0 * 10.2 * 100.0 + 3.3 * 200.0)).abs() < 1e-6);
        assert!((dec.energy_j - (4.0 * 10.2 * 100.0 + 3.3 * 200.0)).abs() < 1e-6);
        assert!(base.power_w > 7.0 * dec.power_w);
    }

    #[test]
    fn bad_models_are_errors() {
        assert!(PoolModel { pool_iops: 0.0, ..Default::default() }.estimate(1.0, 1, 1).is_err());
        assert!(PoolModel { disks_per_pool: 0, ..Default::default() }.estimate(1.0, 1, 1).is_err());
        let e = PoolModel { total_pools: Some(2), ..Default::default() }.estimate(1000.0, 1, 1).unwrap_err();
        assert!(e.to_string().contains("needs 5 pools"), "{e}");
    }
}
