//! FQ baseline: (weighted) fair queuing of throughput.
//!
//! Seed 004 §2 (Example I: 166.6 IOPS each, SSD 47 % busy; Example II: 90.9 IOPS each,
//! SSD 34.5 %) and §5.1 (Figs. 3–4, "FQ allocates equal amounts of throughput to the two
//! clients"). A weighted fair queue dispatching backlogged clients to the array serves
//! them in the ratio of their weights whatever their devices, so the allocations are
//! `A_i = w_i·t` with `t` as large as the first device to saturate allows:
//! `t = min_k C_k / Σ_i w_i p_ik`.

use super::sets::BottleneckSets;
use super::{Allocation, Policy, Problem};

/// FQ allocation of `problem`.
pub fn solve(problem: &Problem) -> Allocation {
    let caps = problem.capacities();
    let w = problem.weights();
    let t = (0..caps.len())
        .filter_map(|k| {
            let demand: f64 = problem.fractions().iter().zip(w).map(|(row, wi)| wi * row[k]).sum();
            (demand > 0.0).then(|| caps[k] / demand)
        })
        .fold(f64::INFINITY, f64::min);
    debug_assert!(t.is_finite(), "some device carries load");
    let sets = BottleneckSets::of(problem);
    problem.report(Policy::Fq, &sets, w.iter().map(|wi| wi * t).collect(), vec![None; caps.len()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_i_equal_shares() {
        let a = solve(&Problem::two_tier(100.0, 500.0, &[0.5, 0.9]).unwrap());
        assert!((a.throughput[0] - 500.0 / 3.0).abs() < 1e-9 && a.throughput[0] == a.throughput[1]);
        assert!((a.utilisation[1] - 0.4667).abs() < 1e-3);
        let w = solve(&Problem::two_tier(100.0, 500.0, &[0.5, 0.9]).unwrap().with_weights(vec![1.0, 5.0]).unwrap());
        assert!((w.throughput[0] - 100.0).abs() < 1e-9 && (w.throughput[1] - 500.0).abs() < 1e-9);
    }
}
