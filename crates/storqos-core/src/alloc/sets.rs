//! Fair shares and bottleneck sets (seed 004 §3.1 items 1–4, Lemma 1), and the data of
//! BAA's LP in its amplification factors (seed 004 §3.2, Eqs. (1)–(4)).
//!
//! Client `i`'s load on device `k` per IOPS it receives is `p_ik / C_k`. Its
//! *bottleneck* is the device with the largest such load (ties: the lower index, within
//! [`TIE_TOLERANCE`]); its *fair share* is what it gets from a static partition giving
//! it `w_i/W` of every device: `f_i = (w_i/W) / max_k (p_ik / C_k)`.
//!
//! With `A_i = ρ_k f_i` for the members of set `k` (fairness rules (1), (2)), every
//! quantity of the LP is linear in the `ρ`:
//! - objective (Eq. 1): `Σ_k ρ_k F_k` with `F_k = Σ_{i∈B_k} f_i`;
//! - capacity of device `d` (Eqs. 2, 3): `Σ_k ρ_k L_kd ≤ C_d` with
//!   `L_kd = Σ_{i∈B_k} f_i p_id`;
//! - envy-freedom between sets (rule (3), Eq. 4): a member of `B_k` gets, per unit of
//!   weight, at least as much of device `k` as any member `j` of `B_l`:
//!   `ρ_k f_i p_ik / w_i ≥ ρ_l f_j p_jk / w_j`. Since `f_i p_ik / w_i = C_k / W` for every
//!   `i ∈ B_k`, this is `ρ_k C_k ≥ ρ_l C_l E_kl` with `E_kl = max_{j∈B_l} p_jk / p_jl`.
//!   For two tiers the pair (D, S) gives the paper's `ρ_d/ρ_s ≥ α` and (S, D) gives
//!   `ρ_d/ρ_s ≤ β`.

use super::{Problem, TIE_TOLERANCE};

/// Fair shares, bottleneck sets and the coefficients of BAA's LP in `ρ`.
#[derive(Clone, Debug, PartialEq)]
pub struct BottleneckSets {
    /// Fair share `f_i` of each client (IOPS).
    pub fair_share: Vec<f64>,
    /// Bottleneck device of each client.
    pub bottleneck: Vec<usize>,
    /// Members of each device's bottleneck set, in client order.
    pub members: Vec<Vec<usize>>,
    /// `F_k = Σ_{i∈B_k} f_i`: objective coefficient of `ρ_k`.
    pub fair_total: Vec<f64>,
    /// `L[k][d] = Σ_{i∈B_k} f_i p_id`: load of set `k` on device `d` at `ρ_k = 1`.
    pub load: Vec<Vec<f64>>,
    /// `E[k][l] = max_{j∈B_l} p_jk / p_jl` (0 when `B_l` is empty or `k = l`).
    pub envy: Vec<Vec<f64>>,
}

impl BottleneckSets {
    /// Compute the sets of `problem`.
    pub fn of(problem: &Problem) -> BottleneckSets {
        let caps = problem.capacities();
        let nd = caps.len();
        let total_weight: f64 = problem.weights().iter().sum();
        let mut fair_share = Vec::with_capacity(problem.clients());
        let mut bottleneck = Vec::with_capacity(problem.clients());
        for (row, &w) in problem.fractions().iter().zip(problem.weights()) {
            let (k, load) = bottleneck_of(row, caps);
            bottleneck.push(k);
            fair_share.push(w / total_weight / load);
        }
        let mut members = vec![Vec::new(); nd];
        for (i, &k) in bottleneck.iter().enumerate() {
            members[k].push(i);
        }
        let fr = problem.fractions();
        let fair_total = members.iter().map(|m| m.iter().map(|&i| fair_share[i]).sum()).collect();
        let load = members
            .iter()
            .map(|m| (0..nd).map(|d| m.iter().map(|&i| fair_share[i] * fr[i][d]).sum()).collect())
            .collect();
        let envy =
            (0..nd)
                .map(|k| {
                    (0..nd)
                        .map(|l| {
                            if k == l {
                                0.0
                            } else {
                                members[l].iter().map(|&j| fr[j][k] / fr[j][l]).fold(0.0, f64::max)
                            }
                        })
                        .collect()
                })
                .collect();
        BottleneckSets { fair_share, bottleneck, members, fair_total, load, envy }
    }

    /// Devices whose bottleneck set has members.
    pub fn nonempty(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.members.len()).filter(|&k| !self.members[k].is_empty())
    }

    /// Allocations `A_i = ρ_{b(i)} f_i` for amplification factors `rho` (one per device;
    /// entries of empty sets are ignored).
    pub fn throughput(&self, rho: &[f64]) -> Vec<f64> {
        self.fair_share.iter().zip(&self.bottleneck).map(|(f, &k)| rho[k] * f).collect()
    }

    /// `ρ` per device as reported: `None` for empty sets.
    pub fn amplification(&self, rho: &[f64]) -> Vec<Option<f64>> {
        (0..self.members.len()).map(|k| (!self.members[k].is_empty()).then_some(rho[k])).collect()
    }
}

/// The bottleneck device of a client with fractions `row` over capacities `caps`, and
/// its load `p_ik / C_k` there. Ties within [`TIE_TOLERANCE`] go to the lower index.
pub fn bottleneck_of(row: &[f64], caps: &[f64]) -> (usize, f64) {
    let max = row.iter().zip(caps).map(|(p, c)| p / c).fold(0.0, f64::max);
    debug_assert!(max > 0.0, "fractions sum to 1, so some load is positive");
    let k = row.iter().zip(caps).position(|(p, c)| p / c >= max * (1.0 - TIE_TOLERANCE)).expect("max is attained");
    (k, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_iii_sets_fair_shares_and_lp_coefficients() {
        // Seed 004 Example III: f = 200, 100, 277.8, 263.2; D = {p, q}, S = {r, s};
        // LP (5)-(8): max 300ρd + 541ρs, 100ρd + 41ρs ≤ 200, 200ρd + 500ρs ≤ 1000.
        let p = Problem::two_tier(200.0, 1000.0, &[0.75, 0.5, 0.9, 0.95]).unwrap();
        let s = BottleneckSets::of(&p);
        assert_eq!(s.bottleneck, vec![0, 0, 1, 1]);
        let want = [200.0, 100.0, 277.78, 263.16];
        for (f, w) in s.fair_share.iter().zip(want) {
            assert!((f - w).abs() < 0.01, "{:?}", s.fair_share);
        }
        assert!((s.fair_total[0] - 300.0).abs() < 1e-9);
        assert!((s.fair_total[1] - 541.0).abs() < 0.1);
        assert!((s.load[0][0] - 100.0).abs() < 1e-9 && (s.load[1][0] - 41.0).abs() < 0.1);
        assert!((s.load[0][1] - 200.0).abs() < 1e-9 && (s.load[1][1] - 500.0).abs() < 1e-9);
    }

    #[test]
    fn h_bal_is_hdd_bound_and_extremes_are_placed() {
        let (cd, cs) = (100.0, 500.0);
        let h_bal = cs / (cs + cd);
        let p = Problem::two_tier(cd, cs, &[0.0, h_bal, 1.0]).unwrap();
        let s = BottleneckSets::of(&p);
        assert_eq!(s.bottleneck, vec![0, 0, 1]);
        // f at h_bal = (C_d + C_s) / n from either device.
        assert!((s.fair_share[1] - (cd + cs) / 3.0).abs() < 1e-9);
        assert!((s.fair_share[0] - cd / 3.0).abs() < 1e-9);
        assert!((s.fair_share[2] - cs / 3.0).abs() < 1e-9);
    }
}
