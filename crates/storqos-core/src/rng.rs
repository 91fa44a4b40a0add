//! The simulator's random number generator: seeded, portable and fast.
//!
//! Xoshiro256++ gives the same stream on every platform for a given seed, which is what
//! makes runs reproducible bit for bit. Devices and workloads draw from the one
//! generator the simulator owns, in event order, so a run is a pure function of its
//! inputs and seed.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The seeded generator used by the simulator and device models.
#[derive(Clone, Debug)]
pub struct SimRng(Xoshiro256PlusPlus);

impl SimRng {
    /// A generator seeded from `seed`.
    pub fn new(seed: u64) -> Self {
        SimRng(Xoshiro256PlusPlus::seed_from_u64(seed))
    }
    /// Uniform in [0, 1).
    #[inline]
    pub fn uniform(&mut self) -> f64 {
        self.0.random::<f64>()
    }
    /// Uniform integer in [0, n) (n > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        self.0.random_range(0..n)
    }
    /// Exponentially distributed with the given mean (inverse-transform sampling).
    #[inline]
    pub fn exp(&mut self, mean: f64) -> f64 {
        // 1 - U lies in (0, 1], so the logarithm is finite.
        -mean * (1.0 - self.uniform()).ln()
    }
    /// True with probability `p`.
    #[inline]
    pub fn bernoulli(&mut self, p: f64) -> bool {
        self.uniform() < p
    }
}
