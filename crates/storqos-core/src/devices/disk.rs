//! Disk model (seeds 001 and 003: what their DiskSim runs stood for; spec "Device
//! models: Disk").
//!
//! Seed 001 §4 simulates a RAID-5 of 8 Seagate Cheetah 9LP 10k RPM disks in DiskSim 2.0;
//! seed 003 §4.1 a single IBM DNES-309170 (a 7,200 RPM drive) serving random 4 KiB reads
//! FIFO, whose "stable area" ends near 75 IOPS (§4.2, Fig. 4). We do not replay DiskSim's
//! detailed geometry; we keep the three mechanical terms that shape throughput and
//! latency, and a per-disk queue whose order matters:
//!
//! 1. **Seek** over a distance `d` (bytes of LBA between the head and the target, as a
//!    fraction of the disk's capacity `D`): `seek(d) = a + b·sqrt(d / D)` for `d > 0`,
//!    0 for `d = 0`. `a` is the track-to-track (settle) time. For offsets uniform over
//!    the disk, `E[sqrt(|U₁ − U₂|)] = ∫₀¹ 2(1 − x)·√x dx = 8/15`, so a datasheet's
//!    *average seek* `s̄` (the mean over all seek pairs) fixes `b = (s̄ − a)·15/8`
//!    ([`SQRT_DISTANCE_MEAN`]); the full-stroke seek is then `a + b`.
//! 2. **Rotational latency** uniform over one revolution `[0, 60 s / RPM)` (10k RPM →
//!    6 ms), drawn from the simulator's RNG. A request that starts exactly where the
//!    previous one ended (a sequential stream) pays neither seek nor rotation.
//! 3. **Transfer** `bytes / media rate`, plus a fixed per-command controller overhead.
//!
//! So a random request costs on average `overhead + s̄ + rev/2 + bytes/rate`, the
//! depth-1 random IOPS is its inverse ([`DiskProfile::mean_random_service`]), and the
//! named profiles below are chosen so that figure lands in the range the spec quotes.
//!
//! **Queue order** ([`QueuePolicy`]): requests waiting at a disk are served FIFO, by
//! SCAN (the elevator, in its LOOK form: sweep in one direction to the last waiting
//! request, then reverse) or by SPTF (shortest positioning time first; rotational
//! position is not known to the scheduler here, so it estimates by seek distance only,
//! i.e. SSTF). With SCAN or SPTF a deeper queue holds closer targets, so seeks shorten
//! and throughput rises with depth, while each request waits behind more others, so
//! latency rises too. SPTF can starve far requests under sustained load (real drives add
//! aging); SCAN bounds the wait to two sweeps.
//!
//! Reads and writes cost the same (seed 003 §4.1: "the performance of read and write is
//! the same in a random I/O pattern"); caches are not modelled.
//!
//! The [`Disk`](crate::devices::Disk) device, a single disk, is an array of one server of this
//! model ([`crate::devices::disk_device`]).

use std::collections::VecDeque;

use crate::error::{config, Result};
use crate::request::Request;
use crate::rng::SimRng;
use crate::sim::generate::round_ns;
use crate::time::{Nanos, NS_PER_MS, NS_PER_SEC, NS_PER_US};

/// `E[sqrt(|U₁ − U₂|)]` for two independent uniform positions on [0, 1]:
/// `∫₀¹ 2(1 − x)·√x dx = 2·(2/3 − 2/5) = 8/15`. Links a datasheet's average seek to the
/// square-root seek curve.
pub const SQRT_DISTANCE_MEAN: f64 = 8.0 / 15.0;

/// Capacity of both seed disks (Seagate Cheetah 9LP in seed 001, IBM DNES-309170 in seed
/// 003): 9.1 GB. The seek curve is normalised to the capacity, so what matters is the
/// fraction of it a workload spans; offsets beyond it wrap around.
pub const SEED_DISK_CAPACITY_BYTES: u64 = 9_100_000_000;

/// Profile name of the 10k RPM enterprise disk.
pub const ENTERPRISE_10K: &str = "enterprise-10k";
/// 10,000 RPM: one revolution = 60 s / 10,000 = 6 ms, mean rotational latency 3 ms
/// (spec: "10k RPM → 6 ms"; seed 001's Cheetah 9LP spins at 10k RPM).
pub const ENTERPRISE_10K_RPM: f64 = 10_000.0;
/// Average seek 3.0 ms: datasheets of 2.5-inch 10k RPM enterprise drives quote 3–4 ms
/// average read seek; we take the low end so that the depth-1 random 4 KiB IOPS
/// (≈ 163) sits inside the 150–200 range the spec quotes for such a disk.
pub const ENTERPRISE_10K_AVG_SEEK: Nanos = 3 * NS_PER_MS;
/// Track-to-track (settle) time 0.4 ms, typical of enterprise single-track seeks
/// (0.2–0.5 ms in datasheets).
pub const ENTERPRISE_10K_TRACK_TO_TRACK: Nanos = 400 * NS_PER_US;
/// Sustained media rate 150 MB/s (10k RPM enterprise drives: 120–200 MB/s); a 4 KiB
/// transfer takes 27 µs.
pub const ENTERPRISE_10K_MEDIA_RATE: f64 = 150e6;
/// Per-command controller overhead 0.1 ms (SCSI/SAS command processing).
pub const ENTERPRISE_10K_OVERHEAD: Nanos = 100 * NS_PER_US;
/// Documented random 4 KiB read IOPS at depth 1 of [`ENTERPRISE_10K`] (spec: "a 10k RPM
/// enterprise disk ≈ 150–200 random IOPS at depth 1"); tests check the model lands here.
pub const ENTERPRISE_10K_DEPTH1_IOPS: (f64, f64) = (150.0, 200.0);

/// Profile name of the 7,200 RPM disk.
pub const DESKTOP_7200: &str = "desktop-7200";
/// 7,200 RPM: one revolution = 8.33 ms, mean rotational latency 4.17 ms (seed 003's
/// IBM DNES-309170 spins at 7,200 RPM).
pub const DESKTOP_7200_RPM: f64 = 7_200.0;
/// Average seek 7.5 ms: 7,200 RPM datasheets quote 7.5–9 ms average read seek.
pub const DESKTOP_7200_AVG_SEEK: Nanos = 7_500 * NS_PER_US;
/// Track-to-track (settle) time 1.0 ms (desktop datasheets: 0.8–1.2 ms).
pub const DESKTOP_7200_TRACK_TO_TRACK: Nanos = NS_PER_MS;
/// Sustained media rate 100 MB/s; a 4 KiB transfer takes 41 µs.
pub const DESKTOP_7200_MEDIA_RATE: f64 = 100e6;
/// Per-command overhead 0.2 ms (ATA/SCSI command processing on a desktop controller).
pub const DESKTOP_7200_OVERHEAD: Nanos = 200 * NS_PER_US;
/// Documented random 4 KiB read IOPS at depth 1 of [`DESKTOP_7200`] (spec: "a 7.2k RPM
/// disk ≈ 75–100"). The model gives ≈ 84, so FIFO-served Poisson load reaches 90 %
/// utilisation near 75 IOPS: seed 003's "stable area" (§4.2, Fig. 4).
pub const DESKTOP_7200_DEPTH1_IOPS: (f64, f64) = (75.0, 100.0);

/// Names of the built-in profiles, for error messages and listings.
pub const PROFILE_NAMES: [&str; 2] = [ENTERPRISE_10K, DESKTOP_7200];

/// Mechanical parameters of one disk.
#[derive(Clone, Debug, PartialEq)]
pub struct DiskProfile {
    /// Profile name for reports.
    pub name: String,
    /// Spindle speed (revolutions per minute).
    pub rpm: f64,
    /// Average seek over uniformly random positions (ns).
    pub average_seek: Nanos,
    /// Shortest non-zero seek, the settle time `a` (ns).
    pub track_to_track: Nanos,
    /// Sustained media transfer rate (bytes/s).
    pub media_bytes_per_sec: f64,
    /// Fixed per-command overhead (ns).
    pub overhead: Nanos,
    /// Capacity (bytes) the seek curve spans; offsets wrap modulo it.
    pub capacity_bytes: u64,
}

impl DiskProfile {
    /// The 10k RPM enterprise profile ([`ENTERPRISE_10K`]).
    pub fn enterprise_10k() -> Self {
        DiskProfile {
            name: ENTERPRISE_10K.into(),
            rpm: ENTERPRISE_10K_RPM,
            average_seek: ENTERPRISE_10K_AVG_SEEK,
            track_to_track: ENTERPRISE_10K_TRACK_TO_TRACK,
            media_bytes_per_sec: ENTERPRISE_10K_MEDIA_RATE,
            overhead: ENTERPRISE_10K_OVERHEAD,
            capacity_bytes: SEED_DISK_CAPACITY_BYTES,
        }
    }

    /// The 7,200 RPM profile ([`DESKTOP_7200`]).
    pub fn desktop_7200() -> Self {
        DiskProfile {
            name: DESKTOP_7200.into(),
            rpm: DESKTOP_7200_RPM,
            average_seek: DESKTOP_7200_AVG_SEEK,
            track_to_track: DESKTOP_7200_TRACK_TO_TRACK,
            media_bytes_per_sec: DESKTOP_7200_MEDIA_RATE,
            overhead: DESKTOP_7200_OVERHEAD,
            capacity_bytes: SEED_DISK_CAPACITY_BYTES,
        }
    }

    /// A built-in profile by name ([`PROFILE_NAMES`]).
    pub fn named(name: &str) -> Result<Self> {
        match name {
            ENTERPRISE_10K => Ok(Self::enterprise_10k()),
            DESKTOP_7200 => Ok(Self::desktop_7200()),
            _ => config(format!("disk: unknown profile {name:?} (known: {})", PROFILE_NAMES.join(", "))),
        }
    }

    /// The same disk with another capacity (bytes, > 0).
    pub fn with_capacity(mut self, capacity_bytes: u64) -> Result<Self> {
        self.capacity_bytes = capacity_bytes;
        self.validate()?;
        Ok(self)
    }

    /// Check the parameters, naming the bad one.
    pub fn validate(&self) -> Result<()> {
        let n = &self.name;
        if !(self.rpm > 0.0 && self.rpm.is_finite()) {
            return config(format!("disk {n}: rpm must be > 0, got {}", self.rpm));
        }
        if self.average_seek < self.track_to_track {
            return config(format!(
                "disk {n}: average_seek ({} ns) must be >= track_to_track ({} ns)",
                self.average_seek, self.track_to_track
            ));
        }
        if !(self.media_bytes_per_sec > 0.0 && self.media_bytes_per_sec.is_finite()) {
            return config(format!("disk {n}: media rate must be > 0 B/s, got {}", self.media_bytes_per_sec));
        }
        if self.capacity_bytes == 0 {
            return config(format!("disk {n}: capacity must be > 0 bytes"));
        }
        Ok(())
    }

    /// One revolution (ns).
    #[inline]
    pub fn revolution(&self) -> f64 {
        60.0 * NS_PER_SEC as f64 / self.rpm
    }

    /// Coefficient `b` of `seek(d) = a + b·sqrt(d / capacity)` (ns).
    #[inline]
    fn seek_coefficient(&self) -> f64 {
        (self.average_seek - self.track_to_track) as f64 / SQRT_DISTANCE_MEAN
    }

    /// Seek time over `distance` bytes of LBA (ns); 0 for no movement.
    #[inline]
    pub fn seek_time(&self, distance: u64) -> f64 {
        if distance == 0 {
            return 0.0;
        }
        let frac = (as_f64(distance) / as_f64(self.capacity_bytes)).min(1.0);
        self.track_to_track as f64 + self.seek_coefficient() * frac.sqrt()
    }

    /// Media transfer time of `bytes` (ns).
    #[inline]
    pub fn transfer_time(&self, bytes: u32) -> f64 {
        bytes as f64 * NS_PER_SEC as f64 / self.media_bytes_per_sec
    }

    /// Expected service time (ns) of a `bytes`-sized request at a uniformly random
    /// position, served in FIFO order: overhead + average seek + half a revolution +
    /// transfer. Its inverse is the depth-1 random IOPS.
    pub fn mean_random_service(&self, bytes: u32) -> f64 {
        self.overhead as f64 + self.average_seek as f64 + self.revolution() / 2.0 + self.transfer_time(bytes)
    }

    /// Where on the disk (bytes) a disk-local offset lands.
    #[inline]
    pub fn position(&self, local_offset: u64) -> u64 {
        local_offset % self.capacity_bytes
    }

    /// Serve a request of `bytes` at disk position `pos` with the head in `head`:
    /// returns the service time (ns) and moves the head to the end of the transfer.
    #[cfg(test)]
    pub(crate) fn serve(&self, head: &mut Head, pos: u64, bytes: u32, rng: &mut SimRng) -> Nanos {
        Mechanics::new(self).serve(head, pos, bytes, rng)
    }
}

/// A [`DiskProfile`] prepared for serving: the per-request constants (seek
/// coefficient, revolution, the integer parameters as `f64`) computed once, by the same
/// expressions [`DiskProfile`]'s methods evaluate, so every service time is the same to
/// the bit; positions wrap by a compare instead of a division when they already fit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mechanics {
    capacity: u64,
    /// `capacity` as `f64`.
    capacity_f64: f64,
    /// Settle time `a` (ns).
    track_to_track: f64,
    /// `b` of `seek(d) = a + b·sqrt(d / capacity)` (ns).
    seek_coefficient: f64,
    /// One revolution (ns).
    revolution: f64,
    /// Per-command overhead (ns).
    overhead: f64,
    media_bytes_per_sec: f64,
}

impl Mechanics {
    pub fn new(p: &DiskProfile) -> Self {
        Mechanics {
            capacity: p.capacity_bytes,
            capacity_f64: as_f64(p.capacity_bytes),
            track_to_track: p.track_to_track as f64,
            seek_coefficient: p.seek_coefficient(),
            revolution: p.revolution(),
            overhead: p.overhead as f64,
            media_bytes_per_sec: p.media_bytes_per_sec,
        }
    }

    /// `v mod capacity`, without dividing when `v` is already on the disk.
    #[inline(always)]
    fn wrap(&self, v: u64) -> u64 {
        if v < self.capacity {
            v
        } else {
            v % self.capacity
        }
    }

    /// [`DiskProfile::position`].
    #[inline]
    pub fn position(&self, local_offset: u64) -> u64 {
        self.wrap(local_offset)
    }

    /// [`DiskProfile::seek_time`] over a non-zero `distance`.
    #[inline(always)]
    fn seek_time(&self, distance: u64) -> f64 {
        debug_assert!(distance > 0);
        let frac = (as_f64(distance) / self.capacity_f64).min(1.0);
        self.track_to_track + self.seek_coefficient * frac.sqrt()
    }

    /// Serve a request of `bytes` at disk position `pos` with the head in `head`:
    /// returns the service time (ns) and moves the head to the end of the transfer.
    #[inline]
    pub fn serve(&self, head: &mut Head, pos: u64, bytes: u32, rng: &mut SimRng) -> Nanos {
        debug_assert!(pos < self.capacity);
        let positioning = if pos == head.pos {
            // Sequential continuation: the head is already there, the sector next under it.
            0.0
        } else {
            self.seek_time(pos.abs_diff(head.pos)) + rng.uniform() * self.revolution
        };
        head.pos = self.wrap(pos + bytes as u64);
        // The transfer time as `DiskProfile::transfer_time` computes it.
        let transfer = bytes as f64 * NS_PER_SEC as f64 / self.media_bytes_per_sec;
        let t = self.overhead + positioning + transfer;
        round_ns(t).max(1)
    }
}

/// `v as f64`, through the one-instruction signed conversion when `v` fits an `i64`
/// (the same correctly rounded value; baseline x86-64 has no unsigned conversion).
#[inline(always)]
fn as_f64(v: u64) -> f64 {
    if v <= i64::MAX as u64 {
        v as i64 as f64
    } else {
        v as f64
    }
}

/// The order in which a disk serves the requests waiting in its queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueuePolicy {
    /// First in, first out (seed 003: "serves arriving I/O requests in a FIFO manner").
    #[default]
    Fifo,
    /// Elevator (LOOK): keep sweeping in the current direction, reverse at the last
    /// waiting request.
    Scan,
    /// Shortest positioning time first, estimated by seek distance only.
    Sptf,
}

impl QueuePolicy {
    /// Lower-case name (`"fifo"`, `"scan"`, `"sptf"`).
    pub fn as_str(self) -> &'static str {
        match self {
            QueuePolicy::Fifo => "fifo",
            QueuePolicy::Scan => "scan",
            QueuePolicy::Sptf => "sptf",
        }
    }
}

/// A server's head: where it is and, for SCAN, which way it sweeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Head {
    /// Position (bytes) on the disk.
    pub pos: u64,
    /// SCAN direction: true while sweeping towards lower positions.
    pub down: bool,
}

/// A request waiting inside a device.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Waiting {
    /// The request.
    pub req: Request,
    /// When the scheduler handed it to the device.
    pub dispatch: Nanos,
    /// Position on the serving disk (bytes), the key of positional queues.
    pub pos: u64,
    /// Submission sequence number: tie-break everywhere.
    pub seq: u64,
}

/// A queue of waiting requests served in a [`QueuePolicy`] order. Positional policies
/// keep a [`Positional`] queue: small (position, seq) keys sorted in a vector, the
/// requests themselves parked in slots that never move.
#[derive(Clone, Debug)]
pub(crate) enum WaitQueue {
    Fifo(VecDeque<Waiting>),
    Positional(Positional),
}

impl WaitQueue {
    pub fn new(policy: QueuePolicy) -> Self {
        match policy {
            QueuePolicy::Fifo => WaitQueue::Fifo(VecDeque::new()),
            p => WaitQueue::Positional(Positional::new(p)),
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        match self {
            WaitQueue::Fifo(q) => q.len(),
            WaitQueue::Positional(q) => q.by_pos.len(),
        }
    }

    #[inline]
    pub fn push(&mut self, w: Waiting) {
        match self {
            WaitQueue::Fifo(q) => q.push_back(w),
            WaitQueue::Positional(q) => q.push(w),
        }
    }

    /// Remove the request the policy serves next for a head at `head` (SCAN may reverse
    /// the head's direction).
    #[inline]
    pub fn pop_next(&mut self, head: &mut Head) -> Option<Waiting> {
        match self {
            WaitQueue::Fifo(q) => q.pop_front(),
            WaitQueue::Positional(q) => q.pop_next(head),
        }
    }
}

/// A waiting request's place in a [`Positional`] queue: its sort key (position, then
/// submission seq) and the slot holding the request.
#[derive(Clone, Copy, Debug)]
struct Entry {
    pos: u64,
    seq: u64,
    slot: usize,
}

impl Entry {
    /// (position, seq) as one integer with the same order: one comparison.
    #[inline(always)]
    fn key(&self) -> u128 {
        (self.pos as u128) << 64 | self.seq as u128
    }
}

/// The queue of a SCAN or SPTF disk. Entries are kept in a vector sorted by (position,
/// seq): finding the next one is a binary search and its neighbours, insertion and
/// removal shift the entries after it by hand. Per-disk queues are short (a few to a
/// few hundred requests), where this costs a fraction of a B-tree's node walks (it
/// replaced a `BTreeMap<(pos, seq), Waiting>` with the same order). The 64-byte requests
/// stay in `slots` (a slab with a free list): only 24-byte entries move, without a
/// `memmove` call per insertion and removal.
#[derive(Clone, Debug)]
pub(crate) struct Positional {
    policy: QueuePolicy,
    /// Entries sorted by (position, seq).
    by_pos: Vec<Entry>,
    /// The waiting requests, at their entries' slots, and vacant slots.
    slots: Vec<Waiting>,
    /// Vacant slots, reused last freed first.
    free: Vec<usize>,
}

impl Positional {
    fn new(policy: QueuePolicy) -> Self {
        debug_assert!(policy != QueuePolicy::Fifo, "FIFO queues are not positional");
        Positional { policy, by_pos: Vec::new(), slots: Vec::new(), free: Vec::new() }
    }

    #[inline]
    fn push(&mut self, w: Waiting) {
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = w;
                slot
            }
            None => {
                self.slots.push(w);
                self.slots.len() - 1
            }
        };
        let e = Entry { pos: w.pos, seq: w.seq, slot };
        // Insertion step from the back: shift the entries after `e` up by one.
        self.by_pos.push(e);
        let q = &mut self.by_pos[..];
        let mut j = q.len() - 1;
        while j > 0 && q[j - 1].key() > e.key() {
            q[j] = q[j - 1];
            j -= 1;
        }
        q[j] = e;
    }

    /// Remove the request the policy serves next for a head at `head` (SCAN may reverse
    /// the head's direction).
    #[inline]
    fn pop_next(&mut self, head: &mut Head) -> Option<Waiting> {
        let q = &mut self.by_pos[..];
        let n = q.len();
        if n == 0 {
            return None;
        }
        let pos = head.pos;
        // First waiting request at or above the head (the oldest at its position, all
        // before it being below the head); the one before it is the nearest strictly
        // below.
        let i = q.partition_point(|e| e.pos < pos);
        let up = match self.policy {
            // Nearest first, ties upwards.
            QueuePolicy::Sptf => i < n && (i == 0 || q[i].pos - pos <= pos - q[i - 1].pos),
            // Keep sweeping while there is something ahead, else reverse.
            QueuePolicy::Scan => {
                let up = if head.down { i == 0 } else { i < n };
                head.down = !up;
                up
            }
            QueuePolicy::Fifo => unreachable!("FIFO queues are not positional"),
        };
        let k = if up {
            i
        } else {
            // Oldest request at the nearest position below: the first of its run.
            let target = q[i - 1].pos;
            let mut k = i - 1;
            while k > 0 && q[k - 1].pos == target {
                k -= 1;
            }
            k
        };
        let slot = q[k].slot;
        // Shift the entries after `k` down by one.
        for j in k + 1..n {
            q[j - 1] = q[j];
        }
        self.by_pos.pop();
        self.free.push(slot);
        Some(self.slots[slot])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting(pos: u64, seq: u64) -> Waiting {
        Waiting { req: Request::new(seq, 0, 0, 4096), dispatch: 0, pos, seq }
    }

    fn order(policy: QueuePolicy, start: u64, positions: &[u64]) -> Vec<u64> {
        let mut q = WaitQueue::new(policy);
        for (i, &p) in positions.iter().enumerate() {
            q.push(waiting(p, i as u64));
        }
        let mut head = Head { pos: start, down: false };
        std::iter::from_fn(|| {
            let w = q.pop_next(&mut head)?;
            head.pos = w.pos;
            Some(w.pos)
        })
        .collect()
    }

    #[test]
    fn round_ns_is_round() {
        let mut rng = SimRng::new(2);
        for _ in 0..100_000 {
            let t = rng.uniform() * 2e7;
            assert_eq!(round_ns(t), t.round() as Nanos, "{t}");
        }
        for t in [0.0, 0.5, 1.5, 2.4999999999999996, 4503599627370495.5, 9.3e15, 1e30, f64::NAN] {
            assert_eq!(round_ns(t), t.round() as Nanos, "{t}");
        }
    }

    #[test]
    fn queue_orders() {
        let p = [52, 10, 90, 40, 70];
        assert_eq!(order(QueuePolicy::Fifo, 45, &p), vec![52, 10, 90, 40, 70]);
        // LOOK: up from 45 to 90, then down.
        assert_eq!(order(QueuePolicy::Scan, 45, &p), vec![52, 70, 90, 40, 10]);
        // Nearest first: 40 (5 away), 52 (12), 70 (18), 90 (20), 10.
        assert_eq!(order(QueuePolicy::Sptf, 45, &p), vec![40, 52, 70, 90, 10]);
        // A tie (5 above, 5 below) goes up.
        assert_eq!(order(QueuePolicy::Sptf, 45, &[40, 50]), vec![50, 40]);
    }

    #[test]
    fn sptf_matches_brute_force() {
        // Random pushes and pops over few distinct positions (many ties): the sorted
        // queue serves the nearest position (ties upwards), oldest first, like a scan.
        let mut rng = SimRng::new(11);
        let mut q = WaitQueue::new(QueuePolicy::Sptf);
        let mut all: Vec<Waiting> = Vec::new();
        let mut head = Head { pos: 50, down: false };
        for seq in 0..20_000u64 {
            let w = waiting(rng.below(100), seq);
            q.push(w);
            all.push(w);
            while !all.is_empty() && rng.bernoulli(0.5) {
                let p = head.pos;
                let best = all
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, w)| (w.pos.abs_diff(p), w.pos < p, w.seq))
                    .map(|(i, _)| i)
                    .unwrap();
                let want = all.remove(best);
                let got = q.pop_next(&mut head).unwrap();
                assert_eq!((got.pos, got.seq), (want.pos, want.seq));
                head.pos = got.pos;
            }
            assert_eq!(q.len(), all.len());
        }
    }

    #[test]
    fn equal_positions_are_served_oldest_first() {
        let mut q = WaitQueue::new(QueuePolicy::Scan);
        q.push(waiting(5, 0));
        q.push(waiting(5, 1));
        let mut head = Head { pos: 9, down: false };
        assert_eq!(q.pop_next(&mut head).unwrap().seq, 0);
        assert!(head.down);
        assert_eq!(q.pop_next(&mut head).unwrap().seq, 1);
    }

    #[test]
    fn seek_curve_matches_the_datasheet_average() {
        let d = DiskProfile::enterprise_10k();
        assert_eq!(d.seek_time(0), 0.0);
        // One byte away costs the settle time (plus ~50 ns of curve).
        assert!((d.seek_time(1) - d.track_to_track as f64).abs() < 100.0);
        // Monte-Carlo mean over uniform pairs equals the average seek.
        let mut rng = SimRng::new(4);
        let n = 200_000;
        let mean = (0..n)
            .map(|_| {
                let a = rng.below(d.capacity_bytes);
                let b = rng.below(d.capacity_bytes);
                d.seek_time(a.abs_diff(b))
            })
            .sum::<f64>()
            / n as f64;
        assert!((mean / d.average_seek as f64 - 1.0).abs() < 0.01, "mean seek {mean}");
        assert!((d.revolution() - 6e6).abs() < 1.0);
    }

    #[test]
    fn profiles_sit_in_their_documented_ranges() {
        for (p, (lo, hi)) in [
            (DiskProfile::enterprise_10k(), ENTERPRISE_10K_DEPTH1_IOPS),
            (DiskProfile::desktop_7200(), DESKTOP_7200_DEPTH1_IOPS),
        ] {
            let iops = NS_PER_SEC as f64 / p.mean_random_service(4096);
            assert!(lo < iops && iops < hi, "{}: {iops}", p.name);
        }
    }

    #[test]
    fn bad_profiles_are_named() {
        let e = DiskProfile::named("floppy").unwrap_err().to_string();
        assert!(e.contains("unknown profile \"floppy\"") && e.contains("enterprise-10k"), "{e}");
        let e = DiskProfile::enterprise_10k().with_capacity(0).unwrap_err().to_string();
        assert!(e.contains("capacity"), "{e}");
        let mut p = DiskProfile::desktop_7200();
        p.track_to_track = 9 * NS_PER_MS;
        assert!(p.validate().unwrap_err().to_string().contains("track_to_track"));
    }

    #[test]
    fn sequential_requests_skip_positioning() {
        let d = DiskProfile::enterprise_10k();
        let mut head = Head::default();
        let mut rng = SimRng::new(1);
        let first = d.serve(&mut head, 0, 4096, &mut rng);
        let next = d.serve(&mut head, 4096, 4096, &mut rng);
        assert_eq!(first, next); // both start where the head is
        assert_eq!(next, (d.overhead as f64 + d.transfer_time(4096)).round() as Nanos);
        let far = d.serve(&mut head, d.capacity_bytes / 2, 4096, &mut rng);
        assert!(far > next + d.track_to_track);
    }
}
