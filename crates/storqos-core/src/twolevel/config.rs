//! Serde description of seed 001's two-level policies (`001_f68b1e7da7bb5f73.txt`): the
//! parameters shared by the `sarc_avatar`, `sarc_facade`, `fixed_avatar` and
//! `adaptive_avatar` kinds of [`crate::spec::SchedulerSpec`].
//!
//! ```json
//! {"kind": "sarc_avatar",
//!  "slo": [{"rate_iops": 160, "latency_ns": 400000000}, {"rate_iops": 190, "latency_ns": 900000000}],
//!  "percentile": 0.95, "window_ns": 1000000000, "period_ns": 100000000}
//! {"kind": "sarc_facade", "slo": [...], "facade_overload": "total"}
//! {"kind": "adaptive_avatar", "slo": [...], "p_rt": 0.2, "p_inc": 0.025, "p_dec": 0.05}
//! ```
//! Class `i` (the request's `class`, which defaults to its tenant) has `slo[i]`; classes
//! beyond the list share the last entry.

use serde::Deserialize;

use crate::error::{config, Result};
use crate::time::Nanos;
use crate::twolevel::adaptive::{Adaptive, DEFAULT_P_DEC, DEFAULT_P_INC, DEFAULT_P_RT};
use crate::twolevel::avatar::{Avatar, DEFAULT_WINDOW};
use crate::twolevel::facade::{Facade, OverloadTest};
use crate::twolevel::sarc::{Replenishment, Sarc, DEFAULT_PERIOD};
use crate::twolevel::slo::{Slo, SloSet, DEFAULT_PERCENTILE};

/// One class's ⟨R_i, D_i⟩ in a spec.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SloSpec {
    /// Rate requirement R_i (IOPS, > 0).
    pub rate_iops: f64,
    /// Latency requirement D_i (ns, > 0).
    pub latency_ns: Nanos,
}

/// Parameters of a two-level policy.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TwoLevelSpec {
    /// Per-class SLOs (at least one).
    pub slo: Vec<SloSpec>,
    /// Percentile of the latency guarantee (default 0.95).
    #[serde(default)]
    pub percentile: Option<f64>,
    /// Low-level control window (ns, default 1 s).
    #[serde(default)]
    pub window_ns: Option<Nanos>,
    /// Replenishment period T_SARC (ns, default 100 ms).
    #[serde(default)]
    pub period_ns: Option<Nanos>,
    /// AVATAR's threshold in the first window (default 8).
    #[serde(default)]
    pub initial_threshold: Option<f64>,
    /// Facade's overload test (`sarc_facade` only): `"per_class"` (default) or `"total"`
    /// (the spec's literal "arrival rate > Σ R_i"), see [`OverloadTest`].
    #[serde(default)]
    pub facade_overload: Option<OverloadTest>,
    /// ADAPTIVE's latency margin P_rt (adaptive only; default 0.2).
    #[serde(default)]
    pub p_rt: Option<f64>,
    /// ADAPTIVE's increase P_inc (adaptive only; default 0.025).
    #[serde(default)]
    pub p_inc: Option<f64>,
    /// ADAPTIVE's decrease P_dec (adaptive only; default 0.05).
    #[serde(default)]
    pub p_dec: Option<f64>,
}

/// Which upper level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Upper {
    /// SARC (three triggers).
    Sarc,
    /// FIXED (periodic only).
    Fixed,
    /// ADAPTIVE.
    Adaptive,
}

impl TwoLevelSpec {
    fn slos(&self) -> Result<SloSet> {
        let classes = self.slo.iter().map(|s| Slo::new(s.rate_iops, s.latency_ns)).collect();
        SloSet::new(classes, self.percentile.unwrap_or(DEFAULT_PERCENTILE))
    }

    fn rule(&self, upper: Upper) -> Result<Replenishment> {
        if upper != Upper::Adaptive {
            for (name, v) in [("p_rt", self.p_rt), ("p_inc", self.p_inc), ("p_dec", self.p_dec)] {
                if v.is_some() {
                    return config(format!("{name} only applies to adaptive_avatar"));
                }
            }
        }
        Ok(match upper {
            Upper::Sarc => Replenishment::Sarc,
            Upper::Fixed => Replenishment::Periodic,
            Upper::Adaptive => Replenishment::Adaptive(Adaptive::new(
                self.p_rt.unwrap_or(DEFAULT_P_RT),
                self.p_inc.unwrap_or(DEFAULT_P_INC),
                self.p_dec.unwrap_or(DEFAULT_P_DEC),
            )?),
        })
    }

    /// `upper` over AVATAR.
    pub fn build_avatar(&self, upper: Upper) -> Result<Sarc<Avatar>> {
        if self.facade_overload.is_some() {
            return config("facade_overload only applies to sarc_facade");
        }
        let slos = self.slos()?;
        let mut avatar = Avatar::new(slos.clone(), self.window_ns.unwrap_or(DEFAULT_WINDOW))?;
        if let Some(l) = self.initial_threshold {
            avatar = avatar.with_threshold(l)?;
        }
        Sarc::with_rule(slos, self.period_ns.unwrap_or(DEFAULT_PERIOD), avatar, self.rule(upper)?)
    }

    /// SARC over Facade.
    pub fn build_facade(&self) -> Result<Sarc<Facade>> {
        if self.initial_threshold.is_some() {
            return config("initial_threshold only applies to AVATAR policies");
        }
        let slos = self.slos()?;
        let facade = Facade::new(slos.clone(), self.window_ns.unwrap_or(DEFAULT_WINDOW))?
            .with_overload_test(self.facade_overload.unwrap_or_default());
        Sarc::with_rule(slos, self.period_ns.unwrap_or(DEFAULT_PERIOD), facade, self.rule(Upper::Sarc)?)
    }
}
