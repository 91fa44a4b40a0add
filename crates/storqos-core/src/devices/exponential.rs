//! Exponential server (seed 004's simulation; the spec's queueing checks): one server of
//! C IOPS whose service times are i.i.d. Exp(mean 1/C), drawn from the simulator's RNG
//! at submission. One slot, like [`crate::devices::ConstantRate`]: the scheduler in front
//! holds the queue, so Poisson arrivals through FCFS give exactly the M/M/1 queue
//! (mean response 1/(μ − λ)).

use crate::device::{Device, DeviceState};
use crate::error::{config, Result};
use crate::request::{Completion, Request};
use crate::rng::SimRng;
use crate::sim::generate::round_ns;
use crate::time::{Nanos, NS_PER_SEC};

/// One server with exponentially distributed service of mean 1/`iops`.
#[derive(Debug, Clone)]
pub struct Exponential {
    iops: f64,
    mean_ns: f64,
    busy: Option<Completion>,
}

impl Exponential {
    /// A server of `iops` IOPS on average (> 0).
    pub fn new(iops: f64) -> Result<Self> {
        if !(iops > 0.0 && iops.is_finite()) {
            return config(format!("exponential device: iops must be > 0, got {iops}"));
        }
        Ok(Exponential { iops, mean_ns: NS_PER_SEC as f64 / iops, busy: None })
    }

    /// Mean service time (ns).
    pub fn mean_service(&self) -> f64 {
        self.mean_ns
    }
}

impl Device for Exponential {
    fn name(&self) -> String {
        format!("exponential({} IOPS)", self.iops)
    }
    #[inline]
    fn state(&self) -> DeviceState {
        let busy = self.busy.is_some() as usize;
        DeviceState { outstanding: busy, free_slots: 1 - busy }
    }
    #[inline]
    fn submit(&mut self, req: Request, now: Nanos, rng: &mut SimRng) {
        debug_assert!(self.busy.is_none(), "exponential device accepts one request at a time");
        // At least 1 ns so that time always advances (bias ≤ 1 ns on a mean of ~1 ms).
        let service = round_ns(rng.exp(self.mean_ns)).max(1);
        self.busy = Some(Completion { req, dispatch: now, finish: now + service });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_variance_of_service() {
        let mut d = Exponential::new(1000.0).unwrap();
        let mut rng = SimRng::new(11);
        let n = 200_000;
        let (mut s, mut s2) = (0.0, 0.0);
        for i in 0..n {
            d.submit(Request::new(i, 0, 0, 4096), 0, &mut rng);
            assert_eq!(d.state().free_slots, 0);
            let t = d.pop_completion(&mut rng).unwrap().finish as f64;
            s += t;
            s2 += t * t;
        }
        let mean = s / n as f64;
        let cv2 = (s2 / n as f64 - mean * mean) / (mean * mean);
        assert!((mean / 1e6 - 1.0).abs() < 0.01, "mean {mean}");
        assert!((cv2 - 1.0).abs() < 0.03, "squared CV {cv2}");
        assert!(Exponential::new(0.0).unwrap_err().to_string().contains("iops"));
    }
}
