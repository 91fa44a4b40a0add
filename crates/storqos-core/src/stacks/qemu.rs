//! QEMU's I/O throttling and throttle groups, as QEMU 10.0 runs them (what
//! `qemu-storage-daemon` 10.0.2 and libvirt's `<iotune>` use): the leaky buckets of
//! `util/throttle.c` and the drives sharing them of `block/throttle-groups.c`.
//!
//! ## The buckets (`util/throttle.c`)
//!
//! A throttle state holds six [`LeakyBucket`]s ([`BucketType`], QEMU's order): bytes
//! total / read / write and operations total / read / write. Each has a rate `avg` (the
//! limit: `bps-total`, `iops-read`, ...), an optional burst rate `max` (`*-max`), a burst
//! length in whole seconds (`*-max-length`, default [`DEFAULT_BURST_LENGTH`]), a `level`
//! and a `burst_level`.
//!
//! - **Leak** (`throttle_do_leak`, `throttle_leak_bucket`): the time since the last leak
//!   drains `avg · dt` from every level and, for a bucket whose burst length is above 1,
//!   `max · dt` from its burst level; levels never go below 0. The leak happens only when
//!   a wait is computed, never when a request is charged.
//! - **Wait** (`throttle_compute_wait`): a bucket without `avg` never holds anything
//!   back. Without a `max` the bucket holds `avg / 10` (100 ms of the rate: the "short
//!   bursts" QEMU lets through so that not every other request waits); with one it holds
//!   `max · burst_length` and its burst bucket `max / 10`. A level above the size waits
//!   `(level − size) / avg` seconds; otherwise, for a burst length above 1, a burst level
//!   above `max / 10` waits `(burst_level − max / 10) / max`. The wait is truncated to
//!   whole nanoseconds, and a wait of 0 ns does not wait. The check comes *before* the
//!   request is charged, so a request passes while the level is at most the size: with
//!   `iops-total=100` alone, 11 requests pass at once (levels 0 to 10), then one every
//!   10 ms.
//! - **Direction** (`throttle_compute_wait_for`): a read waits for the longest wait of
//!   the bytes and operations buckets, total and read; a write the same with write.
//! - **Charge** (`throttle_account`), when a request passes: its bytes into the two
//!   bytes buckets of its direction, its units into the two operations buckets, where a
//!   request of `b` bytes is `b / iops-size` units when `iops-size` is set and `b` is
//!   larger, else 1 (a small request still counts one). A burst level is charged only
//!   when the burst length is above 1.
//!
//! A burst of `max` over `burst_length` seconds lasts longer than the length: the bucket
//! fills at `max` and drains at `avg` meanwhile, so it is full after
//! `max · burst_length / (max − avg)` seconds (10 s for `iops=100, max=200, length=5`).
//!
//! ## The groups (`block/throttle-groups.c`)
//!
//! Every drive (tenant) with limits is a member of a throttle group, which owns the one
//! throttle state its members share (a drive with its own `throttling.*` is a group of
//! one). For each direction the group has a token (a member), a flag "a timer is armed"
//! and each member a FIFO of waiting requests (`throttle_group_co_io_limits_intercept`):
//!
//! 1. A request of member `m` arriving: the candidate is the next member after the
//!    token, in the group's list, that has requests waiting in that direction, else `m`
//!    (`next_throttle_token`). If the group has a timer armed for that direction the
//!    request waits; otherwise the wait is computed and, if there is one, a timer is
//!    armed on the candidate for then, which becomes the token
//!    (`throttle_group_schedule_timer`). The request also waits when `m` already has
//!    requests waiting in that direction (a drive's requests never overtake each other).
//! 2. A request that passes is charged, then the next one is chosen
//!    (`schedule_next_request`): the next member after the token with requests waiting;
//!    if it has to wait, a timer is armed on it, which becomes the token; if it need not
//!    wait, the head of `m`'s own queue goes at once when it has one (QEMU prefers the
//!    current drive), else the candidate's timer is armed for now.
//! 3. A timer firing (`timer_cb`, `throttle_group_restart_queue_entry`) clears the flag
//!    and lets the head of its member's queue pass *without asking the buckets again*
//!    (the wait it was armed with is taken as served), then step 2 follows.
//!
//! So while a group is backlogged its members take turns one request at a time in the
//! list's order. QEMU inserts a joining member at the head of the list
//! (`throttle_group_register_tgm`) and the first member to join holds the first token:
//! members join here in tenant order, so the turn after a tenant goes to the next lower
//! tenant of the group, and after the lowest to the highest (tenants 0, 2, 1, 0, ... for
//! a group of tenants 0, 1 and 2). Reads and writes keep
//! their own tokens, flags and queues and share only the total buckets; because a timer
//! woken request is not checked again, a direction may pass one request beyond what the
//! other charged since its timer was armed (the steady state of reads and writes under
//! one `iops-total` has the level one unit above the bucket for each direction).
//!
//! ## Why not [`Throttled`](super::Throttled)
//!
//! [`Throttled`](super::Throttled) asks each lane's head again at the time it named and
//! orders lanes ready at the same time by when they began to wait. QEMU does neither:
//! one timer per group and direction, on the token's member, whose request passes
//! unchecked; the next member is picked by list position after the token when a request
//! passes; the current member's queue is preferred when the buckets have room; and the
//! leak happens only when a wait is computed (after the timer-woken request is charged),
//! which changes a level clamped at 0. [`QemuThrottle`] implements
//! [`Scheduler`] itself.
//!
//! ## The spec ([`QemuThrottleSpec`])
//!
//! | spec field | QEMU option (`-drive throttling.*`, `throttle-group` limits) |
//! |---|---|
//! | `iops`, `read_iops`, `write_iops` | `iops-total`, `iops-read`, `iops-write` |
//! | `bps`, `read_bps`, `write_bps` | `bps-total`, `bps-read`, `bps-write` |
//! | `iops_burst`, ..., `write_bps_burst` | `iops-total-max`, ..., `bps-write-max` |
//! | `burst_seconds` | the `*-max-length` of every bucket of that state with a max |
//! | `iops_size` | `iops-size` |
//! | `groups` | `throttling.group` / the `throttle-group` object of each drive |
//!
//! Entry `i` of each vector is tenant `i`'s limits, or group `i`'s when `groups` is
//! given; a missing entry, `null` or 0 is "not set" (QEMU's 0). Without `groups` every
//! tenant is its own group and a tenant beyond every vector is unthrottled; with
//! `groups`, tenant `i` is a member of group `groups[i]` and a tenant beyond the list is
//! unthrottled (it is in no group, as a drive without throttling). Validation is
//! `throttle_is_valid`'s, in its order, after the option parser's refusals (negative
//! values, a burst length above `UINT_MAX`); each message names the tenant or group and
//! quotes QEMU's rule.
//!
//! ## Not modelled
//!
//! - Timers are exact: QEMU arms them in the drive's AioContext and they fire when its
//!   event loop gets to them (microseconds late under load); here a timer fires at its
//!   time, and the request it wakes passes at that time. A timer armed "for now" fires in
//!   the same nanosecond, after the step that armed it (QEMU's event loop runs it after
//!   the current coroutine).
//! - Limits are QEMU integers (`uint64_t`); the model takes the values as given
//!   (fractional ones included).
//! - Draining (`io_limits_disabled`: a drive being drained bypasses its limits),
//!   changing limits at run time (`block_set_io_throttle`, which resets the levels and
//!   restarts the queues), members joining or leaving, and moving between AioContexts.
//! - Which requests are throttled: QEMU throttles reads, writes, write-zeroes and
//!   discards (the last two as writes) and not flushes; the simulator's requests are
//!   reads and writes.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use serde::Deserialize;

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::request::{Op, Request, MAX_TENANTS};
use crate::scheduler::Scheduler;
use crate::time::{Nanos, NS_PER_SEC};

/// Policy name in reports.
pub const NAME: &str = "qemu-throttle";

/// The largest rate or burst rate QEMU takes (`THROTTLE_VALUE_MAX`, 10^15).
pub const THROTTLE_VALUE_MAX: u64 = 1_000_000_000_000_000;

/// The longest burst length QEMU takes, seconds (`UINT_MAX`: `burst_length` is an
/// `unsigned`).
pub const BURST_LENGTH_MAX: u64 = u32::MAX as u64;

/// Burst length of a bucket whose `*-max-length` is not set, seconds
/// (`throttle_config_init`).
pub const DEFAULT_BURST_LENGTH: u64 = 1;

/// A bucket without a burst rate holds `avg / SHORT_BURST_DIVISOR` (100 ms of its rate);
/// with one, its burst bucket holds `max / SHORT_BURST_DIVISOR` (`throttle_compute_wait`).
pub const SHORT_BURST_DIVISOR: f64 = 10.0;

/// The number of buckets of a throttle state (`BUCKETS_COUNT`).
pub const BUCKETS_COUNT: usize = 6;

const NS: f64 = NS_PER_SEC as f64;

/// The six buckets, in QEMU's order (`BucketType`): `buckets[b as usize]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BucketType {
    /// Bytes per second, all I/O (`bps-total`).
    BpsTotal = 0,
    /// Bytes per second of reads (`bps-read`).
    BpsRead = 1,
    /// Bytes per second of writes (`bps-write`).
    BpsWrite = 2,
    /// Operations per second, all I/O (`iops-total`).
    OpsTotal = 3,
    /// Operations per second of reads (`iops-read`).
    OpsRead = 4,
    /// Operations per second of writes (`iops-write`).
    OpsWrite = 5,
}

impl BucketType {
    /// Every bucket, in QEMU's order.
    pub const ALL: [BucketType; BUCKETS_COUNT] = [
        BucketType::BpsTotal,
        BucketType::BpsRead,
        BucketType::BpsWrite,
        BucketType::OpsTotal,
        BucketType::OpsRead,
        BucketType::OpsWrite,
    ];

    /// QEMU's option name for this bucket's rate (`"iops-total"`, ...); its burst rate is
    /// this name with `-max`, its burst length with `-max-length`.
    pub fn option(self) -> &'static str {
        match self {
            BucketType::BpsTotal => "bps-total",
            BucketType::BpsRead => "bps-read",
            BucketType::BpsWrite => "bps-write",
            BucketType::OpsTotal => "iops-total",
            BucketType::OpsRead => "iops-read",
            BucketType::OpsWrite => "iops-write",
        }
    }
}

/// The buckets a request of direction `op` is checked against and charged to:
/// (bytes total, operations total, bytes of `op`, operations of `op`).
#[inline]
fn buckets_of(op: Op) -> [usize; 4] {
    let d = op as usize;
    [BucketType::BpsTotal as usize, BucketType::OpsTotal as usize, 1 + d, 4 + d]
}

/// One of QEMU's leaky buckets (`LeakyBucket`): a rate, an optional burst rate and
/// length, and its levels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeakyBucket {
    /// The rate, units per second (bytes or operations); 0 = no limit.
    pub avg: f64,
    /// The burst rate, units per second (`*-max`); 0 = none.
    pub max: f64,
    /// How long a burst at `max` may last, whole seconds (`*-max-length`, ≥ 1).
    pub burst_length: u64,
    /// Units charged and not yet leaked at `avg`.
    pub level: f64,
    /// Units charged and not yet leaked at `max` (kept only when `burst_length > 1`).
    pub burst_level: f64,
}

impl Default for LeakyBucket {
    fn default() -> Self {
        LeakyBucket { avg: 0.0, max: 0.0, burst_length: DEFAULT_BURST_LENGTH, level: 0.0, burst_level: 0.0 }
    }
}

impl LeakyBucket {
    /// A bucket of rate `avg` and burst rate `max` (0 = none), burst length 1, empty.
    pub fn new(avg: f64, max: f64) -> Self {
        LeakyBucket { avg, max, ..LeakyBucket::default() }
    }

    /// Drain `delta_ns` of the rates (`throttle_leak_bucket`).
    pub fn leak(&mut self, delta_ns: Nanos) {
        let dt = delta_ns as f64;
        self.level = (self.level - self.avg * dt / NS).max(0.0);
        if self.burst_length > 1 {
            self.burst_level = (self.burst_level - self.max * dt / NS).max(0.0);
        }
    }

    /// How long a request must wait before it may be charged to this bucket, ns (0: it
    /// may pass now), from the levels as they are (`throttle_compute_wait`).
    pub fn wait(&self) -> Nanos {
        if self.avg == 0.0 {
            return 0;
        }
        let (size, burst_size) = if self.max == 0.0 {
            (self.avg / SHORT_BURST_DIVISOR, 0.0)
        } else {
            (self.max * self.burst_length as f64, self.max / SHORT_BURST_DIVISOR)
        };
        let extra = self.level - size;
        if extra > 0.0 {
            return time_for(extra, self.avg);
        }
        if self.burst_length > 1 {
            let extra = self.burst_level - burst_size;
            if extra > 0.0 {
                return time_for(extra, self.max);
            }
        }
        0
    }

    /// Charge `amount` units.
    #[inline]
    fn charge(&mut self, amount: f64) {
        self.level += amount;
        if self.burst_length > 1 {
            self.burst_level += amount;
        }
    }
}

/// The time `extra` units take at `rate` per second, truncated to whole ns as QEMU's
/// conversion of the `double` to `int64_t` does.
#[inline]
fn time_for(extra: f64, rate: f64) -> Nanos {
    (extra * NS / rate) as Nanos
}

/// The limits of one throttle state (`ThrottleConfig`): six buckets and `iops-size`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ThrottleConfig {
    /// The buckets, indexed by [`BucketType`].
    pub buckets: [LeakyBucket; BUCKETS_COUNT],
    /// `iops-size`, bytes: a larger request counts `bytes / op_size` operations; 0 = not
    /// set (every request counts 1).
    pub op_size: u64,
}

impl ThrottleConfig {
    /// The bucket `b`.
    pub fn bucket(&self, b: BucketType) -> &LeakyBucket {
        &self.buckets[b as usize]
    }

    /// Whether any bucket has a rate (`throttle_enabled`).
    pub fn enabled(&self) -> bool {
        self.buckets.iter().any(|b| b.avg > 0.0)
    }

    /// The operations a request of `bytes` counts (`throttle_account`'s units).
    #[inline]
    pub fn units(&self, bytes: u64) -> f64 {
        if self.op_size != 0 && bytes > self.op_size {
            bytes as f64 / self.op_size as f64
        } else {
            1.0
        }
    }

    /// Refuse what QEMU refuses, in its order: the option parser's negative values and
    /// burst lengths above `UINT_MAX`, then `throttle_is_valid`. `who` names the state in
    /// the message (`"tenant 3"`, `"group 0"`).
    pub fn check(&self, who: &str) -> Result<()> {
        let fail = |what: String, rule: &str| config(format!("qemu throttle: {who}: {what} (QEMU: {rule})"));
        for b in BucketType::ALL {
            let k = self.bucket(b);
            for (value, suffix) in [(k.avg, ""), (k.max, "-max")] {
                if value.is_nan() || value < 0.0 {
                    return fail(
                        format!("{}{suffix} = {value} is not a non-negative number", b.option()),
                        "Property values cannot be negative",
                    );
                }
            }
            if k.burst_length > BURST_LENGTH_MAX {
                return fail(
                    format!("{}-max-length = {} is too long", b.option(), k.burst_length),
                    &format!("{}-max-length value must be in the range [0, {BURST_LENGTH_MAX}]", b.option()),
                );
            }
        }
        let b = &self.buckets;
        let clash = |total: BucketType, max: bool| {
            let v = |t: BucketType| if max { b[t as usize].max } else { b[t as usize].avg };
            let (read, write) = (BucketType::ALL[total as usize + 1], BucketType::ALL[total as usize + 2]);
            v(total) != 0.0 && (v(read) != 0.0 || v(write) != 0.0)
        };
        for (total, max) in [
            (BucketType::BpsTotal, false),
            (BucketType::OpsTotal, false),
            (BucketType::BpsTotal, true),
            (BucketType::OpsTotal, true),
        ] {
            if clash(total, max) {
                let s = if max { "-max" } else { "" };
                let (read, write) = (BucketType::ALL[total as usize + 1], BucketType::ALL[total as usize + 2]);
                return fail(
                    format!("{}{s} is set with {}{s} or {}{s}", total.option(), read.option(), write.option()),
                    "bps/iops/max total values and read/write values cannot be used at the same time",
                );
            }
        }
        let ops = [BucketType::OpsTotal, BucketType::OpsRead, BucketType::OpsWrite];
        if self.op_size != 0 && ops.iter().all(|&o| self.bucket(o).avg == 0.0) {
            return fail(
                format!("iops-size = {} is set without iops-total, iops-read or iops-write", self.op_size),
                "iops size requires an iops value to be set",
            );
        }
        for b in BucketType::ALL {
            let k = self.bucket(b);
            let name = b.option();
            let top = THROTTLE_VALUE_MAX as f64;
            if k.avg > top || k.max > top {
                let (value, suffix) = if k.avg > top { (k.avg, "") } else { (k.max, "-max") };
                return fail(
                    format!("{name}{suffix} = {value} is above {THROTTLE_VALUE_MAX}"),
                    &format!("bps/iops/max values must be within [0, {THROTTLE_VALUE_MAX}]"),
                );
            }
            if k.burst_length == 0 {
                return fail(format!("{name}-max-length is 0"), "the burst length cannot be 0");
            }
            if k.burst_length > 1 && k.max == 0.0 {
                return fail(
                    format!("{name}-max-length = {} is set without {name}-max", k.burst_length),
                    "burst length set without burst rate",
                );
            }
            if k.max != 0.0 && k.burst_length as f64 > (top / k.max).floor() {
                return fail(
                    format!("{name}-max-length = {} is too long for {name}-max = {}", k.burst_length, k.max),
                    "burst length too high for this burst rate",
                );
            }
            if k.max != 0.0 && k.avg == 0.0 {
                return fail(
                    format!("{name}-max requires {name}"),
                    "bps_max/iops_max require corresponding bps/iops values",
                );
            }
            if k.max != 0.0 && k.max < k.avg {
                return fail(
                    format!("{name}-max = {} is below {name} = {}", k.max, k.avg),
                    "bps_max/iops_max cannot be lower than bps/iops",
                );
            }
        }
        Ok(())
    }
}

/// One throttle state (`ThrottleState`): the limits, the levels, the time of the last
/// leak.
#[derive(Clone, Debug, PartialEq)]
pub struct ThrottleState {
    cfg: ThrottleConfig,
    previous_leak: Nanos,
}

impl ThrottleState {
    /// `cfg` with empty buckets, configured at `now` (`throttle_config`).
    pub fn new(mut cfg: ThrottleConfig, now: Nanos) -> Self {
        for b in &mut cfg.buckets {
            b.level = 0.0;
            b.burst_level = 0.0;
        }
        ThrottleState { cfg, previous_leak: now }
    }

    /// The limits and the levels.
    pub fn config(&self) -> &ThrottleConfig {
        &self.cfg
    }

    /// Leak up to `now`, then the time at which a request of direction `op` may pass, or
    /// `None` when it may pass now (`throttle_compute_timer`).
    pub fn compute_timer(&mut self, op: Op, now: Nanos) -> Option<Nanos> {
        let delta = now.saturating_sub(self.previous_leak);
        self.previous_leak = now;
        if delta > 0 {
            for b in &mut self.cfg.buckets {
                b.leak(delta);
            }
        }
        let wait = buckets_of(op).iter().map(|&i| self.cfg.buckets[i].wait()).max().unwrap_or(0);
        (wait > 0).then(|| now + wait)
    }

    /// A request of direction `op` and `bytes` passes: charge it (`throttle_account`).
    pub fn account(&mut self, op: Op, bytes: u64) {
        let units = self.cfg.units(bytes);
        let [bps_total, ops_total, bps_dir, ops_dir] = buckets_of(op);
        self.cfg.buckets[bps_total].charge(bytes as f64);
        self.cfg.buckets[ops_total].charge(units);
        self.cfg.buckets[bps_dir].charge(bytes as f64);
        self.cfg.buckets[ops_dir].charge(units);
    }
}

/// A drive of a group (`ThrottleGroupMember`): its tenant and its waiting requests by
/// direction (QEMU's `pending_reqs` is the length of a queue).
#[derive(Clone, Debug)]
struct Member {
    tenant: u32,
    queue: [VecDeque<Request>; 2],
}

/// A throttle group (`ThrottleGroup`): the shared state, the members in QEMU's list
/// order, and per direction the token and the member whose timer is armed (`Some` is
/// QEMU's `any_timer_armed`: a group arms one timer per direction at a time).
#[derive(Clone, Debug)]
struct Group {
    ts: ThrottleState,
    members: Vec<Member>,
    token: [usize; 2],
    armed: [Option<usize>; 2],
}

impl Group {
    #[inline]
    fn pending(&self, member: usize, d: usize) -> bool {
        !self.members[member].queue[d].is_empty()
    }

    /// The next member after the token with requests waiting in direction `d`, the
    /// token itself last, else `m` (`next_throttle_token`).
    fn next_token(&self, d: usize, m: usize) -> usize {
        let n = self.members.len();
        let start = self.token[d];
        let mut token = (start + 1) % n;
        while token != start && !self.pending(token, d) {
            token = (token + 1) % n;
        }
        if token == start && !self.pending(token, d) {
            m
        } else {
            token
        }
    }
}

#[inline]
fn op_of(d: usize) -> Op {
    if d == 0 {
        Op::Read
    } else {
        Op::Write
    }
}

/// QEMU's throttle groups in front of the device: requests held in their drive's queue
/// until the group lets them pass, then served first come first served.
#[derive(Clone, Debug)]
pub struct QemuThrottle {
    groups: Vec<Group>,
    /// Tenant → (group, position in the group's list); `None` or beyond: unthrottled.
    member_of: Vec<Option<(u32, u32)>>,
    /// Armed timers: (time, arming order, group, direction); one per group and direction.
    timers: BinaryHeap<Reverse<(Nanos, u64, u32, u8)>>,
    seq: u64,
    released: VecDeque<Request>,
    held: usize,
}

impl QemuThrottle {
    /// Groups of limits `groups` (group `g` configured at time 0 with `groups[g]`), and
    /// tenant `t` a member of group `member_of[t]` (`None`, or a tenant beyond the list:
    /// unthrottled). Members join in tenant order. Refuses a configuration QEMU refuses
    /// (see [`ThrottleConfig::check`]) and a member of a group that does not exist.
    pub fn new(groups: Vec<ThrottleConfig>, member_of: &[Option<u32>]) -> Result<Self> {
        for (g, cfg) in groups.iter().enumerate() {
            cfg.check(&format!("group {g}"))?;
        }
        if member_of.len() > MAX_TENANTS as usize {
            return config(format!("qemu throttle: {} tenants listed, at most {MAX_TENANTS}", member_of.len()));
        }
        let mut joined: Vec<Vec<u32>> = vec![Vec::new(); groups.len()];
        for (t, g) in member_of.iter().enumerate() {
            if let Some(g) = *g {
                let Some(list) = joined.get_mut(g as usize) else {
                    return config(format!(
                        "qemu throttle: tenant {t} is in group {g}, but there are only {} groups",
                        groups.len()
                    ));
                };
                list.push(t as u32);
            }
        }
        let mut placed = vec![None; member_of.len()];
        let groups = groups
            .into_iter()
            .zip(joined)
            .enumerate()
            .map(|(g, (cfg, tenants))| {
                // Each newcomer goes to the head of QEMU's list: the list is the tenants
                // newest first, and the first to join (the last place) holds the tokens.
                let members: Vec<Member> = tenants
                    .iter()
                    .rev()
                    .map(|&tenant| Member { tenant, queue: [VecDeque::new(), VecDeque::new()] })
                    .collect();
                for (pos, m) in members.iter().enumerate() {
                    placed[m.tenant as usize] = Some((g as u32, pos as u32));
                }
                let first = members.len().saturating_sub(1);
                Group { ts: ThrottleState::new(cfg, 0), members, token: [first; 2], armed: [None; 2] }
            })
            .collect();
        Ok(QemuThrottle {
            groups,
            member_of: placed,
            timers: BinaryHeap::new(),
            seq: 0,
            released: VecDeque::new(),
            held: 0,
        })
    }

    /// The number of groups.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Group `g`'s throttle state (limits and levels).
    pub fn state(&self, g: usize) -> &ThrottleState {
        &self.groups[g].ts
    }

    /// The tenants of group `g` in QEMU's list order (the order the turns go round).
    pub fn members(&self, g: usize) -> Vec<u32> {
        self.groups[g].members.iter().map(|m| m.tenant).collect()
    }

    fn arm(&mut self, at: Nanos, g: usize, d: usize, member: usize) {
        let grp = &mut self.groups[g];
        grp.armed[d] = Some(member);
        grp.token[d] = member;
        self.seq += 1;
        self.timers.push(Reverse((at, self.seq, g as u32, d as u8)));
    }

    /// Whether `token`'s request must wait; arms a timer on it if it must and none is
    /// armed (`throttle_group_schedule_timer`).
    fn must_wait(&mut self, g: usize, d: usize, token: usize, now: Nanos) -> bool {
        if self.groups[g].armed[d].is_some() {
            return true;
        }
        match self.groups[g].ts.compute_timer(op_of(d), now) {
            Some(at) => {
                self.arm(at, g, d, token);
                true
            }
            None => false,
        }
    }

    /// `req` passes: charge it and send it on.
    fn release(&mut self, g: usize, req: Request) {
        self.groups[g].ts.account(req.op, u64::from(req.bytes));
        self.released.push_back(req);
    }

    /// After member `m`'s request passed, or its timer found its queue empty: choose
    /// and start the next request (`schedule_next_request`).
    fn schedule_next(&mut self, g: usize, d: usize, m: usize, now: Nanos) {
        loop {
            let token = self.groups[g].next_token(d, m);
            if !self.groups[g].pending(token, d) || self.must_wait(g, d, token, now) {
                return;
            }
            // No wait: `m`'s own next request goes first, at once.
            let grp = &mut self.groups[g];
            if let Some(next) = grp.members[m].queue[d].pop_front() {
                grp.token[d] = m;
                self.held -= 1;
                self.release(g, next);
                continue;
            }
            self.arm(now, g, d, token);
            return;
        }
    }

    /// A request arrives (`throttle_group_co_io_limits_intercept`).
    fn intercept(&mut self, req: Request, now: Nanos) {
        let Some(&Some((g, m))) = self.member_of.get(req.tenant as usize) else {
            self.released.push_back(req);
            return;
        };
        let (g, m, d) = (g as usize, m as usize, req.op as usize);
        let token = self.groups[g].next_token(d, m);
        if self.must_wait(g, d, token, now) || self.groups[g].pending(m, d) {
            self.groups[g].members[m].queue[d].push_back(req);
            self.held += 1;
            return;
        }
        self.release(g, req);
        self.schedule_next(g, d, m, now);
    }

    /// Fire every timer due by `now`, each at its own time, in the order armed.
    fn fire_due(&mut self, now: Nanos) {
        while let Some(&Reverse((at, _, g, d))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let (g, d) = (g as usize, d as usize);
            let Some(member) = self.groups[g].armed[d].take() else { continue };
            // The request this timer was armed for passes without a new check.
            if let Some(req) = self.groups[g].members[member].queue[d].pop_front() {
                self.held -= 1;
                self.release(g, req);
            }
            self.schedule_next(g, d, member, at);
        }
    }
}

impl Scheduler for QemuThrottle {
    fn name(&self) -> String {
        NAME.into()
    }

    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.fire_due(now);
        self.intercept(req, now);
    }

    fn dispatch(&mut self, now: Nanos, _dev: &DeviceState) -> Option<Request> {
        self.fire_due(now);
        self.released.pop_front()
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.timers.peek().map(|Reverse((at, _, _, _))| *at)
    }

    fn on_timer(&mut self, now: Nanos) {
        self.fire_due(now);
    }

    fn queued(&self) -> usize {
        self.held + self.released.len()
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("held", self.held as f64);
        sink("armed_timers", self.timers.len() as f64);
    }
}

/// The simulator's spec of QEMU throttling: per throttle state (tenant `i`, or group `i`
/// when `groups` is given) QEMU's limits; `None` / missing / 0 = not set. See the
/// module's table for the QEMU option of each field.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QemuThrottleSpec {
    /// `iops-total`, IOPS.
    #[serde(default)]
    pub iops: Vec<Option<f64>>,
    /// `iops-read`, IOPS.
    #[serde(default)]
    pub read_iops: Vec<Option<f64>>,
    /// `iops-write`, IOPS.
    #[serde(default)]
    pub write_iops: Vec<Option<f64>>,
    /// `bps-total`, bytes/s.
    #[serde(default)]
    pub bps: Vec<Option<f64>>,
    /// `bps-read`, bytes/s.
    #[serde(default)]
    pub read_bps: Vec<Option<f64>>,
    /// `bps-write`, bytes/s.
    #[serde(default)]
    pub write_bps: Vec<Option<f64>>,
    /// `iops-total-max`, IOPS.
    #[serde(default)]
    pub iops_burst: Vec<Option<f64>>,
    /// `iops-read-max`, IOPS.
    #[serde(default)]
    pub read_iops_burst: Vec<Option<f64>>,
    /// `iops-write-max`, IOPS.
    #[serde(default)]
    pub write_iops_burst: Vec<Option<f64>>,
    /// `bps-total-max`, bytes/s.
    #[serde(default)]
    pub bps_burst: Vec<Option<f64>>,
    /// `bps-read-max`, bytes/s.
    #[serde(default)]
    pub read_bps_burst: Vec<Option<f64>>,
    /// `bps-write-max`, bytes/s.
    #[serde(default)]
    pub write_bps_burst: Vec<Option<f64>>,
    /// `*-max-length`, whole seconds, for every bucket of the state that has a burst
    /// rate (default 1).
    #[serde(default)]
    pub burst_seconds: Vec<Option<u64>>,
    /// `iops-size`, bytes.
    #[serde(default)]
    pub iops_size: Vec<Option<u64>>,
    /// Tenant `i`'s group (numbered from 0); empty: every tenant its own group. A tenant
    /// beyond the list is in no group (unthrottled).
    #[serde(default)]
    pub groups: Vec<u32>,
}

impl QemuThrottleSpec {
    /// Entry `i` of every vector as QEMU's configuration, checked as QEMU checks it.
    fn config(&self, i: usize, who: &str) -> Result<ThrottleConfig> {
        let at = |v: &[Option<f64>]| v.get(i).copied().flatten().unwrap_or(0.0);
        let avg = [&self.bps, &self.read_bps, &self.write_bps, &self.iops, &self.read_iops, &self.write_iops];
        let max = [
            &self.bps_burst,
            &self.read_bps_burst,
            &self.write_bps_burst,
            &self.iops_burst,
            &self.read_iops_burst,
            &self.write_iops_burst,
        ];
        let mut cfg =
            ThrottleConfig { op_size: self.iops_size.get(i).copied().flatten().unwrap_or(0), ..Default::default() };
        for (b, bucket) in cfg.buckets.iter_mut().enumerate() {
            *bucket = LeakyBucket::new(at(avg[b]), at(max[b]));
        }
        if let Some(len) = self.burst_seconds.get(i).copied().flatten() {
            let fail = |what: String, rule: &str| config(format!("qemu throttle: {who}: {what} (QEMU: {rule})"));
            if len == 0 {
                return fail("burst_seconds (*-max-length) is 0".into(), "the burst length cannot be 0");
            }
            if len > BURST_LENGTH_MAX {
                return fail(
                    format!("burst_seconds (*-max-length) = {len} is too long"),
                    &format!("*-max-length value must be in the range [0, {BURST_LENGTH_MAX}]"),
                );
            }
            if len > 1 && cfg.buckets.iter().all(|b| b.max == 0.0) {
                return fail(
                    format!("burst_seconds (*-max-length) = {len} is set without any *_burst (*-max)"),
                    "burst length set without burst rate",
                );
            }
            for b in cfg.buckets.iter_mut().filter(|b| b.max != 0.0) {
                b.burst_length = len;
            }
        }
        cfg.check(who)?;
        Ok(cfg)
    }

    /// The scheduler, or the first setting QEMU would refuse (naming the tenant, or the
    /// group when `groups` is given).
    pub fn build(&self) -> Result<QemuThrottle> {
        let lens = [
            self.iops.len(),
            self.read_iops.len(),
            self.write_iops.len(),
            self.bps.len(),
            self.read_bps.len(),
            self.write_bps.len(),
            self.iops_burst.len(),
            self.read_iops_burst.len(),
            self.write_iops_burst.len(),
            self.bps_burst.len(),
            self.read_bps_burst.len(),
            self.write_bps_burst.len(),
            self.burst_seconds.len(),
            self.iops_size.len(),
        ];
        let mut states = lens.into_iter().max().unwrap_or(0);
        if let Some(&g) = self.groups.iter().find(|&&g| g >= MAX_TENANTS) {
            return config(format!(
                "qemu throttle: group {g} is out of range (groups are numbered below {MAX_TENANTS})"
            ));
        }
        if let Some(&top) = self.groups.iter().max() {
            states = states.max(top as usize + 1);
        }
        if states > MAX_TENANTS as usize {
            return config(format!("qemu throttle: {states} throttle states listed, at most {MAX_TENANTS}"));
        }
        let by_group = !self.groups.is_empty();
        let configs = (0..states)
            .map(|i| self.config(i, &if by_group { format!("group {i}") } else { format!("tenant {i}") }))
            .collect::<Result<Vec<_>>>()?;
        let member_of: Vec<Option<u32>> = if by_group {
            self.groups.iter().map(|&g| Some(g)).collect()
        } else {
            (0..states as u32).map(Some).collect()
        };
        QemuThrottle::new(configs, &member_of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS as MS;

    const SEC: Nanos = NS_PER_SEC;

    /// Run every timer up to `until`, collecting (time, request) as they pass.
    fn drive(s: &mut QemuThrottle, until: Nanos) -> Vec<(Nanos, Request)> {
        let dev = DeviceState { outstanding: 0, free_slots: 1 };
        let mut out = Vec::new();
        let mut now = 0;
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

    /// `n` requests of `tenant`, direction `op`, `bytes` each, arriving at `at`.
    fn send(s: &mut QemuThrottle, tenant: u32, op: Op, n: u64, bytes: u32, at: Nanos) {
        for i in 0..n {
            let mut r = Request::new(u64::from(tenant) * 1_000_000 + op as u64 * 100_000 + i, tenant, at, bytes);
            r.op = op;
            s.enqueue(r, at);
        }
    }

    fn times(out: &[(Nanos, Request)], keep: impl Fn(&Request) -> bool) -> Vec<Nanos> {
        out.iter().filter(|(_, r)| keep(r)).map(|&(t, _)| t).collect()
    }

    fn in_window(ts: &[Nanos], from: Nanos, to: Nanos) -> usize {
        ts.iter().filter(|&&t| t >= from && t < to).count()
    }

    fn spec_iops(iops: &[f64]) -> QemuThrottleSpec {
        QemuThrottleSpec { iops: iops.iter().map(|&v| Some(v)).collect(), ..Default::default() }
    }

    #[test]
    fn iops_alone_passes_eleven_at_once_then_one_every_10ms() {
        // iops-total=100: bucket of 100 / 10 = 10; passes while the level is at most 10
        // (levels 0..=10: 11 requests), then each waits for 1 unit to leak: 10 ms.
        let mut s = spec_iops(&[100.0]).build().unwrap();
        send(&mut s, 0, Op::Read, 1000, 4096, 0);
        let got = times(&drive(&mut s, 60 * SEC), |_| true);
        let want: Vec<Nanos> = (0..1000).map(|k| if k <= 10 { 0 } else { (k - 10) * 10 * MS }).collect();
        assert_eq!(got, want);
        // Steady state: exactly 100 IOPS.
        assert_eq!(in_window(&got, SEC, 9 * SEC), 800);
        assert_eq!(s.queued(), 0);
    }

    #[test]
    fn a_burst_rate_lasts_until_max_times_length_is_full() {
        // iops=100, max=200, max-length=5: bucket 200·5 = 1000, burst bucket 200 / 10 =
        // 20. At t = 0: 21 pass (burst levels 0..=20), then the burst bucket spaces them
        // 5 ms apart (200 IOPS) while the level grows by 1 − 0.5 a step: after the n-th
        // timed pass it is 21 + n/2, first above 1000 + 0.5 at n = 1960 (t = 9.8 s), from
        // where it is 10 ms (100 IOPS). The burst lasts 1000 / (200 − 100) ≈ 10 s, not 5.
        let spec = QemuThrottleSpec {
            iops: vec![Some(100.0)],
            iops_burst: vec![Some(200.0)],
            burst_seconds: vec![Some(5)],
            ..Default::default()
        };
        let mut s = spec.build().unwrap();
        send(&mut s, 0, Op::Read, 3000, 4096, 0);
        let got = times(&drive(&mut s, 15 * SEC), |_| true);
        let want: Vec<Nanos> = (0..=2500)
            .map(|k| match k {
                0..=20 => 0,
                21..=1980 => (k - 20) * 5 * MS,
                _ => 9800 * MS + (k - 1980) * 10 * MS,
            })
            .collect();
        assert_eq!(got, want);
        assert_eq!(in_window(&got, SEC, 2 * SEC), 200);
        assert_eq!(in_window(&got, 11 * SEC, 12 * SEC), 100);
    }

    #[test]
    fn bps_limit_with_64k_requests() {
        // bps-total = 10 × 64 KiB/s: bucket 65536 bytes, so two pass at once (levels 0 and
        // 65536), then each waits for 64 KiB to leak: 100 ms.
        let spec = QemuThrottleSpec { bps: vec![Some(655_360.0)], ..Default::default() };
        let mut s = spec.build().unwrap();
        send(&mut s, 0, Op::Write, 100, 65_536, 0);
        let got = times(&drive(&mut s, 60 * SEC), |_| true);
        let want: Vec<Nanos> = (0..100).map(|k| if k <= 1 { 0 } else { (k - 1) * 100 * MS }).collect();
        assert_eq!(got, want);
        assert_eq!(in_window(&got, SEC, 5 * SEC) as u64 * 65_536 / 4, 655_360);
    }

    #[test]
    fn iops_size_counts_a_large_request_as_several() {
        // iops=100, iops-size=4 KiB, 16 KiB requests: 4 units each. Levels 0, 4, 8 pass
        // (3 at once, level 12); the 4th waits for 2 units (20 ms), then 4 units (40 ms).
        let spec = QemuThrottleSpec { iops: vec![Some(100.0)], iops_size: vec![Some(4096)], ..Default::default() };
        let mut s = spec.build().unwrap();
        send(&mut s, 0, Op::Read, 20, 16_384, 0);
        let got = times(&drive(&mut s, 60 * SEC), |_| true);
        let want: Vec<Nanos> = (0..20).map(|k| if k < 3 { 0 } else { 20 * MS + (k - 3) * 40 * MS }).collect();
        assert_eq!(got, want);
        // A request smaller than iops-size still counts 1 (not a fraction).
        let mut s = spec.build().unwrap();
        send(&mut s, 0, Op::Read, 20, 2048, 0);
        let got = times(&drive(&mut s, 60 * SEC), |_| true);
        let want: Vec<Nanos> = (0..20).map(|k| if k <= 10 { 0 } else { (k - 10) * 10 * MS }).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn reads_and_writes_limited_separately() {
        // iops-read=100 (bucket 10: 11 at once, then 10 ms), iops-write=50 (bucket 5: 6 at
        // once, then 1 unit at 50/s = 20 ms); each direction has its own timer.
        let spec =
            QemuThrottleSpec { read_iops: vec![Some(100.0)], write_iops: vec![Some(50.0)], ..Default::default() };
        let mut s = spec.build().unwrap();
        send(&mut s, 0, Op::Read, 100, 4096, 0);
        send(&mut s, 0, Op::Write, 100, 4096, 0);
        let out = drive(&mut s, 60 * SEC);
        let reads = times(&out, |r| r.op == Op::Read);
        let writes = times(&out, |r| r.op == Op::Write);
        assert_eq!(reads, (0..100).map(|k| if k <= 10 { 0 } else { (k - 10) * 10 * MS }).collect::<Vec<_>>());
        assert_eq!(writes, (0..100).map(|k| if k <= 5 { 0 } else { (k - 5) * 20 * MS }).collect::<Vec<_>>());
    }

    #[test]
    fn reads_and_writes_share_a_total_limit_one_unit_over_each() {
        // iops-total=100 and both directions backlogged. 11 reads pass at 0 (level 11);
        // the next read arms the read timer for 10 ms, the first write the write timer for
        // 10 ms too. At 10 ms the read passes (level 12, leaked to 11: next read 10 ms
        // later), then the write, unchecked (level 12: next write 20 ms later, at 30 ms).
        // From then each direction passes every 20 ms, 10 ms apart, the level at 12: 100
        // IOPS together, 50 each.
        let mut s = spec_iops(&[100.0]).build().unwrap();
        send(&mut s, 0, Op::Read, 1000, 4096, 0);
        send(&mut s, 0, Op::Write, 1000, 4096, 0);
        let out = drive(&mut s, 10 * SEC);
        let reads = times(&out, |r| r.op == Op::Read);
        let writes = times(&out, |r| r.op == Op::Write);
        let want_reads = (0..reads.len() as u64).map(|k| match k {
            0..=10 => 0,
            11 => 10 * MS,
            _ => 20 * MS + (k - 12) * 20 * MS,
        });
        assert_eq!(reads, want_reads.collect::<Vec<_>>());
        assert_eq!(writes, (0..writes.len() as u64).map(|k| 10 * MS + k * 20 * MS).collect::<Vec<_>>());
        assert_eq!(in_window(&reads, SEC, 9 * SEC), 400);
        assert_eq!(in_window(&writes, SEC, 9 * SEC), 400);
        assert!((s.state(0).config().bucket(BucketType::OpsTotal).level - 12.0).abs() < 1e-9);
    }

    #[test]
    fn a_group_of_two_backlogged_drives_alternate_at_half_each() {
        // Tenant 0 sends first: 11 of its requests pass at 0 and its next one arms the
        // group's timer (tenant 0 holds the token); tenant 1's requests wait behind it.
        // Then one request every 10 ms, the turn going to the other member each time.
        let spec = QemuThrottleSpec { iops: vec![Some(100.0)], groups: vec![0, 0], ..Default::default() };
        let mut s = spec.build().unwrap();
        send(&mut s, 0, Op::Read, 1000, 4096, 0);
        send(&mut s, 1, Op::Read, 1000, 4096, 0);
        let out = drive(&mut s, 9 * SEC);
        assert!(out[..11].iter().all(|&(t, r)| t == 0 && r.tenant == 0));
        for (j, &(t, r)) in out[11..].iter().enumerate() {
            let j = j as u64 + 1;
            assert_eq!((t, r.tenant), (j * 10 * MS, if j % 2 == 1 { 0 } else { 1 }), "pass {j}");
        }
        let per = |tenant| times(&out, |r| r.tenant == tenant);
        assert_eq!(in_window(&per(0), SEC, 9 * SEC), 400);
        assert_eq!(in_window(&per(1), SEC, 9 * SEC), 400);
    }

    #[test]
    fn turns_go_round_the_list_newest_member_first() {
        // QEMU puts each joining drive at the head of the group's list: members 0, 1, 2
        // make the list 2, 1, 0, and the turn after 0 wraps to 2, then 1, then 0.
        let spec = QemuThrottleSpec { iops: vec![Some(100.0)], groups: vec![0, 0, 0], ..Default::default() };
        let mut s = spec.build().unwrap();
        assert_eq!(s.members(0), vec![2, 1, 0]);
        for tenant in 0..3 {
            send(&mut s, tenant, Op::Read, 100, 4096, 0);
        }
        let out = drive(&mut s, 2 * SEC);
        let order: Vec<u32> = out[11..].iter().take(9).map(|&(_, r)| r.tenant).collect();
        assert_eq!(order, vec![0, 2, 1, 0, 2, 1, 0, 2, 1]);
    }

    #[test]
    fn a_lone_active_member_gets_the_whole_limit() {
        let spec = QemuThrottleSpec { iops: vec![Some(100.0)], groups: vec![0, 0], ..Default::default() };
        let mut s = spec.build().unwrap();
        send(&mut s, 1, Op::Read, 1000, 4096, 0);
        let got = times(&drive(&mut s, 60 * SEC), |_| true);
        assert_eq!(got, (0..1000).map(|k| if k <= 10 { 0 } else { (k - 10) * 10 * MS }).collect::<Vec<_>>());
    }

    #[test]
    fn separate_groups_do_not_share_and_unlisted_tenants_are_unthrottled() {
        // Without groups each tenant has its own 100 IOPS; tenant 2 is beyond the vector.
        let mut s = spec_iops(&[100.0, 100.0]).build().unwrap();
        for tenant in 0..3 {
            send(&mut s, tenant, Op::Read, 1000, 4096, 0);
        }
        let out = drive(&mut s, 9 * SEC);
        assert_eq!(in_window(&times(&out, |r| r.tenant == 0), SEC, 9 * SEC), 800);
        assert_eq!(in_window(&times(&out, |r| r.tenant == 1), SEC, 9 * SEC), 800);
        assert!(times(&out, |r| r.tenant == 2).iter().all(|&t| t == 0));
        assert_eq!(times(&out, |r| r.tenant == 2).len(), 1000);
        // With groups a tenant beyond the list is in no group.
        let spec = QemuThrottleSpec { iops: vec![Some(100.0)], groups: vec![0], ..Default::default() };
        let mut s = spec.build().unwrap();
        send(&mut s, 1, Op::Read, 50, 4096, 0);
        assert!(drive(&mut s, SEC).iter().all(|&(t, _)| t == 0));
    }

    #[test]
    fn a_late_arrival_on_an_idle_group_passes_at_once() {
        // After the backlog drains the bucket empties (clamped at 0): a request 5 s later
        // passes at its arrival.
        let mut s = spec_iops(&[100.0]).build().unwrap();
        send(&mut s, 0, Op::Read, 20, 4096, 0);
        assert_eq!(drive(&mut s, SEC).len(), 20);
        send(&mut s, 0, Op::Read, 11, 4096, 5 * SEC);
        let dev = DeviceState { outstanding: 0, free_slots: 1 };
        let mut n = 0;
        while s.dispatch(5 * SEC, &dev).is_some() {
            n += 1;
        }
        assert_eq!(n, 11);
    }

    #[test]
    fn with_room_left_the_current_drive_goes_first_and_a_timer_for_now_wakes_the_next() {
        // bps-total = 2e9 (bucket 2e8 bytes) shared by tenants 0 and 1. Tenant 0's first
        // request of 2.2e9 bytes passes at 0 and leaves the level 2e9 above the bucket:
        // its next waits exactly 1 s. At 1 s that one passes unchecked (level 2e8 + 1
        // after the leak), and the next check finds 1 byte over, 0.5 ns, truncated to no
        // wait: tenant 0's own next request goes at once although the turn is tenant 1's.
        // Then 2 bytes over (1 ns): tenant 1's timer for 1 s + 1 ns. There 1 byte over
        // again, no wait, and tenant 1 has nothing queued: tenant 0's timer is armed for
        // that same nanosecond; its last request then waits 1 ns more.
        let spec = QemuThrottleSpec { bps: vec![Some(2e9)], groups: vec![0, 0], ..Default::default() };
        let mut s = spec.build().unwrap();
        s.enqueue(Request::new(0, 0, 0, 2_200_000_000), 0);
        for id in 1..=4 {
            s.enqueue(Request::new(id, 0, 0, 1), 0);
        }
        s.enqueue(Request::new(10, 1, 0, 1), 0);
        let got: Vec<(Nanos, u64)> = drive(&mut s, 10 * SEC).iter().map(|&(t, r)| (t, r.id)).collect();
        assert_eq!(got, vec![(0, 0), (SEC, 1), (SEC, 2), (SEC + 1, 10), (SEC + 1, 3), (SEC + 2, 4)]);
    }

    fn err(spec: QemuThrottleSpec) -> String {
        match spec.build() {
            Ok(_) => panic!("accepted {spec:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn refuses_what_throttle_is_valid_refuses() {
        let base = QemuThrottleSpec::default;
        let m = err(QemuThrottleSpec { iops_burst: vec![Some(200.0)], ..base() });
        assert!(m.contains("tenant 0: iops-total-max requires iops-total"), "{m}");
        assert!(m.contains("(QEMU: bps_max/iops_max require corresponding bps/iops values)"), "{m}");
        let m = err(QemuThrottleSpec { iops: vec![Some(100.0)], read_iops: vec![Some(50.0)], ..base() });
        assert!(m.contains("iops-total is set with iops-read or iops-write"), "{m}");
        assert!(m.contains("cannot be used at the same time"), "{m}");
        let m = err(QemuThrottleSpec {
            bps: vec![Some(1e6)],
            bps_burst: vec![Some(2e6)],
            write_bps: vec![None],
            write_bps_burst: vec![Some(3e6)],
            ..base()
        });
        assert!(m.contains("bps-total-max is set with"), "{m}");
        let m = err(QemuThrottleSpec { iops: vec![Some(100.0)], iops_burst: vec![Some(50.0)], ..base() });
        assert!(m.contains("iops-total-max = 50 is below iops-total = 100"), "{m}");
        assert!(m.contains("cannot be lower than bps/iops"), "{m}");
        let m = err(QemuThrottleSpec { iops: vec![Some(100.0)], burst_seconds: vec![Some(5)], ..base() });
        assert!(m.contains("burst length set without burst rate"), "{m}");
        let m = err(QemuThrottleSpec { iops: vec![Some(100.0)], burst_seconds: vec![Some(0)], ..base() });
        assert!(m.contains("the burst length cannot be 0"), "{m}");
        let m = err(QemuThrottleSpec { bps: vec![Some(1e6)], iops_size: vec![Some(4096)], ..base() });
        assert!(m.contains("iops size requires an iops value to be set"), "{m}");
        let m = err(QemuThrottleSpec { bps: vec![None, Some(2e15)], ..base() });
        assert!(m.contains("tenant 1: bps-total = 2000000000000000 is above"), "{m}");
        assert!(m.contains("must be within [0, 1000000000000000]"), "{m}");
        let m = err(QemuThrottleSpec { read_bps: vec![Some(-1.0)], ..base() });
        assert!(m.contains("bps-read = -1") && m.contains("cannot be negative"), "{m}");
        let m = err(QemuThrottleSpec { iops: vec![Some(f64::NAN)], ..base() });
        assert!(m.contains("iops-total = NaN"), "{m}");
        let m = err(QemuThrottleSpec {
            iops: vec![Some(1e12)],
            iops_burst: vec![Some(1e13)],
            burst_seconds: vec![Some(101)],
            ..base()
        });
        assert!(m.contains("burst length too high for this burst rate"), "{m}");
        let m = err(QemuThrottleSpec { iops: vec![Some(100.0)], burst_seconds: vec![Some(1 << 33)], ..base() });
        assert!(m.contains("must be in the range [0, 4294967295]"), "{m}");
        // With groups the message names the group.
        let m = err(QemuThrottleSpec { iops_burst: vec![None, Some(10.0)], groups: vec![1, 1], ..base() });
        assert!(m.contains("group 1: iops-total-max requires iops-total"), "{m}");
        let m = err(QemuThrottleSpec { groups: vec![MAX_TENANTS], ..base() });
        assert!(m.contains("out of range"), "{m}");
    }

    #[test]
    fn accepts_what_qemu_accepts() {
        let ok = |spec: QemuThrottleSpec| spec.build().map(|s| s.group_count()).unwrap();
        assert_eq!(ok(QemuThrottleSpec::default()), 0);
        // Total IOPS beside read/write bandwidth (different kinds), bursts, iops-size.
        let spec = QemuThrottleSpec {
            iops: vec![Some(100.0), None],
            iops_burst: vec![Some(200.0), None],
            burst_seconds: vec![Some(5), Some(1)],
            read_bps: vec![Some(1e6), Some(2e6)],
            write_bps: vec![None, Some(1e6)],
            iops_size: vec![Some(4096)],
            ..Default::default()
        };
        assert_eq!(ok(spec.clone()), 2);
        let s = spec.build().unwrap();
        let cfg = s.state(0).config();
        // The burst length goes to the buckets with a burst rate only.
        assert_eq!(cfg.bucket(BucketType::OpsTotal).burst_length, 5);
        assert_eq!(cfg.bucket(BucketType::BpsRead).burst_length, 1);
        assert_eq!(cfg.op_size, 4096);
        // A group listed by no tenant still exists (and is checked).
        assert_eq!(ok(QemuThrottleSpec { iops: vec![Some(1.0), Some(2.0)], groups: vec![1], ..Default::default() }), 2);
    }

    #[test]
    fn spec_deserializes_and_refuses_unknown_fields() {
        let spec: QemuThrottleSpec =
            serde_json::from_str(r#"{"iops":[100,null],"burst_seconds":[2],"iops_burst":[300],"groups":[0,0,1]}"#)
                .unwrap();
        assert_eq!(spec.iops, vec![Some(100.0), None]);
        assert_eq!(spec.groups, vec![0, 0, 1]);
        let s = spec.build().unwrap();
        assert_eq!((s.group_count(), s.members(0), s.members(1)), (2, vec![1, 0], vec![2]));
        assert!(serde_json::from_str::<QemuThrottleSpec>(r#"{"iops_max":[1]}"#).is_err());
    }

    #[test]
    fn leaky_bucket_wait_follows_throttle_compute_wait() {
        // No max: size avg / 10.
        let mut b = LeakyBucket::new(100.0, 0.0);
        b.level = 10.0;
        assert_eq!(b.wait(), 0);
        b.level = 10.5;
        assert_eq!(b.wait(), 5 * MS);
        // With max: size max · length, the burst bucket max / 10 at the max rate.
        let mut b = LeakyBucket { burst_length: 2, ..LeakyBucket::new(100.0, 400.0) };
        b.level = 800.0;
        b.burst_level = 41.0;
        assert_eq!(b.wait(), 2_500_000);
        b.level = 801.0;
        assert_eq!(b.wait(), 10 * MS);
        // The leak: avg from the level, max from the burst level, never below 0.
        b.leak(100 * MS);
        assert_eq!((b.level, b.burst_level), (791.0, 1.0));
        b.leak(SEC);
        assert_eq!((b.level, b.burst_level), (691.0, 0.0));
        // No avg: never waits.
        let b = LeakyBucket { level: 1e9, ..LeakyBucket::default() };
        assert_eq!(b.wait(), 0);
    }
}
