//! The plant gain measured online: the FCLB controller's `G` estimated from the loop's
//! own observations, and the pole placed on the estimate every period (ours; seed 003
//! §4.4 estimates `G` offline).
//!
//! **The seed** (§4.4): "we approximate G by running a set of shared storage profiling
//! experiments" (the open-loop IOPS → p95 curve, [`crate::fclb::tuning`]), then places
//! the single closed-loop pole `p = 1 − K·G` (Eq. 7) with `K = (1 − p)/G`, stable iff
//! `0 < K < 2/G` (Eq. 8), and puts the pole "close to 1" when the storage is non-linear.
//! A profile answers for the operating point it was taken at, and on some storage it
//! answers nothing: on a constant-rate server the open-loop p95 is flat up to the
//! capacity, so the profiled `G` is 0 and no pole can be placed.
//!
//! **Online** (`gain = "online"`, a self-tuning regulator: certainty-equivalent pole
//! placement on a recursive least-squares estimate, as in Åström & Wittenmark,
//! *Adaptive Control*, and Hellerstein et al., *Feedback Control of Computing Systems*):
//! the model is the seed's Eq. 3 in differences. The rate `r(k)` the controller sets at
//! the end of period `k` is in effect during period `k + 1`, whose p95 it moves:
//!
//! `y(k) = p95(k) − p95(k−1) = G · (r_in(k) − r_in(k−1)) = G · u(k)`
//!
//! with `r_in(k)` the rate in effect during period `k`. Per workload, at the end of
//! every period, [`GainEstimator`] updates `Ĝ` by scalar RLS with exponential forgetting
//! `λ` ([`DEFAULT_FORGETTING`]):
//!
//! `L = P·u / (λ + P·u²)`, `Ĝ ← Ĝ + L·(y − Ĝ·u)`, `P ← P / (λ + P·u²)`
//!
//! and [`OnlineGain`] places the pole: `K(k) = (1 − p)/Ĝ(k)`, so the loop on the current
//! estimate has pole `p`, inside Eq. 8's bound `K < 2/Ĝ` whenever `−1 < p < 1`.
//!
//! **Making it safe** (the plant is not linear: flat below the knee, a cliff above it):
//! - *Start value*: `Ĝ(0)` is the configured plant gain (the gateway's knee gain on an
//!   emulated server, else the paper's 0.3 ms/IOPS), weighted as one observation with
//!   `|u|` = [`PRIOR_STEP_FRACTION`] of the workload's demanded IOPS (`P(0) = 1/u₀²`):
//!   the loop runs on it until its own steps have said otherwise.
//! - *Dead zone*: a period updates the estimate only if the rate moved by at least
//!   [`MIN_STEP_FRACTION`] of the demanded IOPS, both periods had completions, and the
//!   bucket held the workload back in both (so the bucket's rate was the input: a
//!   workload sending less than its rate has nothing to say about `G`). Without
//!   excitation `P` is left alone, so it cannot blow up while the rate rests on its floor.
//! - *Covariance bound*: `P ≤ P(0)`, the estimate never becomes less certain than the prior.
//! - *Projection*: `Ĝ` stays between [`MIN_GAIN_FACTOR`] and [`MAX_GAIN_FACTOR`] × the
//!   start value. On a flat stretch (`y ≈ 0`) the estimate falls to the lower bound, so
//!   `K` rises at most `1/MIN_GAIN_FACTOR` × the start value's; a cliff raises it again
//!   within a period or two.
//! - *Sign*: a sample whose p95 moved against the rate (`u·y < 0`: the p95 still rising
//!   while the rate falls, the queue draining a period late) is skipped: storage does
//!   not answer faster for being asked more.
//!
//! The regression cannot tell the rate's effect from a neighbour's: a neighbour
//! stepping in while the rate rises reads as a steep plant (`Ĝ` up, `K` down) until
//! forgotten. On the gateway's step case (`docs/gateway-seeds.md`, "FCLB live") the online
//! gain recovers as fast as the server's knee gain but, `Ĝ` at its floor below the
//! knee, climbs to the knee sooner: it is an option, not the default.
//!
//! In closed loop `u(k)` depends on the noise in `p95(k−1)`, which enters `y(k)` with a
//! minus sign: the least-squares slope is biased *upwards* by about `K·σ²/Var(u)`, to a
//! smaller `K`, the stable side.

use crate::error::{config, Result};
use crate::fclb::controller::STABILITY_BOUND_TIMES_G;

/// Forgetting factor λ per control period: old observations weigh λ^age, a memory of
/// about `1/(1 − λ)` = 5 periods (the plant's local gain changes as the rate moves along
/// the curve).
pub const DEFAULT_FORGETTING: f64 = 0.8;

/// Lower bound of `Ĝ` as a fraction of the start value: `K` never exceeds
/// `1/MIN_GAIN_FACTOR` times the start value's, `(1 − p)/(MIN_GAIN_FACTOR·Ĝ(0))`.
pub const MIN_GAIN_FACTOR: f64 = 0.25;

/// Upper bound of `Ĝ` as a multiple of the start value.
pub const MAX_GAIN_FACTOR: f64 = 16.0;

/// Dead zone: a period informs the estimate only if the rate moved by at least this
/// fraction of the workload's demanded IOPS.
pub const MIN_STEP_FRACTION: f64 = 0.01;

/// The start value weighs as one observation with a rate step of this fraction of the
/// workload's demanded IOPS.
pub const PRIOR_STEP_FRACTION: f64 = 0.1;

/// How the plant gain of one workload is estimated online.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EstimatorConfig {
    /// `Ĝ(0)` (ms per IOPS, > 0): the estimate until the loop's own steps inform it.
    pub start_ms_per_iops: f64,
    /// Lower bound of `Ĝ` (ms per IOPS, > 0, ≤ start).
    pub min_ms_per_iops: f64,
    /// Upper bound of `Ĝ` (ms per IOPS, ≥ start).
    pub max_ms_per_iops: f64,
    /// Forgetting factor λ in (0, 1].
    pub forgetting: f64,
    /// Dead zone: the smallest rate step `|u|` (IOPS, ≥ 0) that updates the estimate.
    pub min_step_iops: f64,
    /// The start value weighs as one observation with `|u|` = this (IOPS, > 0).
    pub prior_step_iops: f64,
}

impl EstimatorConfig {
    /// The defaults around `start` (ms/IOPS) for a workload demanding `floor_iops`:
    /// bounds [`MIN_GAIN_FACTOR`]·start .. [`MAX_GAIN_FACTOR`]·start, λ =
    /// [`DEFAULT_FORGETTING`], dead zone [`MIN_STEP_FRACTION`] and prior step
    /// [`PRIOR_STEP_FRACTION`] of `floor_iops`.
    pub fn around(start_ms_per_iops: f64, floor_iops: f64) -> Result<Self> {
        let c = EstimatorConfig {
            start_ms_per_iops,
            min_ms_per_iops: MIN_GAIN_FACTOR * start_ms_per_iops,
            max_ms_per_iops: MAX_GAIN_FACTOR * start_ms_per_iops,
            forgetting: DEFAULT_FORGETTING,
            min_step_iops: MIN_STEP_FRACTION * floor_iops,
            prior_step_iops: PRIOR_STEP_FRACTION * floor_iops,
        };
        c.check()?;
        Ok(c)
    }

    /// Check the ranges; the error names the bad field.
    pub fn check(&self) -> Result<()> {
        let pos = |x: f64| x > 0.0 && x.is_finite();
        if !pos(self.start_ms_per_iops) {
            return config(format!(
                "fclb: online gain: the start value of the plant gain G must be > 0 ms/IOPS, got {}",
                self.start_ms_per_iops
            ));
        }
        if !(pos(self.min_ms_per_iops)
            && self.min_ms_per_iops <= self.start_ms_per_iops
            && self.start_ms_per_iops <= self.max_ms_per_iops
            && self.max_ms_per_iops.is_finite())
        {
            return config(format!(
                "fclb: online gain: bounds must satisfy 0 < min <= start <= max, got {} <= {} <= {} ms/IOPS",
                self.min_ms_per_iops, self.start_ms_per_iops, self.max_ms_per_iops
            ));
        }
        if !(self.forgetting > 0.0 && self.forgetting <= 1.0) {
            return config(format!("fclb: online gain: forgetting factor must lie in (0, 1], got {}", self.forgetting));
        }
        if !(self.min_step_iops >= 0.0 && self.min_step_iops.is_finite() && pos(self.prior_step_iops)) {
            return config(format!(
                "fclb: online gain: dead zone must be >= 0 and prior step > 0 IOPS, got {} and {}",
                self.min_step_iops, self.prior_step_iops
            ));
        }
        Ok(())
    }
}

/// Recursive least squares with forgetting, projection and a dead zone for the scalar
/// model `y = G·u` (see the module notes).
#[derive(Clone, Debug, PartialEq)]
pub struct GainEstimator {
    cfg: EstimatorConfig,
    /// Ĝ (ms per IOPS).
    gain: f64,
    /// The scalar covariance P.
    p: f64,
    /// P(0) = 1/u₀², also P's upper bound.
    p_max: f64,
    /// The previous informative period: the rate in effect (IOPS) and its p95 (ms).
    last: Option<(f64, f64)>,
    /// Updates made.
    updates: u64,
}

impl GainEstimator {
    /// An estimator at `cfg`'s start value.
    pub fn new(cfg: EstimatorConfig) -> Result<Self> {
        cfg.check()?;
        let p0 = 1.0 / (cfg.prior_step_iops * cfg.prior_step_iops);
        Ok(GainEstimator { cfg, gain: cfg.start_ms_per_iops, p: p0, p_max: p0, last: None, updates: 0 })
    }

    /// One regression sample `y = G·u` (u in IOPS, y in ms): the RLS update, unless
    /// `|u|` is inside the dead zone or either is not finite. Returns whether it updated.
    pub fn update(&mut self, u: f64, y: f64) -> bool {
        if !(u.is_finite() && y.is_finite()) || u.abs() < self.cfg.min_step_iops || u == 0.0 {
            return false;
        }
        if u * y < 0.0 {
            // The p95 moved against the rate: the queue draining a period late, or a
            // neighbour, not this plant's gain (storage does not answer faster when
            // asked more).
            return false;
        }
        let lambda = self.cfg.forgetting;
        let denom = lambda + self.p * u * u;
        let l = self.p * u / denom;
        self.gain = (self.gain + l * (y - self.gain * u)).clamp(self.cfg.min_ms_per_iops, self.cfg.max_ms_per_iops);
        self.p = (self.p / denom).min(self.p_max);
        self.updates += 1;
        true
    }

    /// The end of a control period: the rate that was in effect during it (IOPS) and its
    /// p95 (ms), or `None` if the period says nothing about the plant (no completions,
    /// or the bucket did not hold the workload back). Differences with the previous
    /// informative period feed [`GainEstimator::update`]; an uninformative one breaks
    /// the chain. Returns the estimate.
    pub fn observe(&mut self, period: Option<(f64, f64)>) -> f64 {
        match (self.last, period) {
            (Some((r0, y0)), Some((r1, y1))) => {
                self.update(r1 - r0, y1 - y0);
            }
            (_, None) => {}
            (None, Some(_)) => {}
        }
        self.last = period;
        self.gain
    }

    /// The estimate Ĝ (ms per IOPS).
    pub fn gain_ms_per_iops(&self) -> f64 {
        self.gain
    }

    /// Updates made (periods that informed the estimate).
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// The configuration.
    pub fn config(&self) -> &EstimatorConfig {
        &self.cfg
    }
}

/// The controller gain measured online: a [`GainEstimator`] and the pole placed on it,
/// `K = (1 − p)/Ĝ` (seed 003 Eq. 7 with the estimate for `G`).
#[derive(Clone, Debug, PartialEq)]
pub struct OnlineGain {
    estimator: GainEstimator,
    pole: f64,
}

impl OnlineGain {
    /// Place `pole` (−1 < p < 1) on the estimates of `estimator`.
    pub fn new(estimator: GainEstimator, pole: f64) -> Result<Self> {
        if !(pole > -1.0 && pole < 1.0) {
            return config(format!("fclb: closed-loop pole must lie in (-1, 1) for stability (Eq. 8), got {pole}"));
        }
        Ok(OnlineGain { estimator, pole })
    }

    /// Observe one period ([`GainEstimator::observe`]) and return the controller gain K
    /// (IOPS per ms) for the step that ends it.
    pub fn period(&mut self, period: Option<(f64, f64)>) -> f64 {
        self.estimator.observe(period);
        self.gain_iops_per_ms()
    }

    /// `K = (1 − p)/Ĝ` (IOPS per ms) on the current estimate; `K·Ĝ = 1 − p` lies in
    /// (0, [`STABILITY_BOUND_TIMES_G`]).
    pub fn gain_iops_per_ms(&self) -> f64 {
        let k = (1.0 - self.pole) / self.estimator.gain_ms_per_iops();
        debug_assert!(k * self.estimator.gain_ms_per_iops() < STABILITY_BOUND_TIMES_G);
        k
    }

    /// The pole placed.
    pub fn pole(&self) -> f64 {
        self.pole
    }

    /// The estimator.
    pub fn estimator(&self) -> &GainEstimator {
        &self.estimator
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fclb::controller::{IntegralController, LinearPlant, RateLimits};
    use crate::rng::SimRng;

    /// Zero-mean noise of standard deviation `sd` (sum of 12 uniforms, Irwin-Hall).
    fn noise(rng: &mut SimRng, sd: f64) -> f64 {
        ((0..12).map(|_| rng.uniform()).sum::<f64>() - 6.0) * sd
    }

    #[test]
    fn recovers_a_known_gain_on_a_noisy_linear_plant() {
        // y = G·u + noise, G = 0.8 ms/IOPS, the estimator started 4x too low (0.2).
        const G: f64 = 0.8;
        let cfg = EstimatorConfig::around(0.2, 100.0).unwrap();
        let mut est = GainEstimator::new(cfg).unwrap();
        let mut rng = SimRng::new(17);
        for _ in 0..60 {
            let u = 40.0 * (rng.uniform() - 0.5); // ±20 IOPS steps
            est.update(u, G * u + noise(&mut rng, 0.5));
        }
        let g = est.gain_ms_per_iops();
        assert!((g - G).abs() < 0.1 * G, "Ĝ = {g}");
        assert!(est.updates() > 50);
        // Through observe(): levels, not differences, with a period that breaks the chain.
        let mut est = GainEstimator::new(cfg).unwrap();
        let (mut r, mut rt) = (100.0, 5.0);
        for k in 0..40 {
            let step = if k % 2 == 0 { 15.0 } else { -10.0 };
            r += step;
            rt += G * step + noise(&mut rng, 0.2);
            est.observe(if k == 20 { None } else { Some((r, rt)) });
        }
        assert!((est.gain_ms_per_iops() - G).abs() < 0.05 * G, "Ĝ = {}", est.gain_ms_per_iops());
        assert_eq!(est.updates(), 37); // 39 pairs, 2 broken by the gap
    }

    #[test]
    fn stays_bounded_on_a_flat_plant_and_inside_the_dead_zone() {
        let cfg = EstimatorConfig::around(0.25, 500.0).unwrap();
        let mut est = GainEstimator::new(cfg).unwrap();
        let mut rng = SimRng::new(3);
        // The p95 does not move with the rate: only noise.
        for k in 0..200 {
            let u = if k % 3 == 0 { -60.0 } else { 30.0 };
            est.update(u, noise(&mut rng, 1.0));
            let g = est.gain_ms_per_iops();
            assert!((cfg.min_ms_per_iops..=cfg.max_ms_per_iops).contains(&g), "Ĝ = {g}");
        }
        assert!((est.gain_ms_per_iops() - cfg.min_ms_per_iops).abs() < 0.05, "{}", est.gain_ms_per_iops());
        // K stays finite and within the bound for the estimate: (1 − p)/Ĝ < 2/Ĝ.
        let on = OnlineGain::new(est.clone(), 0.4).unwrap();
        assert!((on.gain_iops_per_ms() - 0.6 / est.gain_ms_per_iops()).abs() < 1e-12);
        assert!(on.gain_iops_per_ms() <= 0.6 / (MIN_GAIN_FACTOR * 0.25) + 1e-9);
        // Huge steps in p95 hit the upper bound, not infinity.
        for _ in 0..10 {
            est.update(5.0, 1e6);
        }
        assert_eq!(est.gain_ms_per_iops(), cfg.max_ms_per_iops);
        // Steps inside the dead zone (1 % of 500 IOPS) change nothing, not even P.
        let before = est.clone();
        assert!(!est.update(4.9, 100.0));
        assert!(!est.update(f64::NAN, 1.0));
        // A p95 that moved against the rate is not this plant's gain.
        assert!(!est.update(-50.0, 30.0));
        assert_eq!(est, before);
    }

    #[test]
    fn the_online_loop_settles_where_the_offline_gain_would_oscillate() {
        // True G = 1.0 ms/IOPS; the start value 0.3 (the paper's) with pole 0.4 gives
        // K = 2 IOPS/ms, K·G = 2: the offline loop sits on the stability bound.
        let plant = LinearPlant { gain_ms_per_iops: 1.0, r0_iops: 60.0, rt0_ms: 20.0 };
        let lim = RateLimits { floor_iops: 40.0, ceiling_iops: None };
        let reference = 35.0;
        let fixed = plant.closed_loop(&IntegralController::new(2.0).unwrap(), &lim, 60.0, reference, 30);
        assert!((fixed[29] - reference).abs() > 10.0, "{fixed:?}");
        let cfg = EstimatorConfig::around(0.3, 40.0).unwrap();
        let mut on = OnlineGain::new(GainEstimator::new(cfg).unwrap(), 0.4).unwrap();
        let mut r = 60.0;
        let mut k = on.gain_iops_per_ms();
        let mut rts = Vec::new();
        for _ in 0..30 {
            let rt = plant.response_ms(r);
            rts.push(rt);
            k = on.period(Some((r, rt)));
            r = IntegralController::new(k).unwrap().step_ms(r, reference, rt, &lim);
        }
        assert!((rts[29] - reference).abs() < 0.01, "{rts:?}");
        // The steps shrink into the dead zone as the loop settles: Ĝ near G, not at it.
        let g = on.estimator().gain_ms_per_iops();
        assert!((g - 1.0).abs() < 0.05, "Ĝ = {g}");
        assert!((k - 0.6 / g).abs() < 1e-12 && k * 1.0 < 2.0, "K = {k}");
    }

    #[test]
    fn bad_configurations_are_named() {
        assert!(EstimatorConfig::around(0.0, 10.0).unwrap_err().to_string().contains("start value"));
        let mut c = EstimatorConfig::around(0.3, 10.0).unwrap();
        c.forgetting = 1.5;
        assert!(GainEstimator::new(c).unwrap_err().to_string().contains("forgetting factor"));
        c.forgetting = 0.9;
        c.min_ms_per_iops = 0.5;
        assert!(c.check().unwrap_err().to_string().contains("0 < min <= start <= max"));
        let est = GainEstimator::new(EstimatorConfig::around(0.3, 10.0).unwrap()).unwrap();
        assert!(OnlineGain::new(est, 1.0).unwrap_err().to_string().contains("pole must lie in (-1, 1)"));
    }
}
