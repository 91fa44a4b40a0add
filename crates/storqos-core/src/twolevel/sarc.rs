//! SARC, the high-level rate controller of seed 001 (`001_f68b1e7da7bb5f73.txt`, §3.2–3.3):
//! per-class FIFO queues with credits in front of a low-level scheduler (AVATAR).
//!
//! **Credits.** Class `i` holds at most `r_i = T_SARC · R_i` credits ([`DEFAULT_PERIOD`]
//! for `T_SARC`). An arriving request takes one credit and goes straight down to the low
//! level's EDF queue; without a credit it waits in its class's FIFO queue (backlogged).
//! `r_i` need not be an integer: each replenishment grants `⌊r_i + carry_i⌋` credits and
//! carries the fraction to the next one, so over many periods a class gets `r_i` per
//! period on average (Firecracker-style integer budget with carried remainder).
//!
//! **Synchronous replenishment.** A replenishment resets *every* class to its full
//! amount, regardless of what it has left, and releases up to that many backlogged
//! requests of each class. It happens ([`Trigger`]):
//! 1. when `T_SARC` has elapsed since the last replenishment (any kind) — so no two are
//!    more than `T_SARC` apart;
//! 2. when a request arrives at a class with no credit while the low level reports spare
//!    bandwidth;
//! 3. when the low level's spareness turns from "no" to "spare" (checked after every
//!    call into it: its dispatches, departures and window starts are where it can change,
//!    §3.4.4).
//!
//! Triggers 2 and 3 make SARC work conserving: nothing waits above while the utility has
//! room. Trigger 1 alone ([`Replenishment::Periodic`]) is the FIXED baseline
//! ([`crate::twolevel::fixed`](mod@crate::twolevel::fixed)), and periodic replenishment with credit amounts adjusted
//! every second is ADAPTIVE ([`crate::twolevel::adaptive`]); both are this same type with
//! another [`Replenishment`].
//!
//! **Cost.** `O(1)` per request above the low level (a `VecDeque` per class), and a
//! replenishment costs `O(log m)` per class it releases requests of, not `O(m)`: with
//! tens of thousands of classes, resetting every class at every replenishment (each
//! arrival, when the utility is spare) made SARC the one policy whose cost grew with
//! the classes. A replenishment only counts itself; a class's credits are brought up to
//! date when it is next touched, in closed form: its amount and carry are fixed-point
//! numbers (32 fractional bits), for which `k` replenishments in a row leave exactly
//! what one formula gives. The backlogged classes wait in a heap keyed by the
//! replenishment that will give them their next credit, so a replenishment visits only
//! the classes it releases. The amounts are rounded to 2⁻³² credit (the paper's 16 and
//! 19 credits, or 18.75, are exact).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::request::{Completion, Request};
use crate::scheduler::Scheduler;
use crate::time::{Nanos, NS_PER_MS, NS_PER_SEC};
use crate::twolevel::adaptive::Adaptive;
use crate::twolevel::slo::SloSet;
use crate::twolevel::{class_gauge_names, LowLevel};

/// Default replenishment period `T_SARC`: 100 ms. The paper leaves `T_SARC` open; a tenth
/// of the 1 s SLO interval (§3.1) keeps a class's burst into the low level to `R_i / 10`
/// requests while the utility is busy, and the credits per period (16 and 19 for E1's
/// 160 and 190 IOPS) stay well above one.
pub const DEFAULT_PERIOD: Nanos = 100 * NS_PER_MS;

/// Fractional bits of the fixed-point credit amounts and carries.
const FRAC_BITS: u32 = 32;
/// The fractional part of a fixed-point amount.
const FRAC_MASK: u64 = (1 << FRAC_BITS) - 1;

/// `x` credits in fixed point (rounded to 2⁻³²; negative or NaN amounts are 0).
fn fixed(x: f64) -> u64 {
    (x * (1u64 << FRAC_BITS) as f64).round() as u64
}

/// What causes a replenishment (§3.3's three events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// `T_SARC` elapsed since the last replenishment.
    Periodic = 0,
    /// An arrival found no credit while the low level was spare.
    Arrival = 1,
    /// The low level's spareness turned to "spare".
    Spare = 2,
}

/// Which replenishment rule the credit controller follows.
#[derive(Clone, Debug)]
pub enum Replenishment {
    /// SARC: all three triggers (§3.3).
    Sarc,
    /// FIXED: trigger 1 only (§4.2).
    Periodic,
    /// ADAPTIVE: trigger 1 only, credit amounts adjusted every second (§4.2).
    Adaptive(Adaptive),
}

impl Replenishment {
    #[inline]
    fn uses_spareness(&self) -> bool {
        matches!(self, Replenishment::Sarc)
    }
    fn label(&self) -> &'static str {
        match self {
            Replenishment::Sarc => "sarc",
            Replenishment::Periodic => "fixed",
            Replenishment::Adaptive(_) => "adaptive",
        }
    }
}

/// A credit-based rate controller over a low-level scheduler `L`.
#[derive(Clone, Debug)]
pub struct Sarc<L> {
    slos: SloSet,
    period: Nanos,
    rule: Replenishment,
    /// `r_i = T_SARC · R_i`, the SLO's credit amount.
    base: Vec<f64>,
    /// Full amount granted at each replenishment (= `base` except under ADAPTIVE).
    full: Vec<f64>,
    /// `full` in fixed point (32 fractional bits).
    full_q: Vec<u64>,
    /// Carried fraction of each class (fixed point, < 1), as of replenishment `at[i]`.
    carry: Vec<u64>,
    /// Credits of each class as of replenishment `at[i]`, less those used since.
    credits: Vec<u64>,
    /// Replenishment each class's `carry` and `credits` are up to date with.
    at: Vec<u64>,
    /// Replenishments so far (all triggers, and the initial grant).
    grants: u64,
    /// Backlogged classes by the replenishment that gives them their next credit (an
    /// entry is stale when the class has no backlog or another key).
    due: BinaryHeap<Reverse<(u64, usize)>>,
    queues: Vec<VecDeque<Request>>,
    backlog: usize,
    next_periodic: Nanos,
    was_spare: bool,
    replenished: [u64; 3],
    /// Per-class gauge names (`credits.i`, `full_credits.i`, `backlog.i`), built once.
    names: Vec<[String; 3]>,
    inner: L,
}

impl<L: LowLevel> Sarc<L> {
    /// SARC over `inner` with class SLOs `slos` and period `period` (> 0).
    pub fn new(slos: SloSet, period: Nanos, inner: L) -> Result<Self> {
        Self::with_rule(slos, period, inner, Replenishment::Sarc)
    }

    /// A credit controller following `rule`.
    pub fn with_rule(slos: SloSet, period: Nanos, inner: L, rule: Replenishment) -> Result<Self> {
        if period == 0 {
            return config("sarc: period_ns (T_SARC) must be > 0");
        }
        let m = slos.len();
        let base: Vec<f64> = slos.classes().iter().map(|s| s.rate_iops * period as f64 / NS_PER_SEC as f64).collect();
        let mut s = Sarc {
            period,
            full_q: base.iter().map(|&f| fixed(f)).collect(),
            full: base.clone(),
            base,
            carry: vec![0; m],
            credits: vec![0; m],
            at: vec![0; m],
            grants: 0,
            due: BinaryHeap::new(),
            queues: vec![VecDeque::new(); m],
            backlog: 0,
            next_periodic: 0,
            was_spare: false,
            replenished: [0; 3],
            names: class_gauge_names(["credits", "full_credits", "backlog"], m),
            rule,
            slos,
            inner,
        };
        // "Initially, credits of class i are set to r_i."
        s.grant(0);
        s.was_spare = s.inner.spare();
        if let Replenishment::Adaptive(a) = &mut s.rule {
            a.start(m);
        }
        Ok(s)
    }

    /// The low-level scheduler.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// Credits class `i` has left.
    pub fn credits(&self, i: usize) -> u64 {
        self.caught_up(i).0
    }

    /// Full credit amount of class `i` (`r_i`, or ADAPTIVE's current amount).
    pub fn full_credits(&self, i: usize) -> f64 {
        self.full[i]
    }

    /// Backlogged requests of class `i`.
    pub fn backlog(&self, i: usize) -> usize {
        self.queues[i].len()
    }

    /// Replenishments so far by trigger.
    pub fn replenishments(&self, t: Trigger) -> u64 {
        self.replenished[t as usize]
    }

    /// Class `i`'s (credits, carry) after every replenishment so far: each one resets
    /// the credits to `⌊full + carry⌋` and carries the fraction; `k` of them in a row
    /// leave the carry `frac(carry + (k − 1)·full)` before the last one (exact in fixed
    /// point).
    #[inline]
    fn caught_up(&self, i: usize) -> (u64, u64) {
        let k = self.grants - self.at[i];
        if k == 0 {
            return (self.credits[i], self.carry[i]);
        }
        let f = self.full_q[i];
        let before = self.carry[i].wrapping_add((k - 1).wrapping_mul(f & FRAC_MASK)) & FRAC_MASK;
        let t = before + (f & FRAC_MASK);
        ((f >> FRAC_BITS) + (t >> FRAC_BITS), t & FRAC_MASK)
    }

    /// Bring class `i` up to date with every replenishment so far.
    #[inline]
    fn sync(&mut self, i: usize) {
        if self.at[i] != self.grants {
            (self.credits[i], self.carry[i]) = self.caught_up(i);
            self.at[i] = self.grants;
        }
    }

    /// The replenishment that gives class `i` (no credit left as of replenishment
    /// `at[i]`) its next credit, `None` if none ever will (a zero amount). The same
    /// whenever the class is brought up to date before it: the first `j ≥ 1` with
    /// `carry + j·full ≥ 1`, counted from `at[i]`.
    fn next_credit(&self, i: usize) -> Option<u64> {
        let f = self.full_q[i];
        if f >> FRAC_BITS > 0 {
            return Some(self.at[i] + 1);
        }
        let ff = f & FRAC_MASK;
        (ff > 0).then(|| self.at[i] + ((1u64 << FRAC_BITS) - self.carry[i]).div_ceil(ff))
    }

    /// Class `i` became (or stays) backlogged with no credit: wait for its next one.
    fn wait_for_credit(&mut self, i: usize) {
        if let Some(g) = self.next_credit(i) {
            self.due.push(Reverse((g, i)));
        }
    }

    /// A replenishment: every class's credits reset to its full amount (carrying
    /// fractions), applied lazily; schedule the next periodic one.
    fn grant(&mut self, now: Nanos) {
        self.grants += 1;
        self.next_periodic = now + self.period;
    }

    /// A replenishment event: grant, then release backlogged requests against the fresh
    /// credits, in FIFO order per class and class order across classes.
    fn replenish(&mut self, now: Nanos, why: Trigger) {
        self.replenished[why as usize] += 1;
        self.grant(now);
        while let Some(&Reverse((g, i))) = self.due.peek() {
            if g > self.grants {
                break;
            }
            self.due.pop();
            if self.queues[i].is_empty() || self.at[i] == self.grants {
                continue; // stale: no backlog, or already released at this replenishment
            }
            if self.next_credit(i) != Some(g) {
                continue; // stale: its amount changed (ADAPTIVE) and it has a newer entry
            }
            self.sync(i);
            while self.credits[i] > 0 {
                let Some(r) = self.queues[i].pop_front() else { break };
                self.credits[i] -= 1;
                self.backlog -= 1;
                self.inner.enqueue(r, now);
            }
            if !self.queues[i].is_empty() {
                self.wait_for_credit(i);
            }
        }
        debug_assert_eq!(self.backlog, self.queues.iter().map(|q| q.len()).sum::<usize>());
    }

    /// Trigger 3: replenish when the low level turns spare.
    #[inline(always)]
    fn watch_spareness(&mut self, now: Nanos) {
        if !self.rule.uses_spareness() {
            return;
        }
        let spare = self.inner.spare();
        if spare && !self.was_spare {
            self.replenish(now, Trigger::Spare);
            self.was_spare = self.inner.spare();
        } else {
            self.was_spare = spare;
        }
    }
}

impl<L: LowLevel> Scheduler for Sarc<L> {
    fn name(&self) -> String {
        format!("{}+{}", self.rule.label(), self.inner.name())
    }

    #[inline(always)]
    fn enqueue(&mut self, req: Request, now: Nanos) {
        let i = self.slos.index(req.class);
        self.sync(i);
        if self.credits[i] == 0 && self.rule.uses_spareness() && self.inner.spare() {
            self.replenish(now, Trigger::Arrival);
            self.sync(i);
        }
        if self.credits[i] > 0 {
            debug_assert!(self.queues[i].is_empty(), "a class with credits has no backlog");
            self.credits[i] -= 1;
            self.inner.enqueue(req, now);
        } else {
            if self.queues[i].is_empty() {
                self.wait_for_credit(i);
            }
            self.queues[i].push_back(req);
            self.backlog += 1;
            if let Replenishment::Adaptive(a) = &mut self.rule {
                a.mark_backlogged(i);
            }
        }
        self.watch_spareness(now);
    }

    #[inline(always)]
    fn dispatch(&mut self, now: Nanos, dev: &DeviceState) -> Option<Request> {
        let r = self.inner.dispatch(now, dev);
        if r.is_some() {
            self.watch_spareness(now);
        }
        r
    }

    #[inline(always)]
    fn complete(&mut self, done: &Completion, now: Nanos) {
        self.inner.complete(done, now);
        self.watch_spareness(now);
    }

    #[inline(always)]
    fn next_timer(&self) -> Option<Nanos> {
        let mut t = self.next_periodic;
        if let Some(x) = self.inner.next_timer() {
            t = t.min(x);
        }
        if let Replenishment::Adaptive(a) = &self.rule {
            t = t.min(a.next());
        }
        Some(t)
    }

    fn on_timer(&mut self, now: Nanos) {
        // The low level first: its window closes before ADAPTIVE reads it.
        if self.inner.next_timer().is_some_and(|t| t <= now) {
            self.inner.on_timer(now);
        }
        if matches!(&self.rule, Replenishment::Adaptive(a) if now >= a.next()) {
            // Every class up to date under its old amount, then the new amounts.
            for i in 0..self.full.len() {
                self.sync(i);
            }
            if let Replenishment::Adaptive(a) = &mut self.rule {
                let inner = &self.inner;
                a.adjust(now, &mut self.full, &self.base, &self.slos, |i| inner.class_latency(i));
                for i in 0..self.full.len() {
                    let f = fixed(self.full[i]);
                    if f != self.full_q[i] {
                        self.full_q[i] = f;
                        if !self.queues[i].is_empty() && self.credits[i] == 0 {
                            self.wait_for_credit(i);
                        }
                    }
                }
            }
        }
        if now >= self.next_periodic {
            self.replenish(now, Trigger::Periodic);
        }
        self.watch_spareness(now);
    }

    #[inline]
    fn queued(&self) -> usize {
        self.backlog + self.inner.queued()
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        for (i, [credits, full, backlog]) in self.names.iter().enumerate() {
            sink(credits, self.caught_up(i).0 as f64);
            sink(full, self.full[i]);
            sink(backlog, self.queues[i].len() as f64);
        }
        sink("replenish.periodic", self.replenished[0] as f64);
        sink("replenish.arrival", self.replenished[1] as f64);
        sink("replenish.spare", self.replenished[2] as f64);
        self.inner.gauges(sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twolevel::slo::Slo;

    /// A scripted low level: a FIFO whose spareness the test sets.
    #[derive(Default)]
    struct Script {
        got: Vec<(u64, Nanos)>,
        spare: bool,
    }
    impl Scheduler for Script {
        fn name(&self) -> String {
            "script".into()
        }
        fn enqueue(&mut self, req: Request, now: Nanos) {
            self.got.push((req.id, now));
        }
        fn dispatch(&mut self, _: Nanos, _: &DeviceState) -> Option<Request> {
            None
        }
        fn queued(&self) -> usize {
            0
        }
    }
    impl LowLevel for Script {
        fn spare(&self) -> bool {
            self.spare
        }
        fn class_latency(&self, _: usize) -> Option<Nanos> {
            None
        }
        fn threshold(&self) -> f64 {
            1.0
        }
        fn monitor(&self) -> &crate::twolevel::monitor::Monitor {
            unreachable!("SARC never asks the scripted low level for its monitor")
        }
    }

    fn slos() -> SloSet {
        // 20 IOPS and 35 IOPS: 2 and 3.5 credits per 100 ms.
        SloSet::new(vec![Slo::new(20.0, NS_PER_SEC), Slo::new(35.0, NS_PER_SEC)], 0.95).unwrap()
    }

    fn req(id: u64, class: u32) -> Request {
        Request::new(id, class, 0, 4096)
    }

    #[test]
    fn credits_limit_and_periodic_replenishment_releases_backlog() {
        let mut s = Sarc::new(slos(), DEFAULT_PERIOD, Script::default()).unwrap();
        assert_eq!((s.credits(0), s.credits(1)), (2, 3)); // 3.5 → 3, carry 0.5
        for id in 0..5 {
            s.enqueue(req(id, 0), 10);
        }
        assert_eq!(s.inner().got.len(), 2);
        assert_eq!(s.backlog(0), 3);
        assert_eq!(s.next_timer(), Some(DEFAULT_PERIOD));
        s.on_timer(DEFAULT_PERIOD);
        // Periodic: 2 more released, in FIFO order, at the replenishment time.
        assert_eq!(s.inner().got[2..], [(2, DEFAULT_PERIOD), (3, DEFAULT_PERIOD)]);
        assert_eq!((s.backlog(0), s.credits(0)), (1, 0));
        assert_eq!(s.credits(1), 4); // 3.5 + 0.5 carried
        assert_eq!(s.replenishments(Trigger::Periodic), 1);
        assert_eq!(s.next_timer(), Some(2 * DEFAULT_PERIOD));
    }

    #[test]
    fn arrival_without_credit_replenishes_when_spare() {
        let mut s = Sarc::new(slos(), DEFAULT_PERIOD, Script::default()).unwrap();
        s.enqueue(req(0, 0), 1);
        s.enqueue(req(1, 0), 1);
        s.enqueue(req(2, 0), 1); // no credit, not spare → backlogged
        assert_eq!(s.backlog(0), 1);
        s.inner.spare = true;
        s.was_spare = true; // (no transition: isolate trigger 2)
        s.enqueue(req(3, 1), 2); // class 1 still has credits: no replenishment
        assert_eq!(s.replenishments(Trigger::Arrival), 0);
        s.credits[1] = 0;
        s.enqueue(req(4, 1), 3); // no credit and spare → replenish all, synchronously
        assert_eq!(s.replenishments(Trigger::Arrival), 1);
        // The backlogged class-0 request went down too, and the period restarted.
        assert!(s.inner().got.contains(&(2, 3)) && s.inner().got.contains(&(4, 3)));
        assert_eq!(s.next_timer(), Some(3 + DEFAULT_PERIOD));
    }

    #[test]
    fn spareness_turning_on_replenishes() {
        let mut s = Sarc::new(slos(), DEFAULT_PERIOD, Script::default()).unwrap();
        for id in 0..4 {
            s.enqueue(req(id, 0), 1);
        }
        assert_eq!(s.backlog(0), 2);
        s.inner.spare = true;
        s.complete(&Completion { req: req(0, 0), dispatch: 1, finish: 7 }, 7);
        assert_eq!(s.replenishments(Trigger::Spare), 1);
        assert_eq!(s.backlog(0), 0);
        // Still spare: no new transition, no new replenishment.
        s.complete(&Completion { req: req(1, 0), dispatch: 1, finish: 8 }, 8);
        assert_eq!(s.replenishments(Trigger::Spare), 1);
    }

    #[test]
    fn fixed_ignores_spareness() {
        let mut s = Sarc::with_rule(slos(), DEFAULT_PERIOD, Script::default(), Replenishment::Periodic).unwrap();
        s.inner.spare = true;
        for id in 0..4 {
            s.enqueue(req(id, 0), 1);
        }
        assert_eq!(s.backlog(0), 2);
        assert_eq!(s.replenishments(Trigger::Arrival) + s.replenishments(Trigger::Spare), 0);
        assert_eq!(s.name(), "fixed+script");
    }

    /// The lazy bookkeeping releases exactly what resetting every class at every
    /// replenishment releases (the paper's rule, written out eagerly here): random
    /// arrivals over classes of 0.008 to 3.06 credits per period, spareness toggled at
    /// random, periodic replenishments, under SARC and FIXED.
    #[test]
    fn lazy_credits_release_what_eager_resets_release() {
        // Dyadic amounts: the eager f64 arithmetic below is exact for them.
        let amounts = [0.0078125, 0.125, 0.375, 1.5, 3.0625, 0.0078125, 0.25];
        let slos = SloSet::new(amounts.iter().map(|a| Slo::new(a * 10.0, NS_PER_SEC)).collect(), 0.95).unwrap();
        for rule in [Replenishment::Sarc, Replenishment::Periodic] {
            let spare_rule = rule.uses_spareness();
            let mut s = Sarc::with_rule(slos.clone(), DEFAULT_PERIOD, Script::default(), rule).unwrap();
            // The eager model.
            let m = amounts.len();
            let (mut credits, mut carry) = (vec![0u64; m], vec![0f64; m]);
            let mut queues: Vec<VecDeque<u64>> = vec![VecDeque::new(); m];
            let mut got: Vec<(u64, Nanos)> = Vec::new();
            let mut next_periodic = 0;
            let grant = |credits: &mut Vec<u64>, carry: &mut Vec<f64>| {
                for i in 0..m {
                    let t = amounts[i] + carry[i];
                    credits[i] = t.floor() as u64;
                    carry[i] = t - t.floor();
                }
            };
            let release =
                |credits: &mut Vec<u64>, queues: &mut Vec<VecDeque<u64>>, got: &mut Vec<(u64, Nanos)>, now| {
                    for i in 0..m {
                        while credits[i] > 0 {
                            let Some(id) = queues[i].pop_front() else { break };
                            credits[i] -= 1;
                            got.push((id, now));
                        }
                    }
                };
            grant(&mut credits, &mut carry);
            next_periodic += DEFAULT_PERIOD;
            let mut rng = crate::rng::SimRng::new(17);
            let (mut now, mut spare, mut was_spare) = (0, false, false);
            for id in 0..20_000u64 {
                now += rng.below(DEFAULT_PERIOD / 20);
                while now >= next_periodic {
                    let at = next_periodic;
                    s.on_timer(at);
                    grant(&mut credits, &mut carry);
                    release(&mut credits, &mut queues, &mut got, at);
                    next_periodic = at + DEFAULT_PERIOD;
                }
                if rng.bernoulli(0.2) {
                    // Spareness changes; SARC sees it after a completion.
                    spare = rng.bernoulli(0.5);
                    s.inner.spare = spare;
                    s.complete(&Completion { req: req(u64::MAX, 0), dispatch: now, finish: now }, now);
                    if spare_rule && spare && !was_spare {
                        grant(&mut credits, &mut carry);
                        release(&mut credits, &mut queues, &mut got, now);
                        next_periodic = now + DEFAULT_PERIOD;
                    }
                    was_spare = spare;
                }
                let c = rng.below(m as u64) as usize;
                s.enqueue(req(id, c as u32), now);
                if credits[c] == 0 && spare_rule && spare {
                    grant(&mut credits, &mut carry);
                    release(&mut credits, &mut queues, &mut got, now);
                    next_periodic = now + DEFAULT_PERIOD;
                }
                if credits[c] > 0 {
                    credits[c] -= 1;
                    got.push((id, now));
                } else {
                    queues[c].push_back(id);
                }
                for i in 0..m {
                    assert_eq!((s.credits(i), s.backlog(i)), (credits[i], queues[i].len()), "class {i} at {id}");
                }
            }
            assert_eq!(s.inner().got, got);
            assert!(got.len() > 2_000 && queues.iter().any(|q| !q.is_empty()));
        }
    }
}
