//! Constant-rate server (seed 000's capacity model): one server of C IOPS; each request
//! takes 1/C seconds, optionally plus `bytes / bandwidth` for a size-dependent cost.
//! One slot: the scheduler in front holds the queue, so FCFS in front of it is exactly
//! the Lindley recursion and Poisson arrivals give M/D/1.

use crate::device::{Device, DeviceState};
use crate::error::{config, Result};
use crate::request::{Completion, Request};
use crate::rng::SimRng;
use crate::time::{per_op, Nanos, NS_PER_SEC};

/// One deterministic server of `iops` operations per second.
#[derive(Debug, Clone)]
pub struct ConstantRate {
    iops: f64,
    per_op: Nanos,
    bytes_per_sec: Option<f64>,
    busy: Option<Completion>,
}

impl ConstantRate {
    /// A server of `iops` IOPS (> 0).
    pub fn new(iops: f64) -> Result<Self> {
        if !(iops > 0.0 && iops.is_finite()) {
            return config(format!("constant device: capacity must be > 0 IOPS, got {iops}"));
        }
        Ok(ConstantRate { iops, per_op: per_op(iops), bytes_per_sec: None, busy: None })
    }

    /// Add a size-dependent transfer cost of `bytes / bytes_per_sec` to every request.
    pub fn with_bandwidth(mut self, bytes_per_sec: f64) -> Result<Self> {
        if !(bytes_per_sec > 0.0 && bytes_per_sec.is_finite()) {
            return config(format!("constant device: bandwidth must be > 0 B/s, got {bytes_per_sec}"));
        }
        self.bytes_per_sec = Some(bytes_per_sec);
        Ok(self)
    }

    /// Service time of `req`.
    #[inline]
    pub fn service_time(&self, req: &Request) -> Nanos {
        match self.bytes_per_sec {
            None => self.per_op,
            Some(bw) => self.per_op + (req.bytes as f64 * NS_PER_SEC as f64 / bw).round() as Nanos,
        }
    }
}

impl Device for ConstantRate {
    fn name(&self) -> String {
        match self.bytes_per_sec {
            None => format!("constant({} IOPS)", self.iops),
            Some(bw) => format!("constant({} IOPS + {:.0} MB/s)", self.iops, bw / 1e6),
        }
    }
    #[inline]
    fn state(&self) -> DeviceState {
        let busy = self.busy.is_some() as usize;
        DeviceState { outstanding: busy, free_slots: 1 - busy }
    }
    #[inline]
    fn submit(&mut self, req: Request, now: Nanos, _rng: &mut SimRng) {
        debug_assert!(self.busy.is_none(), "constant device accepts one request at a time");
        let finish = now + self.service_time(&req);
        self.busy = Some(Completion { req, dispatch: now, finish });
    }
    #[inline]
    fn next_completion(&self) -> Option<Nanos> {
        self.busy.as_ref().map(|c| c.finish)
    }
    #[inline]
    fn pop_completion(&mut self, _rng: &mut SimRng) -> Option<Completion> {
        self.busy.take()
    }
}
