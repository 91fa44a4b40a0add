//! DRF baseline: dominant resource fairness by progressive filling.
//!
//! Seed 004 §2 (Example I: "equalizing the dominant shares means that 0.5n/100 =
//! 0.9m/500 or n : m = 9 : 25", SSD 77 % busy; Example II: 9 : 9 : 25, allocations 78,
//! 78, 217, SSD 55 %), after Ghodsi et al., NSDI'11. A client receiving `A_i` IOPS uses
//! the fraction `A_i p_ik / C_k` of device `k`; its *dominant share* is the largest of
//! these, `A_i s_i` with `s_i = max_k p_ik / C_k`. Weighted DRF equalises
//! `A_i s_i / w_i`.
//!
//! Progressive filling: every unfrozen client grows at rate `w_i / s_i`; when a device
//! saturates, every client using it (`p_ik > 0`) freezes; the others keep growing. In
//! the two-tier setting every client with `0 < h < 1` uses both devices, so the first
//! saturation ends the filling (the paper's figures); a client with `h = 1` (or
//! `h = 0`) keeps filling the device it alone uses.

use super::sets::BottleneckSets;
use super::{Allocation, Policy, Problem};

/// A device counts as saturated once its load is within this relative margin of its
/// capacity (round-off of the filling steps).
pub const SATURATION_TOLERANCE: f64 = 1e-12;

/// DRF allocation of `problem`.
pub fn solve(problem: &Problem) -> Allocation {
    let caps = problem.capacities();
    let fr = problem.fractions();
    let n = problem.clients();
    let rate: Vec<f64> = fr
        .iter()
        .zip(problem.weights())
        .map(|(row, w)| w / row.iter().zip(caps).map(|(p, c)| p / c).fold(0.0, f64::max))
        .collect();
    let mut alloc = vec![0.0; n];
    let mut active = vec![true; n];
    let mut used = vec![0.0; caps.len()];
    let mut saturated = vec![false; caps.len()];
    // Each round saturates at least one device, so at most one round per device.
    for _ in 0..caps.len() {
        let growth: Vec<f64> =
            (0..caps.len()).map(|k| (0..n).filter(|&i| active[i]).map(|i| rate[i] * fr[i][k]).sum()).collect();
        let dt = (0..caps.len())
            .filter(|&k| !saturated[k] && growth[k] > 0.0)
            .map(|k| (caps[k] - used[k]).max(0.0) / growth[k])
            .fold(f64::INFINITY, f64::min);
        if !dt.is_finite() {
            break;
        }
        for i in (0..n).filter(|&i| active[i]) {
            alloc[i] += rate[i] * dt;
        }
        for k in 0..caps.len() {
            used[k] += growth[k] * dt;
            if used[k] >= caps[k] * (1.0 - SATURATION_TOLERANCE) {
                saturated[k] = true;
            }
        }
        for i in 0..n {
            if active[i] && (0..caps.len()).any(|k| saturated[k] && fr[i][k] > 0.0) {
                active[i] = false;
            }
        }
        if !active.iter().any(|&a| a) {
            break;
        }
    }
    let sets = BottleneckSets::of(problem);
    let none = vec![None; caps.len()];
    problem.report(Policy::Drf, &sets, alloc, none)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_i_ratio_is_9_to_25() {
        let a = solve(&Problem::two_tier(100.0, 500.0, &[0.5, 0.9]).unwrap());
        assert!((a.throughput[0] / a.throughput[1] - 9.0 / 25.0).abs() < 1e-12);
        assert!((a.utilisation[0] - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_client_alone_on_a_device_keeps_filling_it() {
        // Two HDD-only clients fill the HDD at 50 IOPS each (dominant share 1/2); the
        // SSD-only client, sharing no device with them, keeps filling the SSD.
        let a = solve(&Problem::two_tier(100.0, 500.0, &[0.0, 0.0, 1.0]).unwrap());
        assert!((a.utilisation[0] - 1.0).abs() < 1e-12 && (a.utilisation[1] - 1.0).abs() < 1e-12);
        assert!((a.throughput[0] - 50.0).abs() < 1e-9 && (a.throughput[2] - 500.0).abs() < 1e-9);
    }
}
