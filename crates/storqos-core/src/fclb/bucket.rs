//! The per-workload token bucket of seed 003 (§3.1, §4.1, Table 1): tokens arrive every
//! [`REFILL_INTERVAL`] (1 ms) at the replenish rate `r_i` (IOPS), up to the bucket size
//! `b_i`; a request passes when a whole token is available and takes it.
//!
//! ## Integer arithmetic, refilled lazily
//! The bucket never reads a clock and needs no 1 ms timer: whenever it is touched at
//! time `now` it adds the refills of every whole 1 ms tick since the last one it
//! accounted (`ticks = (now − last_tick) / 1 ms`; ticks sit at multiples of 1 ms from
//! time 0, so the refill instants are the paper's).
//!
//! Levels are kept in micro-tokens ([`MICRO_TOKENS`] per token) and rates in milli-IOPS,
//! so one tick adds exactly `rate_milli_iops` micro-tokens:
//! `r [IOPS] × 1 ms = r / 1000 tokens = r·1000 µtokens = rate_milli_iops µtokens`.
//! A rate of 40.5 IOPS adds 40,500 µtokens a tick, i.e. a whole token every 24.69 ticks;
//! the fraction left after a request takes its 10^6 µtokens stays in the level and
//! carries over, so over any span the bucket hands out `r·t` tokens to within one token
//! (the bucket size cap aside). Nothing is rounded except the rate itself, to 1/1000 IOPS.
//!
//! **The cap.** Sizes are whole tokens. The level is capped at `size + 1 token − 1 µtoken`
//! rather than at `size`: the whole tokens available never exceed `b_i`, and the
//! fraction of a token that arrived with the last tick is not thrown away when a waiting
//! request takes its token at that tick (capping at `size` would round a rate of 45 IOPS
//! down to 1000/23 = 43.5 IOPS with a one-token bucket).
//!
//! Invariant (asserted in debug builds): `0 ≤ level ≤ cap`; a token is taken only when
//! `level ≥ 10^6`, so the level never goes negative.

use crate::error::{config, Result};
use crate::time::{Nanos, NS_PER_MS};

/// Token refill interval: "tokens (IOPS) of r_i/1000 are replenished every 1/1000
/// second ... we employ a time interval of 1 msec to replenish tokens" (seed 003 §4.1).
pub const REFILL_INTERVAL: Nanos = NS_PER_MS;

/// Micro-tokens per token: the integer unit of bucket levels.
pub const MICRO_TOKENS: u64 = 1_000_000;

/// Milli-IOPS per IOPS: the integer unit of replenish rates. With [`MICRO_TOKENS`] and a
/// 1 ms tick, one tick adds exactly `rate` (in milli-IOPS) micro-tokens.
pub const MILLI: u64 = 1_000;

/// Convert IOPS to integer milli-IOPS (rounded; the rate's only rounding).
#[inline]
pub fn milli_iops(iops: f64) -> u64 {
    (iops * MILLI as f64).round().max(0.0) as u64
}

/// A token bucket refilled every [`REFILL_INTERVAL`] at `rate` up to `size`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    /// Replenish rate (milli-IOPS = micro-tokens per tick).
    rate: u64,
    /// Cap of the level (micro-tokens): `b_i` whole tokens plus the largest fraction.
    size: u64,
    /// Current level (micro-tokens), as of `last_tick`.
    level: u64,
    /// The last refill instant accounted (a multiple of [`REFILL_INTERVAL`]).
    last_tick: Nanos,
}

impl TokenBucket {
    /// A full bucket of `size_tokens` (≥ 1, or no request could ever pass) refilled at
    /// `rate_iops` (> 0). `what` names the workload in errors.
    pub fn new(what: &str, rate_iops: f64, size_tokens: f64) -> Result<Self> {
        if !(rate_iops > 0.0 && rate_iops.is_finite()) {
            return config(format!("{what}: replenish rate must be > 0 IOPS, got {rate_iops}"));
        }
        if !(size_tokens >= 1.0 && size_tokens.is_finite() && size_tokens.fract() == 0.0) {
            return config(format!("{what}: bucket size must be a whole number >= 1 of tokens, got {size_tokens}"));
        }
        let size = size_tokens as u64 * MICRO_TOKENS + (MICRO_TOKENS - 1);
        let full = size - (MICRO_TOKENS - 1);
        Ok(TokenBucket { rate: milli_iops(rate_iops).max(1), size, level: full, last_tick: 0 })
    }

    /// Account the refills of every whole tick up to `now`.
    #[inline]
    pub fn refill(&mut self, now: Nanos) {
        if now < self.last_tick + REFILL_INTERVAL {
            return;
        }
        let ticks = (now - self.last_tick) / REFILL_INTERVAL;
        self.level = self.level.saturating_add(ticks.saturating_mul(self.rate)).min(self.size);
        self.last_tick += ticks * REFILL_INTERVAL;
        debug_assert!(self.level <= self.size);
    }

    /// Take one token at `now` if a whole one is there.
    #[inline]
    pub fn try_take(&mut self, now: Nanos) -> bool {
        self.refill(now);
        if self.level >= MICRO_TOKENS {
            self.level -= MICRO_TOKENS;
            true
        } else {
            false
        }
    }

    /// The earliest time ≥ `now` at which a whole token is available (`now` if one is).
    pub fn next_token_at(&self, now: Nanos) -> Nanos {
        let level = self.level_at(now);
        if level >= MICRO_TOKENS {
            return now;
        }
        let ticks_now = now.saturating_sub(self.last_tick) / REFILL_INTERVAL;
        let deficit = MICRO_TOKENS - level;
        let more = deficit.div_ceil(self.rate);
        self.last_tick + (ticks_now + more) * REFILL_INTERVAL
    }

    /// The level (micro-tokens) the bucket would have at `now`, without changing it.
    #[inline]
    pub fn level_at(&self, now: Nanos) -> u64 {
        let ticks = now.saturating_sub(self.last_tick) / REFILL_INTERVAL;
        self.level.saturating_add(ticks.saturating_mul(self.rate)).min(self.size)
    }

    /// Tokens available at `now` (fractional).
    pub fn tokens_at(&self, now: Nanos) -> f64 {
        self.level_at(now) as f64 / MICRO_TOKENS as f64
    }

    /// Change the replenish rate at `now` (refills up to `now` use the old rate).
    pub fn set_rate(&mut self, now: Nanos, rate_iops: f64) {
        self.refill(now);
        self.rate = milli_iops(rate_iops).max(1);
    }

    /// The replenish rate (IOPS, to 1/1000).
    pub fn rate_iops(&self) -> f64 {
        self.rate as f64 / MILLI as f64
    }

    /// The bucket size b_i (whole tokens).
    pub fn size_tokens(&self) -> u64 {
        self.size / MICRO_TOKENS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_SEC;

    #[test]
    fn full_bucket_then_paced_by_whole_ticks() {
        let mut b = TokenBucket::new("w", 100.0, 2.0).unwrap();
        assert!(b.try_take(0) && b.try_take(0));
        assert!(!b.try_take(0));
        // 100 IOPS = 0.1 token per 1 ms tick: the next token at the 10th tick.
        assert_eq!(b.next_token_at(0), 10 * NS_PER_MS);
        assert_eq!(b.next_token_at(3_500_000), 10 * NS_PER_MS);
        assert!(!b.try_take(9_999_999));
        assert!(b.try_take(10 * NS_PER_MS));
        // A long idle period fills it to its size in whole tokens, not beyond.
        assert_eq!(b.tokens_at(NS_PER_SEC).floor(), 2.0);
        assert_eq!(b.size_tokens(), 2);
    }

    #[test]
    fn fractional_rates_carry_over() {
        // 40.5 IOPS for 10 s: 405 tokens exactly once the initial one is taken, even
        // with a one-token bucket (the fraction above the cap carries over).
        let mut b = TokenBucket::new("w", 40.5, 1.0).unwrap();
        assert!(b.try_take(0));
        let mut taken = 0u64;
        let mut t = 0;
        while t <= 10 * NS_PER_SEC {
            t = b.next_token_at(t);
            if t > 10 * NS_PER_SEC {
                break;
            }
            assert!(b.try_take(t));
            taken += 1;
        }
        assert_eq!(taken, 405);
        assert!(b.level_at(t) <= b.size);
    }

    #[test]
    fn rate_changes_apply_from_now() {
        let mut b = TokenBucket::new("w", 1000.0, 1.0).unwrap();
        assert!(b.try_take(0));
        b.set_rate(0, 1.0); // 1 IOPS: a token after 1000 ticks
        assert_eq!(b.next_token_at(0), NS_PER_SEC);
        assert_eq!(b.rate_iops(), 1.0);
        assert!(TokenBucket::new("w1", 0.0, 1.0).unwrap_err().to_string().contains("w1: replenish rate"));
        assert!(TokenBucket::new("w1", 5.0, 0.5)
            .unwrap_err()
            .to_string()
            .contains("bucket size must be a whole number >= 1"));
        assert!(TokenBucket::new("w1", 5.0, 2.5).is_err());
    }
}
