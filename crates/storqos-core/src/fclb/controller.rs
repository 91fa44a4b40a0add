//! The FCLB integral controller and its linear plant model (seed 003 §3.1 Eqs. 1–2,
//! §3.2 Eqs. 3–8).
//!
//! At the end of control period `k` (every [`CONTROL_PERIOD`], 1 s), per workload `i`:
//!
//! - Eq. 1, error: `e_i(k) = RT_ref,i − RT_i(k)`, with `RT_i(k)` the 95th percentile
//!   response time the monitor measured in the period (negative = violation);
//! - Eq. 2, integral control: `r_i(k) = r_i(k−1) + K·e_i(k)`, never below the demanded
//!   `IOPS_i` ("the controller decreases r_i to its demanded IOPS_i maximumly") and, if
//!   configured, never above a ceiling.
//!
//! **Plant model** (Eq. 3, linearised around the operating point):
//! `RT(k+1) = RT0 + G·(r(k) − r0)`, where the process gain `G` (ms per IOPS) is the
//! sensitivity of the response time to the replenish rate. With Eq. 2 the error obeys
//! `e(k+1) = (1 − K·G)·e(k)`: the closed loop (Eq. 6) has the single pole (Eq. 7)
//! `p = 1 − K·G`, and is stable iff `|p| < 1`, i.e. (Eq. 8) `0 < K < 2/G`. A pole in
//! `(0, 1)` converges monotonically, `(−1, 0)` with alternating overshoot, `p = 0` in one
//! period (deadbeat); `p ≤ −1` oscillates with growing (or, at `−1`, constant) amplitude.
//! After `n` periods the error is `p^n·e(0)`, so reaching `|e| ≤ tol` takes
//! `ceil(ln(tol/|e0|) / ln|p|)` periods ([`periods_to_settle`]).
//!
//! **Pole placement** (§4.4, Eq. 7): `K = (1 − p)/G` for a chosen pole
//! ([`pole_placement`], [`DEFAULT_POLE`]; G defaults to the paper's
//! [`PAPER_PLANT_GAIN_MS_PER_IOPS`]); [`crate::fclb::tuning`] profiles G and places it.
//!
//! Units: `K` in IOPS per millisecond of error, `G` in milliseconds per IOPS, so
//! `K·G` is dimensionless.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

use crate::error::{config, Result};
use crate::time::{Nanos, NS_PER_MS, NS_PER_SEC};

/// Control period: "1000 msec to control the replenish rate" (seed 003 §4.1).
pub const CONTROL_PERIOD: Nanos = NS_PER_SEC;

/// Upper end of the stable gain range in units of `1/G`: Eq. 8, `0 < K < 2/G`.
pub const STABILITY_BOUND_TIMES_G: f64 = 2.0;

/// G the paper estimated for its disk and synthetic workload (§4.4: "We estimate that
/// G=0.3"), in ms of p95 per IOPS: the default when none is given or profiled.
pub const PAPER_PLANT_GAIN_MS_PER_IOPS: f64 = 0.3;

/// Default closed-loop pole. The paper places it "close to 1" for its non-linear disk
/// (§4.4; the value itself is lost in the seed text). 0.7 settles a step to 5 % in 9
/// periods on the linear model and leaves a 5.7× margin before the stability bound
/// `K < 2/G` when the disk's local gain rises near saturation.
pub const DEFAULT_POLE: f64 = 0.4;

/// The closed-loop pole `p = 1 − K·G` (Eq. 7).
#[inline]
pub fn closed_loop_pole(gain_iops_per_ms: f64, plant_ms_per_iops: f64) -> f64 {
    1.0 - gain_iops_per_ms * plant_ms_per_iops
}

/// The largest stable controller gain `2/G` (IOPS per ms), exclusive (Eq. 8).
#[inline]
pub fn stable_gain_bound(plant_ms_per_iops: f64) -> f64 {
    STABILITY_BOUND_TIMES_G / plant_ms_per_iops
}

/// Check that `K` (IOPS/ms) makes the loop stable for plant gain `G` (ms/IOPS):
/// `0 < K < 2/G`. The error states the bound and the resulting pole.
pub fn check_gain(gain_iops_per_ms: f64, plant_ms_per_iops: f64) -> Result<()> {
    if !(plant_ms_per_iops > 0.0 && plant_ms_per_iops.is_finite()) {
        return config(format!(
            "fclb: plant gain G must be > 0 ms/IOPS (response time rising with the rate), got {plant_ms_per_iops}"
        ));
    }
    let bound = stable_gain_bound(plant_ms_per_iops);
    if !(gain_iops_per_ms > 0.0 && gain_iops_per_ms < bound) {
        return config(format!(
            "fclb: controller gain K = {gain_iops_per_ms:.4} IOPS/ms is outside the stable range 0 < K < 2/G = {bound:.4} IOPS/ms \
             for plant gain G = {plant_ms_per_iops:.4} ms/IOPS (closed-loop pole p = 1 - K*G = {:.4}; stable iff |p| < 1)",
            closed_loop_pole(gain_iops_per_ms, plant_ms_per_iops)
        ));
    }
    Ok(())
}

/// Periods the error needs to shrink from `|e0|` to at most `tol` with pole `p`
/// (`|p| < 1`): `ceil(ln(tol/|e0|) / ln|p|)`; 0 if already within, 1 for `p = 0`.
pub fn periods_to_settle(pole: f64, e0: f64, tol: f64) -> u32 {
    debug_assert!(pole.abs() < 1.0 && tol > 0.0);
    if e0.abs() <= tol {
        return 0;
    }
    if pole == 0.0 {
        return 1;
    }
    ((tol / e0.abs()).ln() / pole.abs().ln()).ceil().max(1.0) as u32
}

/// How a spec sets the controller gain K: a number (IOPS per ms of error) or `"online"`,
/// the plant gain measured by the loop itself and the pole placed on it every period
/// ([`crate::fclb::estimator`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gain {
    /// A fixed K (IOPS per ms).
    IopsPerMs(f64),
    /// `K = (1 − p)/Ĝ` with `Ĝ` estimated online per workload.
    Online,
}

impl<'de> Deserialize<'de> for Gain {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Gain;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of IOPS per ms or \"online\"")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<Gain, E> {
                Ok(Gain::IopsPerMs(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<Gain, E> {
                Ok(Gain::IopsPerMs(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Gain, E> {
                Ok(Gain::IopsPerMs(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Gain, E> {
                if v.eq_ignore_ascii_case("online") {
                    Ok(Gain::Online)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// Bounds on a workload's replenish rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimits {
    /// Demanded IOPS_i: the rate never goes below it.
    pub floor_iops: f64,
    /// Optional ceiling (IOPS).
    pub ceiling_iops: Option<f64>,
}

impl RateLimits {
    /// Clamp `r` into `[floor, ceiling]`.
    #[inline]
    pub fn clamp(&self, r: f64) -> f64 {
        let r = r.max(self.floor_iops);
        self.ceiling_iops.map_or(r, |c| r.min(c))
    }
}

/// The integral controller of Eq. 2 with gain `K` (IOPS per ms of error).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntegralController {
    /// K (IOPS per ms).
    pub gain_iops_per_ms: f64,
}

impl IntegralController {
    /// A controller with gain `K` (finite; its stability is checked against a plant gain
    /// by [`check_gain`], not here, so tests can build unstable loops on purpose).
    pub fn new(gain_iops_per_ms: f64) -> Result<Self> {
        if !gain_iops_per_ms.is_finite() || gain_iops_per_ms < 0.0 {
            return config(format!(
                "fclb: controller gain K must be a finite number >= 0 IOPS/ms, got {gain_iops_per_ms}"
            ));
        }
        Ok(IntegralController { gain_iops_per_ms })
    }

    /// Eq. 1–2: the next rate from the previous one and the measured p95 (both ns),
    /// clamped by `limits`.
    #[inline]
    pub fn step(&self, rate_iops: f64, reference_ns: Nanos, measured_ns: Nanos, limits: &RateLimits) -> f64 {
        let ms = |ns: Nanos| ns as f64 / NS_PER_MS as f64;
        self.step_ms(rate_iops, ms(reference_ns), ms(measured_ns), limits)
    }

    /// [`IntegralController::step`] with response times in (fractional) milliseconds.
    #[inline]
    pub fn step_ms(&self, rate_iops: f64, reference_ms: f64, measured_ms: f64, limits: &RateLimits) -> f64 {
        limits.clamp(rate_iops + self.gain_iops_per_ms * (reference_ms - measured_ms))
    }
}

/// The linearised plant of Eq. 3: `RT(k+1) = RT0 + G·(r(k) − r0)` (ms).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearPlant {
    /// G (ms per IOPS).
    pub gain_ms_per_iops: f64,
    /// Operating point rate r0 (IOPS).
    pub r0_iops: f64,
    /// Response time at the operating point RT0 (ms).
    pub rt0_ms: f64,
}

impl LinearPlant {
    /// The response time (ms) the plant answers to rate `r` (IOPS).
    #[inline]
    pub fn response_ms(&self, rate_iops: f64) -> f64 {
        self.rt0_ms + self.gain_ms_per_iops * (rate_iops - self.r0_iops)
    }

    /// Run the closed loop for `periods` from rate `r_start` towards `reference_ms`:
    /// the measured response times `RT(1) … RT(periods)` (ms).
    pub fn closed_loop(
        &self,
        ctl: &IntegralController,
        limits: &RateLimits,
        r_start: f64,
        reference_ms: f64,
        periods: usize,
    ) -> Vec<f64> {
        let mut r = r_start;
        (0..periods)
            .map(|_| {
                let rt = self.response_ms(r);
                r = ctl.step_ms(r, reference_ms, rt, limits);
                rt
            })
            .collect()
    }
}

/// Controller parameters from pole placement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tuning {
    /// Plant gain G (ms per IOPS).
    pub plant_gain_ms_per_iops: f64,
    /// Closed-loop pole p.
    pub pole: f64,
    /// Controller gain K = (1 − p)/G (IOPS per ms).
    pub gain_iops_per_ms: f64,
    /// Stability bound 2/G (IOPS per ms).
    pub bound_iops_per_ms: f64,
}

/// K for the pole `p` (−1 < p < 1) on a plant of gain `G` (> 0): `K = (1 − p)/G`.
pub fn pole_placement(plant_ms_per_iops: f64, pole: f64) -> Result<Tuning> {
    if !(pole > -1.0 && pole < 1.0) {
        return config(format!("fclb: closed-loop pole must lie in (-1, 1) for stability (Eq. 8), got {pole}"));
    }
    if !(plant_ms_per_iops > 0.0 && plant_ms_per_iops.is_finite()) {
        return config(format!("fclb: plant gain G must be > 0 ms/IOPS, got {plant_ms_per_iops}"));
    }
    let k = (1.0 - pole) / plant_ms_per_iops;
    check_gain(k, plant_ms_per_iops)?;
    debug_assert!((closed_loop_pole(k, plant_ms_per_iops) - pole).abs() < 1e-9);
    Ok(Tuning {
        plant_gain_ms_per_iops: plant_ms_per_iops,
        pole,
        gain_iops_per_ms: k,
        bound_iops_per_ms: stable_gain_bound(plant_ms_per_iops),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pole_placement_inverts_eq7() {
        let t = pole_placement(0.3, 0.7).unwrap();
        assert!((t.gain_iops_per_ms - 1.0).abs() < 1e-12);
        assert!((t.bound_iops_per_ms - 6.666_666_666).abs() < 1e-6);
        assert!(pole_placement(0.3, 1.0).unwrap_err().to_string().contains("pole must lie in (-1, 1)"));
        assert!(pole_placement(0.0, 0.5).is_err());
    }

    #[test]
    fn bound_and_pole() {
        assert!((closed_loop_pole(2.0, 0.3) - 0.4).abs() < 1e-12);
        assert!((stable_gain_bound(0.3) - 6.666_666).abs() < 1e-5);
        assert!(check_gain(6.0, 0.3).is_ok());
        let e = check_gain(7.0, 0.3).unwrap_err().to_string();
        assert!(e.contains("0 < K < 2/G = 6.6667 IOPS/ms") && e.contains("p = 1 - K*G = -1.1000"), "{e}");
        assert!(check_gain(0.0, 0.3).is_err());
        assert!(check_gain(1.0, -0.3).unwrap_err().to_string().contains("plant gain G must be > 0"));
        assert_eq!(periods_to_settle(0.5, 8.0, 1.0), 3);
        assert_eq!(periods_to_settle(0.0, 8.0, 1.0), 1);
        assert_eq!(periods_to_settle(0.5, 0.5, 1.0), 0);
    }

    #[test]
    fn step_is_eq2_with_floor_and_ceiling() {
        let c = IntegralController::new(0.5).unwrap();
        let lim = RateLimits { floor_iops: 40.0, ceiling_iops: Some(70.0) };
        // 10 ms below the reference: +5 IOPS.
        assert_eq!(c.step(50.0, 35 * NS_PER_MS, 25 * NS_PER_MS, &lim), 55.0);
        // Far above: clamped to the demanded floor.
        assert_eq!(c.step(50.0, 35 * NS_PER_MS, 135 * NS_PER_MS, &lim), 40.0);
        assert_eq!(c.step(68.0, 35 * NS_PER_MS, 5 * NS_PER_MS, &lim), 70.0);
        assert!(IntegralController::new(f64::NAN).is_err());
    }
}
