//! Two-level allocate-and-dispatch scheduler for an SSD + HDD array (seed 004 §3.3).
//!
//! Seed 004 (Wang & Varman, bottleneck-aware allocation), §3.3 "Scheduling framework":
//!
//! 1. **Monitor** (step 1): per client, the hit ratio (fraction of its requests served
//!    by the SSD) over a moving window (`window`, 60 s in the paper's Fig. 5). We observe
//!    where each completed request was served ([`Completion::req`]`.target`, set by the
//!    tiered device), in [`MONITOR_BUCKETS`] time buckets so the window slides cheaply.
//! 2. **Allocate** (step 2): every `period` (100 s in Fig. 5), and optionally when an
//!    alarm sees the devices' utilisation drop ("periodically (or triggered by an alarm
//!    based on device utilizations)"), the allocator ([`crate::alloc`]: BAA, or the
//!    DRF / FQ baselines) computes allocations from the measured hit ratios of the
//!    clients seen in the window.
//! 3. **Dispatch** (step 3): the allocations become the weights of a WF2Q+ fair queue
//!    ([`Wf2q::set_weight`]) that feeds the array, which keeps a fixed number of requests
//!    outstanding (the tiered device's depth).
//!
//! The scheduler never reads a clock: recomputations are timers at multiples of
//! `period` (and of the alarm's check interval), driven by the simulator or gateway.

use crate::alloc::{allocate, Allocation, Policy, Problem};
use crate::device::DeviceState;
use crate::devices::tiered::FAST;
use crate::error::{config, Result};
use crate::request::{Completion, Request};
use crate::scheduler::Scheduler;
use crate::schedulers::Wf2q;
use crate::time::Nanos;

/// Number of time buckets the monitor's moving window is cut into (the window slides by
/// `window / MONITOR_BUCKETS`: one second for the paper's 60 s window).
pub const MONITOR_BUCKETS: u64 = 60;

/// Utilisation alarm: recompute early when, over one check interval, no device is
/// busier than `threshold` (the allocation no longer saturates anything).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Alarm {
    /// Recompute when the busiest device's utilisation is below this (e.g. 0.9).
    pub threshold: f64,
    /// How often utilisation is checked (ns).
    pub check: Nanos,
}

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    index: u64,
    hits: u64,
    total: u64,
}

/// BAA (or DRF / FQ) weights over WF2Q+, recomputed from measured hit ratios.
#[derive(Clone, Debug)]
pub struct BaaScheduler {
    inner: Wf2q,
    hdd_iops: f64,
    ssd_iops: f64,
    policy: Policy,
    bucket_len: Nanos,
    period: Nanos,
    next_recompute: Nanos,
    monitor: Vec<[Bucket; MONITOR_BUCKETS as usize]>,
    alarm: Option<Alarm>,
    next_check: Nanos,
    /// Requests served by [HDD, SSD] since the last alarm check.
    served: [u64; 2],
    recomputations: u64,
    alarms: u64,
    last: Option<Allocation>,
    /// The tenants of `last`, in its order.
    last_tenants: Vec<u32>,
}

impl BaaScheduler {
    /// A scheduler for an HDD of `hdd_iops` and an SSD of `ssd_iops`, allocating with
    /// `policy` every `period` ns from hit ratios measured over the last `window` ns.
    /// Until the first recomputation clients share equally.
    pub fn new(hdd_iops: f64, ssd_iops: f64, policy: Policy, window: Nanos, period: Nanos) -> Result<Self> {
        if !(hdd_iops.is_finite() && hdd_iops > 0.0 && ssd_iops.is_finite() && ssd_iops > 0.0) {
            return config(format!("baa scheduler: capacities must be > 0 IOPS, got {hdd_iops} and {ssd_iops}"));
        }
        if window < MONITOR_BUCKETS {
            return config(format!("baa scheduler: window must be >= {MONITOR_BUCKETS} ns, got {window}"));
        }
        if period == 0 {
            return config("baa scheduler: period must be > 0");
        }
        Ok(BaaScheduler {
            inner: Wf2q::default(),
            hdd_iops,
            ssd_iops,
            policy,
            bucket_len: window / MONITOR_BUCKETS,
            period,
            next_recompute: period,
            monitor: Vec::new(),
            alarm: None,
            next_check: Nanos::MAX,
            served: [0, 0],
            recomputations: 0,
            alarms: 0,
            last: None,
            last_tenants: Vec::new(),
        })
    }

    /// Start from allocations computed for known hit ratios (tenant `i` has
    /// `hit_ratios[i]`) instead of equal weights.
    pub fn with_initial_hit_ratios(mut self, hit_ratios: &[f64]) -> Result<Self> {
        let tenants: Vec<u32> = (0..hit_ratios.len() as u32).collect();
        self.apply(&tenants, hit_ratios)?;
        Ok(self)
    }

    /// Also recompute when the utilisation alarm fires.
    pub fn with_alarm(mut self, alarm: Alarm) -> Result<Self> {
        if !(alarm.threshold > 0.0 && alarm.threshold <= 1.0) || alarm.check == 0 {
            return config(format!(
                "baa scheduler: alarm threshold must be in (0, 1] and check > 0, got {} and {}",
                alarm.threshold, alarm.check
            ));
        }
        self.next_check = alarm.check;
        self.alarm = Some(alarm);
        Ok(self)
    }

    /// The allocation behind the current weights, if any was computed.
    pub fn allocation(&self) -> Option<&Allocation> {
        self.last.as_ref()
    }

    /// Recomputations so far (periodic and alarm-triggered).
    pub fn recomputations(&self) -> u64 {
        self.recomputations
    }

    /// Alarm-triggered recomputations so far.
    pub fn alarms(&self) -> u64 {
        self.alarms
    }

    /// Current dispatch weight of `tenant`.
    pub fn weight(&self, tenant: u32) -> f64 {
        self.inner.weight(tenant)
    }

    /// Measured hit ratio of `tenant` over the window ending at `now` (`None` without
    /// completions in the window).
    pub fn hit_ratio(&self, tenant: u32, now: Nanos) -> Option<f64> {
        let buckets = self.monitor.get(tenant as usize)?;
        let cur = now / self.bucket_len;
        let (hits, total) = buckets
            .iter()
            .filter(|b| b.total > 0 && b.index + MONITOR_BUCKETS > cur && b.index <= cur)
            .fold((0, 0), |(h, t), b| (h + b.hits, t + b.total));
        (total > 0).then(|| hits as f64 / total as f64)
    }

    fn record(&mut self, tenant: u32, hit: bool, now: Nanos) {
        let t = tenant as usize;
        if t >= self.monitor.len() {
            self.monitor.resize(t + 1, [Bucket::default(); MONITOR_BUCKETS as usize]);
        }
        let idx = now / self.bucket_len;
        let b = &mut self.monitor[t][(idx % MONITOR_BUCKETS) as usize];
        if b.index != idx || b.total == 0 {
            *b = Bucket { index: idx, hits: 0, total: 0 };
        }
        b.total += 1;
        b.hits += hit as u64;
    }

    /// Allocate for `tenants` with `hits` and install the weights.
    fn apply(&mut self, tenants: &[u32], hits: &[f64]) -> Result<()> {
        let problem = Problem::two_tier(self.hdd_iops, self.ssd_iops, hits)?;
        let a = allocate(&problem, self.policy)?;
        for (&t, w) in tenants.iter().zip(a.dispatch_weights()) {
            self.inner.set_weight(t, w)?;
        }
        self.last = Some(a);
        self.last_tenants = tenants.to_vec();
        self.recomputations += 1;
        Ok(())
    }

    fn recompute(&mut self, now: Nanos) {
        let (tenants, hits): (Vec<u32>, Vec<f64>) =
            (0..self.monitor.len() as u32).filter_map(|t| self.hit_ratio(t, now).map(|h| (t, h))).unzip();
        if !tenants.is_empty() {
            // Measured ratios lie in [0, 1] and capacities were checked: cannot fail.
            self.apply(&tenants, &hits).expect("valid allocation problem");
        }
    }
}

impl Scheduler for BaaScheduler {
    fn name(&self) -> String {
        format!("{}-weights over wf2q+", self.policy.name())
    }

    #[inline]
    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.inner.enqueue(req, now)
    }

    #[inline]
    fn dispatch(&mut self, now: Nanos, dev: &DeviceState) -> Option<Request> {
        self.inner.dispatch(now, dev)
    }

    fn complete(&mut self, done: &Completion, now: Nanos) {
        let hit = done.req.target == FAST;
        self.record(done.req.tenant, hit, now);
        self.served[hit as usize] += 1;
        self.inner.complete(done, now)
    }

    fn next_timer(&self) -> Option<Nanos> {
        Some(self.next_recompute.min(self.next_check))
    }

    fn on_timer(&mut self, now: Nanos) {
        if now >= self.next_recompute {
            self.recompute(now);
            while self.next_recompute <= now {
                self.next_recompute += self.period;
            }
        }
        if let Some(alarm) = self.alarm {
            if now >= self.next_check {
                let secs = alarm.check as f64 / 1e9;
                let busiest = (self.served[0] as f64 / (self.hdd_iops * secs))
                    .max(self.served[1] as f64 / (self.ssd_iops * secs));
                if busiest < alarm.threshold && self.served.iter().sum::<u64>() > 0 {
                    self.alarms += 1;
                    self.recompute(now);
                }
                self.served = [0, 0];
                while self.next_check <= now {
                    self.next_check += alarm.check;
                }
            }
        }
    }

    #[inline]
    fn queued(&self) -> usize {
        self.inner.queued()
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("baa_recomputations", self.recomputations as f64);
        if let Some(a) = &self.last {
            // The allocation in force, per tenant (IOPS): what a live run is compared with.
            for (t, x) in self.last_tenants.iter().zip(&a.throughput) {
                sink(&format!("baa_allocation_iops.{t}"), *x);
            }
        }
        self.inner.gauges(sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::tiered::SLOW;
    use crate::time::NS_PER_SEC;

    fn done(tenant: u32, target: u8, at: Nanos) -> Completion {
        let req = Request { target, ..Request::new(0, tenant, at, 4096) };
        Completion { req, dispatch: at, finish: at }
    }

    #[test]
    fn monitor_window_slides_and_weights_follow_baa() {
        let s = NS_PER_SEC;
        let mut b = BaaScheduler::new(100.0, 500.0, Policy::Baa, 60 * s, 100 * s).unwrap();
        assert_eq!(b.next_timer(), Some(100 * s));
        // Tenant 0: h = 0.5, tenant 1: h = 0.9 (Example I) during 40..100 s.
        for k in 0..600u64 {
            let at = 40 * s + k * s / 10;
            b.complete(&done(0, if k % 2 == 0 { FAST } else { SLOW }, at), at);
            b.complete(&done(1, if k % 10 == 0 { SLOW } else { FAST }, at), at);
        }
        assert!((b.hit_ratio(0, 99 * s).unwrap() - 0.5).abs() < 1e-9);
        assert!((b.hit_ratio(1, 99 * s).unwrap() - 0.9).abs() < 1e-9);
        b.on_timer(100 * s);
        assert_eq!(b.recomputations(), 1);
        // BAA: 100 : 500.
        assert!((b.weight(1) / b.weight(0) - 5.0).abs() < 1e-9, "{} {}", b.weight(0), b.weight(1));
        assert_eq!(b.next_timer(), Some(200 * s));
        // 61 s after the last sample nothing is left in the window.
        assert_eq!(b.hit_ratio(0, 161 * s), None);
    }

    #[test]
    fn alarm_recomputes_when_utilisation_drops() {
        let s = NS_PER_SEC;
        let alarm = Alarm { threshold: 0.9, check: 10 * s };
        let mut b = BaaScheduler::new(100.0, 500.0, Policy::Baa, 60 * s, 100 * s)
            .unwrap()
            .with_initial_hit_ratios(&[0.5, 0.9])
            .unwrap()
            .with_alarm(alarm)
            .unwrap();
        assert_eq!(b.recomputations(), 1);
        // 10 s with the HDD at 100 % (1000 misses): no alarm.
        for k in 0..1000u64 {
            b.complete(&done(0, SLOW, k * s / 100), k * s / 100);
        }
        b.on_timer(10 * s);
        assert_eq!(b.alarms(), 0);
        // Next 10 s: only 300 HDD requests (30 %): alarm, recompute.
        for k in 0..300u64 {
            b.complete(&done(0, SLOW, 10 * s + k * s / 30), 10 * s + k * s / 30);
        }
        b.on_timer(20 * s);
        assert_eq!((b.alarms(), b.recomputations()), (1, 2));
        assert!(BaaScheduler::new(0.0, 1.0, Policy::Baa, s, s).is_err());
        assert!(b.clone().with_alarm(Alarm { threshold: 1.5, check: s }).is_err());
    }
}
