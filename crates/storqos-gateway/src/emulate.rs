//! Emulated device capacity: a constant-rate server (the simulator's `constant` device,
//! spec "Device models") in front of a real file, so that QoS shows on storage much
//! faster than the capacity being studied.
//!
//! An [`Emulated`] device of `C` IOPS and `k` servers serves each request in `k/C` s on
//! the server that frees first, one request after another per server, FIFO in the order
//! requests were started: `k = 1` is `--iops C` (the gateway's whole backend), and the
//! tiered backend ([`crate::tier`]) gives each tier one of its own (the `depth` of a
//! tier: a device that reaches `C` only with `k` requests outstanding). A request is
//! answered at `max(real I/O done, emulated finish)`
//! ([`crate::emulated_backend::EmulatedBackend`]).
//!
//! The loop may wake late (tokio's millisecond timer; on a busy machine the thread
//! waits for a CPU), and a constant-rate device does not lose the time it would have
//! served in: a server may start a request up to [`TIMER_SLACK_NS`] in the past, never
//! before the request's arrival, so a depth-1 gateway still reaches `C` IOPS.

use storqos_core::time::{per_op, Nanos};

/// How far in the past an emulated server may start a request (10 ms): see the module
/// documentation.
pub const TIMER_SLACK_NS: Nanos = 10_000_000;

/// `servers` constant-rate servers sharing a capacity of `iops`.
#[derive(Clone, Debug, PartialEq)]
pub struct Emulated {
    /// Service time of one request on one server (ns).
    service: Nanos,
    /// When each server is free again (clock ns).
    free_at: Vec<Nanos>,
}

impl Emulated {
    /// A device of `iops` (> 0) over `servers` (≥ 1) servers of `iops / servers` each.
    pub fn new(iops: f64, servers: usize) -> Self {
        let servers = servers.max(1);
        Emulated { service: per_op(iops / servers as f64), free_at: vec![0; servers] }
    }

    /// Start a request that arrived at `arrival` on the server free first, at `now`;
    /// returns its emulated finish.
    pub fn start(&mut self, now: Nanos, arrival: Nanos) -> Nanos {
        let (i, free) = self.free_at.iter().copied().enumerate().min_by_key(|&(_, t)| t).unwrap_or((0, 0));
        let start = free.max(now.saturating_sub(TIMER_SLACK_NS).max(arrival));
        let finish = start + self.service;
        if let Some(f) = self.free_at.get_mut(i) {
            *f = finish;
        }
        finish
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_server_serves_back_to_back_within_the_slack() {
        let ms = 1_000_000;
        let mut d = Emulated::new(1000.0, 1);
        assert_eq!(d.start(100 * ms, 100 * ms), 101 * ms);
        assert_eq!(d.start(100 * ms, 100 * ms), 102 * ms, "queued behind the first");
        // Woken 5 ms late: starts when it could have (its arrival), not now.
        assert_eq!(d.start(110 * ms, 104 * ms), 105 * ms);
        // Never more than the slack in the past.
        assert_eq!(d.start(200 * ms, 150 * ms), 191 * ms);
    }

    #[test]
    fn k_servers_share_the_capacity() {
        let ms = 1_000_000;
        let mut d = Emulated::new(1000.0, 2);
        // Two at once, 2 ms each: both done at 2 ms; the third waits for one.
        assert_eq!(d.start(0, 0), 2 * ms);
        assert_eq!(d.start(0, 0), 2 * ms);
        assert_eq!(d.start(0, 0), 4 * ms);
    }
}
