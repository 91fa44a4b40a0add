//! SPDK's bdev QoS (`bdev_set_qos_limit`: `rw_ios_per_sec`, `rw_mbytes_per_sec`,
//! `r_mbytes_per_sec`, `w_mbytes_per_sec`), as `lib/bdev/bdev.c` of **SPDK v26.05** runs it (the
//! latest release; the QoS code is the same since v24.09). Each bdev is one tenant.
//!
//! ## What is modelled
//! - **Limits** (`spdk_bdev_set_qos_rate_limits`, `bdev_qos_update_max_quota_per_timeslice`):
//!   up to four per bdev, checked in SPDK's order: IOPS of all I/O, bytes/s of all I/O, of
//!   reads, of writes. Byte rates are given in MiB/s (MB means 1024 × 1024 bytes). Each limit
//!   grants `max_per_timeslice` = rate × [`SPDK_BDEV_QOS_TIMESLICE_IN_USEC`] / 10^6 (integer
//!   division, kept in 32 bits, at least [`SPDK_BDEV_QOS_MIN_IO_PER_TIMESLICE`] or
//!   [`SPDK_BDEV_QOS_MIN_BYTE_PER_TIMESLICE`]) per 1 ms timeslice, and starts full. So
//!   1 MiB/s grants 1048 bytes a millisecond: 1.048 MB/s, 0.06 % under 1 MiB/s.
//! - **Admission** (`bdev_qos_rw_queue_io`, `bdev_qos_queue_io`): an I/O passes a limit when the
//!   limit's `remaining_this_timeslice` is above 0, whatever its size, and takes its size (or 1
//!   I/O) from it, so the remaining may go negative: a request larger than what is left goes
//!   while anything is left, and the deficit is carried into the next timeslices. An I/O
//!   stopped by a later limit gives back what the earlier ones took.
//! - **Timeslices** (`bdev_channel_poll_qos`): every 1 ms the poller drops a positive remainder
//!   (idleness banks nothing past one timeslice), keeps a negative one, and adds
//!   `max_per_timeslice`.
//! - **The queue** (`_bdev_io_submit`, `bdev_qos_io_submit`): every I/O joins the tail of the
//!   channel's one queue (`qos_queued_io`), and the whole queue is scanned in order, at each
//!   arrival and after each poll, submitting every I/O that passes. A write held by
//!   `w_mbytes_per_sec` thus lets a later read by, which a FIFO asked only about its head
//!   would not; [`crate::stacks::Throttled`] (lanes asked about their heads, lanes ready
//!   together taken in turn) cannot express this scan, so this model implements [`Scheduler`]
//!   itself. Once a limit every I/O is subject to (IOPS or all-I/O bytes) is spent, or both
//!   directions' limits are, the rest of the scan cannot pass anything, so the model stops
//!   there; and it sleeps through timeslices in which nothing queued could pass, applying
//!   their refills when it wakes, with the same result as polling each.
//!
//! ## Not modelled
//! - Several channels (threads) per bdev: one channel, the QoS one, carries all I/O. I/O types
//!   other than read and write (which QoS does not count), splitting into children before QoS
//!   (a request is one I/O), the retry queue behind a full device (`nomem_io`), limit changes
//!   while running, and a poller running late (it runs exactly every 1 ms from t = 0, when QoS
//!   is enabled).
//! - SPDK rounds an IOPS limit that is not a multiple of 1000 (or a byte limit not a multiple
//!   of 1 MiB/s) up, with an error log; [`SpdkQosSpec::build`] refuses it instead, so that a
//!   configuration means what it says.

use std::collections::{BTreeSet, VecDeque};

use serde::Deserialize;

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::request::{Op, Request, MAX_TENANTS};
use crate::scheduler::Scheduler;
use crate::time::{Nanos, NS_PER_US};

/// Policy name in reports and errors.
const NAME: &str = "spdk-qos";
/// Name in configuration errors.
const SPDK: &str = "spdk";

/// One QoS timeslice in µs (`SPDK_BDEV_QOS_TIMESLICE_IN_USEC`): also the poller's period.
pub const SPDK_BDEV_QOS_TIMESLICE_IN_USEC: u64 = 1000;
/// One timeslice in ns.
pub const TIMESLICE_NS: Nanos = SPDK_BDEV_QOS_TIMESLICE_IN_USEC * NS_PER_US;
/// µs per second (`SPDK_SEC_TO_USEC`).
pub const SPDK_SEC_TO_USEC: u64 = 1_000_000;
/// The least quota of an IOPS limit per timeslice (`SPDK_BDEV_QOS_MIN_IO_PER_TIMESLICE`).
pub const SPDK_BDEV_QOS_MIN_IO_PER_TIMESLICE: u32 = 1;
/// The least quota of a byte limit per timeslice (`SPDK_BDEV_QOS_MIN_BYTE_PER_TIMESLICE`).
pub const SPDK_BDEV_QOS_MIN_BYTE_PER_TIMESLICE: u32 = 512;
/// IOPS limits are multiples of this (`SPDK_BDEV_QOS_MIN_IOS_PER_SEC`).
pub const SPDK_BDEV_QOS_MIN_IOS_PER_SEC: u64 = 1000;
/// Byte limits are multiples of this, 1 MiB/s (`SPDK_BDEV_QOS_MIN_BYTES_PER_SEC`).
pub const SPDK_BDEV_QOS_MIN_BYTES_PER_SEC: u64 = MIB;
/// A limit that is not set (`SPDK_BDEV_QOS_LIMIT_NOT_DEFINED`).
pub const SPDK_BDEV_QOS_LIMIT_NOT_DEFINED: u64 = u64::MAX;
/// The MB of `*_mbytes_per_sec`: 1024 × 1024 bytes.
pub const MIB: u64 = 1024 * 1024;

/// The rate limits in SPDK's order (`enum spdk_bdev_qos_rate_limit_type`).
const RW_IOPS: usize = 0;
const RW_BPS: usize = 1;
const R_BPS: usize = 2;
const W_BPS: usize = 3;
const NUM_LIMITS: usize = 4;

/// One bdev's QoS limits as SPDK holds them: IOPS and bytes/s (`None` = not defined).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BdevQosLimits {
    /// I/Os per second, reads and writes (`rw_ios_per_sec`).
    pub rw_ios_per_sec: Option<u64>,
    /// Bytes per second, reads and writes (`rw_mbytes_per_sec` × 1 MiB).
    pub rw_bytes_per_sec: Option<u64>,
    /// Bytes read per second (`r_mbytes_per_sec` × 1 MiB).
    pub r_bytes_per_sec: Option<u64>,
    /// Bytes written per second (`w_mbytes_per_sec` × 1 MiB).
    pub w_bytes_per_sec: Option<u64>,
}

/// One rate limit (`struct spdk_bdev_qos_limit`).
#[derive(Clone, Copy, Debug, Default)]
struct Quota {
    /// Per timeslice, 0 = not defined (SPDK's `queue_io` is then NULL).
    max_per_timeslice: u32,
    remaining_this_timeslice: i64,
}

/// Whether limit `i` counts an I/O of `op` (`bdev_qos_r_bps_queue` skips writes, ...).
fn applies(i: usize, op: Op) -> bool {
    match i {
        R_BPS => op == Op::Read,
        W_BPS => op == Op::Write,
        _ => true,
    }
}

/// What an I/O takes from limit `i`: 1 I/O or its bytes.
fn delta(i: usize, req: &Request) -> i64 {
    if i == RW_IOPS {
        1
    } else {
        i64::from(req.bytes)
    }
}

/// `remaining` after `n` ≥ 1 polls, each `min(remaining, 0) + max` (`bdev_channel_poll_qos`):
/// a deficit is paid off a timeslice at a time, and once positive the next poll resets to max.
fn refill(remaining: i64, max: u32, n: u64) -> i64 {
    let (r, m, n) = (i128::from(remaining), i128::from(max), i128::from(n));
    if r + (n - 1) * m <= 0 {
        (r + n * m) as i64
    } else {
        i64::from(max)
    }
}

/// Polls until a limit at `remaining` is above 0 again (≥ 1).
fn polls_until_positive(remaining: i64, max: u32) -> u64 {
    if remaining > 0 {
        1
    } else {
        remaining.unsigned_abs() / u64::from(max) + 1
    }
}

/// One bdev: its limits, the timeslices applied, its queue.
#[derive(Clone, Debug)]
struct Bdev {
    quota: [Quota; NUM_LIMITS],
    /// Some limit is defined: QoS is on (`BDEV_CH_QOS_ENABLED`).
    enabled: bool,
    /// The poll of the end of timeslice `polled` (at `polled` ms) has been applied.
    polled: u64,
    /// The one queue, kept as its reads and its writes, each with its place in arrival order.
    queued: [VecDeque<(u64, Request)>; 2],
    /// The timeslice this bdev waits for, if any (its entry in `SpdkQos::timers`).
    armed: Option<u64>,
}

impl Bdev {
    fn new(limits: &BdevQosLimits) -> Self {
        let given = [limits.rw_ios_per_sec, limits.rw_bytes_per_sec, limits.r_bytes_per_sec, limits.w_bytes_per_sec];
        let mut quota = [Quota::default(); NUM_LIMITS];
        for (i, q) in quota.iter_mut().enumerate() {
            // A limit of 0 is not defined, as SPDK takes it.
            let limit = given[i].filter(|&l| l > 0).unwrap_or(SPDK_BDEV_QOS_LIMIT_NOT_DEFINED);
            if limit == SPDK_BDEV_QOS_LIMIT_NOT_DEFINED {
                continue;
            }
            let min =
                if i == RW_IOPS { SPDK_BDEV_QOS_MIN_IO_PER_TIMESLICE } else { SPDK_BDEV_QOS_MIN_BYTE_PER_TIMESLICE };
            let per_slice =
                u128::from(limit) * u128::from(SPDK_BDEV_QOS_TIMESLICE_IN_USEC) / u128::from(SPDK_SEC_TO_USEC);
            q.max_per_timeslice = (per_slice.min(u128::from(u32::MAX)) as u32).max(min);
            q.remaining_this_timeslice = i64::from(q.max_per_timeslice);
        }
        Bdev {
            enabled: quota.iter().any(|q| q.max_per_timeslice > 0),
            quota,
            polled: 0,
            queued: [VecDeque::new(), VecDeque::new()],
            armed: None,
        }
    }

    /// Apply the polls up to `now` (at every whole ms).
    fn catch_up(&mut self, now: Nanos) {
        let slice = now / TIMESLICE_NS;
        if slice > self.polled {
            let n = slice - self.polled;
            for q in &mut self.quota {
                q.remaining_this_timeslice = refill(q.remaining_this_timeslice, q.max_per_timeslice, n);
            }
            self.polled = slice;
        }
    }

    /// The first limit that holds `req` back (`bdev_qos_queue_io`), or `None`.
    fn holding(&self, req: &Request) -> Option<usize> {
        (0..NUM_LIMITS).find(|&i| {
            let q = &self.quota[i];
            q.max_per_timeslice > 0 && applies(i, req.op) && q.remaining_this_timeslice <= 0
        })
    }

    fn charge(&mut self, req: &Request) {
        for (i, q) in self.quota.iter_mut().enumerate() {
            if q.max_per_timeslice > 0 && applies(i, req.op) {
                q.remaining_this_timeslice -= delta(i, req);
            }
        }
    }

    /// Polls from `polled` until some queued I/O could pass, if any is queued.
    fn next_pass(&self) -> Option<u64> {
        let mut next: Option<u64> = None;
        for dir in &self.queued {
            let Some((_, req)) = dir.front() else { continue };
            let mut n = 1;
            for (i, q) in self.quota.iter().enumerate() {
                if q.max_per_timeslice > 0 && applies(i, req.op) {
                    n = n.max(polls_until_positive(q.remaining_this_timeslice, q.max_per_timeslice));
                }
            }
            next = Some(next.map_or(n, |m| m.min(n)));
        }
        next
    }
}

/// SPDK bdev QoS in front of the device: one bdev (with its limits) per tenant.
#[derive(Clone, Debug)]
pub struct SpdkQos {
    bdevs: Vec<Bdev>,
    /// Bdevs waiting for a poll: (timeslice, bdev).
    timers: BTreeSet<(u64, usize)>,
    /// Arrival order across a bdev's reads and writes.
    seq: u64,
    /// Submitted, waiting for a device slot.
    released: VecDeque<Request>,
    /// I/Os held by the limits.
    held: usize,
}

impl SpdkQos {
    /// QoS with `bdevs[i]` the limits of tenant `i` (tenants past the end have none). Limits
    /// are taken as SPDK stores them (bytes/s already × 1 MiB), a quota per timeslice beyond
    /// 32 bits saturating; use [`SpdkQosSpec::build`] to check them as SPDK's RPC would.
    pub fn new(bdevs: &[BdevQosLimits]) -> Self {
        SpdkQos {
            bdevs: bdevs.iter().map(Bdev::new).collect(),
            timers: BTreeSet::new(),
            seq: 0,
            released: VecDeque::new(),
            held: 0,
        }
    }

    /// Bdevs with limits.
    pub fn bdevs(&self) -> usize {
        self.bdevs.len()
    }

    /// The quota of bdev `tenant` per timeslice, in SPDK's order (IOPS, bytes, read bytes,
    /// write bytes; 0 = not defined).
    pub fn max_per_timeslice(&self, tenant: usize) -> Option<[u32; 4]> {
        self.bdevs.get(tenant).map(|b| b.quota.map(|q| q.max_per_timeslice))
    }

    /// `bdev_qos_io_submit`: scan bdev `bi`'s queue in arrival order, submitting what passes.
    fn submit_queued(&mut self, bi: usize) {
        let b = &mut self.bdevs[bi];
        let mut open = [true, true];
        loop {
            let front = |rw: usize| if open[rw] { b.queued[rw].front().map(|&(seq, _)| seq) } else { None };
            let rw = match (front(0), front(1)) {
                (Some(r), Some(w)) => usize::from(w < r),
                (Some(_), None) => 0,
                (None, Some(_)) => 1,
                (None, None) => break,
            };
            let Some(&(_, req)) = b.queued[rw].front() else { break };
            match b.holding(&req) {
                None => {
                    b.charge(&req);
                    b.queued[rw].pop_front();
                    self.released.push_back(req);
                    self.held -= 1;
                }
                // Every I/O is subject to these: nothing further passes.
                Some(RW_IOPS | RW_BPS) => break,
                // Only this direction's I/Os are.
                Some(_) => open[rw] = false,
            }
        }
    }

    /// Wait for the first poll after which something queued on bdev `bi` could pass.
    fn rearm(&mut self, bi: usize) {
        let b = &mut self.bdevs[bi];
        if let Some(t) = b.armed.take() {
            self.timers.remove(&(t, bi));
        }
        if let Some(n) = b.next_pass() {
            let t = b.polled + n;
            b.armed = Some(t);
            self.timers.insert((t, bi));
        }
    }

    /// Run the polls due by `now` of the bdevs waiting for one.
    fn run_due(&mut self, now: Nanos) {
        let slice = now / TIMESLICE_NS;
        while let Some(&(t, bi)) = self.timers.first() {
            if t > slice {
                break;
            }
            self.timers.pop_first();
            self.bdevs[bi].armed = None;
            self.bdevs[bi].catch_up(now);
            self.submit_queued(bi);
            self.rearm(bi);
        }
    }
}

impl Scheduler for SpdkQos {
    fn name(&self) -> String {
        NAME.into()
    }

    /// `_bdev_io_submit` with QoS on: the I/O joins the queue's tail and the queue is scanned.
    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.run_due(now);
        let bi = req.tenant as usize;
        if !self.bdevs.get(bi).is_some_and(|b| b.enabled) {
            self.released.push_back(req);
            return;
        }
        let b = &mut self.bdevs[bi];
        b.catch_up(now);
        // An I/O that finds the queue empty and its limits open passes at once: what the
        // scan below would do, without queueing it (an empty queue has no poll armed).
        if b.queued.iter().all(VecDeque::is_empty) && b.holding(&req).is_none() {
            b.charge(&req);
            self.released.push_back(req);
            return;
        }
        self.seq += 1;
        b.queued[req.op as usize].push_back((self.seq, req));
        self.held += 1;
        self.submit_queued(bi);
        self.rearm(bi);
    }

    fn dispatch(&mut self, now: Nanos, _dev: &DeviceState) -> Option<Request> {
        self.run_due(now);
        self.released.pop_front()
    }

    fn next_timer(&self) -> Option<Nanos> {
        self.timers.first().map(|&(t, _)| t * TIMESLICE_NS)
    }

    fn on_timer(&mut self, now: Nanos) {
        self.run_due(now);
    }

    fn queued(&self) -> usize {
        self.held + self.released.len()
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("held", self.held as f64);
    }
}

/// The SPDK QoS settings the simulator reads: entry `i` of each list is bdev (tenant) `i`,
/// `null` (or a missing entry) is not defined.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SpdkQosSpec {
    /// I/Os per second, reads and writes (`rw_ios_per_sec`).
    #[serde(default)]
    pub iops: Vec<Option<f64>>,
    /// Bytes per second, reads and writes (`rw_mbytes_per_sec` × 1 MiB).
    #[serde(default)]
    pub bps: Vec<Option<f64>>,
    /// Bytes read per second (`r_mbytes_per_sec` × 1 MiB).
    #[serde(default)]
    pub read_bps: Vec<Option<f64>>,
    /// Bytes written per second (`w_mbytes_per_sec` × 1 MiB).
    #[serde(default)]
    pub write_bps: Vec<Option<f64>>,
}

impl SpdkQosSpec {
    /// The model, refusing limits SPDK would not take as given.
    pub fn build(&self) -> Result<SpdkQos> {
        let lists = [&self.iops, &self.bps, &self.read_bps, &self.write_bps];
        let n = lists.iter().map(|l| l.len()).max().unwrap_or(0);
        if n > MAX_TENANTS as usize {
            return config(format!("{SPDK}: limits for {n} bdevs; tenants are fewer than {MAX_TENANTS}"));
        }
        let mut bdevs = vec![BdevQosLimits::default(); n];
        for (i, b) in bdevs.iter_mut().enumerate() {
            let at = |l: &Vec<Option<f64>>| l.get(i).copied().flatten();
            b.rw_ios_per_sec = iops_limit(i, at(&self.iops))?;
            b.rw_bytes_per_sec = bytes_limit("rw_mbytes_per_sec", i, at(&self.bps))?;
            b.r_bytes_per_sec = bytes_limit("r_mbytes_per_sec", i, at(&self.read_bps))?;
            b.w_bytes_per_sec = bytes_limit("w_mbytes_per_sec", i, at(&self.write_bps))?;
        }
        Ok(SpdkQos::new(&bdevs))
    }
}

/// The largest rate whose quota per timeslice (rate / 1000) fits SPDK's 32 bits.
const MAX_RATE: f64 = u32::MAX as f64 * (SPDK_SEC_TO_USEC / SPDK_BDEV_QOS_TIMESLICE_IN_USEC) as f64;

/// `rw_ios_per_sec`: a whole multiple of 1000, at least 1000.
fn iops_limit(tenant: usize, v: Option<f64>) -> Result<Option<u64>> {
    let Some(v) = v else { return Ok(None) };
    let step = SPDK_BDEV_QOS_MIN_IOS_PER_SEC as f64;
    if !(v.is_finite() && v >= step && (v / step).fract() == 0.0) {
        return config(format!(
            "{SPDK}: rw_ios_per_sec of tenant {tenant} is {v}; SPDK takes multiples of {} \
             (SPDK_BDEV_QOS_MIN_IOS_PER_SEC)",
            SPDK_BDEV_QOS_MIN_IOS_PER_SEC
        ));
    }
    if v > MAX_RATE {
        return config(format!(
            "{SPDK}: rw_ios_per_sec of tenant {tenant} is {v}; SPDK keeps the quota per 1 ms timeslice in 32 bits, \
             so at most {MAX_RATE}"
        ));
    }
    Ok(Some(v as u64))
}

/// `*_mbytes_per_sec` in bytes/s: a whole number of MiB/s, at least 1.
fn bytes_limit(key: &str, tenant: usize, v: Option<f64>) -> Result<Option<u64>> {
    let Some(v) = v else { return Ok(None) };
    let mib = v / MIB as f64;
    if !(v.is_finite() && mib >= 1.0 && mib.fract() == 0.0) {
        return config(format!(
            "{SPDK}: {key} of tenant {tenant} is {mib} MiB/s ({v} bytes/s); SPDK takes whole MiB/s, at least 1 \
             (SPDK_BDEV_QOS_MIN_BYTES_PER_SEC)"
        ));
    }
    if v > MAX_RATE {
        return config(format!(
            "{SPDK}: {key} of tenant {tenant} is {mib} MiB/s; SPDK keeps the quota per 1 ms timeslice in 32 bits, \
             so at most {} MiB/s",
            (MAX_RATE / MIB as f64).floor()
        ));
    }
    Ok(Some(v as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS as MS;

    const KIB: u32 = 1024;
    const MIB_F: f64 = MIB as f64;

    fn read(id: u64, tenant: u32, bytes: u32) -> Request {
        Request::new(id, tenant, 0, bytes)
    }

    fn write(id: u64, tenant: u32, bytes: u32) -> Request {
        Request { op: Op::Write, ..Request::new(id, tenant, 0, bytes) }
    }

    /// Dispatch at `start`, then at each timer up to `until`: (time, request) in device order.
    fn drive(s: &mut SpdkQos, start: Nanos, until: Nanos) -> Vec<(Nanos, Request)> {
        let dev = DeviceState { outstanding: 0, free_slots: 1 };
        let mut out = Vec::new();
        let mut now = start;
        loop {
            while let Some(r) = s.dispatch(now, &dev) {
                out.push((now, r));
            }
            match s.next_timer() {
                Some(t) if t <= until => {
                    now = t;
                    s.on_timer(now);
                }
                _ => return out,
            }
        }
    }

    fn qos(spec: SpdkQosSpec) -> SpdkQos {
        spec.build().unwrap()
    }

    #[test]
    fn a_thousand_iops_is_one_io_per_timeslice() {
        // 1000 × 1000 µs / 10^6 = 1 I/O per 1 ms timeslice, the first at once.
        let mut s = qos(SpdkQosSpec { iops: vec![Some(1000.0)], ..Default::default() });
        for id in 0..20 {
            s.enqueue(read(id, 0, 4 * KIB), 0);
        }
        let got = drive(&mut s, 0, 1_000 * MS);
        let times: Vec<Nanos> = got.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, (0..20).map(|k| k * MS).collect::<Vec<_>>());
        assert!(got.iter().enumerate().all(|(i, (_, r))| r.id == i as u64));
    }

    #[test]
    fn five_thousand_iops_is_a_burst_of_five_at_each_timeslice() {
        let mut s = qos(SpdkQosSpec { iops: vec![Some(5000.0)], ..Default::default() });
        for id in 0..50 {
            s.enqueue(read(id, 0, 4 * KIB), 0);
        }
        let got = drive(&mut s, 0, 1_000 * MS);
        assert_eq!(got.len(), 50);
        for (i, (t, _)) in got.iter().enumerate() {
            assert_eq!(*t, (i as u64 / 5) * MS, "I/O {i}");
        }
    }

    #[test]
    fn one_mib_per_second_with_4k_requests_is_256_iops() {
        // 1 MiB/s grants 1048576 / 1000 = 1048 bytes a timeslice. The n-th 4 KiB read goes in
        // the first timeslice k with 1048 (k + 1) − 4096 n > 0 (it goes while anything is
        // left, the rest is debt): k = ⌊4096 n / 1048⌋. Before 1 s: n < 255.86, 256 reads;
        // before 10 s: 2559, i.e. 255.9 IOPS.
        let mut s = qos(SpdkQosSpec { bps: vec![Some(MIB_F)], ..Default::default() });
        for id in 0..3000 {
            s.enqueue(read(id, 0, 4 * KIB), 0);
        }
        let got = drive(&mut s, 0, 10_000 * MS);
        for (n, (t, _)) in got.iter().enumerate().take(40) {
            assert_eq!(*t, (4096 * n as u64 / 1048) * MS, "read {n}");
        }
        assert_eq!(got.iter().filter(|(t, _)| *t < 1_000 * MS).count(), 256);
        assert_eq!(got.iter().filter(|(t, _)| *t < 10_000 * MS).count(), 2559);
    }

    #[test]
    fn a_request_larger_than_the_quota_goes_and_its_deficit_is_carried() {
        // 128 KiB at 1 MiB/s: the first goes at once (1048 > 0 left), leaving 1048 − 131072 =
        // −130024; it is paid off at 1048 a timeslice and positive again after 125 (976), so
        // the second goes at 125 ms, leaving −130096, and the third 125 timeslices later.
        let mut s = qos(SpdkQosSpec { bps: vec![Some(MIB_F)], ..Default::default() });
        for id in 0..3 {
            s.enqueue(read(id, 0, 128 * KIB), 0);
        }
        let got = drive(&mut s, 0, 10_000 * MS);
        assert_eq!(got.iter().map(|(t, _)| *t).collect::<Vec<_>>(), [0, 125 * MS, 250 * MS]);
    }

    #[test]
    fn an_idle_bdev_banks_one_timeslice_at_most() {
        // After 100 ms idle at 5000 IOPS a burst of 20 gets 5 at once, not 500.
        let mut s = qos(SpdkQosSpec { iops: vec![Some(5000.0)], ..Default::default() });
        for id in 0..20 {
            s.enqueue(read(id, 0, 4 * KIB), 100 * MS);
        }
        let got = drive(&mut s, 100 * MS, 1_000 * MS);
        let times: Vec<Nanos> = got.iter().map(|(t, _)| *t).collect();
        let expect: Vec<Nanos> = (0..20).map(|i| (100 + i / 5) * MS).collect();
        assert_eq!(times, expect);
    }

    #[test]
    fn a_read_passes_a_write_held_by_the_write_limit() {
        // w_mbytes_per_sec = 1: the first 128 KiB write goes and spends the write quota for
        // 125 ms; a read queued behind the second write is not subject to it and goes at
        // once: SPDK scans the whole queue.
        let mut s = qos(SpdkQosSpec { write_bps: vec![Some(MIB_F)], ..Default::default() });
        s.enqueue(write(0, 0, 128 * KIB), 0);
        s.enqueue(write(1, 0, 128 * KIB), 0);
        s.enqueue(read(2, 0, 128 * KIB), 0);
        let got = drive(&mut s, 0, 1_000 * MS);
        assert_eq!(got.iter().map(|(t, r)| (*t, r.id)).collect::<Vec<_>>(), [(0, 0), (0, 2), (125 * MS, 1)]);
    }

    #[test]
    fn an_iops_limit_holds_both_directions_in_arrival_order() {
        // rw_ios_per_sec = 2000: 2 a timeslice across reads and writes, in arrival order.
        let mut s = qos(SpdkQosSpec { iops: vec![Some(2000.0)], ..Default::default() });
        for id in 0..6 {
            let r = if id % 3 == 2 { write(id, 0, 4 * KIB) } else { read(id, 0, 4 * KIB) };
            s.enqueue(r, 0);
        }
        let got = drive(&mut s, 0, 1_000 * MS);
        let ids: Vec<(Nanos, u64)> = got.iter().map(|(t, r)| (*t, r.id)).collect();
        assert_eq!(ids, [(0, 0), (0, 1), (MS, 2), (MS, 3), (2 * MS, 4), (2 * MS, 5)]);
    }

    #[test]
    fn bdevs_are_limited_independently() {
        // 1000 and 3000 IOPS; bdev 2 has no QoS and passes at once.
        let mut s = qos(SpdkQosSpec { iops: vec![Some(1000.0), Some(3000.0)], ..Default::default() });
        for id in 0..3000 {
            s.enqueue(read(id, 0, 4 * KIB), 0);
            s.enqueue(read(10_000 + id, 1, 4 * KIB), 0);
            s.enqueue(read(20_000 + id, 2, 4 * KIB), 0);
        }
        let got = drive(&mut s, 0, 2_000 * MS);
        let before = |tenant: u32, t: Nanos| got.iter().filter(|(at, r)| r.tenant == tenant && *at < t).count();
        // Timeslices 0..999 before 1 s: 1000 and 3000.
        assert_eq!(before(0, 1_000 * MS), 1000);
        assert_eq!(before(1, 1_000 * MS), 3000);
        assert_eq!(before(2, 1), 3000);
    }

    #[test]
    fn spdk_rules_are_refused_in_one_line() {
        let err = |s: SpdkQosSpec| s.build().unwrap_err().to_string();
        let e = err(SpdkQosSpec { iops: vec![Some(1500.0)], ..Default::default() });
        assert!(e.contains("rw_ios_per_sec of tenant 0 is 1500; SPDK takes multiples of 1000"), "{e}");
        assert!(e.contains("SPDK_BDEV_QOS_MIN_IOS_PER_SEC") && !e.contains('\n'), "{e}");
        let e = err(SpdkQosSpec { iops: vec![None, Some(500.0)], ..Default::default() });
        assert!(e.contains("tenant 1 is 500"), "{e}");
        let e = err(SpdkQosSpec { bps: vec![Some(1.5 * MIB_F)], ..Default::default() });
        assert!(e.contains("rw_mbytes_per_sec of tenant 0 is 1.5 MiB/s") && e.contains("whole MiB/s"), "{e}");
        let e = err(SpdkQosSpec { read_bps: vec![Some(512.0 * 1024.0)], ..Default::default() });
        assert!(e.contains("r_mbytes_per_sec") && e.contains("SPDK_BDEV_QOS_MIN_BYTES_PER_SEC"), "{e}");
        let e = err(SpdkQosSpec { write_bps: vec![Some(f64::INFINITY)], ..Default::default() });
        assert!(e.contains("w_mbytes_per_sec"), "{e}");
        let e = err(SpdkQosSpec { iops: vec![Some(1e16)], ..Default::default() });
        assert!(e.contains("32 bits"), "{e}");
        let s =
            qos(SpdkQosSpec { iops: vec![Some(5000.0)], bps: vec![None, Some(10.0 * MIB_F)], ..Default::default() });
        assert_eq!(s.bdevs(), 2);
        assert_eq!(s.max_per_timeslice(0), Some([5, 0, 0, 0]));
        assert_eq!(s.max_per_timeslice(1), Some([0, 10_485, 0, 0]));
        let spec: SpdkQosSpec = serde_json::from_str(r#"{"iops": [1000, null], "write_bps": [1048576]}"#).unwrap();
        assert_eq!(spec.iops, vec![Some(1000.0), None]);
        assert!(serde_json::from_str::<SpdkQosSpec>(r#"{"rw_ios_per_sec": [1000]}"#).is_err());
    }
}
