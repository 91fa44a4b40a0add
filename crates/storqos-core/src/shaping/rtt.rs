//! RTT (Response Time Threshold) decomposition: seed 000 (Lu, "Workload Shaping for QoS
//! and Power Efficiency of Storage Systems"), §3.3.1, Algorithm 1, with the optimality
//! property of Lemmas 1–3 and the SPEC's "Algorithm notes → RTT" clarification.
//!
//! ## The rule
//! A server of capacity C IOPS serves the *primary* class FIFO; every primary request
//! must finish within δ of its arrival. An arriving request is admitted to the primary
//! class iff, queued behind the primary backlog, it would finish in time:
//!
//! ```text
//! finish = max(now, last_finish) + 1/C;   admit iff finish <= now + δ
//! ```
//!
//! otherwise it overflows to the secondary class. For unit requests this is Algorithm
//! 1's "queue length < C·δ"; written with finish times it is also exact for batched
//! timestamps and for a C·δ that is not an integer. RTT admits the largest possible
//! number of requests of any (online or offline) partition (Lemma 3); the property test
//! below checks that against a brute force over all subsets.
//!
//! ## Integer arithmetic (how 1/C is kept exact)
//! 1/C is not an integer number of nanoseconds for most C (1/3 000 IOPS = 333 333.3 ns),
//! and rounding it would make the admitted count drift with the trace length. Instead a
//! capacity is an integer number of milli-IOPS, `C = milli / 1000`, and time is counted
//! in *scaled units* of `1 / milli` ns: a duration of `t` ns is `t · milli` units and one
//! request's service, `10^12 / milli` ns, is exactly [`SERVICE_UNITS`] = 10^12 units.
//! All comparisons are then exact integer comparisons; no fraction is ever dropped.
//!
//! The state is the primary *backlog* `last_finish − now` in scaled units, never the
//! absolute finish time, so the numbers stay small: the backlog never exceeds
//! `δ · milli` (a request is admitted only if it fits), and a gap between arrivals
//! longer than δ is clamped to δ before multiplying (it empties the backlog either
//! way), so no product overflows. The one limit is `δ · milli + 10^12 < 2^64`, i.e.
//! δ (s) · C (IOPS) below about 1.8 · 10^10 / 1000 = 1.8 · 10^7 requests of backlog;
//! [`Rtt::new`] rejects more with a configuration error.

use crate::error::{config, Result};
use crate::time::{Nanos, NS_PER_SEC};

/// Class of requests RTT admits (guaranteed δ at Cmin).
pub const PRIMARY: u32 = 0;
/// Class of requests RTT overflows (best effort).
pub const SECONDARY: u32 = 1;

/// Capacity resolution: capacities are integer multiples of 1/1000 IOPS (milli-IOPS).
pub const MILLI_PER_IOPS: u64 = 1000;

/// One request's service time in scaled units (1 scaled unit = 1/milli ns): exactly
/// 1 s × 1000 = 10^12, whatever the capacity (see the module notes).
pub const SERVICE_UNITS: u64 = NS_PER_SEC * MILLI_PER_IOPS;

/// A server capacity, exact to 1/1000 IOPS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Capacity {
    milli: u64,
}

impl Capacity {
    /// A capacity of `milli` thousandths of an IOPS (≥ 1).
    pub fn from_milli(milli: u64) -> Self {
        Capacity { milli: milli.max(1) }
    }

    /// The capacity nearest to `iops` on the 1/1000 IOPS grid (at least 0.001 IOPS).
    pub fn from_iops(iops: f64) -> Result<Self> {
        if !(iops.is_finite() && iops > 0.0) {
            return config(format!("rtt: capacity must be a finite number of IOPS > 0, got {iops}"));
        }
        Ok(Capacity::from_milli((iops * MILLI_PER_IOPS as f64).round() as u64))
    }

    /// The smallest grid capacity ≥ `iops`.
    pub fn ceil_iops(iops: f64) -> Self {
        Capacity::from_milli((iops * MILLI_PER_IOPS as f64 - 1e-6).ceil().max(1.0) as u64)
    }

    /// Thousandths of an IOPS.
    #[inline]
    pub fn milli(self) -> u64 {
        self.milli
    }

    /// The capacity in IOPS.
    #[inline]
    pub fn iops(self) -> f64 {
        self.milli as f64 / MILLI_PER_IOPS as f64
    }

    /// `δ · milli` (the admission limit in scaled units), or a configuration error when
    /// it would not fit the integer arithmetic.
    pub fn limit_units(self, deadline: Nanos) -> Result<u64> {
        match deadline.checked_mul(self.milli).and_then(|l| l.checked_add(SERVICE_UNITS).map(|_| l)) {
            Some(l) => Ok(l),
            None => config(format!(
                "rtt: deadline {deadline} ns × capacity {} IOPS is too large a backlog for exact arithmetic",
                self.iops()
            )),
        }
    }
}

/// The online RTT classifier: feed arrivals in time order, learn primary or secondary.
///
/// Reusable in front of any scheduler ([`super::RttStage`]), inside Miser
/// ([`super::Miser`]) and in the live gateway: it never reads a clock, it is told `now`.
#[derive(Clone, Debug)]
pub struct Rtt {
    cap: Capacity,
    deadline: Nanos,
    /// δ · milli: the largest backlog (scaled units) an admitted request may finish by.
    limit: u64,
    /// Primary backlog `last_finish − last` in scaled units (≤ limit).
    backlog: u64,
    /// Time of the last arrival seen.
    last: Nanos,
    admitted: u64,
    overflowed: u64,
}

impl Rtt {
    /// RTT for a primary server of capacity `cap` and response-time bound `deadline` (> 0).
    pub fn new(cap: Capacity, deadline: Nanos) -> Result<Self> {
        if deadline == 0 {
            return config("rtt: deadline must be > 0");
        }
        let limit = cap.limit_units(deadline)?;
        Ok(Rtt { cap, deadline, limit, backlog: 0, last: 0, admitted: 0, overflowed: 0 })
    }

    /// The primary capacity.
    pub fn capacity(&self) -> Capacity {
        self.cap
    }

    /// The response-time bound δ.
    pub fn deadline(&self) -> Nanos {
        self.deadline
    }

    /// Requests admitted to the primary class so far.
    pub fn admitted(&self) -> u64 {
        self.admitted
    }

    /// Requests sent to the secondary class so far.
    pub fn overflowed(&self) -> u64 {
        self.overflowed
    }

    /// Drain the backlog up to `now` (≥ the last arrival).
    #[inline]
    fn advance(&mut self, now: Nanos) {
        debug_assert!(now >= self.last, "rtt: time went backwards");
        // A gap ≥ δ empties the backlog (backlog ≤ δ·milli): clamp before multiplying.
        let gap = now.saturating_sub(self.last).min(self.deadline);
        self.backlog = self.backlog.saturating_sub(gap * self.cap.milli);
        self.last = now;
    }

    /// Classify a request arriving at `now`: `true` = primary (admitted), `false` =
    /// secondary (overflow).
    #[inline]
    pub fn admit(&mut self, now: Nanos) -> bool {
        self.advance(now);
        let after = self.backlog + SERVICE_UNITS;
        if after <= self.limit {
            self.backlog = after;
            self.admitted += 1;
            true
        } else {
            self.overflowed += 1;
            false
        }
    }

    /// Free places in the primary queue now (Algorithm 2's `maxQ1 − lenQ1`): how many
    /// more requests arriving at the last arrival time would still be admitted.
    #[inline]
    pub fn free_places(&self) -> u64 {
        (self.limit - self.backlog) / SERVICE_UNITS
    }

    /// Primary backlog at the last arrival, in nanoseconds (rounded down).
    pub fn backlog_ns(&self) -> Nanos {
        self.backlog / self.cap.milli
    }
}

/// Number of requests RTT admits on `arrivals` (non-decreasing) at capacity `cap` and
/// deadline `deadline`. The single-lane reference kernel (see [`super::cmin()`] for the
/// multi-lane one the planner uses).
pub fn admitted_count(arrivals: &[Nanos], cap: Capacity, deadline: Nanos) -> Result<u64> {
    let mut r = Rtt::new(cap, deadline)?;
    for &a in arrivals {
        r.admit(a);
    }
    Ok(r.admitted())
}

/// RTT's class of every request of `arrivals`: `true` = primary.
pub fn classify(arrivals: &[Nanos], cap: Capacity, deadline: Nanos) -> Result<Vec<bool>> {
    let mut r = Rtt::new(cap, deadline)?;
    Ok(arrivals.iter().map(|&a| r.admit(a)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SimRng;
    use crate::time::NS_PER_MS;

    /// Can every request of `subset` (arrival times, sorted) be served FIFO by a server of
    /// capacity `cap` and finish within `deadline`? Exact, in absolute scaled time (u128),
    /// independent of the backlog formulation. FIFO = EDF here (equal relative deadlines),
    /// and EDF is optimal for unit jobs with agreeable deadlines, so this is feasibility.
    fn feasible(subset: &[Nanos], cap: Capacity, deadline: Nanos) -> bool {
        let m = cap.milli() as u128;
        let mut last: u128 = 0;
        for &a in subset {
            let a = a as u128 * m;
            last = last.max(a) + SERVICE_UNITS as u128;
            if last > a + deadline as u128 * m {
                return false;
            }
        }
        true
    }

    fn brute_force_max(arrivals: &[Nanos], cap: Capacity, deadline: Nanos) -> u64 {
        let n = arrivals.len();
        let mut best = 0;
        let mut sub = Vec::with_capacity(n);
        for mask in 0u32..(1 << n) {
            let k = mask.count_ones() as u64;
            if k <= best {
                continue;
            }
            sub.clear();
            sub.extend((0..n).filter(|i| mask >> i & 1 == 1).map(|i| arrivals[i]));
            if feasible(&sub, cap, deadline) {
                best = k;
            }
        }
        best
    }

    /// A small random trace: n ≤ 12 arrivals on a coarse grid so that batches (equal
    /// timestamps) and bursts are common.
    fn random_trace(rng: &mut SimRng) -> Vec<Nanos> {
        let n = 1 + rng.below(12) as usize;
        let step = [1, 250_000, NS_PER_MS][rng.below(3) as usize];
        let mut t = 0;
        (0..n)
            .map(|_| {
                // 40 % of arrivals join the previous timestamp (a batch).
                if !rng.bernoulli(0.4) {
                    t += rng.below(8) * step;
                }
                t
            })
            .collect()
    }

    #[test]
    fn rtt_admits_the_brute_force_maximum() {
        let mut rng = SimRng::new(2024);
        let mut batched = 0;
        for case in 0..3000 {
            let trace = random_trace(&mut rng);
            batched += trace.windows(2).any(|w| w[0] == w[1]) as u32;
            // Capacities from 50 IOPS to 20k IOPS with fractional milli parts, deadlines
            // from 1 µs (nothing but an idle server admits) to 20 ms.
            let cap = Capacity::from_milli(50_000 + rng.below(20_000_000));
            let deadline = [1_000, 300_000, NS_PER_MS, 5 * NS_PER_MS, 20 * NS_PER_MS][rng.below(5) as usize];
            let got = admitted_count(&trace, cap, deadline).unwrap();
            let want = brute_force_max(&trace, cap, deadline);
            assert_eq!(got, want, "case {case}: trace {trace:?}, cap {cap:?}, deadline {deadline}");
            // The admitted set itself is feasible.
            let cls = classify(&trace, cap, deadline).unwrap();
            let prim: Vec<Nanos> = trace.iter().zip(&cls).filter(|(_, &p)| p).map(|(&a, _)| a).collect();
            assert!(feasible(&prim, cap, deadline));
        }
        assert!(batched > 500, "the generator must produce batched arrivals ({batched})");
    }

    #[test]
    fn queue_length_rule_for_unit_requests() {
        // 1000 IOPS, δ = 5 ms: a batch of 8 at t = 0 admits exactly C·δ = 5.
        let cap = Capacity::from_iops(1000.0).unwrap();
        let mut r = Rtt::new(cap, 5 * NS_PER_MS).unwrap();
        let got: Vec<bool> = (0..8).map(|_| r.admit(0)).collect();
        assert_eq!(got, [true, true, true, true, true, false, false, false]);
        assert_eq!(r.free_places(), 0);
        // 2.5 ms later 2.5 requests' worth drained: 2 more fit, not 3.
        assert!(r.admit(2_500_000));
        assert_eq!(r.free_places(), 1);
        assert!(r.admit(2_500_000));
        assert!(!r.admit(2_500_000));
        assert_eq!((r.admitted(), r.overflowed()), (7, 4));
        assert_eq!(r.backlog_ns(), 4_500_000);
    }

    #[test]
    fn one_over_c_is_not_rounded() {
        // 3000 IOPS: 1/C = 333 333.33 ns. δ = 1 ms fits exactly 3 requests (finish of the
        // third = 1 000 000 ns). Rounding 1/C up to 333 334 ns would reject the third.
        let cap = Capacity::from_iops(3000.0).unwrap();
        assert_eq!(admitted_count(&[0, 0, 0, 0], cap, NS_PER_MS).unwrap(), 3);
        // A long trace at exactly C: every request admitted, no drift.
        let arr: Vec<Nanos> = (0..300_000u64).map(|i| i * 1_000_000 / 3).collect();
        assert_eq!(admitted_count(&arr, cap, 333_334).unwrap(), 300_000);
    }

    #[test]
    fn bad_parameters_are_errors() {
        assert!(Rtt::new(Capacity::from_milli(1000), 0).is_err());
        assert!(Capacity::from_iops(f64::NAN).is_err());
        assert!(Capacity::from_iops(-1.0).is_err());
        let e = Rtt::new(Capacity::from_iops(1e9).unwrap(), 100 * NS_PER_SEC).unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
        assert_eq!(Capacity::ceil_iops(417.0001).milli(), 417_001);
        assert_eq!(Capacity::ceil_iops(417.0).milli(), 417_000);
    }
}
