//! # Throughput allocation for tiered storage: BAA, DRF and FQ
//!
//! Seed 004 (`shared/seeds/004_0b9aebab67b5daf8.txt`, Wang & Varman, "Balancing fairness
//! and efficiency in tiered storage systems with bottleneck-aware allocation"): clients
//! share an HDD and an SSD; client `i` sends a fraction `h_i` of its requests to the SSD
//! (hits) and `m_i = 1 − h_i` to the HDD. How many IOPS should each backlogged client
//! get? This module answers with three policies and reports, for each, the fair shares,
//! the allocation per client and per device, and the device utilisations. It is pure
//! arithmetic (no clock, no I/O), so the simulator's two-level scheduler
//! ([`crate::schedulers::baa_sched`]) and the live gateway use the same code.
//!
//! ## 1. The model (seed 004 §2–§3.1)
//! Devices `k` of capacity `C_k` IOPS; client `i` puts a fraction `p_ik` of its
//! requests on device `k` (`Σ_k p_ik = 1`; for two tiers `p_i,HDD = m_i`,
//! `p_i,SSD = h_i`). A client receiving `A_i` IOPS loads device `k` with `A_i·p_ik`.
//! Clients may carry weights `w_i` (default 1, `W = Σ w`); the paper's conclusion
//! sketches this extension.
//!
//! - **Fair share** (§3.1 item 4, Lemma 1): the throughput of client `i` when every
//!   device is statically partitioned, each client getting `w_i/W` of it:
//!   `f_i = min_k (w_i/W)·C_k / p_ik`. For two tiers and equal weights this is the
//!   paper's `C_d/(n·m_i)` for `i ∈ D` and `C_s/(n·h_i)` for `i ∈ S`.
//! - **Bottleneck set** (§3.1 items 1–3): the device attaining that minimum, i.e. the
//!   largest `p_ik / C_k`. For two tiers: `h_bal = C_s/(C_s + C_d)`,
//!   `D = {h_i ≤ h_bal}`, `S = {h_i > h_bal}`. Ties go to the device listed first (the
//!   HDD in [`Problem::two_tier`], as the paper's `≤` puts `h_bal` into `D`), decided
//!   with the relative tolerance [`TIE_TOLERANCE`].
//!
//! ## 2. Policies
//! - [`Policy::Baa`] (§3.1 fairness rules (1)–(3), §3.2 LP (1)–(4)): clients of one
//!   bottleneck set get allocations proportional to their fair shares,
//!   `A_i = ρ_k·f_i`; clients of different sets are envy-free; the amplification
//!   factors `ρ_k` maximise the total throughput. Two devices: [`baa`] solves the
//!   paper's 2-variable LP exactly. Any number of devices: [`lp`] (an `N`-variable LP,
//!   see `docs/baa.md`), equal to [`baa`] for two.
//! - [`Policy::Drf`] (§2 baseline, Ghodsi et al.): equal (weighted) dominant shares, by
//!   progressive filling ([`drf`]). Example I: allocation ratio 9 : 25.
//! - [`Policy::Fq`] (§2 baseline): equal (weighted) throughputs, scaled until a device
//!   saturates ([`fq`]). Example I: 166.6 IOPS each.
//!
//! ## 3. Worked example (Example III, §3.1–§3.2)
//! `C_d = 200`, `C_s = 1000`, `h = (0.75, 0.5, 0.9, 0.95)`: `h_bal = 0.83`,
//! `D = {p, q}`, `S = {r, s}`, `f = (200, 100, 277.8, 263.2)`; the LP
//! `max 300ρ_d + 541ρ_s` s.t. `100ρ_d + 41ρ_s ≤ 200`, `200ρ_d + 500ρ_s ≤ 1000`,
//! `0.55 ≤ ρ_d/ρ_s ≤ 1.67` gives `ρ_d = 1.41`, `ρ_s = 1.44`,
//! `A = (282.5, 141.3, 398.6, 377.6)` and both devices 100 % busy.
//!
//! ```
//! use storqos_core::alloc::{allocate, Policy, Problem};
//! let p = Problem::two_tier(200.0, 1000.0, &[0.75, 0.5, 0.9, 0.95]).unwrap();
//! let a = allocate(&p, Policy::Baa).unwrap();
//! assert!((a.throughput[0] - 282.5).abs() < 0.1);
//! assert!(a.utilisation.iter().all(|u| (u - 1.0).abs() < 1e-9));
//! ```

pub mod baa;
pub mod drf;
pub mod fq;
pub mod lp;
pub mod scenario;
pub mod sets;

use crate::error::{config, Result};

pub use sets::BottleneckSets;

/// Relative tolerance when comparing a client's loads `p_ik / C_k` across devices: loads
/// equal within this are a tie (a client at exactly `h_bal` computed in floating point
/// still lands in `D`, as the paper's `h_i ≤ h_bal` says).
pub const TIE_TOLERANCE: f64 = 1e-12;

/// How far a client's device fractions may miss summing to 1.
pub const FRACTION_SUM_TOLERANCE: f64 = 1e-9;

/// Device index of the HDD in [`Problem::two_tier`] (listed first: it wins ties, so
/// `h_i = h_bal` is HDD-bound as in the paper).
pub const HDD: usize = 0;
/// Device index of the SSD in [`Problem::two_tier`].
pub const SSD: usize = 1;

/// An allocation policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// Bottleneck-aware allocation (seed 004 §3).
    Baa,
    /// Dominant resource fairness (seed 004 §2, Ghodsi et al.).
    Drf,
    /// Fair queuing: equal (weighted) throughputs.
    Fq,
}

impl Policy {
    /// Every policy, in report order.
    pub const ALL: [Policy; 3] = [Policy::Baa, Policy::Drf, Policy::Fq];

    /// Lower-case name (`"baa"`, `"drf"`, `"fq"`).
    pub fn name(self) -> &'static str {
        match self {
            Policy::Baa => "baa",
            Policy::Drf => "drf",
            Policy::Fq => "fq",
        }
    }

    /// Parse a name (`baa`, `drf`, `fq`; case-insensitive).
    pub fn parse(s: &str) -> Result<Policy> {
        match s.to_ascii_lowercase().as_str() {
            "baa" => Ok(Policy::Baa),
            "drf" => Ok(Policy::Drf),
            "fq" => Ok(Policy::Fq),
            _ => config(format!("allocation policy: unknown {s:?} (known: baa, drf, fq)")),
        }
    }
}

/// Devices, clients' device fractions and weights: what every policy allocates over.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    capacities: Vec<f64>,
    fractions: Vec<Vec<f64>>,
    weights: Vec<f64>,
}

impl Problem {
    /// `capacities[k]` IOPS of device `k` (finite, > 0); `fractions[i][k]` the share of
    /// client `i`'s requests going to device `k` (each in [0, 1], summing to 1); equal
    /// weights. At least one device and one client.
    pub fn new(capacities: Vec<f64>, fractions: Vec<Vec<f64>>) -> Result<Self> {
        if capacities.is_empty() {
            return config("allocation: at least one device is needed");
        }
        if fractions.is_empty() {
            return config("allocation: at least one client is needed");
        }
        for (k, &c) in capacities.iter().enumerate() {
            if !(c.is_finite() && c > 0.0) {
                return config(format!("allocation: capacity of device {k} must be a finite number > 0 IOPS, got {c}"));
            }
        }
        for (i, row) in fractions.iter().enumerate() {
            if row.len() != capacities.len() {
                return config(format!(
                    "allocation: client {i} has {} device fractions, expected {} (one per device)",
                    row.len(),
                    capacities.len()
                ));
            }
            for (k, &p) in row.iter().enumerate() {
                if !(0.0..=1.0).contains(&p) {
                    return config(format!(
                        "allocation: client {i}'s fraction on device {k} must lie in [0, 1], got {p}"
                    ));
                }
            }
            let s: f64 = row.iter().sum();
            if (s - 1.0).abs() > FRACTION_SUM_TOLERANCE {
                return config(format!("allocation: client {i}'s device fractions must sum to 1, got {s}"));
            }
        }
        let n = fractions.len();
        Ok(Problem { capacities, fractions, weights: vec![1.0; n] })
    }

    /// Seed 004's setting: an HDD of `hdd_iops` (device [`HDD`]) and an SSD of
    /// `ssd_iops` (device [`SSD`]); client `i` hits the SSD with probability
    /// `hit_ratios[i]` ∈ [0, 1].
    pub fn two_tier(hdd_iops: f64, ssd_iops: f64, hit_ratios: &[f64]) -> Result<Self> {
        for (i, &h) in hit_ratios.iter().enumerate() {
            if !(0.0..=1.0).contains(&h) {
                return config(format!("allocation: hit ratio of client {i} must lie in [0, 1], got {h}"));
            }
        }
        Problem::new(vec![hdd_iops, ssd_iops], hit_ratios.iter().map(|&h| vec![1.0 - h, h]).collect())
    }

    /// Give client `i` weight `weights[i]` (finite, > 0; one per client).
    pub fn with_weights(mut self, weights: Vec<f64>) -> Result<Self> {
        if weights.len() != self.fractions.len() {
            return config(format!("allocation: {} weights given for {} clients", weights.len(), self.fractions.len()));
        }
        for (i, &w) in weights.iter().enumerate() {
            if !(w.is_finite() && w > 0.0) {
                return config(format!("allocation: weight of client {i} must be a finite number > 0, got {w}"));
            }
        }
        self.weights = weights;
        Ok(self)
    }

    /// Device capacities (IOPS).
    pub fn capacities(&self) -> &[f64] {
        &self.capacities
    }

    /// `fractions()[i][k]`: share of client `i`'s requests on device `k`.
    pub fn fractions(&self) -> &[Vec<f64>] {
        &self.fractions
    }

    /// Client weights.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Number of clients.
    pub fn clients(&self) -> usize {
        self.fractions.len()
    }

    /// Number of devices.
    pub fn devices(&self) -> usize {
        self.capacities.len()
    }

    /// Build the full report of allocation `throughput` (IOPS per client).
    pub(crate) fn report(
        &self,
        policy: Policy,
        sets: &BottleneckSets,
        throughput: Vec<f64>,
        amplification: Vec<Option<f64>>,
    ) -> Allocation {
        let per_device: Vec<Vec<f64>> =
            self.fractions.iter().zip(&throughput).map(|(row, &a)| row.iter().map(|p| a * p).collect()).collect();
        let device_iops: Vec<f64> = (0..self.devices()).map(|k| per_device.iter().map(|r| r[k]).sum()).collect();
        let utilisation = device_iops.iter().zip(&self.capacities).map(|(x, c)| x / c).collect();
        debug_assert!(throughput.iter().all(|a| a.is_finite() && *a >= 0.0));
        Allocation {
            policy,
            fair_share: sets.fair_share.clone(),
            bottleneck: sets.bottleneck.clone(),
            throughput,
            per_device,
            device_iops,
            utilisation,
            amplification,
        }
    }
}

/// What a policy allocates, with everything a report needs. IOPS throughout.
#[derive(Clone, Debug, PartialEq)]
pub struct Allocation {
    /// The policy that produced it.
    pub policy: Policy,
    /// Fair share `f_i` of each client (IOPS, seed 004 Lemma 1; weighted).
    pub fair_share: Vec<f64>,
    /// Bottleneck device of each client (its bottleneck set).
    pub bottleneck: Vec<usize>,
    /// Allocation `A_i` of each client (IOPS).
    pub throughput: Vec<f64>,
    /// `per_device[i][k] = A_i · p_ik`: client `i`'s IOPS on device `k`.
    pub per_device: Vec<Vec<f64>>,
    /// Total IOPS on each device.
    pub device_iops: Vec<f64>,
    /// `device_iops[k] / C_k` (1.0 = saturated).
    pub utilisation: Vec<f64>,
    /// BAA's amplification factor `ρ_k = A_i / f_i` of each device's bottleneck set
    /// (`None` for an empty set, and for DRF and FQ).
    pub amplification: Vec<Option<f64>>,
}

impl Allocation {
    /// Total throughput `Σ A_i` (IOPS).
    pub fn total(&self) -> f64 {
        self.throughput.iter().sum()
    }

    /// Relative weights for a proportional-share dispatcher (seed 004 §3.3 step 3): the
    /// allocations themselves, each at least [`MIN_DISPATCH_WEIGHT`] so that a client
    /// allocated nothing still drains.
    pub fn dispatch_weights(&self) -> Vec<f64> {
        let top = self.throughput.iter().cloned().fold(0.0, f64::max).max(1.0);
        self.throughput.iter().map(|&a| (a / top).max(MIN_DISPATCH_WEIGHT)).collect()
    }
}

/// Smallest relative weight [`Allocation::dispatch_weights`] hands a dispatcher (WF2Q+
/// needs weights > 0).
pub const MIN_DISPATCH_WEIGHT: f64 = 1e-6;

/// Allocate with `policy`. BAA over two devices uses the exact 2-variable solution
/// ([`baa::solve`]); over any other number of devices, the LP ([`lp::solve`]).
pub fn allocate(problem: &Problem, policy: Policy) -> Result<Allocation> {
    match policy {
        Policy::Baa if problem.devices() == 2 => baa::solve(problem),
        Policy::Baa => lp::solve(problem),
        Policy::Drf => Ok(drf::solve(problem)),
        Policy::Fq => Ok(fq::solve(problem)),
    }
}
