//! A service-time model measured on real storage (`storqos calibrate`'s device profile):
//! for each class of request (read or write, random or sequential, a size), the
//! quantile function of its service time, drawn from by inverse transform sampling with
//! linear interpolation between the measured quantiles.
//!
//! A request takes the class of its op and pattern (sequential when it starts where the
//! server's previous request ended) with the smallest measured size at or above its own;
//! above the largest size, that class's time is scaled by the size ratio (a transfer
//! bound). A pattern that was not measured falls back to the other pattern, then to the
//! other op.

use crate::error::{config, Result};
use crate::request::Op;
use crate::rng::SimRng;
use crate::time::Nanos;

/// The measured service time of one class of request.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredClass {
    /// Reads (true) or writes.
    pub read: bool,
    /// Sequential (true) or random.
    pub sequential: bool,
    /// Request size (bytes, > 0).
    pub bytes: u32,
    /// Points `(q, ns)` of the quantile function, q rising from 0 to 1, ns not falling.
    pub quantiles: Vec<(f64, f64)>,
}

impl MeasuredClass {
    fn validate(&self) -> Result<()> {
        let what = format!(
            "{} {} {} B",
            if self.sequential { "sequential" } else { "random" },
            if self.read { "read" } else { "write" },
            self.bytes
        );
        if self.bytes == 0 {
            return config(format!("measured service: {what}: bytes must be > 0"));
        }
        let q = &self.quantiles;
        if q.len() < 2 {
            return config(format!("measured service: {what}: needs at least 2 quantile points"));
        }
        if q[0].0 != 0.0 || q[q.len() - 1].0 != 1.0 {
            return config(format!("measured service: {what}: quantiles must run from q = 0 to q = 1"));
        }
        for w in q.windows(2) {
            if w[1].0.partial_cmp(&w[0].0) != Some(std::cmp::Ordering::Greater) || w[1].1 < w[0].1 {
                return config(format!(
                    "measured service: {what}: quantile points must rise (q and time), got ({}, {}) then ({}, {})",
                    w[0].0, w[0].1, w[1].0, w[1].1
                ));
            }
        }
        if !q.iter().all(|&(_, ns)| ns.is_finite() && ns > 0.0) {
            return config(format!("measured service: {what}: times must be finite and > 0"));
        }
        Ok(())
    }

    /// Mean of the service time (ns): the integral of the piecewise-linear quantile function.
    pub fn mean_ns(&self) -> f64 {
        self.quantiles.windows(2).map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0).sum()
    }

    /// The service time at quantile `u` in [0, 1] (ns).
    fn at(&self, u: f64) -> f64 {
        let q = &self.quantiles;
        let i = q.partition_point(|&(p, _)| p <= u).clamp(1, q.len() - 1);
        let (p0, t0) = q[i - 1];
        let (p1, t1) = q[i];
        t0 + (t1 - t0) * ((u - p0) / (p1 - p0)).clamp(0.0, 1.0)
    }
}

/// Measured service times of a device, by class.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredService {
    /// The classes, sorted by (read, sequential, bytes).
    classes: Vec<MeasuredClass>,
}

impl MeasuredService {
    /// The model of `classes` (at least one; each checked, naming the bad one).
    pub fn new(mut classes: Vec<MeasuredClass>) -> Result<Self> {
        if classes.is_empty() {
            return config("measured service: give at least one class");
        }
        for c in &classes {
            c.validate()?;
        }
        classes.sort_by_key(|c| (!c.read, c.sequential, c.bytes));
        for w in classes.windows(2) {
            if (w[0].read, w[0].sequential, w[0].bytes) == (w[1].read, w[1].sequential, w[1].bytes) {
                return config(format!("measured service: the class of {} B is given twice", w[0].bytes));
            }
        }
        Ok(MeasuredService { classes })
    }

    /// The classes, sorted by (reads first, random first, bytes).
    pub fn classes(&self) -> &[MeasuredClass] {
        &self.classes
    }

    /// The class serving a request of `bytes` and the scale applied to its time.
    fn class(&self, read: bool, sequential: bool, bytes: u32) -> (&MeasuredClass, f64) {
        let pick = |r: bool, s: bool| {
            let same: Vec<&MeasuredClass> = self.classes.iter().filter(|c| c.read == r && c.sequential == s).collect();
            let last = *same.last()?;
            Some(match same.into_iter().find(|c| c.bytes >= bytes) {
                Some(c) => (c, 1.0),
                None => (last, f64::from(bytes) / f64::from(last.bytes)),
            })
        };
        pick(read, sequential)
            .or_else(|| pick(read, !sequential))
            .or_else(|| pick(!read, sequential))
            .or_else(|| pick(!read, !sequential))
            .expect("a measured model has at least one class")
    }

    /// Mean service time of a random read of `bytes` (ns).
    pub fn mean_random_read(&self, bytes: u32) -> f64 {
        let (c, scale) = self.class(true, false, bytes);
        c.mean_ns() * scale
    }

    /// Draw the service time (ns, ≥ 1) of a request.
    pub fn draw(&self, op: Op, sequential: bool, bytes: u32, rng: &mut SimRng) -> Nanos {
        let (c, scale) = self.class(op == Op::Read, sequential, bytes);
        ((c.at(rng.uniform()) * scale).round() as Nanos).max(1)
    }

    /// Short description (`"measured(6 classes, 4 KiB read 500 µs)"`).
    pub fn name(&self) -> String {
        format!("measured({} classes, 4 KiB read {:.0} µs)", self.classes.len(), self.mean_random_read(4096) / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(read: bool, sequential: bool, bytes: u32, q: &[(f64, f64)]) -> MeasuredClass {
        MeasuredClass { read, sequential, bytes, quantiles: q.to_vec() }
    }

    #[test]
    fn draws_follow_the_quantile_function() {
        // Uniform on [100 µs, 300 µs]: mean 200 µs, median 200 µs, p90 280 µs.
        let m = MeasuredService::new(vec![class(true, false, 4096, &[(0.0, 100e3), (1.0, 300e3)])]).unwrap();
        let mut rng = SimRng::new(7);
        let mut v: Vec<Nanos> = (0..100_000).map(|_| m.draw(Op::Read, false, 4096, &mut rng)).collect();
        v.sort_unstable();
        let mean = v.iter().sum::<u64>() as f64 / v.len() as f64;
        assert!((mean - 200e3).abs() < 1e3, "mean {mean}");
        assert!((v[50_000] as f64 - 200e3).abs() < 2e3 && (v[90_000] as f64 - 280e3).abs() < 2e3);
        assert!(v[0] >= 100_000 && v[99_999] <= 300_000);
        assert_eq!(m.mean_random_read(4096), 200e3);
    }

    #[test]
    fn classes_by_op_pattern_and_size_with_scaling_above_the_largest() {
        let m = MeasuredService::new(vec![
            class(true, false, 4096, &[(0.0, 100.0), (1.0, 100.0)]),
            class(true, false, 65536, &[(0.0, 400.0), (1.0, 400.0)]),
            class(false, false, 4096, &[(0.0, 50.0), (1.0, 50.0)]),
            class(true, true, 65536, &[(0.0, 200.0), (1.0, 200.0)]),
        ])
        .unwrap();
        let mut rng = SimRng::new(1);
        assert_eq!(m.draw(Op::Read, false, 512, &mut rng), 100);
        assert_eq!(m.draw(Op::Read, false, 8192, &mut rng), 400);
        assert_eq!(m.draw(Op::Read, false, 131072, &mut rng), 800); // 2 × the 64 KiB class
        assert_eq!(m.draw(Op::Write, false, 4096, &mut rng), 50);
        assert_eq!(m.draw(Op::Write, true, 4096, &mut rng), 50); // no sequential writes: random writes
        assert_eq!(m.draw(Op::Read, true, 4096, &mut rng), 200);
    }

    #[test]
    fn bad_tables_are_refused_with_the_class_named() {
        let e = MeasuredService::new(vec![class(false, true, 8192, &[(0.0, 5.0), (0.5, 4.0), (1.0, 6.0)])]);
        let msg = e.unwrap_err().to_string();
        assert!(msg.contains("sequential write 8192 B") && msg.contains("must rise"), "{msg}");
        assert!(MeasuredService::new(vec![class(true, false, 4096, &[(0.1, 5.0), (1.0, 6.0)])]).is_err());
        assert!(MeasuredService::new(vec![]).is_err());
    }
}
