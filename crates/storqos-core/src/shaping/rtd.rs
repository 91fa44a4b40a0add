//! n-tier response-time distributions (RTD) by recursive RTT decomposition (seed 000,
//! §3.2.2 "Performance Model", Fig. 3.5; SPEC "Algorithm notes → RTD").
//!
//! An RTD {(f_1, R_1), …, (f_n, R_n)} with f and R increasing asks that a fraction f_i
//! of all requests finish within R_i. Tier 1 is RTT at Cmin(f_1, R_1) on the whole
//! trace; tier i is RTT on what the earlier tiers overflowed, at the smallest capacity
//! that admits the requests still missing for f_i (⌈f_i·n⌉ minus those already
//! admitted) within R_i. Each tier gets its own server (the Split arrangement of the
//! thesis's Fig. 3.5 pools), so a request of tier j ≤ i finishes within R_j ≤ R_i and
//! the cumulative fraction within R_i is at least f_i. The capacity the RTD needs is the
//! sum of the tiers'. Requests no tier admits (when f_n < 1) are best effort.

use crate::error::{config, Result};
use crate::shaping::cmin::{cmin_count, needed};
use crate::shaping::rtt::{classify, Capacity};
use crate::time::Nanos;

/// One tier: a fraction of all requests and its response-time bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tier {
    /// Cumulative fraction of all requests, in (0, 1].
    pub fraction: f64,
    /// Response-time bound R (ns, > 0).
    pub deadline: Nanos,
}

/// The decomposition of a trace for an RTD.
#[derive(Clone, Debug, PartialEq)]
pub struct RtdPlan {
    /// The tiers, as given.
    pub tiers: Vec<Tier>,
    /// Capacity of each tier's server (`None`: the tier needed no more requests).
    pub capacities: Vec<Option<Capacity>>,
    /// Requests each tier admitted.
    pub admitted: Vec<u64>,
    /// Tier of every request (index into `tiers`; `tiers.len()` = best effort).
    pub tier_of: Vec<u32>,
}

impl RtdPlan {
    /// Total capacity the RTD needs (IOPS): the sum over tiers.
    pub fn total_iops(&self) -> f64 {
        self.capacities.iter().flatten().map(|c| c.iops()).sum()
    }
}

/// Check an RTD: fractions in (0, 1] and strictly increasing, deadlines > 0 and
/// strictly increasing.
pub fn check_tiers(tiers: &[Tier]) -> Result<()> {
    if tiers.is_empty() {
        return config("rtd: at least one tier (fraction, deadline) is needed");
    }
    for (i, t) in tiers.iter().enumerate() {
        if !(t.fraction > 0.0 && t.fraction <= 1.0) {
            return config(format!("rtd: tier {} fraction must be in (0, 1], got {}", i + 1, t.fraction));
        }
        if t.deadline == 0 {
            return config(format!("rtd: tier {} deadline must be > 0", i + 1));
        }
        if i > 0 && (t.fraction <= tiers[i - 1].fraction || t.deadline <= tiers[i - 1].deadline) {
            return config(format!(
                "rtd: tier {} must have a larger fraction and a larger deadline than tier {}",
                i + 1,
                i
            ));
        }
    }
    Ok(())
}

/// Decompose `arrivals` (non-decreasing) recursively for the RTD `tiers`.
pub fn plan_rtd(arrivals: &[Nanos], tiers: &[Tier]) -> Result<RtdPlan> {
    check_tiers(tiers)?;
    let n = arrivals.len() as u64;
    let mut tier_of = vec![tiers.len() as u32; arrivals.len()];
    // Indices of requests no tier has admitted yet.
    let mut rest: Vec<usize> = (0..arrivals.len()).collect();
    let mut done = 0u64;
    let mut capacities = Vec::new();
    let mut admitted = Vec::new();
    for (ti, t) in tiers.iter().enumerate() {
        let need = needed(n, t.fraction).saturating_sub(done);
        if need == 0 || rest.is_empty() {
            capacities.push(None);
            admitted.push(0);
            continue;
        }
        let sub: Vec<Nanos> = rest.iter().map(|&i| arrivals[i]).collect();
        let cap = cmin_count(&sub, need, t.deadline)?;
        let cls = classify(&sub, cap, t.deadline)?;
        let mut next = Vec::with_capacity(rest.len());
        let mut k = 0;
        for (&i, &p) in rest.iter().zip(&cls) {
            if p {
                tier_of[i] = ti as u32;
                k += 1;
            } else {
                next.push(i);
            }
        }
        debug_assert!(k >= need);
        done += k;
        rest = next;
        capacities.push(Some(cap));
        admitted.push(k);
    }
    Ok(RtdPlan { tiers: tiers.to_vec(), capacities, admitted, tier_of })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::ConstantRate;
    use crate::request::Request;
    use crate::schedulers::Fcfs;
    use crate::shaping::cmin::{cmin, tests_support::bursty};
    use crate::sim::{simulate, SimConfig};
    use crate::time::NS_PER_MS;

    #[test]
    fn three_tiers_are_met_in_simulation() {
        let arr = bursty(40_000, 300.0, 4);
        let tiers = [
            Tier { fraction: 0.9, deadline: 20 * NS_PER_MS },
            Tier { fraction: 0.99, deadline: 50 * NS_PER_MS },
            Tier { fraction: 1.0, deadline: 500 * NS_PER_MS },
        ];
        let plan = plan_rtd(&arr, &tiers).unwrap();
        assert_eq!(plan.admitted.iter().sum::<u64>(), arr.len() as u64);
        assert_eq!(plan.capacities[0], Some(cmin(&arr, 0.9, 20 * NS_PER_MS).unwrap()));
        // Simulate each tier's requests FCFS on its own server in the event loop.
        let mut responses: Vec<(u32, Nanos)> = Vec::new();
        for (ti, cap) in plan.capacities.iter().enumerate() {
            let reqs: Vec<Request> = arr
                .iter()
                .enumerate()
                .filter(|&(i, _)| plan.tier_of[i] == ti as u32)
                .map(|(i, &a)| Request::new(i as u64, 0, a, 4096))
                .collect();
            let cfg = SimConfig { keep_requests: true, ..Default::default() };
            let mut dev = ConstantRate::new(cap.unwrap().iops()).unwrap();
            let r = simulate(reqs, &[], &mut Fcfs::new(), &mut dev, &cfg).unwrap();
            let log = r.log.unwrap();
            responses.extend(log.finish.iter().zip(&log.arrival).map(|(f, a)| (ti as u32, f - a)));
        }
        for (ti, t) in tiers.iter().enumerate() {
            // The device model rounds 1/C to the nearest ns: allow that much per queued request.
            let slack = 1_000;
            let own_ok = responses.iter().filter(|r| r.0 == ti as u32).all(|r| r.1 <= t.deadline + slack);
            assert!(own_ok, "tier {ti} has a request over its bound");
            let within = responses.iter().filter(|r| r.1 <= t.deadline + slack).count() as f64 / arr.len() as f64;
            assert!(within >= t.fraction, "tier {ti}: {within} < {}", t.fraction);
        }
        // The RTD needs far less than guaranteeing 20 ms to everything.
        let all20 = crate::shaping::cmin::cmin_all(&arr, 20 * NS_PER_MS).unwrap();
        assert!(plan.total_iops() < all20.iops(), "{} vs {}", plan.total_iops(), all20.iops());
    }

    #[test]
    fn bad_tiers_are_rejected() {
        let t = |f, d| Tier { fraction: f, deadline: d };
        assert!(plan_rtd(&[0], &[]).is_err());
        assert!(plan_rtd(&[0], &[t(0.99, 10), t(0.9, 20)]).unwrap_err().to_string().contains("tier 2"));
        assert!(plan_rtd(&[0], &[t(0.9, 20), t(0.99, 10)]).is_err());
        assert!(plan_rtd(&[0], &[t(1.2, 20)]).is_err());
        assert!(plan_rtd(&[0], &[t(0.5, 0)]).is_err());
    }
}
