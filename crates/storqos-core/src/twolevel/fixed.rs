//! FIXED, a rate-controller baseline of seed 001 (`001_f68b1e7da7bb5f73.txt`, §4.2
//! experiment E2, Table 1): "periodically replenishes full credits for each class, with
//! no other replenishments otherwise" — a leaky bucket with fixed parameters, in the
//! spirit of SLEDS and Triage.
//!
//! **Our reading** (the spec's "Algorithm notes → FIXED"): SARC's credit machinery
//! ([`crate::twolevel::Sarc`]: per-class FIFO queues, `r_i = T·R_i` credits, synchronous
//! reset of all classes) with only the periodic trigger, every `T` = `T_SARC`. It never
//! looks at the low level's spareness, so a class never gets more than `r_i` requests
//! per period into the low level even when the utility idles: not work conserving. In
//! E2 its throughput per class is therefore about `R_i` (Table 1: 249.3 and 199.9 io/s for
//! SLO rates 250 and 200).

use crate::error::Result;
use crate::time::Nanos;
use crate::twolevel::sarc::{Replenishment, Sarc};
use crate::twolevel::slo::SloSet;
use crate::twolevel::LowLevel;

/// FIXED over `inner`: credits `r_i = period·R_i`, replenished every `period` only.
pub fn fixed<L: LowLevel>(slos: SloSet, period: Nanos, inner: L) -> Result<Sarc<L>> {
    Sarc::with_rule(slos, period, inner, Replenishment::Periodic)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::DeviceState;
    use crate::scheduler::Scheduler;
    use crate::time::{NS_PER_MS, NS_PER_SEC};
    use crate::twolevel::slo::Slo;
    use crate::twolevel::{Avatar, Trigger};
    use crate::Request;

    #[test]
    fn releases_r_i_per_period_even_when_the_utility_idles() {
        let slos = SloSet::new(vec![Slo::new(50.0, NS_PER_SEC)], 0.95).unwrap();
        let avatar = Avatar::new(slos.clone(), NS_PER_SEC).unwrap();
        let mut s = fixed(slos, 100 * NS_PER_MS, avatar).unwrap();
        for id in 0..20 {
            s.enqueue(Request::new(id, 0, 0, 4096), 0);
        }
        // 5 credits per 100 ms: 5 go down, 15 wait although nothing is outstanding.
        let idle = DeviceState { outstanding: 0, free_slots: 64 };
        let mut sent = 0;
        while s.dispatch(0, &idle).is_some() {
            sent += 1;
        }
        assert_eq!(sent, 5);
        assert_eq!(s.backlog(0), 15);
        s.on_timer(100 * NS_PER_MS);
        assert_eq!(s.backlog(0), 10);
        assert_eq!(s.replenishments(Trigger::Spare) + s.replenishments(Trigger::Arrival), 0);
    }
}
