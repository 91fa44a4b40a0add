//! ADAPTIVE, a rate-controller baseline of seed 001 (`001_f68b1e7da7bb5f73.txt`, §4.2
//! experiment E2, Table 1): periodic credit replenishment like FIXED, but the *full*
//! credit amounts change every second "adaptively based on the SLO requirements and load
//! conditions", in the spirit of SLEDS (Chambliss et al., SRDS'03). Its parameters
//! `P_rt`, `P_inc`, `P_dec` are defined in the paper's technical report (its ref. \[14\]),
//! which the seed does not include.
//!
//! **Our reading** (the spec's "Algorithm notes → ADAPTIVE"): every second
//! ([`ADAPTIVE_PERIOD`]), read each class's percentile low-level latency over the last
//! low-level window (the monitor of [`crate::twolevel::Avatar`]):
//! - if some class missed its latency (`p > D_i`), cut the full amount of every class
//!   that is above its SLO amount `r_i` by `P_dec` (never below `r_i`): the classes
//!   running beyond their contract give bandwidth back;
//! - else, if every class met it with margin `P_rt` (`p ≤ (1 − P_rt)·D_i`), raise the
//!   full amount of every class that was backlogged in the last second by `P_inc`;
//! - else leave the amounts alone.
//!
//! A class without completions in the window counts as meeting its latency with margin.
//! The paper's E2 values are the defaults: `P_rt = 20 %`, `P_inc = 2.5 %`, `P_dec = 5 %`.

use crate::error::{config, Result};
use crate::time::{Nanos, NS_PER_SEC};
use crate::twolevel::slo::SloSet;

/// ADAPTIVE sets the full credit amounts "at 1 second intervals" (§4.2).
pub const ADAPTIVE_PERIOD: Nanos = NS_PER_SEC;
/// Latency margin `P_rt = 20 %` (§4.2, E2's setting).
pub const DEFAULT_P_RT: f64 = 0.20;
/// Credit increase `P_inc = 2.5 %` (§4.2, E2's setting).
pub const DEFAULT_P_INC: f64 = 0.025;
/// Credit decrease `P_dec = 5 %` (§4.2, E2's setting).
pub const DEFAULT_P_DEC: f64 = 0.05;

/// What ADAPTIVE did at one period end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Some class missed its latency: amounts above `r_i` were cut by `P_dec`.
    Decrease,
    /// All met with margin `P_rt`: backlogged classes' amounts grew by `P_inc`.
    Increase,
    /// Neither.
    Hold,
}

/// ADAPTIVE's state: parameters, the next adjustment time, who was backlogged.
#[derive(Clone, Debug)]
pub struct Adaptive {
    p_rt: f64,
    p_inc: f64,
    p_dec: f64,
    next: Nanos,
    backlogged: Vec<bool>,
    last: Option<Action>,
}

impl Adaptive {
    /// ADAPTIVE with margins in [0, 1): `p_rt`, `p_inc` (≥ 0, finite), `p_dec` in [0, 1).
    pub fn new(p_rt: f64, p_inc: f64, p_dec: f64) -> Result<Self> {
        if !(0.0..1.0).contains(&p_rt) {
            return config(format!("adaptive: p_rt must be in [0, 1), got {p_rt}"));
        }
        if !(p_inc >= 0.0 && p_inc.is_finite()) {
            return config(format!("adaptive: p_inc must be a finite number >= 0, got {p_inc}"));
        }
        if !(0.0..1.0).contains(&p_dec) {
            return config(format!("adaptive: p_dec must be in [0, 1), got {p_dec}"));
        }
        Ok(Adaptive { p_rt, p_inc, p_dec, next: ADAPTIVE_PERIOD, backlogged: Vec::new(), last: None })
    }

    /// The paper's E2 parameters.
    pub fn paper() -> Self {
        Self::new(DEFAULT_P_RT, DEFAULT_P_INC, DEFAULT_P_DEC).expect("valid defaults")
    }

    /// Prepare for `classes` classes.
    pub(crate) fn start(&mut self, classes: usize) {
        self.backlogged = vec![false; classes];
    }

    /// Class `i` had a request wait for credits.
    #[inline]
    pub(crate) fn mark_backlogged(&mut self, i: usize) {
        self.backlogged[i] = true;
    }

    /// Time of the next adjustment.
    #[inline]
    pub fn next(&self) -> Nanos {
        self.next
    }

    /// The last action taken.
    pub fn last_action(&self) -> Option<Action> {
        self.last
    }

    /// Adjust the full amounts `full` (SLO amounts `base`) from each class's latency.
    pub fn adjust(
        &mut self,
        now: Nanos,
        full: &mut [f64],
        base: &[f64],
        slos: &SloSet,
        latency: impl Fn(usize) -> Option<Nanos>,
    ) -> Action {
        let d = |i: usize| slos.classes()[i].latency as f64;
        let missed = (0..full.len()).any(|i| latency(i).is_some_and(|p| p as f64 > d(i)));
        let margin = (0..full.len()).all(|i| latency(i).is_none_or(|p| p as f64 <= (1.0 - self.p_rt) * d(i)));
        let action = if missed {
            for i in 0..full.len() {
                if full[i] > base[i] {
                    full[i] = (full[i] * (1.0 - self.p_dec)).max(base[i]);
                }
            }
            Action::Decrease
        } else if margin {
            for (f, &backlogged) in full.iter_mut().zip(&self.backlogged) {
                if backlogged {
                    *f *= 1.0 + self.p_inc;
                }
            }
            Action::Increase
        } else {
            Action::Hold
        };
        self.backlogged.iter_mut().for_each(|b| *b = false);
        self.next = (now / ADAPTIVE_PERIOD + 1) * ADAPTIVE_PERIOD;
        self.last = Some(action);
        action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twolevel::slo::Slo;

    #[test]
    fn increases_decreases_and_holds() {
        let slos = SloSet::new(vec![Slo::new(10.0, 100), Slo::new(10.0, 100)], 0.95).unwrap();
        let base = [1.0, 1.0];
        let mut full = [1.0, 1.0];
        let mut a = Adaptive::paper();
        a.start(2);
        // Both well within (≤ 80 % of D): the backlogged class grows by 2.5 %.
        a.mark_backlogged(1);
        assert_eq!(a.adjust(NS_PER_SEC, &mut full, &base, &slos, |_| Some(80)), Action::Increase);
        assert_eq!(full, [1.0, 1.025]);
        assert_eq!(a.next(), 2 * NS_PER_SEC);
        // Backlog flags reset each period: nothing grows without a new backlog.
        a.adjust(2 * NS_PER_SEC, &mut full, &base, &slos, |_| None);
        assert_eq!(full, [1.0, 1.025]);
        // Within D but not with margin: hold.
        a.mark_backlogged(1);
        assert_eq!(a.adjust(3 * NS_PER_SEC, &mut full, &base, &slos, |_| Some(90)), Action::Hold);
        // A miss cuts classes above their SLO amount by 5 %, never below it.
        assert_eq!(
            a.adjust(4 * NS_PER_SEC, &mut full, &base, &slos, |i| Some(if i == 0 { 101 } else { 1 })),
            Action::Decrease
        );
        assert_eq!(full, [1.0, 1.0]);
        assert!(Adaptive::new(1.0, 0.1, 0.1).unwrap_err().to_string().contains("p_rt"));
        assert!(Adaptive::new(0.1, -1.0, 0.1).unwrap_err().to_string().contains("p_inc"));
        assert!(Adaptive::new(0.1, 0.1, 1.0).unwrap_err().to_string().contains("p_dec"));
    }
}
