//! Cache tier with LRU replacement and explicit warm-up (seed 002, "Storage Workload
//! Isolation via Tier Warming", §3.2 and §4.2; spec "Device models: Tiered ... a cache
//! model (LRU over blocks with explicit warm-up)").
//!
//! **Model.** The volume is cut into fixed-size blocks of `block_bytes`. The fast tier
//! holds at most `capacity_blocks` of them, replaced least-recently-used. A request whose
//! blocks are all resident is a *hit* and is served by the fast device; otherwise it is a
//! *miss*, served by the slow device, and afterwards all its blocks are resident (the
//! missing ones are brought up, evicting the least recently used). Both outcomes refresh
//! the blocks' recency. Residency is decided at submission (what the request finds), so
//! the order of decisions is the dispatch order: deterministic.
//!
//! **System work.** Requests of any tenant go through the same LRU: a system tenant
//! reading a working set larger than the tier evicts the user working set (seed 002 §1:
//! "its working set is much larger than the user working set").
//!
//! **Warm-up.** Requests of a *warm tenant* are the explicit, sequential warm-up of
//! seed 002 §4.1 ("the fast tier is warmed up via a sequential read of the user working
//! set"): they are read from the slow device and make their blocks resident, most
//! recent. The warm-up rate F is the rate at which the caller issues them (e.g. one
//! 1 MiB request every 1 MiB / F); with the tier's capacity C, a full warm-up takes
//! T_fast = C / F (Eq. 7).
//!
//! Queues and slots are those of [`Tiered`]: the cache sets each request's target
//! (0 = fast, 1 = slow) and hands it to an inner two-tier device, so completions carry
//! `target` = where the request was served (hit = 0).

use std::collections::{BTreeMap, HashMap};

use crate::device::{Device, DeviceState};
use crate::devices::tiered::{FAST, SLOW};
use crate::devices::Tiered;
use crate::error::{config, Result};
use crate::request::{Completion, Request};
use crate::rng::SimRng;
use crate::time::Nanos;

/// Default block size: 4 KiB, the unit of the seed's small random reads.
pub const DEFAULT_BLOCK_BYTES: u64 = 4096;

/// Least-recently-used set of block numbers with a fixed capacity.
///
/// Recency is a counter stamped on every touch; `order` maps stamp → block so the
/// least recent block is the first entry (O(log n) per touch).
#[derive(Debug, Default, Clone)]
pub struct Lru {
    capacity: usize,
    stamp_of: HashMap<u64, u64>,
    order: BTreeMap<u64, u64>,
    clock: u64,
}

impl Lru {
    /// An empty LRU set holding at most `capacity` blocks.
    pub fn new(capacity: usize) -> Self {
        Lru { capacity, ..Default::default() }
    }

    /// Whether `block` is resident.
    pub fn contains(&self, block: u64) -> bool {
        self.stamp_of.contains_key(&block)
    }

    /// Make `block` resident and most recent; evict the least recent one if full.
    /// Returns the evicted block, if any.
    pub fn touch(&mut self, block: u64) -> Option<u64> {
        self.clock += 1;
        if let Some(old) = self.stamp_of.insert(block, self.clock) {
            self.order.remove(&old);
            self.order.insert(self.clock, block);
            return None;
        }
        self.order.insert(self.clock, block);
        if self.stamp_of.len() > self.capacity {
            let (_, victim) = self.order.pop_first().expect("non-empty LRU");
            self.stamp_of.remove(&victim);
            debug_assert_eq!(self.stamp_of.len(), self.order.len());
            return Some(victim);
        }
        None
    }

    /// Resident blocks.
    pub fn len(&self) -> usize {
        self.stamp_of.len()
    }

    /// Whether no block is resident.
    pub fn is_empty(&self) -> bool {
        self.stamp_of.is_empty()
    }

    /// How many blocks of `[first, first + count)` are resident.
    pub fn resident_in(&self, first: u64, count: u64) -> u64 {
        (first..first + count).filter(|b| self.contains(*b)).count() as u64
    }
}

/// An LRU cache tier in front of a slow device, with explicit warm-up tenants.
pub struct CacheTier {
    inner: Tiered,
    lru: Lru,
    block_bytes: u64,
    warm_tenants: Vec<u32>,
    /// Hits and misses per tenant (warm-up requests are counted as misses).
    hits: Vec<[u64; 2]>,
    /// Time of the last event seen (tests drive the device with it).
    now: Nanos,
}

impl CacheTier {
    /// A cache of `capacity_bytes` (rounded down to whole blocks, ≥ 1 block) of
    /// `block_bytes` blocks; hits go to `fast`, misses and warm-up reads to `slow`.
    pub fn new(
        fast: Box<dyn Device + Send>,
        slow: Box<dyn Device + Send>,
        capacity_bytes: u64,
        block_bytes: u64,
    ) -> Result<Self> {
        if block_bytes == 0 {
            return config("cache: block_bytes must be > 0, got 0");
        }
        let blocks = capacity_bytes / block_bytes;
        if blocks == 0 {
            return config(format!(
                "cache: capacity_bytes must hold at least one block of {block_bytes} bytes, got {capacity_bytes}"
            ));
        }
        Ok(CacheTier {
            inner: Tiered::new(fast, slow, 0.0)?,
            lru: Lru::new(blocks as usize),
            block_bytes,
            warm_tenants: Vec::new(),
            hits: Vec::new(),
            now: 0,
        })
    }

    /// Requests of these tenants are explicit warm-up reads (slow tier, then resident).
    pub fn with_warm_tenants(mut self, tenants: Vec<u32>) -> Self {
        self.warm_tenants = tenants;
        self
    }

    /// Limit outstanding requests of both tiers together (≥ 1).
    pub fn with_depth(mut self, depth: usize) -> Result<Self> {
        self.inner = self.inner.with_depth(depth)?;
        Ok(self)
    }

    /// Capacity in blocks.
    pub fn capacity_blocks(&self) -> usize {
        self.lru.capacity
    }

    /// The LRU state (for checks: how much of a working set is resident).
    pub fn lru(&self) -> &Lru {
        &self.lru
    }

    /// `[hits, misses]` of `tenant` so far.
    pub fn hits(&self, tenant: u32) -> [u64; 2] {
        self.hits.get(tenant as usize).copied().unwrap_or([0, 0])
    }

    fn blocks_of(&self, req: &Request) -> (u64, u64) {
        let first = req.offset / self.block_bytes;
        let last = (req.offset + u64::from(req.bytes).max(1) - 1) / self.block_bytes;
        (first, last - first + 1)
    }
}

impl Device for CacheTier {
    fn name(&self) -> String {
        format!(
            "cache({} blocks of {} B, fast {}, slow {})",
            self.lru.capacity,
            self.block_bytes,
            self.inner.fast().name(),
            self.inner.slow().name()
        )
    }

    #[inline]
    fn state(&self) -> DeviceState {
        self.inner.state()
    }

    fn submit(&mut self, req: Request, now: Nanos, rng: &mut SimRng) {
        self.now = now;
        let (first, count) = self.blocks_of(&req);
        let warm = self.warm_tenants.contains(&req.tenant);
        let hit = !warm && (first..first + count).all(|b| self.lru.contains(b));
        for b in first..first + count {
            self.lru.touch(b);
        }
        let t = req.tenant as usize;
        if self.hits.len() <= t {
            self.hits.resize(t + 1, [0, 0]);
        }
        self.hits[t][(!hit) as usize] += 1;
        let target = if hit { FAST } else { SLOW };
        self.inner.submit(Request { target, ..req }, now, rng);
    }

    #[inline]
    fn next_completion(&self) -> Option<Nanos> {
        self.inner.next_completion()
    }

    #[inline]
    fn pop_completion(&mut self, rng: &mut SimRng) -> Option<Completion> {
        let c = self.inner.pop_completion(rng)?;
        self.now = c.finish;
        Some(c)
    }
}

impl std::fmt::Debug for CacheTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheTier")
            .field("capacity_blocks", &self.lru.capacity)
            .field("resident", &self.lru.len())
            .field("block_bytes", &self.block_bytes)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::ConstantRate;

    fn cache(blocks: u64) -> CacheTier {
        let f: Box<dyn Device + Send> = Box::new(ConstantRate::new(10_000.0).unwrap());
        let s: Box<dyn Device + Send> = Box::new(ConstantRate::new(100.0).unwrap());
        CacheTier::new(f, s, blocks * 4096, 4096).unwrap().with_warm_tenants(vec![9])
    }

    /// Submit one 4 KiB request at the device's current time and wait for it.
    fn run(c: &mut CacheTier, tenant: u32, block: u64, rng: &mut SimRng) -> u8 {
        let now = c.now;
        let r = Request { offset: block * 4096, tenant, ..Request::new(0, tenant, now, 4096) };
        c.submit(r, now, rng);
        c.pop_completion(rng).unwrap().req.target
    }

    #[test]
    fn lru_evicts_the_least_recent_block() {
        let mut l = Lru::new(2);
        assert_eq!(l.touch(1), None);
        assert_eq!(l.touch(2), None);
        assert_eq!(l.touch(1), None);
        assert_eq!(l.touch(3), Some(2));
        assert!(l.contains(1) && l.contains(3) && !l.contains(2));
        assert_eq!(l.resident_in(1, 3), 2);
    }

    #[test]
    fn system_work_evicts_and_warm_up_restores_the_user_set() {
        let mut c = cache(10);
        let mut rng = SimRng::new(1);
        // User set blocks 0..10: first pass misses, second hits.
        assert!((0..10).all(|b| run(&mut c, 0, b, &mut rng) == SLOW));
        assert!((0..10).all(|b| run(&mut c, 0, b, &mut rng) == FAST));
        // System work over 10 other blocks evicts every user block.
        for b in 100..110 {
            run(&mut c, 1, b, &mut rng);
        }
        assert_eq!(c.lru().resident_in(0, 10), 0);
        // Warm-up (tenant 9) brings the set back: warm reads are slow, users then hit.
        assert!((0..10).all(|b| run(&mut c, 9, b, &mut rng) == SLOW));
        assert!((0..10).all(|b| run(&mut c, 0, b, &mut rng) == FAST));
        assert_eq!(c.hits(0), [20, 10]);
        assert_eq!(c.hits(9), [0, 10]);
    }

    #[test]
    fn bad_sizes_are_named() {
        let f = || -> Box<dyn Device + Send> { Box::new(ConstantRate::new(1.0).unwrap()) };
        assert!(CacheTier::new(f(), f(), 4096, 0).unwrap_err().to_string().contains("block_bytes"));
        assert!(CacheTier::new(f(), f(), 100, 4096).unwrap_err().to_string().contains("capacity_bytes"));
    }
}
