//! The tiered backend (seeds 002 and 004; spec "Device models: Tiered", live): an
//! export backed by a **slow** file (the HDD role: the export's own `path`) and a
//! **fast** file (the SSD role), with a block map saying which blocks the fast file
//! holds.
//!
//! ## 1. The block map
//! The export is cut into blocks of `block_bytes`; the fast file into as many slots of
//! that size as it holds. A slot holds one block and is
//! - **placed** (explicit placement, seed 004's fixed hit ratios): `pin` ∈ [0, 1] of the
//!   export's blocks, spread evenly (block `b` is placed iff `⌊(b+1)·pin⌋ > ⌊b·pin⌋`), so
//!   that uniform *and* sequential reads hit a fraction `pin` of the time; never evicted;
//! - **cached** (LRU, seed 002's fast tier): a block a read missed is copied in after the
//!   read (`lru = true`), evicting the least recently used cached block not in use by an
//!   I/O. Reads larger than [`PROMOTE_MAX_BYTES`] are not copied in (a scan or a backup
//!   does not flush the working set);
//! - or **filling** (being copied in), or free.
//!
//! ## 2. Reads, writes, and what a request costs
//! A read **hits** when every block it covers is in a placed or cached slot: it is read
//! from the fast file and served by the fast tier (`Request::target = FAST`); otherwise
//! it **misses**: read from the slow file, served by the slow tier. Writes (and trims,
//! write-zeroes) are **write-through**: the slow file gets them, and the fast copies of
//! the blocks they cover are brought up to date before the reply (the data for a write,
//! from the request's buffer, one `pwrite` per run of consecutive slots; re-read from
//! the slow file for trims and write-zeroes); they are served by the slow tier. Copies
//! into the fast file (fills, updates) are cache maintenance: they are not charged to
//! the fast tier's emulated capacity. The engine decides the route when it
//! starts the I/O ([`TierStore::route`]), so the policy sees each completion's tier
//! (BAA's monitor counts hits from it).
//!
//! ## 3. Consistency
//! The slow file is always complete and current; the fast file is a copy of some of its
//! blocks. Hence the map is **not persisted: it is rebuilt at every start** (placed
//! blocks copied in from the slow file, the LRU part empty), and a crash or a lost fast
//! file loses no data. The rebuild then drops the slow file's clean pages from the page
//! cache: its sequential read left them in large readahead folios, which make every
//! later small write to those blocks slower (`forget_cached`). Invariants while
//! serving, all decided in the engine under the map's lock:
//! - a slot used by an I/O in flight (a hit, a write's update, a fill) is pinned and is
//!   not evicted or reused until the loop releases it ([`TierStore::release`]);
//! - a fill is not started for a block with a write in flight, and a write that starts
//!   while its block fills marks the fill stale (dropped when it ends): a fill never
//!   installs data older than a completed write;
//! - writes that overlap and update fast copies take the same stripe locks
//!   ([`WRITE_STRIPES`]) around "slow file, then fast copies", so the two files never
//!   disagree. A write that covers no fast copy takes none: no copy of its blocks can
//!   appear while it is in flight (placed blocks are fixed, fills wait), so no write
//!   updates a copy of them meanwhile and the two files have nothing to disagree on.
//!
//! A fast-file error (the file truncated under the gateway, EIO) never fails a request:
//! a hit that cannot read its copy is served from the slow file, and a slot whose copy
//! could not be written is dropped from the map (once, a line on stderr). An error of
//! the slow file fails the requests that touch it with the NBD error, as for a plain
//! export.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde::Deserialize;
use storqos_core::devices::tiered::{FAST, SLOW};

use crate::error::{Error, Result};

/// Reads larger than this (256 KiB) that miss are not copied into the fast file.
pub const PROMOTE_MAX_BYTES: u32 = 256 << 10;
/// Stripe locks serialising overlapping writes (a block's stripe: block mod 64).
pub const WRITE_STRIPES: usize = 64;
/// Default block size (4 KiB: the NBD block size the gateway advertises as preferred).
pub const DEFAULT_BLOCK_BYTES: u32 = 4096;

/// An export's fast tier (`[export.tier]` in the config file).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TierConfig {
    /// The fast file (an existing regular file; its size is the map's capacity).
    pub fast: PathBuf,
    /// Block size in bytes (a power of two, 512 B .. 32 MiB; default 4 KiB).
    #[serde(default = "default_block")]
    pub block_bytes: u32,
    /// Fraction of the export's blocks placed on the fast tier for good (in [0, 1]).
    #[serde(default)]
    pub pin: f64,
    /// Copy blocks that reads miss into the fast file (LRU); default true.
    #[serde(default = "default_true")]
    pub lru: bool,
}

fn default_block() -> u32 {
    DEFAULT_BLOCK_BYTES
}
fn default_true() -> bool {
    true
}

impl TierConfig {
    /// Check the fields that do not need the files (`field` names the entry).
    pub fn check(&self, field: &str) -> Result<()> {
        let b = self.block_bytes;
        if !b.is_power_of_two() || !(512..=crate::protocol::MAX_IO_BYTES).contains(&b) {
            return bad(format!("{field}.block_bytes: must be a power of two from 512 B to 32 MiB, got {b}"));
        }
        if !(self.pin.is_finite() && (0.0..=1.0).contains(&self.pin)) {
            return bad(format!("{field}.pin: the placed fraction must lie in [0, 1], got {}", self.pin));
        }
        Ok(())
    }
}

/// The emulated device of one tier (`[tiers.fast]`, `[tiers.slow]`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TierDevice {
    /// Emulated capacity (IOPS; `None`: as fast as the file goes).
    #[serde(default)]
    pub iops: Option<f64>,
    /// Servers of the emulated device (≥ 1, default 1): the capacity is reached with
    /// this many of the tier's requests outstanding.
    #[serde(default = "default_one")]
    pub depth: usize,
}

fn default_one() -> usize {
    1
}

impl Default for TierDevice {
    fn default() -> Self {
        TierDevice { iops: None, depth: 1 }
    }
}

/// The two tiers' emulated devices, shared by every tiered export (`tiers`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TiersConfig {
    /// The fast tier (SSD role).
    #[serde(default)]
    pub fast: TierDevice,
    /// The slow tier (HDD role).
    #[serde(default)]
    pub slow: TierDevice,
}

impl TiersConfig {
    /// Check both devices (a device has at most `max_depth` servers).
    pub fn check(&self, max_depth: usize) -> Result<()> {
        for (name, d) in [("fast", &self.fast), ("slow", &self.slow)] {
            if let Some(c) = d.iops.filter(|c| !(c.is_finite() && *c > 0.0)) {
                return bad(format!("tiers.{name}.iops: the emulated capacity must be a finite number > 0, got {c}"));
            }
            if d.depth == 0 || d.depth > max_depth {
                return bad(format!("tiers.{name}.depth: must be between 1 and {max_depth}, got {}", d.depth));
            }
        }
        Ok(())
    }

    /// The device of tier `target` ([`FAST`] or [`SLOW`]).
    pub fn device(&self, target: u8) -> &TierDevice {
        if target == FAST {
            &self.fast
        } else {
            &self.slow
        }
    }
}

fn bad<T>(msg: impl Into<String>) -> Result<T> {
    Err(Error::Config(msg.into()))
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    /// Being copied in; `stale` once a write to its block started meanwhile.
    Filling {
        stale: bool,
    },
    /// A cached copy (in the LRU list).
    Cached,
    /// Placed for good (not in the LRU list).
    Placed,
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    block: u64,
    state: State,
    /// I/Os in flight using the slot.
    pins: u32,
    /// Its copy failed (read or write of the fast file): dropped once unpinned.
    broken: bool,
    /// LRU neighbours (towards the most / least recently used), [`NONE`] at the ends.
    newer: u32,
    older: u32,
}

/// The block map (see the module documentation); guarded by [`TierStore`]'s lock.
#[derive(Debug)]
struct Map {
    slot_of: HashMap<u64, u32>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Most and least recently used cached slots.
    newest: u32,
    oldest: u32,
    /// Writes in flight per block.
    writing: HashMap<u64, u32>,
}

impl Map {
    fn new(slots: u32) -> Map {
        let s = Slot { block: 0, state: State::Free, pins: 0, broken: false, newer: NONE, older: NONE };
        Map {
            slot_of: HashMap::new(),
            slots: vec![s; slots as usize],
            free: (0..slots).rev().collect(),
            newest: NONE,
            oldest: NONE,
            writing: HashMap::new(),
        }
    }

    fn unlink(&mut self, i: u32) {
        let Slot { newer, older, .. } = self.slots[i as usize];
        if newer == NONE {
            self.newest = older;
        } else {
            self.slots[newer as usize].older = older;
        }
        if older == NONE {
            self.oldest = newer;
        } else {
            self.slots[older as usize].newer = newer;
        }
        self.slots[i as usize].newer = NONE;
        self.slots[i as usize].older = NONE;
    }

    fn push_newest(&mut self, i: u32) {
        self.slots[i as usize].older = self.newest;
        self.slots[i as usize].newer = NONE;
        if self.newest != NONE {
            self.slots[self.newest as usize].newer = i;
        } else {
            self.oldest = i;
        }
        self.newest = i;
    }

    fn touch(&mut self, i: u32) {
        if self.slots[i as usize].state == State::Cached && self.newest != i {
            self.unlink(i);
            self.push_newest(i);
        }
    }

    /// A slot for a new fill: a free one, else the least recently used cached one not
    /// in use (walking past at most the slots pinned by I/Os in flight).
    fn take_slot(&mut self) -> Option<u32> {
        if let Some(i) = self.free.pop() {
            return Some(i);
        }
        let mut i = self.oldest;
        while i != NONE {
            let s = self.slots[i as usize];
            if s.pins == 0 {
                self.unlink(i);
                self.slot_of.remove(&s.block);
                self.slots[i as usize].state = State::Free;
                return Some(i);
            }
            i = s.newer;
        }
        None
    }

    /// Forget slot `i` (unpinned): free again.
    fn drop_slot(&mut self, i: u32) {
        let s = self.slots[i as usize];
        if s.state == State::Cached {
            self.unlink(i);
        }
        if self.slot_of.get(&s.block) == Some(&i) {
            self.slot_of.remove(&s.block);
        }
        self.slots[i as usize] = Slot { state: State::Free, pins: 0, broken: false, ..s };
        self.free.push(i);
    }

    fn unpin(&mut self, i: u32) {
        let s = &mut self.slots[i as usize];
        debug_assert!(s.pins > 0, "unpin of an unpinned slot");
        s.pins = s.pins.saturating_sub(1);
        if s.pins == 0 && s.broken {
            self.drop_slot(i);
        }
    }
}

/// How the engine routes one request of a tiered export ([`TierStore::route`]):
/// the tier that serves it and the fast-file slots it uses. Give it back to
/// [`TierStore::release`] once the I/O is done.
#[derive(Debug, Default)]
pub struct Plan {
    /// [`FAST`] (a read hit) or [`SLOW`].
    pub target: u8,
    /// A read hit: the slot of each block, in order.
    hit: Vec<u32>,
    /// A read miss: blocks to copy in, with their (filling) slots.
    fill: Vec<(u64, u32)>,
    /// A write: the blocks it covers (their writes-in-flight counts) and the slots of
    /// the cached or placed ones, to update.
    write_blocks: (u64, u64),
    update: Vec<(u64, u32)>,
    is_write: bool,
}

/// The fast file and the block map of a tiered export.
#[derive(Debug)]
pub struct TierStore {
    /// The fast file's path (as configured).
    pub fast_path: PathBuf,
    fast: File,
    block: u64,
    size: u64,
    lru: bool,
    /// Blocks placed for good.
    pub placed: u64,
    /// Slots the fast file holds.
    pub slots: u32,
    map: Mutex<Map>,
    stripes: Vec<Mutex<()>>,
    warned: AtomicBool,
}

/// Whether block `b` is placed, for a placed fraction `pin` (spread evenly): the
/// simulator's rule for its spread hits, so that the twin sees the same hit sequence.
pub use storqos_core::devices::tiered::is_placed;

impl TierStore {
    /// Open the fast file of an export of `size` bytes whose slow file is `slow`, build
    /// the map and copy the placed blocks in. `field` names the entry in errors
    /// (`"exports[0].tier"`): a missing fast file, one too small for the placed blocks.
    pub fn open(cfg: &TierConfig, slow: &File, size: u64, read_only: bool, field: &str) -> Result<TierStore> {
        cfg.check(field)?;
        let p = cfg.fast.display();
        let meta =
            std::fs::metadata(&cfg.fast).map_err(|e| Error::Config(format!("{field}.fast: {p}: {}", describe(&e))))?;
        if !meta.is_file() {
            return bad(format!("{field}.fast: {p}: not a regular file"));
        }
        let block = u64::from(cfg.block_bytes);
        let blocks = size.div_ceil(block);
        let slots = u32::try_from((meta.len() / block).min(u64::from(NONE - 1))).unwrap_or(NONE - 1);
        let placed = (0..blocks).filter(|&b| is_placed(b, cfg.pin)).count() as u64;
        if placed > u64::from(slots) || (cfg.lru && slots == 0) {
            return bad(format!(
                "{field}.fast: {p}: {} B hold {slots} block(s) of {block} B, the map needs {} (pin = {} of {blocks} blocks{}); \
                 give it at least {} B, e.g. truncate -s {} {p}",
                meta.len(),
                placed.max(1),
                cfg.pin,
                if cfg.lru { ", plus room for the LRU cache" } else { "" },
                placed.max(1) * block,
                (placed.max(1) + u64::from(cfg.lru) * placed.max(1).div_ceil(8)) * block,
            ));
        }
        // The fast file is scratch: written even for a read-only export.
        let _ = read_only;
        let fast = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&cfg.fast)
            .map_err(|e| Error::Config(format!("{field}.fast: {p}: {}", describe(&e))))?;
        let mut map = Map::new(slots);
        // Rebuild: copy every placed block from the slow file (authoritative) in.
        let mut buf = vec![0u8; block as usize];
        for b in (0..blocks).filter(|&b| is_placed(b, cfg.pin)) {
            let n = block.min(size - b * block) as usize;
            slow.read_exact_at(&mut buf[..n], b * block)
                .map_err(|e| Error::Config(format!("{field}: reading block {b} of the slow file: {e}")))?;
            let Some(i) = map.free.pop() else { break };
            fast.write_all_at(&buf[..n], u64::from(i) * block)
                .map_err(|e| Error::Config(format!("{field}.fast: {p}: writing slot {i}: {e}")))?;
            map.slots[i as usize].block = b;
            map.slots[i as usize].state = State::Placed;
            map.slot_of.insert(b, i);
        }
        if placed > 0 {
            forget_cached(slow);
        }
        Ok(TierStore {
            fast_path: cfg.fast.clone(),
            fast,
            block,
            size,
            lru: cfg.lru,
            placed,
            slots,
            map: Mutex::new(map),
            stripes: (0..WRITE_STRIPES).map(|_| Mutex::new(())).collect(),
            warned: AtomicBool::new(false),
        })
    }

    fn blocks_of(&self, offset: u64, len: u32) -> (u64, u64) {
        let first = offset / self.block;
        let last = (offset + u64::from(len.max(1)) - 1) / self.block;
        (first, last)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Map> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Route a request (in the engine, when it starts): a read hits or misses
    /// (and, missing, may copy its blocks in), a write goes to the slow file and
    /// updates the fast copies. Pins the slots it uses.
    pub fn route(&self, write: bool, offset: u64, len: u32) -> Plan {
        let (first, last) = self.blocks_of(offset, len);
        let mut m = self.lock();
        if write {
            let mut update = Vec::new();
            for b in first..=last {
                *m.writing.entry(b).or_insert(0) += 1;
                if let Some(&i) = m.slot_of.get(&b) {
                    let s = &mut m.slots[i as usize];
                    match s.state {
                        State::Filling { .. } => s.state = State::Filling { stale: true },
                        State::Cached | State::Placed => {
                            s.pins += 1;
                            update.push((b, i));
                        }
                        State::Free => {}
                    }
                }
            }
            return Plan { target: SLOW, write_blocks: (first, last), update, is_write: true, ..Plan::default() };
        }
        let hit: Option<Vec<u32>> = (first..=last)
            .map(|b| {
                m.slot_of
                    .get(&b)
                    .copied()
                    .filter(|&i| matches!(m.slots[i as usize].state, State::Cached | State::Placed))
            })
            .collect();
        if let Some(hit) = hit {
            for &i in &hit {
                m.slots[i as usize].pins += 1;
                m.touch(i);
            }
            return Plan { target: FAST, hit, ..Plan::default() };
        }
        let mut fill = Vec::new();
        if self.lru && len <= PROMOTE_MAX_BYTES {
            for b in first..=last {
                if let Some(&i) = m.slot_of.get(&b) {
                    m.touch(i);
                    continue;
                }
                if m.writing.contains_key(&b) {
                    continue;
                }
                let Some(i) = m.take_slot() else { break };
                m.slots[i as usize] = Slot {
                    block: b,
                    state: State::Filling { stale: false },
                    pins: 1,
                    broken: false,
                    newer: NONE,
                    older: NONE,
                };
                m.slot_of.insert(b, i);
                fill.push((b, i));
            }
        }
        Plan { target: SLOW, fill, ..Plan::default() }
    }

    /// The I/O is done (in the engine): unpin its slots, install the blocks it
    /// copied in (unless a write made them stale or the copy failed).
    pub fn release(&self, plan: &Plan) {
        let mut m = self.lock();
        for &i in &plan.hit {
            m.unpin(i);
        }
        for &(_, i) in &plan.fill {
            let s = m.slots[i as usize];
            if s.broken || s.state != (State::Filling { stale: false }) {
                m.slots[i as usize].pins = 0;
                m.drop_slot(i);
            } else {
                m.slots[i as usize].pins = 0;
                m.slots[i as usize].state = State::Cached;
                m.push_newest(i);
            }
        }
        for &(_, i) in &plan.update {
            m.unpin(i);
        }
        if plan.is_write {
            for b in plan.write_blocks.0..=plan.write_blocks.1 {
                if let Entry::Occupied(mut n) = m.writing.entry(b) {
                    *n.get_mut() -= 1;
                    if *n.get() == 0 {
                        n.remove();
                    }
                }
            }
        }
    }

    /// Mark slot `i` broken (its fast copy failed): it leaves the map once unpinned.
    fn broke(&self, i: u32, what: &str, e: &std::io::Error) {
        self.lock().slots[i as usize].broken = true;
        if !self.warned.swap(true, Ordering::Relaxed) {
            eprintln!(
                "storqos serve: fast tier {}: {what} failed ({e}); its blocks are served from the slow file",
                self.fast_path.display()
            );
        }
    }

    /// Read `len` bytes at `offset` as `plan` says (on an I/O thread): from the fast
    /// file (a hit; from the slow file if the fast one fails), or from the slow file
    /// via `read_slow`, copying the blocks to fill in.
    pub fn read(
        &self,
        plan: &Plan,
        offset: u64,
        len: u32,
        read_slow: &dyn Fn(u64, u32) -> std::result::Result<Vec<u8>, u32>,
    ) -> std::result::Result<Vec<u8>, u32> {
        if !plan.hit.is_empty() {
            match self.read_hit(&plan.hit, offset, len) {
                Ok(data) => return Ok(data),
                Err((i, e)) => {
                    self.broke(i, "a read", &e);
                    return read_slow(offset, len);
                }
            }
        }
        if plan.fill.is_empty() {
            return read_slow(offset, len);
        }
        // Read the whole blocks, keep the request's bytes, copy the fills in.
        let (first, last) = self.blocks_of(offset, len);
        let start = first * self.block;
        let end = ((last + 1) * self.block).min(self.size);
        let span = read_slow(start, (end - start) as u32)?;
        for &(b, i) in &plan.fill {
            let at = (b * self.block - start) as usize;
            let n = (self.block as usize).min(span.len() - at);
            if let Err(e) = self.fast.write_all_at(&span[at..at + n], u64::from(i) * self.block) {
                self.broke(i, "a copy into it", &e);
            }
        }
        let at = (offset - start) as usize;
        Ok(span[at..at + len as usize].to_vec())
    }

    /// Read as `plan` says only if that cannot block (the engine's fast path):
    /// a hit whose blocks the page cache holds (`preadv2(RWF_NOWAIT)` of the fast file),
    /// or a miss that copies nothing in, via `slow_nowait`. `None`: do it on an I/O
    /// thread ([`TierStore::read`]).
    pub fn read_nowait(
        &self,
        plan: &Plan,
        offset: u64,
        len: u32,
        slow_nowait: &dyn Fn(u64, u32) -> Option<Vec<u8>>,
    ) -> Option<Vec<u8>> {
        if !plan.fill.is_empty() {
            return None;
        }
        if plan.hit.is_empty() {
            return slow_nowait(offset, len);
        }
        #[cfg(target_os = "linux")]
        {
            let (first, _) = self.blocks_of(offset, len);
            let mut out = Vec::with_capacity(len as usize);
            for (k, &i) in plan.hit.iter().enumerate() {
                let b = first + k as u64;
                let from = if k == 0 { offset - b * self.block } else { 0 };
                let n = ((self.block - from) as usize).min(len as usize - out.len());
                let piece =
                    crate::positional::pread(&self.fast, u64::from(i) * self.block + from, n as u32, libc::RWF_NOWAIT)
                        .ok()
                        .flatten()?;
                out.extend_from_slice(&piece);
            }
            Some(out)
        }
        #[cfg(not(target_os = "linux"))]
        {
            None
        }
    }

    fn read_hit(&self, slots: &[u32], offset: u64, len: u32) -> std::result::Result<Vec<u8>, (u32, std::io::Error)> {
        let mut out = vec![0u8; len as usize];
        let (first, _) = self.blocks_of(offset, len);
        let mut done = 0usize;
        for (k, &i) in slots.iter().enumerate() {
            let b = first + k as u64;
            let from = if k == 0 { offset - b * self.block } else { 0 };
            let n = ((self.block - from) as usize).min(len as usize - done);
            self.fast.read_exact_at(&mut out[done..done + n], u64::from(i) * self.block + from).map_err(|e| (i, e))?;
            done += n;
        }
        Ok(out)
    }

    /// A write (or trim, write-zeroes) as `plan` says (on an I/O thread): `write_slow`
    /// changes the slow file; then each fast copy it covers is brought up to date, with
    /// `data` (a write: straight from the request's buffer, one `pwrite` per run of
    /// blocks whose slots follow each other) or re-read from the slow file via
    /// `read_slow`. Overlapping writes that update fast copies hold the same stripe
    /// locks throughout; a write that covers no fast copy takes none.
    pub fn write(
        &self,
        plan: &Plan,
        offset: u64,
        len: u32,
        data: Option<&[u8]>,
        write_slow: &mut dyn FnMut() -> std::result::Result<(), u32>,
        read_slow: &dyn Fn(u64, u32) -> std::result::Result<Vec<u8>, u32>,
    ) -> std::result::Result<(), u32> {
        if plan.update.is_empty() {
            // No fast copy to keep in step, and none can appear while this write is in
            // flight (a fill does not start for a block being written): no lock.
            return write_slow();
        }
        let _guards = self.lock_stripes(plan.write_blocks);
        write_slow()?;
        let end = offset + u64::from(len);
        let mut k = 0;
        while k < plan.update.len() {
            let (b, i) = plan.update[k];
            // With the data at hand, the blocks whose slots follow each other go in one
            // `pwrite` (all of them for `pin = 1`).
            let mut run = 1;
            if data.is_some() {
                while plan.update.get(k + run) == Some(&(b + run as u64, i + run as u32)) {
                    run += 1;
                }
            }
            k += run;
            let from = offset.max(b * self.block);
            let to = end.min(((b + run as u64) * self.block).min(self.size));
            if from >= to {
                continue;
            }
            let at = u64::from(i) * self.block + (from - b * self.block);
            let done = match data {
                Some(d) => self.fast.write_all_at(&d[(from - offset) as usize..(to - offset) as usize], at),
                None => match read_slow(from, (to - from) as u32) {
                    Ok(p) => self.fast.write_all_at(&p, at),
                    Err(_) => Err(std::io::Error::other("re-reading the slow file")),
                },
            };
            if let Err(e) = done {
                for j in 0..run as u32 {
                    self.broke(i + j, "an update", &e);
                }
            }
        }
        Ok(())
    }

    /// Lock the stripes of blocks `first ..= last` (at most all [`WRITE_STRIPES`]), in
    /// stripe order, so that overlapping writes cannot deadlock.
    fn lock_stripes(&self, (first, last): (u64, u64)) -> Vec<std::sync::MutexGuard<'_, ()>> {
        const _: () = assert!(WRITE_STRIPES == 64, "the stripe set is a u64 mask");
        let mut mask = 0u64;
        for b in first..=last.min(first + WRITE_STRIPES as u64 - 1) {
            mask |= 1 << (b % WRITE_STRIPES as u64);
        }
        let mut guards = Vec::with_capacity(mask.count_ones() as usize);
        while mask != 0 {
            let s = mask.trailing_zeros() as usize;
            guards.push(self.stripes[s].lock().unwrap_or_else(|p| p.into_inner()));
            mask &= mask - 1;
        }
        guards
    }

    /// Blocks in the map now: `(placed, cached)`.
    pub fn occupancy(&self) -> (u64, u64) {
        let m = self.lock();
        let cached = m.slots.iter().filter(|s| s.state == State::Cached).count() as u64;
        (self.placed, cached)
    }
}

/// Drop the slow file's clean pages from the page cache (Linux
/// `posix_fadvise(POSIX_FADV_DONTNEED)`: dirty pages stay, nothing is lost, the kernel
/// reads them again when needed). The rebuild's sequential read leaves the placed blocks
/// there in large readahead folios, in which every later small write costs more (ext4
/// walks the whole folio's buffer heads at each write: a 4 KiB `pwrite` took 6.0 µs
/// there against 1.4 µs in 4 KiB folios, see BENCHMARKS.md), and which duplicate what
/// the fast file now holds. A hint only: a failure changes nothing.
fn forget_cached(slow: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain syscall on an open fd; no memory is passed.
        unsafe { libc::posix_fadvise(slow.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = slow;
}

fn describe(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied (the gateway needs read and write access)".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::scratch::file as tmp;
    use tempfile::TempPath;

    /// A tier store over scratch files, its slow file open, and the files (removed when
    /// the last two are dropped).
    fn store(name: &str, size: u64, fast: u64, pin: f64, lru: bool) -> (TierStore, File, TempPath, TempPath) {
        let sp = tmp(&format!("tier-{name}-slow"), size);
        let fp = tmp(&format!("tier-{name}-fast"), fast);
        let slow = OpenOptions::new().read(true).write(true).open(&sp).unwrap();
        for b in 0..size / 4096 {
            slow.write_all_at(&[b as u8; 4096], b * 4096).unwrap();
        }
        let cfg = TierConfig { fast: fp.to_path_buf(), block_bytes: 4096, pin, lru };
        let t = TierStore::open(&cfg, &slow, size, false, "exports[0].tier").unwrap();
        (t, slow, sp, fp)
    }

    fn reader(slow: &File) -> impl Fn(u64, u32) -> std::result::Result<Vec<u8>, u32> + '_ {
        move |o, n| {
            let mut b = vec![0u8; n as usize];
            slow.read_exact_at(&mut b, o).map_err(|_| 5u32)?;
            Ok(b)
        }
    }

    #[test]
    fn placement_spreads_the_fraction_evenly() {
        for pin in [0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 1.0] {
            let n = (0..1000).filter(|&b| is_placed(b, pin)).count();
            assert_eq!(n, (1000.0 * pin) as usize, "{pin}");
            // Any run of 20 blocks is within one block of the fraction.
            let w = (100..120).filter(|&b| is_placed(b, pin)).count() as f64;
            assert!((w - 20.0 * pin).abs() <= 1.0, "{pin}: {w}");
        }
    }

    #[test]
    fn placed_blocks_hit_others_miss_and_data_is_the_slow_files() {
        let (t, slow, _sp, _fp) = store("placed", 64 << 10, 64 << 10, 0.75, false);
        assert_eq!((t.placed, t.slots), (12, 16));
        let mut hits = 0;
        for b in 0..16u64 {
            let p = t.route(false, b * 4096 + 100, 200);
            hits += (p.target == FAST) as u32;
            assert_eq!(p.target == FAST, is_placed(b, 0.75));
            assert_eq!(t.read(&p, b * 4096 + 100, 200, &reader(&slow)).unwrap(), vec![b as u8; 200]);
            t.release(&p);
        }
        assert_eq!(hits, 12);
        // A write-through updates the fast copy: the next hit reads the new data.
        let b = (0..16).find(|&b| is_placed(b, 0.75)).unwrap();
        let p = t.route(true, b * 4096 + 10, 20);
        assert_eq!(p.target, SLOW);
        let data = [0xee; 20];
        let mut w = || slow.write_all_at(&data, b * 4096 + 10).map_err(|_| 5u32);
        t.write(&p, b * 4096 + 10, 20, Some(&data), &mut w, &reader(&slow)).unwrap();
        t.release(&p);
        let p = t.route(false, b * 4096, 64);
        assert_eq!(p.target, FAST);
        let got = t.read(&p, b * 4096, 64, &reader(&slow)).unwrap();
        if cfg!(target_os = "linux") {
            // Just written, so in the page cache: the loop's non-blocking read serves it.
            assert_eq!(t.read_nowait(&p, b * 4096, 64, &|_, _| None), Some(got.clone()));
        }
        t.release(&p);
        assert_eq!(&got[10..30], &[0xee; 20]);
        assert_eq!(got[0], b as u8);
    }

    #[test]
    fn a_write_across_blocks_updates_every_fast_copy_it_covers() {
        // pin = 1: the slots follow the blocks (one `pwrite` for the run); pin = 0.5:
        // every other block is placed (one `pwrite` per slot). Unaligned at both ends.
        for (name, pin) in [("run", 1.0), ("gaps", 0.5)] {
            let (t, slow, _sp, _fp) = store(name, 64 << 10, 64 << 10, pin, false);
            let (off, len) = (4096 + 100, 3 * 4096u32);
            let data: Vec<u8> = (0..len).map(|k| (k % 251) as u8).collect();
            let p = t.route(true, off, len);
            assert_eq!(p.update.len(), (1..=4).filter(|&b| is_placed(b, pin)).count(), "{name}");
            let mut w = || slow.write_all_at(&data, off).map_err(|_| 5u32);
            t.write(&p, off, len, Some(&data), &mut w, &reader(&slow)).unwrap();
            t.release(&p);
            for b in 0..6u64 {
                let p = t.route(false, b * 4096, 4096);
                assert_eq!(p.target == FAST, is_placed(b, pin), "{name} {b}");
                let mut want = vec![0u8; 4096];
                slow.read_exact_at(&mut want, b * 4096).unwrap();
                assert_eq!(t.read(&p, b * 4096, 4096, &reader(&slow)).unwrap(), want, "{name} {b}");
                t.release(&p);
            }
            // A write-zeroes re-reads the slow file for the copies it covers.
            let p = t.route(true, 4096, 2 * 4096);
            let mut z = || slow.write_all_at(&[0u8; 2 * 4096], 4096).map_err(|_| 5u32);
            t.write(&p, 4096, 2 * 4096, None, &mut z, &reader(&slow)).unwrap();
            t.release(&p);
            for b in [1u64, 2] {
                let p = t.route(false, b * 4096, 4096);
                assert_eq!(t.read(&p, b * 4096, 4096, &reader(&slow)).unwrap(), vec![0u8; 4096], "{name} {b}");
                t.release(&p);
            }
        }
    }

    #[test]
    fn lru_copies_misses_in_and_evicts_the_least_recent_unpinned() {
        let (t, slow, _sp, _fp) = store("lru", 64 << 10, 3 * 4096, 0.0, true);
        let rd = |b: u64| {
            let p = t.route(false, b * 4096, 4096);
            let tgt = p.target;
            assert_eq!(t.read(&p, b * 4096, 4096, &reader(&slow)).unwrap(), vec![b as u8; 4096]);
            t.release(&p);
            tgt
        };
        assert_eq!(rd(0), SLOW);
        assert_eq!(rd(0), FAST);
        assert_eq!((rd(1), rd(2)), (SLOW, SLOW));
        assert_eq!(rd(0), FAST); // 0 is now the most recent; 1 the least
        assert_eq!(rd(3), SLOW); // evicts 1
        assert_eq!((rd(0), rd(2), rd(3)), (FAST, FAST, FAST));
        assert_eq!(rd(1), SLOW);
        // A pinned slot (a hit in flight) is not evicted.
        let held = t.route(false, 2 * 4096, 4096);
        assert_eq!(held.target, FAST);
        for b in 4..8 {
            rd(b);
        }
        let p = t.route(false, 2 * 4096, 4096);
        assert_eq!(p.target, FAST, "block 2 was evicted while in use");
        t.release(&p);
        t.release(&held);
        // A big read is not copied in.
        let p = t.route(false, 8 * 4096, PROMOTE_MAX_BYTES.min(32 << 10));
        t.release(&p);
        assert_eq!(t.occupancy(), (0, 3));
    }

    #[test]
    fn a_write_during_a_fill_makes_it_stale_and_no_fill_starts_under_a_write() {
        let (t, slow, _sp, _fp) = store("stale", 64 << 10, 8 * 4096, 0.0, true);
        let fill = t.route(false, 4096, 4096);
        assert_eq!(fill.fill.len(), 1);
        let w = t.route(true, 4096, 4096);
        let _ = t.read(&fill, 4096, 4096, &reader(&slow)).unwrap();
        t.release(&fill);
        // The fill was dropped: the block misses again, and no fill starts meanwhile.
        let p = t.route(false, 4096, 4096);
        assert_eq!((p.target, p.fill.len()), (SLOW, 0));
        t.release(&p);
        t.release(&w);
        let p = t.route(false, 4096, 4096);
        assert_eq!((p.target, p.fill.len()), (SLOW, 1));
        t.release(&p);
    }

    #[test]
    fn a_failing_fast_file_falls_back_to_the_slow_one_and_leaves_the_map() {
        let (t, slow, _sp, fp) = store("eio", 64 << 10, 64 << 10, 1.0, false);
        File::options().write(true).open(&fp).unwrap().set_len(0).unwrap();
        let p = t.route(false, 8192, 4096);
        assert_eq!(p.target, FAST);
        assert_eq!(t.read(&p, 8192, 4096, &reader(&slow)).unwrap(), vec![2u8; 4096]);
        t.release(&p);
        let p = t.route(false, 8192, 4096);
        assert_eq!(p.target, SLOW, "the broken slot left the map");
        t.release(&p);
    }

    #[test]
    fn bad_tiers_are_one_line_errors() {
        let sp = tmp("tier-bad-slow", 64 << 10);
        let fp = tmp("tier-bad-fast", 4096);
        let slow = File::open(&sp).unwrap();
        let cfg = TierConfig { fast: fp.to_path_buf(), block_bytes: 4096, pin: 0.5, lru: false };
        let e = TierStore::open(&cfg, &slow, 64 << 10, false, "exports[1].tier").unwrap_err().to_string();
        assert!(e.contains("exports[1].tier.fast:") && e.contains("hold 1 block(s)") && e.contains("needs 8"), "{e}");
        let e = TierStore::open(&TierConfig { pin: 1.5, ..cfg.clone() }, &slow, 1, false, "t").unwrap_err().to_string();
        assert!(e.contains("t.pin: the placed fraction must lie in [0, 1], got 1.5"), "{e}");
        let e = TierStore::open(&TierConfig { block_bytes: 3000, ..cfg.clone() }, &slow, 1, false, "t").unwrap_err();
        assert!(e.to_string().contains("t.block_bytes"), "{e}");
        let missing = TierConfig { fast: PathBuf::from("/nonexistent/fast.img"), ..cfg };
        let e = TierStore::open(&missing, &slow, 1, false, "t").unwrap_err().to_string();
        assert!(e.contains("t.fast: /nonexistent/fast.img: no such file"), "{e}");
        assert!(!e.contains('\n'));
    }
}
