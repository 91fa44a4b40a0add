//! librbd's image QoS, as Ceph Reef 18.2.7 runs it (Debian trixie's `ceph` source):
//! `src/librbd/io/QosImageDispatch.cc` (which throttles a request takes tokens from),
//! `src/common/Throttle.cc` and `Throttle.h` (`TokenBucketThrottle`, its `Bucket` and its
//! schedule tick), `src/librbd/ImageCtx.cc` (how the options are applied) and
//! `src/common/options/rbd.yaml.in` (the options). The token bucket code is the same in
//! post-Squid `main` (moved to `common/TokenBucketThrottle.cc`), so Squid (v19) throttles
//! as modelled here.
//!
//! ## Six throttles per image
//!
//! An image (here: a tenant) has one `TokenBucketThrottle` per option pair
//! ([`RbdThrottleKind`], librbd's order): `rbd_qos_iops_limit`, `rbd_qos_bps_limit`,
//! `rbd_qos_read_iops_limit`, `rbd_qos_write_iops_limit`, `rbd_qos_read_bps_limit`,
//! `rbd_qos_write_bps_limit`, each with its `*_burst` and `*_burst_seconds`. A throttle
//! whose limit is 0 is off (and then its burst is ignored). A request takes tokens from
//! **every** throttle that is on and concerns it (`calculate_tokens`): 1 from an IOPS
//! throttle, its length in bytes from a BPS one, nothing from the read throttles for a
//! write or the write throttles for a read. It asks them all at once, and is sent on when
//! the **last** of them has granted it (`needs_throttle`, `handle_throttle_ready`).
//!
//! ## One throttle (`TokenBucketThrottle`)
//!
//! - **Ticks** (`set_limit`): tokens are added by a timer every `tick = max(1000 / limit,
//!   rbd_qos_schedule_tick_min)` ms (integer division; the minimum defaults to
//!   [`RBD_QOS_SCHEDULE_TICK_MIN_MS`]), `1000 / tick` ticks a second (integer division).
//!   The `k`-th tick of a second adds `floor(k / tps · limit) − floor((k − 1) / tps ·
//!   limit)` tokens (`tokens_this_tick`), so a second adds exactly `limit` (950 IOPS: 47,
//!   48, 47, ...). The timer runs from the image's open (the first tick is at the open
//!   itself) and every tick period after, busy or idle.
//! - **The bucket** (`Bucket`) has a `max` (the burst, or the limit when the burst is 0)
//!   and a `capacity = max · burst_seconds`. It keeps two levels: `remain`, which starts
//!   full at the capacity and gains the tick's tokens (at most the capacity), and
//!   `available`, what may be taken now, which **starts empty** and gains the tick's tokens
//!   times `max / limit` (the burst speed), at most `min(remain, max)`. Taking tokens takes
//!   them from both.
//! - **Waiting** (`get`, `add_tokens`): a request that finds no one waiting takes what is
//!   available; if that is less than it needs, it waits (a blocker) for the rest. A request
//!   that finds someone waiting queues behind without taking anything (FIFO per throttle).
//!   At each tick the blockers, oldest first, take what they still need, partly if that is
//!   all there is (a request larger than a tick's tokens gathers them over several ticks).
//!
//! So with a limit alone, a backlog passes `limit / tps` requests at every tick (100 IOPS:
//! 5 every 50 ms), and after an idle second a whole second's worth at once. With a burst
//! `b` over `s` seconds it passes at `b` until `remain` runs out, which takes
//! `b · s / (b − limit)` seconds, then at the limit.
//!
//! ## Why not [`Throttled`](super::Throttled)
//!
//! A request waits in one FIFO per throttle it needs, all at once, and takes tokens in each
//! as soon as its turn there comes, whatever the others say. A write is never held behind
//! reads waiting for `rbd_qos_read_iops_limit`, and a request takes BPS tokens while its
//! IOPS tokens are still missing. [`Throttled`](super::Throttled) has one lane per request,
//! asked only at its head, so [`RbdQos`] implements [`Scheduler`] itself.
//!
//! ## Not modelled
//!
//! - Timer drift: librbd's `SafeTimer` schedules each tick one period after the previous
//!   callback ran (a little later than its time under load); here ticks are exact. The
//!   dispatch posted to the image's asio engine once the last throttle granted is
//!   immediate.
//! - Discard, write-same and compare-and-write (charged as writes in librbd), flushes (not
//!   throttled), `rbd_qos_exclude_ops`, changing limits at run time (which resets a
//!   throttle's tick count and refills its capacity when the capacity changes).
//! - A burst below its limit is refused here; librbd logs it and runs the limit without
//!   the burst. A burst without a limit is refused here; librbd ignores it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use serde::Deserialize;

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::request::{Op, Request, MAX_TENANTS};
use crate::scheduler::Scheduler;
use crate::time::{Nanos, NS_PER_MS};

/// Policy name in reports.
pub const NAME: &str = "rbd-qos";

/// `rbd_qos_schedule_tick_min`'s default, ms: the shortest tick period.
pub const RBD_QOS_SCHEDULE_TICK_MIN_MS: u64 = 50;

/// `rbd_qos_*_burst_seconds`' default (also the option's minimum), seconds.
pub const DEFAULT_BURST_SECONDS: u64 = 1;

/// Milliseconds per second (the tick arithmetic is in whole ms).
pub const MS_PER_SEC: u64 = 1000;

/// The longest tick this model takes, ms: beyond, `1000 / tick` is 0 ticks a second and
/// Ceph's token arithmetic divides by zero.
pub const TICK_MIN_MAX_MS: u64 = MS_PER_SEC;

/// The number of throttles of an image.
pub const THROTTLE_COUNT: usize = 6;

/// The six throttles of an image, in librbd's order (`throttle_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RbdThrottleKind {
    /// `rbd_qos_iops_*`: operations, reads and writes.
    Iops = 0,
    /// `rbd_qos_bps_*`: bytes, reads and writes.
    Bps = 1,
    /// `rbd_qos_read_iops_*`: read operations.
    ReadIops = 2,
    /// `rbd_qos_write_iops_*`: write operations.
    WriteIops = 3,
    /// `rbd_qos_read_bps_*`: read bytes.
    ReadBps = 4,
    /// `rbd_qos_write_bps_*`: write bytes.
    WriteBps = 5,
}

impl RbdThrottleKind {
    /// Every throttle, in librbd's order.
    pub const ALL: [RbdThrottleKind; THROTTLE_COUNT] = [
        RbdThrottleKind::Iops,
        RbdThrottleKind::Bps,
        RbdThrottleKind::ReadIops,
        RbdThrottleKind::WriteIops,
        RbdThrottleKind::ReadBps,
        RbdThrottleKind::WriteBps,
    ];

    /// The options' common prefix (`"rbd_qos_read_iops"`): the limit is this with
    /// `_limit`, the burst with `_burst`, its length with `_burst_seconds`.
    pub fn option(self) -> &'static str {
        match self {
            RbdThrottleKind::Iops => "rbd_qos_iops",
            RbdThrottleKind::Bps => "rbd_qos_bps",
            RbdThrottleKind::ReadIops => "rbd_qos_read_iops",
            RbdThrottleKind::WriteIops => "rbd_qos_write_iops",
            RbdThrottleKind::ReadBps => "rbd_qos_read_bps",
            RbdThrottleKind::WriteBps => "rbd_qos_write_bps",
        }
    }

    /// The tokens a request of direction `op` and `bytes` takes from this throttle, 0 when
    /// it does not concern it (`calculate_tokens`).
    #[inline]
    pub fn tokens(self, op: Op, bytes: u32) -> u64 {
        let concerns = match self {
            RbdThrottleKind::Iops | RbdThrottleKind::Bps => true,
            RbdThrottleKind::ReadIops | RbdThrottleKind::ReadBps => op == Op::Read,
            RbdThrottleKind::WriteIops | RbdThrottleKind::WriteBps => op == Op::Write,
        };
        match (concerns, self) {
            (false, _) => 0,
            (true, RbdThrottleKind::Bps | RbdThrottleKind::ReadBps | RbdThrottleKind::WriteBps) => bytes.into(),
            (true, _) => 1,
        }
    }
}

/// One throttle's options: `limit` (0 = off), `burst` (0 = none) and `burst_seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RbdLimit {
    /// `rbd_qos_*_limit`: operations or bytes per second.
    pub limit: u64,
    /// `rbd_qos_*_burst`: the burst rate, operations or bytes per second.
    pub burst: u64,
    /// `rbd_qos_*_burst_seconds` (≥ 1).
    pub burst_seconds: u64,
}

impl Default for RbdLimit {
    fn default() -> Self {
        RbdLimit { limit: 0, burst: 0, burst_seconds: DEFAULT_BURST_SECONDS }
    }
}

/// An image's six throttles' options, indexed by [`RbdThrottleKind`].
pub type RbdImageQos = [RbdLimit; THROTTLE_COUNT];

/// `TokenBucketThrottle::Bucket`: the long-term level `remain` (up to `capacity`) and what
/// may be taken now, `available` (up to `min(remain, max)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bucket {
    remain: u64,
    max: u64,
    capacity: u64,
    available: u64,
}

impl Bucket {
    /// Take up to `c` tokens; how many were taken (`Bucket::get`).
    #[inline]
    fn get(&mut self, c: u64) -> u64 {
        let got = c.min(self.available);
        self.available -= got;
        self.remain -= got;
        got
    }

    /// Add a tick's `tokens`, `available` at `burst_ratio` times the speed (`Bucket::put`).
    #[inline]
    fn put(&mut self, tokens: u64, burst_ratio: f64) {
        if tokens == 0 {
            return;
        }
        self.remain = self.remain.saturating_add(tokens).min(self.capacity);
        let inc = if burst_ratio > 1.0 { (tokens as f64 * burst_ratio) as u64 } else { tokens };
        self.available = self.available.saturating_add(inc).min(self.remain.min(self.max));
    }
}

/// One of librbd's throttles (`TokenBucketThrottle`) that is on, with its waiting requests.
#[derive(Clone, Debug)]
pub struct TokenBucketThrottle {
    avg: u64,
    tick: Nanos,
    ticks_per_second: u64,
    current_tick: u64,
    bucket: Bucket,
    /// Time of the next tick.
    next_tick: Nanos,
    /// Waiting requests, oldest first: (slot, tokens still needed).
    blockers: VecDeque<(u32, u64)>,
}

impl TokenBucketThrottle {
    /// The throttle of `limit` (`limit.limit > 0`, burst 0 or at least the limit) set at
    /// `now` on a fresh throttle (`set_limit`), with ticks no shorter than `tick_min_ms`
    /// (1 ..= [`TICK_MIN_MAX_MS`]), its first tick run at `now`.
    fn new(limit: RbdLimit, tick_min_ms: u64, now: Nanos) -> Self {
        debug_assert!(limit.limit > 0 && (limit.burst == 0 || limit.burst >= limit.limit));
        let tick_ms = (MS_PER_SEC / limit.limit).max(tick_min_ms);
        let max = if limit.burst == 0 { limit.limit } else { limit.burst };
        let capacity = max.saturating_mul(limit.burst_seconds.max(1));
        // `set_max` on the bucket constructed empty: `remain` is refilled to the new
        // capacity, `available` stays 0.
        let mut t = TokenBucketThrottle {
            avg: limit.limit,
            tick: tick_ms * NS_PER_MS,
            ticks_per_second: MS_PER_SEC / tick_ms,
            current_tick: 0,
            bucket: Bucket { remain: capacity, max, capacity, available: 0 },
            next_tick: now,
            blockers: VecDeque::new(),
        };
        t.add_tokens(&mut Vec::new());
        t
    }

    /// The tick period, ns.
    pub fn tick(&self) -> Nanos {
        self.tick
    }

    /// Ticks per second.
    pub fn ticks_per_second(&self) -> u64 {
        self.ticks_per_second
    }

    /// Tokens that may be taken now.
    pub fn available(&self) -> u64 {
        self.bucket.available
    }

    /// The long-term level.
    pub fn remain(&self) -> u64 {
        self.bucket.remain
    }

    /// The capacity, `max · burst_seconds`.
    pub fn capacity(&self) -> u64 {
        self.bucket.capacity
    }

    /// Requests waiting for this throttle.
    pub fn blocked(&self) -> usize {
        self.blockers.len()
    }

    /// Tokens put in by the ticks of a second up to its `k`-th (`tokens_filled`): a double
    /// truncated to an integer, as Ceph computes it.
    #[inline]
    fn tokens_filled(&self, k: u64) -> u64 {
        (k as f64 / self.ticks_per_second as f64 * self.avg as f64) as u64
    }

    /// The tokens of the next tick (`tokens_this_tick`).
    #[inline]
    fn tokens_this_tick(&mut self) -> u64 {
        if self.current_tick >= self.ticks_per_second {
            self.current_tick = 0;
        }
        self.current_tick += 1;
        self.tokens_filled(self.current_tick) - self.tokens_filled(self.current_tick - 1)
    }

    /// The tick due at `next_tick` (`add_tokens`): put its tokens, then let the blockers
    /// take theirs in order; the slots of those that got all they needed go to `granted`.
    fn add_tokens(&mut self, granted: &mut Vec<u32>) {
        let ratio = if self.bucket.max > self.avg { self.bucket.max as f64 / self.avg as f64 } else { 1.0 };
        let tokens = self.tokens_this_tick();
        self.bucket.put(tokens, ratio);
        while let Some(front) = self.blockers.front_mut() {
            let got = self.bucket.get(front.1);
            if got < front.1 {
                front.1 -= got;
                break;
            }
            granted.push(front.0);
            self.blockers.pop_front();
        }
        self.next_tick += self.tick;
    }

    /// Run the ticks up to `now` of a throttle no one waits for. Once the bucket is full a
    /// tick changes only the tick count, so the rest are counted, not run.
    fn catch_up(&mut self, now: Nanos) {
        debug_assert!(self.blockers.is_empty());
        while self.next_tick <= now {
            let b = &self.bucket;
            if b.remain == b.capacity && b.available == b.remain.min(b.max) {
                let n = (now - self.next_tick) / self.tick + 1;
                self.current_tick = (self.current_tick - 1 + n) % self.ticks_per_second + 1;
                self.next_tick += n * self.tick;
                return;
            }
            self.add_tokens(&mut Vec::new());
        }
    }

    /// A request (slot `slot`) asks for `c` tokens (`get`): `true` when it must wait.
    fn get(&mut self, c: u64, slot: u32) -> bool {
        if !self.blockers.is_empty() {
            self.blockers.push_back((slot, c));
            return true;
        }
        let got = self.bucket.get(c);
        if got < c {
            self.blockers.push_back((slot, c - got));
            return true;
        }
        false
    }
}

/// A request waiting for the throttles it still needs.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    req: Request,
    throttles: u8,
}

/// librbd's QoS of every tenant's image in front of the device: requests held until every
/// throttle they need granted them, then served first come first served.
#[derive(Clone, Debug)]
pub struct RbdQos {
    /// Per image: its throttles that are on.
    images: Vec<Vec<(RbdThrottleKind, TokenBucketThrottle)>>,
    slots: Vec<Waiting>,
    free: Vec<u32>,
    /// Throttles with blockers, by their next tick: (time, image, index in the image).
    ticks: BinaryHeap<Reverse<(Nanos, u32, u8)>>,
    granted: Vec<u32>,
    released: VecDeque<Request>,
    held: usize,
}

impl RbdQos {
    /// Image (tenant) `i` with the options `images[i]` (tenants beyond the list are not
    /// limited), opened at time 0, ticks no shorter than `tick_min_ms`
    /// (`rbd_qos_schedule_tick_min`). Refuses what librbd refuses or ignores, naming the
    /// option and the tenant: a burst below its limit, a burst without a limit, a burst
    /// length of 0, and a tick minimum outside 1 ..= [`TICK_MIN_MAX_MS`].
    pub fn new(images: &[RbdImageQos], tick_min_ms: u64) -> Result<Self> {
        if images.len() > MAX_TENANTS as usize {
            return config(format!("rbd qos: {} tenants listed, at most {MAX_TENANTS}", images.len()));
        }
        if !(1..=TICK_MIN_MAX_MS).contains(&tick_min_ms) {
            return config(format!(
                "rbd qos: rbd_qos_schedule_tick_min = {tick_min_ms} ms must be in 1 ..= {TICK_MIN_MAX_MS} (Ceph's \
                 minimum is 1; above a second there would be no tick a second)"
            ));
        }
        let mut out = Vec::with_capacity(images.len());
        for (i, image) in images.iter().enumerate() {
            let mut on = Vec::new();
            for kind in RbdThrottleKind::ALL {
                let l = image[kind as usize];
                let o = kind.option();
                if l.burst_seconds == 0 {
                    return config(format!(
                        "rbd qos: {o}_burst_seconds of tenant {i} is 0 (Ceph: the option's minimum is 1)"
                    ));
                }
                if l.limit == 0 {
                    if l.burst > 0 {
                        return config(format!(
                            "rbd qos: {o}_burst of tenant {i} is set without {o}_limit (librbd ignores a burst \
                             whose limit is 0)"
                        ));
                    }
                    continue;
                }
                if l.burst > 0 && l.burst < l.limit {
                    return config(format!(
                        "rbd qos: {o}_burst ({}) of tenant {i} is below {o}_limit ({}) (librbd: \"burst is less \
                         than limit\"; it then drops the burst)",
                        l.burst, l.limit
                    ));
                }
                let max = if l.burst == 0 { l.limit } else { l.burst };
                if max.checked_mul(l.burst_seconds).is_none() {
                    return config(format!(
                        "rbd qos: {o} of tenant {i}: {max} × {o}_burst_seconds ({}) overflows 64 bits",
                        l.burst_seconds
                    ));
                }
                on.push((kind, TokenBucketThrottle::new(l, tick_min_ms, 0)));
            }
            out.push(on);
        }
        Ok(RbdQos {
            images: out,
            slots: Vec::new(),
            free: Vec::new(),
            ticks: BinaryHeap::new(),
            granted: Vec::new(),
            released: VecDeque::new(),
            held: 0,
        })
    }

    /// Tenant `tenant`'s throttle `kind`, if it is on.
    pub fn throttle(&self, tenant: u32, kind: RbdThrottleKind) -> Option<&TokenBucketThrottle> {
        self.images.get(tenant as usize)?.iter().find(|(k, _)| *k == kind).map(|(_, t)| t)
    }

    /// A throttle granted slot `slot`: once every throttle has, the request is sent on.
    fn grant(&mut self, slot: u32) {
        let w = &mut self.slots[slot as usize];
        w.throttles -= 1;
        if w.throttles == 0 {
            self.released.push_back(w.req);
            self.free.push(slot);
            self.held -= 1;
        }
    }

    /// Run every tick due by `now` of the throttles with blockers, in time order.
    fn run_ticks(&mut self, now: Nanos) {
        let mut granted = std::mem::take(&mut self.granted);
        while let Some(&Reverse((at, image, k))) = self.ticks.peek() {
            if at > now {
                break;
            }
            self.ticks.pop();
            let t = &mut self.images[image as usize][k as usize].1;
            debug_assert_eq!(t.next_tick, at);
            t.add_tokens(&mut granted);
            if !t.blockers.is_empty() {
                self.ticks.push(Reverse((t.next_tick, image, k)));
            }
            for slot in granted.drain(..) {
                self.grant(slot);
            }
        }
        self.granted = granted;
    }

    fn slot_for(&mut self, req: Request) -> u32 {
        let w = Waiting { req, throttles: 0 };
        match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = w;
                s
            }
            None => {
                self.slots.push(w);
                (self.slots.len() - 1) as u32
            }
        }
    }
}

impl Scheduler for RbdQos {
    fn name(&self) -> String {
        NAME.into()
    }

    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.run_ticks(now);
        let image = req.tenant as usize;
        if self.images.get(image).is_none_or(|on| on.is_empty()) {
            self.released.push_back(req);
            return;
        }
        let slot = self.slot_for(req);
        let mut waits = 0u8;
        for (k, (kind, t)) in self.images[image].iter_mut().enumerate() {
            let c = kind.tokens(req.op, req.bytes);
            if c == 0 {
                continue;
            }
            let idle = t.blockers.is_empty();
            if idle {
                t.catch_up(now);
            }
            if t.get(c, slot) {
                waits += 1;
                if idle {
                    self.ticks.push(Reverse((t.next_tick, image as u32, k as u8)));
                }
            }
        }
        if waits == 0 {
            self.free.push(slot);
            self.released.push_back(req);
        } else {
            self.slots[slot as usize].throttles = waits;
            self.held += 1;
        }
    }

    fn dispatch(&mut self, now: Nanos, _dev: &DeviceState) -> Option<Request> {
        self.run_ticks(now);
        self.released.pop_front()
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.ticks.peek().map(|Reverse((at, _, _))| *at)
    }

    fn on_timer(&mut self, now: Nanos) {
        self.run_ticks(now);
    }

    fn queued(&self) -> usize {
        self.held + self.released.len()
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("held", self.held as f64);
        sink("rbd_blocked_throttles", self.ticks.len() as f64);
    }
}

/// The simulator's spec of librbd's QoS: entry `i` of each vector is tenant `i`'s image;
/// `None`, missing or 0 is "not set" (Ceph's 0). Values are whole numbers (the options are
/// `uint`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RbdQosSpec {
    /// `rbd_qos_iops_limit`, IOPS.
    #[serde(default)]
    pub iops: Vec<Option<f64>>,
    /// `rbd_qos_read_iops_limit`, IOPS.
    #[serde(default)]
    pub read_iops: Vec<Option<f64>>,
    /// `rbd_qos_write_iops_limit`, IOPS.
    #[serde(default)]
    pub write_iops: Vec<Option<f64>>,
    /// `rbd_qos_bps_limit`, bytes/s.
    #[serde(default)]
    pub bps: Vec<Option<f64>>,
    /// `rbd_qos_read_bps_limit`, bytes/s.
    #[serde(default)]
    pub read_bps: Vec<Option<f64>>,
    /// `rbd_qos_write_bps_limit`, bytes/s.
    #[serde(default)]
    pub write_bps: Vec<Option<f64>>,
    /// `rbd_qos_iops_burst`, IOPS.
    #[serde(default)]
    pub iops_burst: Vec<Option<f64>>,
    /// `rbd_qos_read_iops_burst`, IOPS.
    #[serde(default)]
    pub read_iops_burst: Vec<Option<f64>>,
    /// `rbd_qos_write_iops_burst`, IOPS.
    #[serde(default)]
    pub write_iops_burst: Vec<Option<f64>>,
    /// `rbd_qos_bps_burst`, bytes/s.
    #[serde(default)]
    pub bps_burst: Vec<Option<f64>>,
    /// `rbd_qos_read_bps_burst`, bytes/s.
    #[serde(default)]
    pub read_bps_burst: Vec<Option<f64>>,
    /// `rbd_qos_write_bps_burst`, bytes/s.
    #[serde(default)]
    pub write_bps_burst: Vec<Option<f64>>,
    /// Every `rbd_qos_*_burst_seconds` of tenant `i`'s image (default 1).
    #[serde(default)]
    pub burst_seconds: Vec<Option<u64>>,
}

/// Entry `i` of `v` as the `uint` option `option` (missing or `None`: 0).
fn whole(v: &[Option<f64>], i: usize, option: &str) -> Result<u64> {
    match v.get(i).copied().flatten() {
        None => Ok(0),
        // 2^64: the first double above every u64.
        Some(x) if x.is_finite() && x >= 0.0 && x.fract() == 0.0 && x < 18_446_744_073_709_551_616.0 => Ok(x as u64),
        Some(x) => config(format!("rbd qos: {option} of tenant {i} = {x} is not a whole number >= 0 (a uint option)")),
    }
}

impl RbdQosSpec {
    /// The scheduler (ticks of [`RBD_QOS_SCHEDULE_TICK_MIN_MS`]), or the first setting
    /// librbd would refuse or ignore (naming the option and the tenant).
    pub fn build(&self) -> Result<RbdQos> {
        let limits = [&self.iops, &self.bps, &self.read_iops, &self.write_iops, &self.read_bps, &self.write_bps];
        let bursts = [
            &self.iops_burst,
            &self.bps_burst,
            &self.read_iops_burst,
            &self.write_iops_burst,
            &self.read_bps_burst,
            &self.write_bps_burst,
        ];
        let n = limits.iter().chain(&bursts).map(|v| v.len()).chain([self.burst_seconds.len()]).max().unwrap_or(0);
        if n > MAX_TENANTS as usize {
            return config(format!("rbd qos: {n} tenants listed, at most {MAX_TENANTS}"));
        }
        let mut images = Vec::with_capacity(n);
        for i in 0..n {
            let burst_seconds = self.burst_seconds.get(i).copied().flatten().unwrap_or(DEFAULT_BURST_SECONDS);
            let mut image = [RbdLimit::default(); THROTTLE_COUNT];
            for kind in RbdThrottleKind::ALL {
                let o = kind.option();
                image[kind as usize] = RbdLimit {
                    limit: whole(limits[kind as usize], i, &format!("{o}_limit"))?,
                    burst: whole(bursts[kind as usize], i, &format!("{o}_burst"))?,
                    burst_seconds,
                };
            }
            images.push(image);
        }
        RbdQos::new(&images, RBD_QOS_SCHEDULE_TICK_MIN_MS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Nanos = crate::time::NS_PER_SEC;
    const MS: Nanos = NS_PER_MS;

    /// Run every timer up to `until`, collecting (time, request) as they pass.
    fn drive(s: &mut RbdQos, from: Nanos, until: Nanos) -> Vec<(Nanos, Request)> {
        let dev = DeviceState { outstanding: 0, free_slots: 1 };
        let mut out = Vec::new();
        let mut now = from;
        loop {
            while let Some(r) = s.dispatch(now, &dev) {
                out.push((now, r));
            }
            match s.next_timer() {
                Some(t) if t <= until => {
                    assert!(t >= now, "timer in the past");
                    now = t;
                    s.on_timer(now);
                }
                _ => return out,
            }
        }
    }

    fn send(s: &mut RbdQos, tenant: u32, op: Op, n: u64, bytes: u32, at: Nanos, first_id: u64) {
        for i in 0..n {
            let mut r = Request::new(first_id + i, tenant, at, bytes);
            r.op = op;
            s.enqueue(r, at);
        }
    }

    fn count(out: &[(Nanos, Request)], from: Nanos, to: Nanos, keep: impl Fn(&Request) -> bool) -> usize {
        out.iter().filter(|(t, r)| *t >= from && *t < to && keep(r)).count()
    }

    fn one(v: f64) -> Vec<Option<f64>> {
        vec![Some(v)]
    }

    #[test]
    fn iops_limit_passes_five_every_50ms_tick() {
        // rbd_qos_iops_limit=100: tick max(1000 / 100, 50) = 50 ms, 20 ticks a second of
        // 5 tokens. The first tick is at the open (t = 0); `available` starts empty, so
        // 5 pass at 0, then 5 at each tick: request k at floor(k / 5) · 50 ms.
        let mut s = RbdQosSpec { iops: one(100.0), ..Default::default() }.build().unwrap();
        assert_eq!(s.throttle(0, RbdThrottleKind::Iops).unwrap().tick(), 50 * MS);
        send(&mut s, 0, Op::Read, 1000, 4096, 0, 0);
        let out = drive(&mut s, 0, 3 * SEC);
        for (k, (t, r)) in out.iter().enumerate().take(300) {
            assert_eq!((*t, r.id), (k as u64 / 5 * 50 * MS, k as u64), "request {k}");
        }
        assert_eq!(count(&out, SEC, 2 * SEC, |_| true), 100);
    }

    #[test]
    fn a_burst_of_200_for_3_seconds_lasts_until_remain_runs_out() {
        // limit 100, burst 200, burst_seconds 3: max 200, capacity 600 (full at the open),
        // available gains 5 · 200/100 = 10 a tick. At t = 0: 10 pass, remain 590; each tick
        // k ≥ 1: remain 600 − 5k before taking 10, so 10 pass while that is ≥ 10 (k ≤ 118,
        // t ≤ 5.9 s); at k = 119 only 5 remain: 5 a tick (100 IOPS) from 5.95 s on.
        let spec =
            RbdQosSpec { iops: one(100.0), iops_burst: one(200.0), burst_seconds: vec![Some(3)], ..Default::default() };
        let mut s = spec.build().unwrap();
        send(&mut s, 0, Op::Read, 3000, 4096, 0, 0);
        let out = drive(&mut s, 0, 10 * SEC);
        let all = |_: &Request| true;
        assert_eq!(count(&out, 0, 1, all), 10);
        assert_eq!(count(&out, 0, SEC, all), 200);
        assert_eq!(count(&out, 5 * SEC, 6 * SEC, all), 19 * 10 + 5);
        assert_eq!(count(&out, 5900 * MS, 5901 * MS, all), 10);
        assert_eq!(count(&out, 5950 * MS, 5951 * MS, all), 5);
        assert_eq!(count(&out, 7 * SEC, 8 * SEC, all), 100);
    }

    #[test]
    fn an_idle_second_fills_available_to_one_second_of_the_limit() {
        // No burst: max = limit = 100. Idle from the open to t = 2 s, `available` grows by
        // 5 a tick up to min(remain, max) = 100: 100 pass at once at 2 s, then 5 at 2.05 s.
        let mut s = RbdQosSpec { iops: one(100.0), ..Default::default() }.build().unwrap();
        send(&mut s, 0, Op::Write, 300, 4096, 2 * SEC, 0);
        let out = drive(&mut s, 2 * SEC, 3 * SEC);
        let all = |_: &Request| true;
        assert_eq!(count(&out, 2 * SEC, 2 * SEC + 1, all), 100);
        assert_eq!(count(&out, 2050 * MS, 2050 * MS + 1, all), 5);
    }

    #[test]
    fn read_and_write_limits_are_separate_throttles() {
        // read 100 IOPS: 5 a tick; write 50 IOPS: tick 50 ms, 20 ticks of floor(k · 2.5)
        // differences, 2, 3, 2, 3, ... Writes queued behind 1000 reads still pass at once.
        let spec = RbdQosSpec { read_iops: one(100.0), write_iops: one(50.0), ..Default::default() };
        let mut s = spec.build().unwrap();
        send(&mut s, 0, Op::Read, 1000, 4096, 0, 0);
        send(&mut s, 0, Op::Write, 1000, 4096, 0, 10_000);
        let out = drive(&mut s, 0, 3 * SEC);
        let (reads, writes) = (|r: &Request| r.op == Op::Read, |r: &Request| r.op == Op::Write);
        assert_eq!((count(&out, 0, 1, reads), count(&out, 0, 1, writes)), (5, 2));
        assert_eq!((count(&out, 50 * MS, 50 * MS + 1, writes), count(&out, 100 * MS, 100 * MS + 1, writes)), (3, 2));
        assert_eq!((count(&out, SEC, 2 * SEC, reads), count(&out, SEC, 2 * SEC, writes)), (100, 50));
    }

    #[test]
    fn bps_limit_gathers_a_large_request_over_several_ticks() {
        // rbd_qos_bps_limit = 409600: tick 50 ms, 20 480 bytes a tick. A 64 KiB request
        // takes what there is and waits for the rest: the j-th (from 1) passes at the
        // first tick k (from 0) with 20480 · (k + 1) ≥ 65536 · j: 150, 300, 450, 600, 750 ms.
        let mut s = RbdQosSpec { bps: one(409600.0), ..Default::default() }.build().unwrap();
        send(&mut s, 0, Op::Write, 5, 65536, 0, 0);
        let out = drive(&mut s, 0, SEC);
        let times: Vec<Nanos> = out.iter().map(|(t, _)| *t / MS).collect();
        assert_eq!(times, vec![150, 300, 450, 600, 750]);
        // 4 KiB requests: 5 a tick, 100 IOPS.
        let mut s = RbdQosSpec { bps: one(409600.0), ..Default::default() }.build().unwrap();
        send(&mut s, 0, Op::Read, 500, 4096, 0, 0);
        assert_eq!(count(&drive(&mut s, 0, 3 * SEC), SEC, 2 * SEC, |_| true), 100);
    }

    #[test]
    fn a_request_takes_tokens_from_every_throttle_at_once() {
        // iops 10 (tick 100 ms, 1 a tick) and bps 409600 (5 × 4 KiB a 50 ms tick): the
        // IOPS throttle holds the requests back (one every 100 ms), but the first five took
        // their BPS tokens at arrival while four of them still wait for IOPS tokens.
        let spec = RbdQosSpec { iops: one(10.0), bps: one(409600.0), ..Default::default() };
        let mut s = spec.build().unwrap();
        send(&mut s, 0, Op::Read, 30, 4096, 0, 0);
        assert_eq!(s.throttle(0, RbdThrottleKind::Bps).unwrap().available(), 0);
        assert_eq!(s.throttle(0, RbdThrottleKind::Bps).unwrap().blocked(), 25);
        assert_eq!(s.throttle(0, RbdThrottleKind::Iops).unwrap().blocked(), 29);
        let out = drive(&mut s, 0, 3 * SEC);
        let times: Vec<Nanos> = out.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, (0..30).map(|k| k * 100 * MS).collect::<Vec<_>>());
    }

    #[test]
    fn the_schedule_tick_min_sets_the_tick_and_unlimited_tenants_pass() {
        // tick min 10 ms: 100 IOPS is a tick of 10 ms with 1 token.
        let mut image = [RbdLimit::default(); THROTTLE_COUNT];
        image[RbdThrottleKind::Iops as usize].limit = 100;
        let mut s = RbdQos::new(&[image], 10).unwrap();
        send(&mut s, 0, Op::Read, 10, 4096, 0, 0);
        send(&mut s, 1, Op::Read, 10, 4096, 0, 100);
        let out = drive(&mut s, 0, SEC);
        assert_eq!(count(&out, 0, 1, |r| r.tenant == 1), 10);
        let t0: Vec<Nanos> = out.iter().filter(|(_, r)| r.tenant == 0).map(|(t, _)| *t).collect();
        assert_eq!(t0, (0..10).map(|k| k * 10 * MS).collect::<Vec<_>>());
        assert!(RbdQos::new(&[image], 0).is_err());
        assert!(RbdQos::new(&[image], 1001).is_err());
    }

    /// The tokens of the ticks of one second after the first tick at the open, starting
    /// with the open's.
    fn second_of_ticks(limit: u64, tick_min_ms: u64) -> Vec<u64> {
        let mut t = TokenBucketThrottle::new(RbdLimit { limit, ..Default::default() }, tick_min_ms, 0);
        let first = t.tokens_filled(1);
        std::iter::once(first).chain((1..t.ticks_per_second()).map(|_| t.tokens_this_tick())).collect()
    }

    #[test]
    fn tokens_per_tick_follow_cephs_double_arithmetic() {
        // 950 IOPS at 50 ms ticks: 47.5 a tick, as 47, 48, 47, 48, ... (Throttle.h's example).
        let t = second_of_ticks(950, 50);
        assert_eq!((t.len(), t.iter().sum::<u64>()), (20, 950));
        assert!(t.chunks(2).all(|p| p == [47, 48]), "{t:?}");
        // 100 IOPS at 10 ms ticks: 1 a tick, except where k / 100 · 100 falls just below
        // an integer in doubles (0.29 · 100 = 28.999...): ticks 29 and 57 put nothing in,
        // 30 and 59 put 2.
        let t = second_of_ticks(100, 10);
        assert_eq!(t.iter().sum::<u64>(), 100);
        let odd: Vec<(usize, u64)> = t.iter().enumerate().filter(|(_, &n)| n != 1).map(|(k, &n)| (k + 1, n)).collect();
        assert_eq!(odd, vec![(29, 0), (30, 2), (57, 0), (59, 2)]);
    }

    fn err(spec: RbdQosSpec) -> String {
        spec.build().unwrap_err().to_string()
    }

    #[test]
    fn refuses_what_librbd_refuses_or_ignores() {
        let e = err(RbdQosSpec { iops: vec![None, None], iops_burst: vec![None, Some(200.0)], ..Default::default() });
        assert!(e.contains("rbd qos: rbd_qos_iops_burst of tenant 1 is set without rbd_qos_iops_limit"), "{e}");
        let e = err(RbdQosSpec { write_bps: one(1000.0), write_bps_burst: one(500.0), ..Default::default() });
        assert!(e.contains("rbd_qos_write_bps_burst (500) of tenant 0 is below rbd_qos_write_bps_limit (1000)"), "{e}");
        let e = err(RbdQosSpec { read_iops: one(1.5), ..Default::default() });
        assert!(e.contains("rbd_qos_read_iops_limit of tenant 0 = 1.5 is not a whole number"), "{e}");
        let e = err(RbdQosSpec { bps: one(-1.0), ..Default::default() });
        assert!(e.contains("rbd_qos_bps_limit"), "{e}");
        let e = err(RbdQosSpec { iops: one(100.0), burst_seconds: vec![Some(0)], ..Default::default() });
        assert!(e.contains("rbd_qos_iops_burst_seconds of tenant 0 is 0"), "{e}");
        // A burst equal to its limit, 0 as "not set", and a burst length without a burst
        // are what librbd takes.
        let ok = RbdQosSpec {
            iops: vec![Some(100.0), Some(0.0)],
            iops_burst: one(100.0),
            burst_seconds: vec![Some(5), Some(2)],
            ..Default::default()
        };
        let s = ok.build().unwrap();
        assert_eq!(s.throttle(0, RbdThrottleKind::Iops).unwrap().capacity(), 500);
        assert!(s.throttle(1, RbdThrottleKind::Iops).is_none());
    }

    #[test]
    fn spec_deserializes_and_refuses_unknown_fields() {
        let spec: RbdQosSpec = serde_json::from_str(
            r#"{"iops":[100,null],"bps_burst":[null,2000],"bps":[null,1000],"burst_seconds":[2]}"#,
        )
        .unwrap();
        assert_eq!(spec.iops, vec![Some(100.0), None]);
        assert_eq!(spec.burst_seconds, vec![Some(2)]);
        let s = spec.build().unwrap();
        assert_eq!(s.throttle(1, RbdThrottleKind::Bps).unwrap().capacity(), 2000);
        assert_eq!(s.name(), NAME);
        assert!(serde_json::from_str::<RbdQosSpec>(r#"{"iops_limit":[1]}"#).is_err());
    }
}
