//! BAA for two devices: the 2-variable LP of seed 004 §3.2 solved exactly.
//!
//! Seed 004 (Wang & Varman, bottleneck-aware allocation), §3.1 fairness rules (1)–(3)
//! and §3.2 Eqs. (1)–(4): with `A_i = ρ_d f_i` for `i ∈ D` and `A_j = ρ_s f_j` for
//! `j ∈ S`,
//!
//! ```text
//! maximise   ρ_d Σ_D f_i     + ρ_s Σ_S f_j                       (1)
//! subject to ρ_d Σ_D f_i m_i + ρ_s Σ_S f_j m_j ≤ C_d             (2)
//!            ρ_d Σ_D f_i h_i + ρ_s Σ_S f_j h_j ≤ C_s             (3)
//!            α ≤ ρ_d / ρ_s ≤ β                                   (4)
//! α = max_{i∈D, j∈S} (m_j f_j)/(m_i f_i) = (C_s/C_d)·max_{j∈S} m_j/h_j
//! β = min_{i∈D, j∈S} (h_j f_j)/(h_i f_i) = (C_s/C_d)·min_{i∈D} m_i/h_i
//! ```
//!
//! (`β = ∞` when some `i ∈ D` has `h_i = 0`; `α = 0` when every `j ∈ S` has
//! `h_j = 1`.) The feasible region is a polygon in the `(ρ_d, ρ_s)` plane, so the optimum
//! is one of its vertices: we intersect every pair of boundary lines, keep the feasible
//! points and take the best. No iteration, no tolerance on optimality, only on
//! feasibility ([`FEASIBILITY_TOLERANCE`]). When one set is empty its `ρ` is pinned to 0
//! and the problem is one-dimensional (the other set scales until a device saturates).
//!
//! The objective's gradient `(F_d, F_s)` is never parallel to an edge (the capacity rows
//! have `m` and `h` averages that differ between `D` and `S`; the ratio rays pass
//! through the origin), so the optimum is unique. The `N`-device LP
//! ([`crate::alloc::lp`]) reproduces it for two devices (tested).

use super::sets::BottleneckSets;
use super::{Allocation, Policy, Problem};
use crate::error::{config, Result};

/// Relative slack allowed when testing a vertex against a constraint (floating-point
/// round-off of the 2×2 solve).
pub const FEASIBILITY_TOLERANCE: f64 = 1e-9;

/// Determinants below this (relative to the rows' norms) mean parallel lines.
const PARALLEL_EPS: f64 = 1e-14;

/// One half-plane `a[0]·ρ_d + a[1]·ρ_s ≤ b`.
#[derive(Clone, Copy, Debug)]
struct HalfPlane {
    a: [f64; 2],
    b: f64,
}

impl HalfPlane {
    fn holds(&self, v: [f64; 2]) -> bool {
        let lhs = self.a[0] * v[0] + self.a[1] * v[1];
        let scale = 1f64.max(self.b.abs()).max((self.a[0] * v[0]).abs()).max((self.a[1] * v[1]).abs());
        lhs <= self.b + FEASIBILITY_TOLERANCE * scale
    }
}

/// The BAA envy-freedom bounds `(α, β)` on `ρ_d/ρ_s` (Eq. 4) for a two-device problem
/// whose two sets are both non-empty; `β` may be `f64::INFINITY`.
pub fn ratio_bounds(problem: &Problem, sets: &BottleneckSets) -> Option<(f64, f64)> {
    if problem.devices() != 2 || sets.members.iter().any(|m| m.is_empty()) {
        return None;
    }
    let c = problem.capacities();
    let alpha = c[1] * sets.envy[0][1] / c[0];
    let beta = if sets.envy[1][0] > 0.0 { c[1] / (c[0] * sets.envy[1][0]) } else { f64::INFINITY };
    Some((alpha, beta))
}

/// BAA allocation of a two-device problem (device 0 = the paper's HDD, whose set `D`
/// wins ties; device 1 = the SSD).
pub fn solve(problem: &Problem) -> Result<Allocation> {
    if problem.devices() != 2 {
        return config(format!(
            "BAA closed form: exactly 2 devices, got {} (use the LP for N devices)",
            problem.devices()
        ));
    }
    let sets = BottleneckSets::of(problem);
    let rho = solve_rho(problem, &sets);
    let throughput = sets.throughput(&rho);
    let amp = sets.amplification(&rho);
    Ok(problem.report(Policy::Baa, &sets, throughput, amp))
}

/// The optimal `(ρ_d, ρ_s)` by vertex enumeration.
fn solve_rho(problem: &Problem, sets: &BottleneckSets) -> [f64; 2] {
    let c = problem.capacities();
    let mut hs: Vec<HalfPlane> = vec![HalfPlane { a: [-1.0, 0.0], b: 0.0 }, HalfPlane { a: [0.0, -1.0], b: 0.0 }];
    for (d, &cap) in c.iter().enumerate() {
        hs.push(HalfPlane { a: [sets.load[0][d], sets.load[1][d]], b: cap });
    }
    let (empty_d, empty_s) = (sets.members[0].is_empty(), sets.members[1].is_empty());
    if empty_d {
        hs.push(HalfPlane { a: [1.0, 0.0], b: 0.0 });
    }
    if empty_s {
        hs.push(HalfPlane { a: [0.0, 1.0], b: 0.0 });
    }
    if !empty_d && !empty_s {
        // ρ_d C_d ≥ ρ_s C_s E_ds  (ρ_d/ρ_s ≥ α)  and  ρ_s C_s ≥ ρ_d C_d E_sd  (ρ_d/ρ_s ≤ β).
        hs.push(HalfPlane { a: [-c[0], c[1] * sets.envy[0][1]], b: 0.0 });
        hs.push(HalfPlane { a: [c[0] * sets.envy[1][0], -c[1]], b: 0.0 });
    }
    // Each ρ_k is at most what its set's own load leaves of the fullest device. The
    // capacity rows' feasibility test is relative to the terms' size, so without this
    // bound a far-off vertex (where a near-zero load, e.g. a hit ratio of 1e-300, meets
    // a capacity line at ρ ≈ 1e307) would pass it.
    let rho_max: [f64; 2] = std::array::from_fn(|k| {
        c.iter().zip(&sets.load[k]).filter(|(_, &l)| l > 0.0).map(|(&cap, &l)| cap / l).fold(f64::INFINITY, f64::min)
    });
    let obj = [sets.fair_total[0], sets.fair_total[1]];
    let mut best = [0.0, 0.0];
    let mut best_val = f64::NEG_INFINITY;
    for (i, p) in hs.iter().enumerate() {
        for q in &hs[i + 1..] {
            let det = p.a[0] * q.a[1] - p.a[1] * q.a[0];
            let norm = (p.a[0].hypot(p.a[1])) * (q.a[0].hypot(q.a[1]));
            if det.abs() <= PARALLEL_EPS * norm {
                continue;
            }
            let v = [(p.b * q.a[1] - p.a[1] * q.b) / det, (p.a[0] * q.b - p.b * q.a[0]) / det];
            if !hs.iter().all(|h| h.holds(v)) || (0..2).any(|k| v[k] > rho_max[k] * (1.0 + FEASIBILITY_TOLERANCE)) {
                continue;
            }
            let v = [v[0].max(0.0), v[1].max(0.0)];
            let val = obj[0] * v[0] + obj[1] * v[1];
            if val > best_val {
                best_val = val;
                best = v;
            }
        }
    }
    debug_assert!(best_val.is_finite(), "the origin is always a feasible vertex");
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn example_iii_lp() {
        // Seed 004 §3.2: ρ_d = 1.41, ρ_s = 1.44; α = 0.55, β = 1.67. (Exactly,
        // ρ_d = 202/143 = 1.4126 and ρ_s = 1.43497: the paper rounds the latter up.)
        let p = Problem::two_tier(200.0, 1000.0, &[0.75, 0.5, 0.9, 0.95]).unwrap();
        let s = BottleneckSets::of(&p);
        let (alpha, beta) = ratio_bounds(&p, &s).unwrap();
        assert!(close(alpha, 0.556, 1e-3) && close(beta, 1.667, 1e-3), "{alpha} {beta}");
        let a = solve(&p).unwrap();
        let rho_d = a.amplification[0].unwrap();
        let rho_s = a.amplification[1].unwrap();
        assert!(close(rho_d, 1.41, 0.005) && close(rho_s, 1.44, 0.01), "{rho_d} {rho_s}");
    }

    #[test]
    fn one_set_scales_to_the_first_saturated_device() {
        // All HDD-bound: equal shares of the HDD, A_i ∝ f_i.
        let p = Problem::two_tier(100.0, 1000.0, &[0.3, 0.5]).unwrap();
        let a = solve(&p).unwrap();
        assert_eq!(a.amplification[1], None);
        assert!(close(a.utilisation[0], 1.0, 1e-12));
        assert!(close(a.per_device[0][0], 50.0, 1e-9) && close(a.per_device[1][0], 50.0, 1e-9));
        assert!(solve(&Problem::new(vec![1.0], vec![vec![1.0]]).unwrap()).is_err());
    }

    #[test]
    fn a_near_zero_hit_ratio_does_not_open_a_far_vertex() {
        // Found by the Python property test: h = 8e-304 made the SSD row meet ρ_s = 0 at
        // ρ_d ≈ 6e307, which passed the relative feasibility test (HDD utilisation ∞).
        for h in [8.145962104806121e-304, 1e-300, 1e-200, 5e-324] {
            let p = Problem::two_tier(10.0, 48814.0, &[0.0, 0.0, h]).unwrap();
            let a = solve(&p).unwrap();
            assert!(close(a.utilisation[0], 1.0, 1e-12), "h = {h}: {:?}", a.utilisation);
            assert!(a.utilisation[1] <= 1.0 + 1e-12, "h = {h}: {:?}", a.utilisation);
            assert!(close(a.amplification[0].unwrap(), 1.0, 1e-9), "h = {h}: {:?}", a.amplification);
        }
    }
}
