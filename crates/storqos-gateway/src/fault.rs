//! Fault injection: an export can be told to fail or to slow some of its requests, as
//! nbdkit's `error` and `delay` filters do, so that what a client and the other tenants
//! see when a disk goes bad can be tried on purpose: `EIO` on reads or writes of a byte
//! range, `ENOSPC`, a short write (the first half of the data lands, then `EIO`), or a
//! delay before the I/O (a slow disk: the request holds its backend slot for that time
//! without using a CPU). A rule matches a request by kind and by overlap with its range;
//! `rate` applies it to that fraction of the matching requests, drawn from a fixed
//! sequence (the same requests are hit on every run with the same traffic). Every
//! matching rule's delay adds up; the first matching rule with an error fails the
//! request (after the delays of the rules before it).
//!
//! ```json
//! "faults": [{"op": "read", "error": "eio", "offset": 1048576, "length": 1048576},
//!            {"op": "write", "error": "short", "rate": 0.5},
//!            {"op": "read", "delay_s": 0.002}]
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Deserialize;

use crate::protocol::{EIO, ENOSPC};

/// Which requests a rule applies to.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FaultOp {
    /// Reads.
    Read,
    /// Writes, trims and write-zeroes.
    Write,
    /// Flushes (and the flush of a FUA write).
    Flush,
    /// All of them.
    Any,
}

/// What a matching request gets.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FaultError {
    /// An I/O error.
    Eio,
    /// No space left.
    Enospc,
    /// A write of which only the first half lands, answered `EIO` (other requests:
    /// plain `EIO`).
    Short,
}

/// One fault rule of an export.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// Which requests.
    pub op: FaultOp,
    /// What they get (none: only the delay).
    #[serde(default)]
    pub error: Option<FaultError>,
    /// How long the I/O waits before it starts (s; default 0).
    #[serde(default)]
    pub delay_s: f64,
    /// Start of the byte range (default 0).
    #[serde(default)]
    pub offset: u64,
    /// Length of the range (default: to the end of the export; flushes match any range).
    #[serde(default)]
    pub length: Option<u64>,
    /// Fraction of the matching requests it applies to, in (0, 1] (default 1: all).
    #[serde(default = "all")]
    pub rate: f64,
}

fn all() -> f64 {
    1.0
}

/// Longest delay a rule may add (s): longer would look like a hung gateway, not a slow disk.
pub const MAX_DELAY_S: f64 = 60.0;

/// What the rules do to one request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hit {
    /// The wait before the I/O (the sum of the matching rules' delays).
    pub delay: Duration,
    /// The error it gets, if a rule fails it (and whether it is a short write).
    pub error: Option<(u32, bool)>,
}

impl Fault {
    /// What is wrong with the rule, if anything (named by its key).
    pub fn check(&self) -> Result<(), String> {
        if !(self.rate > 0.0 && self.rate <= 1.0) {
            return Err(format!("rate: must be in (0, 1], got {}", self.rate));
        }
        if !(0.0..=MAX_DELAY_S).contains(&self.delay_s) {
            return Err(format!("delay_s: must be a time in [0, {MAX_DELAY_S}] s, got {}", self.delay_s));
        }
        if self.error.is_none() && self.delay_s == 0.0 {
            return Err("error: a rule needs an error, a delay or both".into());
        }
        if self.length == Some(0) {
            return Err("length: must be > 0 (or left out: to the end)".into());
        }
        Ok(())
    }

    fn covers(&self, offset: u64, len: u64) -> bool {
        let end = self.length.map_or(u64::MAX, |l| self.offset.saturating_add(l));
        offset < end && offset.saturating_add(len.max(1)) > self.offset
    }

    /// Whether the rule matches a request of `kind` on `offset .. offset + len` (a flush
    /// matches any range).
    fn applies(&self, kind: Kind, offset: u64, len: u64) -> bool {
        matches(self, kind) && (kind == Kind::Flush || self.covers(offset, len))
    }
}

/// The kind of a request, as fault rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A read.
    Read,
    /// A write, trim or write-zeroes.
    Write,
    /// A flush.
    Flush,
}

/// An export's fault rules and the sequence their rates draw from.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Vec<Fault>,
    draws: AtomicU64,
}

impl Faults {
    /// The rules (checked by [`Fault::check`]).
    pub fn new(rules: Vec<Fault>) -> Self {
        Faults { rules, draws: AtomicU64::new(0) }
    }

    /// Whether there is any rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether a rule could fail a request of `kind` on `offset .. offset + len` (the
    /// page-cache fast path leaves such a read to the path that applies the rules).
    pub fn may_hit(&self, kind: Kind, offset: u64, len: u64) -> bool {
        self.rules.iter().any(|f| f.applies(kind, offset, len))
    }

    /// What the rules do to a request of `kind` on `offset .. offset + len`: the sum of
    /// the matching rules' delays, up to and including the first matching rule with an
    /// error, and that error.
    pub fn hit(&self, kind: Kind, offset: u64, len: u64) -> Hit {
        let mut hit = Hit::default();
        for f in &self.rules {
            if !f.applies(kind, offset, len) {
                continue;
            }
            if f.rate < 1.0 && unit(self.draws.fetch_add(1, Ordering::Relaxed)) >= f.rate {
                continue;
            }
            hit.delay += Duration::from_secs_f64(f.delay_s);
            if let Some(e) = f.error {
                hit.error = Some(match e {
                    FaultError::Eio => (EIO, false),
                    FaultError::Enospc => (ENOSPC, false),
                    FaultError::Short => (EIO, kind == Kind::Write),
                });
                break;
            }
        }
        hit
    }
}

fn matches(f: &Fault, kind: Kind) -> bool {
    matches!(
        (f.op, kind),
        (FaultOp::Any, _) | (FaultOp::Read, Kind::Read) | (FaultOp::Write, Kind::Write) | (FaultOp::Flush, Kind::Flush)
    )
}

/// The `n`-th draw of a fixed sequence, uniform in [0, 1) (splitmix64).
fn unit(n: u64) -> f64 {
    let mut z = n.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(op: FaultOp, error: FaultError, offset: u64, length: Option<u64>, rate: f64) -> Fault {
        Fault { op, error: Some(error), offset, length, rate, delay_s: 0.0 }
    }

    fn delay(op: FaultOp, s: f64) -> Fault {
        Fault { op, error: None, offset: 0, length: None, rate: 1.0, delay_s: s }
    }

    fn err(f: &Faults, kind: Kind, offset: u64, len: u64) -> Option<(u32, bool)> {
        f.hit(kind, offset, len).error
    }

    #[test]
    fn rules_match_by_kind_and_range() {
        let f = Faults::new(vec![
            rule(FaultOp::Read, FaultError::Eio, 4096, Some(4096), 1.0),
            rule(FaultOp::Write, FaultError::Short, 0, None, 1.0),
        ]);
        assert_eq!(err(&f, Kind::Read, 0, 4096), None, "ends where the range starts");
        assert_eq!(err(&f, Kind::Read, 4000, 100), Some((EIO, false)), "overlaps");
        assert_eq!(err(&f, Kind::Read, 8192, 10), None, "starts where it ends");
        assert_eq!(err(&f, Kind::Write, 1 << 40, 512), Some((EIO, true)));
        assert_eq!(err(&f, Kind::Flush, 0, 0), None);
        assert!(f.may_hit(Kind::Read, 4096, 1) && !f.may_hit(Kind::Read, 0, 4096));
        let any = Faults::new(vec![rule(FaultOp::Any, FaultError::Enospc, 0, Some(10), 1.0)]);
        assert_eq!(err(&any, Kind::Flush, 1 << 30, 0), Some((ENOSPC, false)), "a flush matches any range");
        assert_eq!(err(&any, Kind::Write, 5, 1), Some((ENOSPC, false)));
    }

    #[test]
    fn a_rate_fails_that_fraction_in_a_fixed_sequence() {
        let f = Faults::new(vec![rule(FaultOp::Read, FaultError::Eio, 0, None, 0.25)]);
        let hits: Vec<bool> = (0..20_000).map(|_| err(&f, Kind::Read, 0, 1).is_some()).collect();
        let share = hits.iter().filter(|&&h| h).count() as f64 / hits.len() as f64;
        assert!((share - 0.25).abs() < 0.01, "{share}");
        let again = Faults::new(vec![rule(FaultOp::Read, FaultError::Eio, 0, None, 0.25)]);
        assert!(hits.iter().all(|&h| err(&again, Kind::Read, 0, 1).is_some() == h), "the same sequence");
    }

    #[test]
    fn delays_add_up_to_the_first_error() {
        let ms = Duration::from_millis;
        let f = Faults::new(vec![
            delay(FaultOp::Read, 0.002),
            delay(FaultOp::Any, 0.003),
            rule(FaultOp::Read, FaultError::Eio, 4096, Some(4096), 1.0),
            delay(FaultOp::Read, 0.5),
        ]);
        assert_eq!(f.hit(Kind::Read, 0, 4096), Hit { delay: ms(2) + ms(3) + ms(500), error: None });
        assert_eq!(f.hit(Kind::Read, 4096, 1), Hit { delay: ms(5), error: Some((EIO, false)) }, "stops at the error");
        assert_eq!(f.hit(Kind::Write, 0, 1), Hit { delay: ms(3), error: None });
        assert!(f.may_hit(Kind::Read, 0, 1), "a delayed read leaves the page-cache fast path");
        let mut mixed = rule(FaultOp::Write, FaultError::Enospc, 0, None, 1.0);
        mixed.delay_s = 0.25;
        assert_eq!(
            Faults::new(vec![mixed]).hit(Kind::Write, 9, 9),
            Hit { delay: ms(250), error: Some((ENOSPC, false)) }
        );
    }

    #[test]
    fn bad_rules_are_named() {
        assert!(rule(FaultOp::Any, FaultError::Eio, 0, None, 0.0).check().unwrap_err().starts_with("rate:"));
        assert!(rule(FaultOp::Any, FaultError::Eio, 0, None, 1.5).check().unwrap_err().starts_with("rate:"));
        assert!(rule(FaultOp::Any, FaultError::Eio, 0, Some(0), 1.0).check().unwrap_err().starts_with("length:"));
        assert!(delay(FaultOp::Any, -1.0).check().unwrap_err().starts_with("delay_s:"));
        assert!(delay(FaultOp::Any, f64::NAN).check().unwrap_err().starts_with("delay_s:"));
        assert!(delay(FaultOp::Any, 61.0).check().unwrap_err().starts_with("delay_s:"));
        assert_eq!(delay(FaultOp::Any, 0.0).check().unwrap_err(), "error: a rule needs an error, a delay or both");
        assert!(delay(FaultOp::Any, 60.0).check().is_ok());
    }
}
