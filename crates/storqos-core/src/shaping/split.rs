//! Split recombination (seed 000, §3.3.2 "Split", §4.4.2): RTT's primary class runs on
//! its own server of capacity Cmin, the overflow on a separate server of ΔC; neither
//! can use the other's idle capacity.
//!
//! **Modelling choice.** Two physical servers are a *device* property, so Split is the
//! two-tier device ([`Tiered`]) with a constant-rate server of Cmin as tier 0 and one of
//! ΔC as tier 1, each behind its own FIFO, and an [`RttStage`](super::RttStage) that sets
//! every request's `target` to its class. The device accepts [`SPLIT_DEPTH`] requests
//! so the scheduler never holds one back: each server's queue is its tier's FIFO, which
//! is exactly FCFS per server. (Pacing each class at its rate inside one scheduler on a
//! single device of Cmin + ΔC would not be the same: one device serves one request at a
//! time.) Response times are those of each request's own server.

use crate::device::Device;
use crate::devices::{ConstantRate, Tiered};
use crate::error::Result;

/// Outstanding requests the Split device accepts: effectively unbounded, so that all
/// queueing happens in the two servers' FIFOs (see the module notes).
pub const SPLIT_DEPTH: usize = u32::MAX as usize;

/// The two servers of Split: tier 0 at `primary_iops` (Cmin), tier 1 at `overflow_iops`
/// (ΔC), each FIFO; requests go by their `target` (set it with
/// [`RttStage::routing_target`](super::RttStage::routing_target)).
pub fn split_device(primary_iops: f64, overflow_iops: f64) -> Result<Tiered> {
    let p: Box<dyn Device + Send> = Box::new(ConstantRate::new(primary_iops)?);
    let o: Box<dyn Device + Send> = Box::new(ConstantRate::new(overflow_iops)?);
    Tiered::new(p, o, 0.0)?.with_depth(SPLIT_DEPTH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Request;
    use crate::rng::SimRng;
    use crate::schedulers::Fcfs;
    use crate::shaping::rtt::{Capacity, Rtt};
    use crate::shaping::rtt_stage::RttStage;
    use crate::sim::{simulate, SimConfig};
    use crate::time::NS_PER_MS;

    #[test]
    fn each_class_has_its_own_fifo_server() {
        // Cmin = 100 IOPS (10 ms each), ΔC = 50 IOPS (20 ms each), δ = 20 ms.
        // Batch of 4 at t = 0: 2 primary (finish 10, 20 ms), 2 overflow (finish 20, 40 ms).
        let rtt = Rtt::new(Capacity::from_iops(100.0).unwrap(), 20 * NS_PER_MS).unwrap();
        let mut s = RttStage::new(rtt, Fcfs::new()).routing_target(true);
        let mut d = split_device(100.0, 50.0).unwrap();
        let reqs = (0..4).map(|i| Request::new(i, 0, 0, 4096));
        let r = simulate(reqs, &[], &mut s, &mut d, &SimConfig { keep_requests: true, ..Default::default() }).unwrap();
        let log = r.log.unwrap();
        let ms: Vec<u64> = log.finish.iter().map(|f| f / NS_PER_MS).collect();
        let mut pairs: Vec<(u32, u64)> = log.class.iter().copied().zip(ms).collect();
        pairs.sort();
        assert_eq!(pairs, [(0, 10), (0, 20), (1, 20), (1, 40)]);
        let _ = SimRng::new(0);
    }
}
