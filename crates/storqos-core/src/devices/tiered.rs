//! Two-tier device (seeds 002 and 004; spec "Device models: Tiered"): a fast tier (an
//! SSD, or a cache) and a slow tier (an HDD or an array), each any [`Device`].
//!
//! A request's tier is its [`Request::target`] when the trace or a policy set one
//! (0 = fast, any other value = slow), otherwise a hit drawn from the simulator's RNG
//! with the tenant's hit ratio (seed 004 §2: "the hit ratio of client i is the fraction
//! of its IO requests to the SSD"), or the device-wide hit ratio. The completion carries
//! `target` set to the tier that served it. (In seed 004 the scheduler knows each
//! request's target before dispatching it: give such workloads their targets up front.)
//!
//! **Spread hits** ([`Tiered::with_spread_hits`], spec `"hits": "spread"`): instead of a
//! random draw, tenant `t`'s `n`-th untargeted request (n = 0, 1, ...) hits iff
//! [`is_placed`]`(n, h_t)`, i.e. `⌊(n+1)·h⌋ > ⌊n·h⌋`: exactly `h` of every run of
//! requests, evenly spread. This is the gateway's block placement for a tiered export's
//! `pin` (`crates/storqos-gateway/src/tier.rs`) read sequentially one block per request,
//! so a simulated twin of a live BAA run sees the same deterministic hit ratio in every
//! monitor window that the live one does.
//!
//! **Slots.** The tiered device accepts up to `depth` outstanding requests in total. The
//! scheduler learns a request's tier only after handing it over, so a free slot cannot
//! be promised to a particular tier; instead each tier has a FIFO in front of its
//! sub-device: a request goes straight to its sub-device when that device has a free slot
//! and nobody is waiting ahead of it, and otherwise waits, to be submitted at the instant
//! a completion frees a slot of its tier. A sub-device is therefore never submitted to
//! without a free slot. By default `depth` is the sum of the tiers' own slots, so no
//! hidden queue builds up inside and the scheduler keeps control of the order (a burst
//! of one tier can still make requests of that tier wait in its FIFO while the other tier
//! has room: that head-of-line effect is real for a scheduler that cannot see tiers).
//!
//! Completions leave in time order: the tier with the earlier next completion first,
//! the fast tier on ties.

use std::collections::{HashMap, VecDeque};

use crate::device::{Device, DeviceState};
use crate::error::{config, Result};
use crate::request::{Completion, Request, TARGET_ANY};
use crate::rng::SimRng;
use crate::time::Nanos;

/// Tier index of the fast device (`Request::target` value).
pub const FAST: u8 = 0;
/// Tier index of the slow device (`Request::target` value).
pub const SLOW: u8 = 1;

/// A fast and a slow device behind one set of slots.
pub struct Tiered<F = Box<dyn Device + Send>, S = Box<dyn Device + Send>> {
    fast: F,
    slow: S,
    hit_ratio: f64,
    tenant_hit_ratios: Vec<f64>,
    depth: usize,
    outstanding: usize,
    /// Requests waiting for their tier's sub-device, with their dispatch time.
    waiting: [VecDeque<(Request, Nanos)>; 2],
    /// Original dispatch time of requests that waited (the sub-device saw a later one).
    delayed: HashMap<u64, Nanos>,
    routed: [u64; 2],
    now: Nanos,
    /// Hits spread evenly by a per-tenant request count instead of drawn at random.
    spread: bool,
    /// Per tenant: untargeted requests routed so far (spread hits only).
    drawn: Vec<u64>,
}

/// Whether item `n` (a block, or a tenant's `n`-th request) is placed on the fast tier for
/// a placed fraction `fraction`: `fraction` of the items, spread evenly. The gateway's
/// tiered exports place blocks by the same rule.
#[inline]
pub fn is_placed(n: u64, fraction: f64) -> bool {
    ((n + 1) as f64 * fraction).floor() > (n as f64 * fraction).floor()
}

impl<F: Device, S: Device> Tiered<F, S> {
    /// `fast` and `slow` tiers; requests without a target hit the fast tier with
    /// probability `hit_ratio` ∈ [0, 1]. Depth: the sum of the tiers' free slots now.
    pub fn new(fast: F, slow: S, hit_ratio: f64) -> Result<Self> {
        check_ratio("hit_ratio", hit_ratio)?;
        let depth = fast.state().free_slots.saturating_add(slow.state().free_slots);
        if depth == 0 {
            return config("tiered: the fast and slow devices have no free slots");
        }
        Ok(Tiered {
            fast,
            slow,
            hit_ratio,
            tenant_hit_ratios: Vec::new(),
            depth,
            outstanding: 0,
            waiting: [VecDeque::new(), VecDeque::new()],
            delayed: HashMap::new(),
            routed: [0, 0],
            now: 0,
            spread: false,
            drawn: Vec::new(),
        })
    }

    /// Limit the outstanding requests of both tiers together to `depth` (≥ 1).
    pub fn with_depth(mut self, depth: usize) -> Result<Self> {
        if depth == 0 {
            return config("tiered: depth must be >= 1, got 0");
        }
        self.depth = depth;
        Ok(self)
    }

    /// Per-tenant hit ratios (`ratios[t]` for tenant t; tenants beyond the list use the
    /// device-wide ratio).
    pub fn with_tenant_hit_ratios(mut self, ratios: Vec<f64>) -> Result<Self> {
        for (t, &h) in ratios.iter().enumerate() {
            check_ratio(&format!("tenant_hit_ratios[{t}]"), h)?;
        }
        self.tenant_hit_ratios = ratios;
        Ok(self)
    }

    /// Spread each tenant's hits evenly over its requests ([`is_placed`] of its request
    /// count) instead of drawing them from the RNG (see the module notes).
    pub fn with_spread_hits(mut self, spread: bool) -> Self {
        self.spread = spread;
        self
    }

    /// Requests routed so far to the fast and to the slow tier.
    pub fn routed(&self) -> [u64; 2] {
        self.routed
    }

    /// The fast tier's device.
    pub fn fast(&self) -> &F {
        &self.fast
    }

    /// The slow tier's device.
    pub fn slow(&self) -> &S {
        &self.slow
    }

    /// Requests of `tier` waiting for a slot of its sub-device.
    pub fn waiting(&self, tier: u8) -> usize {
        self.waiting[tier_index(tier)].len()
    }

    fn tier_of(&mut self, req: &Request, rng: &mut SimRng) -> usize {
        if req.target != TARGET_ANY {
            return tier_index(req.target);
        }
        let h = self.tenant_hit_ratios.get(req.tenant as usize).copied().unwrap_or(self.hit_ratio);
        let hit = if self.spread {
            let t = req.tenant as usize;
            if self.drawn.len() <= t {
                self.drawn.resize(t + 1, 0);
            }
            let n = self.drawn[t];
            self.drawn[t] += 1;
            is_placed(n, h)
        } else {
            rng.bernoulli(h)
        };
        if hit {
            FAST as usize
        } else {
            SLOW as usize
        }
    }

    fn sub_state(&self, tier: usize) -> DeviceState {
        if tier == 0 {
            self.fast.state()
        } else {
            self.slow.state()
        }
    }

    fn sub_submit(&mut self, tier: usize, req: Request, now: Nanos, rng: &mut SimRng) {
        debug_assert!(self.sub_state(tier).free_slots > 0, "tier {tier} over-submitted");
        if tier == 0 {
            self.fast.submit(req, now, rng)
        } else {
            self.slow.submit(req, now, rng)
        }
    }

    /// Move waiting requests of `tier` into its sub-device while it has free slots.
    fn feed(&mut self, tier: usize, now: Nanos, rng: &mut SimRng) {
        while self.sub_state(tier).free_slots > 0 {
            let Some((req, dispatch)) = self.waiting[tier].pop_front() else { break };
            if dispatch != now {
                self.delayed.insert(req.id, dispatch);
            }
            self.sub_submit(tier, req, now, rng);
        }
    }
}

fn check_ratio(what: &str, h: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&h) {
        return config(format!("tiered: {what} must lie in [0, 1], got {h}"));
    }
    Ok(())
}

/// Tier index of a target: 0 is fast, anything else slow.
#[inline]
fn tier_index(target: u8) -> usize {
    (target != FAST) as usize
}

impl<F: Device, S: Device> Device for Tiered<F, S> {
    fn name(&self) -> String {
        let spread = if self.spread { ", spread hits" } else { "" };
        format!("tiered(fast {}, slow {}, hit ratio {}{spread})", self.fast.name(), self.slow.name(), self.hit_ratio)
    }

    #[inline]
    fn state(&self) -> DeviceState {
        DeviceState { outstanding: self.outstanding, free_slots: self.depth.saturating_sub(self.outstanding) }
    }

    fn submit(&mut self, req: Request, now: Nanos, rng: &mut SimRng) {
        debug_assert!(self.outstanding < self.depth, "tiered device submitted to with no free slot");
        debug_assert!(now >= self.now, "time went backwards: {now} < {}", self.now);
        self.now = now;
        let tier = self.tier_of(&req, rng);
        let req = Request { target: tier as u8, ..req };
        self.routed[tier] += 1;
        self.outstanding += 1;
        if self.waiting[tier].is_empty() && self.sub_state(tier).free_slots > 0 {
            self.sub_submit(tier, req, now, rng);
        } else {
            self.waiting[tier].push_back((req, now));
        }
    }

    fn next_completion(&self) -> Option<Nanos> {
        match (self.fast.next_completion(), self.slow.next_completion()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn pop_completion(&mut self, rng: &mut SimRng) -> Option<Completion> {
        let tier = match (self.fast.next_completion(), self.slow.next_completion()) {
            (Some(a), Some(b)) => (b < a) as usize,
            (Some(_), None) => 0,
            (None, Some(_)) => 1,
            (None, None) => return None,
        };
        let mut c = if tier == 0 { self.fast.pop_completion(rng) } else { self.slow.pop_completion(rng) }
            .expect("tier announced a completion");
        debug_assert!(c.finish >= self.now, "completion at {} before {}", c.finish, self.now);
        self.now = c.finish;
        if let Some(d) = self.delayed.remove(&c.req.id) {
            c.dispatch = d;
        }
        c.req.target = tier as u8;
        self.outstanding -= 1;
        self.feed(tier, c.finish, rng);
        Some(c)
    }
}

impl<F, S> std::fmt::Debug for Tiered<F, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tiered")
            .field("hit_ratio", &self.hit_ratio)
            .field("depth", &self.depth)
            .field("outstanding", &self.outstanding)
            .field("routed", &self.routed)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::ConstantRate;
    use crate::time::NS_PER_MS;

    fn tiered(depth: usize) -> Tiered<ConstantRate, ConstantRate> {
        // Fast 1000 IOPS (1 ms), slow 100 IOPS (10 ms).
        Tiered::new(ConstantRate::new(1000.0).unwrap(), ConstantRate::new(100.0).unwrap(), 0.0)
            .unwrap()
            .with_depth(depth)
            .unwrap()
    }

    #[test]
    fn targets_route_and_waiting_requests_keep_their_dispatch_time() {
        let mut d = tiered(4);
        let mut rng = SimRng::new(1);
        for (i, target) in [0u8, 0, 1, 7].into_iter().enumerate() {
            let r = Request { target, ..Request::new(i as u64, 0, 0, 4096) };
            d.submit(r, 0, &mut rng);
        }
        assert_eq!(d.routed(), [2, 2]);
        assert_eq!((d.waiting(FAST), d.waiting(SLOW)), (1, 1));
        assert_eq!(d.state(), DeviceState { outstanding: 4, free_slots: 0 });
        let out: Vec<(u64, u8, Nanos, Nanos)> = std::iter::from_fn(|| d.pop_completion(&mut rng))
            .map(|c| (c.req.id, c.req.target, c.dispatch, c.finish))
            .collect();
        let ms = NS_PER_MS;
        assert_eq!(out, vec![(0, 0, 0, ms), (1, 0, 0, 2 * ms), (2, 1, 0, 10 * ms), (3, 1, 0, 20 * ms)]);
    }

    #[test]
    fn default_depth_is_the_tiers_slots() {
        let d = tiered(4);
        assert_eq!(d.state().free_slots, 4);
        let d = Tiered::new(ConstantRate::new(1.0).unwrap(), ConstantRate::new(1.0).unwrap(), 0.5).unwrap();
        assert_eq!(d.state().free_slots, 2);
    }

    #[test]
    fn spread_hits_are_exact_in_every_run_of_requests() {
        // Tenant 0 at 0.75, tenant 1 at 0.5: every 4 (resp. 2) consecutive requests of a
        // tenant hold exactly 3 (resp. 1) hits, whatever the interleaving; the RNG unused.
        let mut d = tiered(1 << 16).with_tenant_hit_ratios(vec![0.75, 0.5]).unwrap().with_spread_hits(true);
        let mut rng = SimRng::new(1);
        for i in 0..4000u64 {
            let tenant = (i % 3 == 0) as u32;
            d.submit(Request::new(i, tenant, 0, 4096), 0, &mut rng);
        }
        let mut done: Vec<(u64, u32, u8)> =
            std::iter::from_fn(|| d.pop_completion(&mut rng)).map(|c| (c.req.id, c.req.tenant, c.req.target)).collect();
        done.sort_unstable();
        for (tenant, run, hits) in [(0u32, 4usize, 3usize), (1, 2, 1)] {
            let seq: Vec<u8> = done.iter().filter(|r| r.1 == tenant).map(|r| r.2).collect();
            for w in seq.chunks_exact(run) {
                assert_eq!(w.iter().filter(|&&t| t == FAST).count(), hits, "tenant {tenant}: {w:?}");
            }
        }
        assert_eq!(rng.uniform(), SimRng::new(1).uniform());
        assert!((0..8).map(|n| is_placed(n, 0.75)).eq([false, true, true, true, false, true, true, true]));
        assert!(d.name().ends_with("spread hits)"), "{}", d.name());
    }

    #[test]
    fn bad_ratios_are_named() {
        let c = || ConstantRate::new(1.0).unwrap();
        assert!(Tiered::new(c(), c(), 1.5).unwrap_err().to_string().contains("hit_ratio"));
        let e = Tiered::new(c(), c(), 0.5).unwrap().with_tenant_hit_ratios(vec![0.1, -0.2]).unwrap_err();
        assert!(e.to_string().contains("tenant_hit_ratios[1]"), "{e}");
        assert!(Tiered::new(c(), c(), 0.5).unwrap().with_depth(0).unwrap_err().to_string().contains("depth"));
    }
}
