//! BAA for `N` devices and client weights: an LP in one amplification factor per device.
//!
//! Seed 004 §3.2 reduces the allocation LP to two variables `ρ_d`, `ρ_s`; its conclusion
//! (§7) sketches the generalisation to more resources and to client weights ("clients in
//! the same bottleneck set receive allocations in proportion to their weighted fair
//! shares"). We keep the reduction: one `ρ_k` per non-empty bottleneck set `B_k`
//! ([`BottleneckSets`]), `A_i = ρ_k f_i` for `i ∈ B_k`, and solve
//!
//! ```text
//! maximise   Σ_k ρ_k F_k                               (Eq. 1)
//! subject to Σ_k ρ_k L_kd ≤ C_d           for every d  (Eqs. 2–3)
//!            ρ_k C_k ≥ ρ_l C_l E_kl       for k ≠ l    (rule (3) / Eq. 4)
//!            ρ_k ≥ 1                                   (sharing incentive)
//! ```
//!
//! The last row is not in the paper: for two devices Lemmas 4–6 prove the optimum
//! already has `ρ ≥ 1`, so it changes nothing there (the tests check this solver equals
//! [`crate::alloc::baa`] for `N = 2`); for `N > 2` that proof does not carry over, so the
//! sharing incentive is imposed. The static partition (`ρ = 1`) satisfies every row, so
//! the LP is always feasible. `docs/baa.md` states the fairness definitions for `N > 2`.
//!
//! The solver is `good_lp` with its pure-Rust `microlp` backend (dual simplex); rows are
//! scaled to capacities 1 so its tolerances are relative.

use good_lp::{microlp, variable, variables, Expression, Solution, SolverModel};

use super::sets::BottleneckSets;
use super::{Allocation, Policy, Problem};
use crate::error::{Error, Result};

/// Smallest amplification factor a non-empty set may get: 1 = its fair share.
pub const SHARING_INCENTIVE_RHO: f64 = 1.0;

/// BAA allocation of `problem` (any number of devices, weights) by LP.
pub fn solve(problem: &Problem) -> Result<Allocation> {
    let sets = BottleneckSets::of(problem);
    let rho = solve_rho(problem, &sets)?;
    let throughput = sets.throughput(&rho);
    let amp = sets.amplification(&rho);
    Ok(problem.report(Policy::Baa, &sets, throughput, amp))
}

/// The optimal amplification factors (0 for empty sets).
pub fn solve_rho(problem: &Problem, sets: &BottleneckSets) -> Result<Vec<f64>> {
    let caps = problem.capacities();
    let nd = caps.len();
    let live: Vec<usize> = sets.nonempty().collect();
    let mut vars = variables!();
    let rho: Vec<_> = live.iter().map(|_| vars.add(variable().min(SHARING_INCENTIVE_RHO))).collect();
    let fair_sum: f64 = live.iter().map(|&k| sets.fair_total[k]).sum();
    let objective: Expression = live.iter().zip(&rho).map(|(&k, &r)| (sets.fair_total[k] / fair_sum) * r).sum();
    let mut model = vars.maximise(objective).using(microlp);
    for (d, &cap) in caps.iter().enumerate() {
        let row: Expression = live.iter().zip(&rho).map(|(&k, &r)| (sets.load[k][d] / cap) * r).sum();
        model = model.with(row.leq(1.0));
    }
    for (a, &k) in live.iter().enumerate() {
        for (b, &l) in live.iter().enumerate() {
            if k != l && sets.envy[k][l] > 0.0 {
                // ρ_k ≥ ρ_l (C_l / C_k) E_kl
                let coef = caps[l] / caps[k] * sets.envy[k][l];
                model = model.with((Expression::from(rho[a]) - coef * rho[b]).geq(0.0));
            }
        }
    }
    let sol = model.solve().map_err(|e| Error::InvalidInput(format!("BAA LP: {e}")))?;
    let mut out = vec![0.0; nd];
    for (&k, &r) in live.iter().zip(&rho) {
        out[k] = sol.value(r).max(SHARING_INCENTIVE_RHO);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_iii_by_lp() {
        let p = Problem::two_tier(200.0, 1000.0, &[0.75, 0.5, 0.9, 0.95]).unwrap();
        let a = solve(&p).unwrap();
        for (x, want) in a.throughput.iter().zip([282.5, 141.3, 398.6, 377.6]) {
            assert!((x - want).abs() < 0.15, "{:?}", a.throughput);
        }
    }

    #[test]
    fn three_tiers_each_set_gets_its_share() {
        // NVMe 20k, SSD 2k, HDD 200 IOPS; one client bound on each.
        let p = Problem::new(
            vec![200.0, 2000.0, 20000.0],
            vec![vec![0.5, 0.3, 0.2], vec![0.02, 0.5, 0.48], vec![0.001, 0.009, 0.99]],
        )
        .unwrap();
        let a = solve(&p).unwrap();
        assert_eq!(a.bottleneck, vec![0, 1, 2]);
        for (x, f) in a.throughput.iter().zip(&a.fair_share) {
            assert!(x >= &(f * (1.0 - 1e-9)));
        }
        assert!(a.utilisation.iter().any(|u| (u - 1.0).abs() < 1e-6), "{:?}", a.utilisation);
    }
}
