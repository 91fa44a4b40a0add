//! Service level objectives ⟨R_i, D_i⟩ of seed 001 (`001_f68b1e7da7bb5f73.txt`) §3.1.
//!
//! Class `i` promises: while its arrival rate stays at or below `R_i` (the *rate
//! requirement*, IOPS), the `percentile` (95 % in the paper's evaluation: a *statistical*
//! latency guarantee, not a mean) of its requests finish within `D_i` (the *latency
//! requirement*); when it arrives faster than `R_i` it is owed a throughput of at least
//! `R_i` and no latency. The promise is judged per interval of fixed length, 1 s in the
//! paper ([`SLO_INTERVAL`]):
//!
//! - arrivals > `R_i`·interval: **throughput met** iff served ≥ `R_i`·interval;
//! - arrivals ≤ `R_i`·interval: **latency met** iff the interval's percentile ≤ `D_i`;
//! - otherwise **violated** ([`Verdict`], [`judge`]).
//!
//! The same ⟨R_i, D_i⟩ parametrise the schedulers: SARC's credits `r_i = T_SARC·R_i`
//! (§3.3), AVATAR's EDF deadlines `D_i` and its percentile statistic `T^O_i` (§3.4).

use crate::error::{config, Result};
use crate::sim::generate::MAX_RATE_IOPS;
use crate::time::{Nanos, NS_PER_SEC};

/// The percentile of the statistical latency guarantee in the paper's evaluation
/// (§3.1: "the SLO requires x% (95% in our evaluations) of all requests be bounded by a
/// latency of D_i").
pub const DEFAULT_PERCENTILE: f64 = 0.95;

/// The interval over which an SLO is enforced and judged (§3.1: "1 second in our
/// evaluation").
pub const SLO_INTERVAL: Nanos = NS_PER_SEC;

/// One class's objective ⟨R_i, D_i⟩.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slo {
    /// Rate requirement R_i (IOPS, finite, > 0).
    pub rate_iops: f64,
    /// Latency requirement D_i (ns, > 0).
    pub latency: Nanos,
}

impl Slo {
    /// ⟨`rate_iops`, `latency`⟩.
    pub fn new(rate_iops: f64, latency: Nanos) -> Self {
        Slo { rate_iops, latency }
    }
}

/// The SLOs of all classes (class `i` = index `i`) and the shared percentile.
#[derive(Clone, Debug, PartialEq)]
pub struct SloSet {
    classes: Vec<Slo>,
    percentile: f64,
}

impl SloSet {
    /// Validated SLOs: at least one class, every rate finite and > 0, every latency > 0,
    /// percentile in (0, 1]. Errors name the class and field (`slo[1].latency_ns`).
    pub fn new(classes: Vec<Slo>, percentile: f64) -> Result<Self> {
        if classes.is_empty() {
            return config("slo: at least one class is needed");
        }
        for (i, s) in classes.iter().enumerate() {
            if !(s.rate_iops > 0.0 && s.rate_iops.is_finite()) {
                return config(format!("slo[{i}].rate_iops must be a finite number > 0, got {}", s.rate_iops));
            }
            if s.rate_iops > MAX_RATE_IOPS {
                return config(format!(
                    "slo[{i}].rate_iops must be at most {MAX_RATE_IOPS:e} (one request per ns), got {:e}",
                    s.rate_iops
                ));
            }
            if s.latency == 0 {
                return config(format!("slo[{i}].latency_ns must be > 0"));
            }
        }
        if !(percentile > 0.0 && percentile <= 1.0) {
            return config(format!("slo: percentile must be in (0, 1], got {percentile}"));
        }
        Ok(SloSet { classes, percentile })
    }

    /// Number of classes.
    #[inline]
    pub fn len(&self) -> usize {
        self.classes.len()
    }

    /// Always false (a set has at least one class).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// The percentile of the latency guarantee (0.95 by default).
    #[inline]
    pub fn percentile(&self) -> f64 {
        self.percentile
    }

    /// All classes.
    #[inline]
    pub fn classes(&self) -> &[Slo] {
        &self.classes
    }

    /// The SLO of `class`; classes beyond the list share the last one (a request of an
    /// unknown class is never dropped).
    #[inline]
    pub fn get(&self, class: u32) -> &Slo {
        let i = (class as usize).min(self.classes.len() - 1);
        &self.classes[i]
    }

    /// The dense class index used by per-class tables: `class` clamped to the list.
    #[inline]
    pub fn index(&self, class: u32) -> usize {
        (class as usize).min(self.classes.len() - 1)
    }

    /// Σ R_i (IOPS).
    pub fn total_rate(&self) -> f64 {
        self.classes.iter().map(|s| s.rate_iops).sum()
    }
}

/// The outcome of one class in one SLO interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Arrivals exceeded R_i and at least R_i were served.
    ThroughputMet,
    /// Arrivals stayed within R_i and the percentile latency was within D_i.
    LatencyMet,
    /// Neither.
    Violated,
}

impl Verdict {
    /// `"throughput met"`, `"latency met"` or `"violated"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::ThroughputMet => "throughput met",
            Verdict::LatencyMet => "latency met",
            Verdict::Violated => "violated",
        }
    }
    /// True unless [`Verdict::Violated`].
    pub fn met(self) -> bool {
        self != Verdict::Violated
    }
}

/// Judge one class in one interval of length `interval` (§3.1): `arrivals` and `served`
/// counted in the interval, `latency` the interval's percentile response time (`None`
/// when nothing completed: then an interval within the rate with arrivals is violated
/// only if something arrived and nothing was served).
pub fn judge(slo: &Slo, interval: Nanos, arrivals: u64, served: u64, latency: Option<Nanos>) -> Verdict {
    let owed = slo.rate_iops * interval as f64 / NS_PER_SEC as f64;
    if arrivals as f64 > owed {
        if served as f64 >= owed {
            Verdict::ThroughputMet
        } else {
            Verdict::Violated
        }
    } else {
        match latency {
            Some(l) if l > slo.latency => Verdict::Violated,
            Some(_) => Verdict::LatencyMet,
            None if arrivals > 0 && served == 0 => Verdict::Violated,
            None => Verdict::LatencyMet,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS;

    #[test]
    fn verdicts_follow_section_3_1() {
        let s = Slo::new(160.0, 400 * NS_PER_MS);
        let sec = NS_PER_SEC;
        // Within the rate: judged on latency.
        assert_eq!(judge(&s, sec, 160, 150, Some(399 * NS_PER_MS)), Verdict::LatencyMet);
        assert_eq!(judge(&s, sec, 100, 100, Some(401 * NS_PER_MS)), Verdict::Violated);
        // Above the rate: judged on throughput only, latency does not matter.
        assert_eq!(judge(&s, sec, 500, 160, Some(5 * sec)), Verdict::ThroughputMet);
        assert_eq!(judge(&s, sec, 500, 159, Some(NS_PER_MS)), Verdict::Violated);
        // Half-second intervals owe half the rate.
        assert_eq!(judge(&s, sec / 2, 81, 80, None), Verdict::ThroughputMet);
        // Idle interval: nothing owed.
        assert_eq!(judge(&s, sec, 0, 0, None), Verdict::LatencyMet);
        assert!(!Verdict::Violated.met() && Verdict::LatencyMet.met());
    }

    #[test]
    fn bad_slos_are_named() {
        let e = SloSet::new(vec![Slo::new(1.0, 1), Slo::new(0.0, 1)], 0.95).unwrap_err().to_string();
        assert!(e.contains("slo[1].rate_iops"), "{e}");
        // 1e308 IOPS made SARC's credits per period infinite and the run never ended.
        let e = SloSet::new(vec![Slo::new(1e308, 1)], 0.95).unwrap_err().to_string();
        assert!(e.contains("slo[0].rate_iops must be at most 1e9 (one request per ns), got 1e308"), "{e}");
        let e = SloSet::new(vec![Slo::new(1.0, 0)], 0.95).unwrap_err().to_string();
        assert!(e.contains("slo[0].latency_ns"), "{e}");
        let e = SloSet::new(vec![Slo::new(1.0, 1)], 1.5).unwrap_err().to_string();
        assert!(e.contains("percentile"), "{e}");
        assert!(SloSet::new(vec![], 0.95).is_err());
        let s = SloSet::new(vec![Slo::new(1.0, 5), Slo::new(2.0, 7)], 0.95).unwrap();
        assert_eq!(s.get(9).latency, 7);
        assert_eq!(s.index(9), 1);
        assert_eq!(s.total_rate(), 3.0);
    }
}
