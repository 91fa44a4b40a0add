//! Parallel array of k servers (seed 001 §4: "a RAID 5 system with 8 Seagate Cheetah9LP
//! 10K RPM disks"; spec "Device models: Array"): an internal queue, a bound on
//! outstanding requests, and throughput that rises with queue depth.
//!
//! **Model.** The array accepts up to `depth` outstanding requests (its slots; the
//! scheduler in front holds the rest). Each of its `k` servers serves one request at a
//! time, with a [`ServiceModel`]: constant, exponential or the [`crate::devices::disk`]
//! mechanical model. Requests reach servers by one of two [`Assign`] modes:
//!
//! - **Shared**: one internal queue feeds whichever server frees first (the lowest
//!   numbered idle server takes a new arrival). With Poisson arrivals this is the
//!   textbook M/M/k (exponential service) or M/D/k (constant service) queue.
//! - **Striped**: request goes to disk `(offset / stripe_bytes) mod k`, at local offset
//!   `(offset / (stripe_bytes·k))·stripe_bytes + offset mod stripe_bytes`; every disk has
//!   its own queue. This is RAID-0, and RAID-5 for reads (rotating parity only shifts
//!   which disk holds a stripe unit). Parity writes (read-modify-write) and the array and
//!   disk caches of seed 001 are not modelled: seed 001's write-through cache with
//!   immediate report makes writes cost like reads at the array. A request is served by
//!   the disk holding its first byte.
//!
//! **Why throughput rises with outstanding depth.** With striping, `d` outstanding
//! requests at uniformly random offsets land on `k(1 − (1 − 1/k)^d)` distinct disks on
//! average, so at depth 1 one disk works, at depth `d ≫ k` all `k` do (8 disks: 1, 3.3
//! and 7.1 busy at depths 1, 4 and 16). With the disk model and a positional queue
//! ([`crate::devices::QueuePolicy::Scan`] / [`crate::devices::QueuePolicy::Sptf`]), a
//! deeper per-disk queue also shortens seeks, so even one disk gets faster with depth.
//! Latency rises too: each request waits behind the others on its disk (Little's law:
//! response = depth / throughput grows as long as throughput grows slower than depth).
//!
//! **Events.** Completions leave in time order, keyed by (finish time, submission
//! sequence number), so equal finish times are broken by submission order and runs are
//! deterministic. Each server has at most one request in service, so the keys sit in the
//! leaves of a tournament tree over the servers: a start or a completion replays one
//! leaf-to-root path (see `Completions`). When a server frees, it starts its next
//! queued request at that same instant, drawing its service time from the RNG passed to
//! [`Device::pop_completion`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::device::{Device, DeviceState};
use crate::devices::disk::{Head, WaitQueue, Waiting};
use crate::devices::service::{PreparedService, ServiceModel};
use crate::error::{config, Result};
use crate::request::{Completion, Request};
use crate::rng::SimRng;
use crate::time::Nanos;

/// Default bound on outstanding requests of an array or a disk: effectively unbounded,
/// every request the scheduler releases enters the device (SCSI tagged queues allowed up
/// to 256 tags per LUN; 1,024 leaves room for whole arrays). Policies that want the queue
/// for themselves (AVATAR, Facade) hold requests back, or set a smaller depth.
pub const DEFAULT_DEPTH: usize = 1024;

/// Largest number of servers an array accepts. Every server holds its own queue and
/// state, built when the array is: a bound keeps a mistyped count (4294967296) an
/// error instead of an allocation failure that aborts the process.
pub const MAX_SERVERS: usize = 65_536;

/// Default stripe unit of a striped array: 64 KiB, a common RAID chunk size (seed 001
/// does not state its own).
pub const DEFAULT_STRIPE_BYTES: u64 = 64 * 1024;

/// How requests are assigned to servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assign {
    /// One FIFO (or positional) queue feeding whichever server frees first.
    Shared,
    /// Server `(offset / stripe_bytes) mod k`, each with its own queue.
    Striped {
        /// Stripe unit (bytes, > 0).
        stripe_bytes: u64,
    },
}

/// One server: its head (disk model) and the request it serves.
#[derive(Clone, Debug)]
struct Server {
    head: Head,
    busy: Option<Completion>,
    /// Own queue (striped mode only).
    queue: WaitQueue,
}

/// k servers with internal queues and at most `depth` outstanding requests.
#[derive(Clone, Debug)]
pub struct Parallel {
    service: ServiceModel,
    /// `service` with its constants computed once.
    prepared: PreparedService,
    assign: Assign,
    depth: usize,
    servers: Vec<Server>,
    /// The common queue (shared mode only).
    shared: WaitQueue,
    /// Idle servers, lowest index first (shared mode only).
    idle: BinaryHeap<Reverse<usize>>,
    /// In-service completions (see [`Completions`]).
    events: Completions,
    /// Striping by shifts and masks when the stripe unit and the server count are both
    /// powers of two: (log₂ stripe, log₂ k).
    pow2: Option<(u32, u32)>,
    outstanding: usize,
    /// Service-time factor by the requests in service when one starts (see
    /// [`Parallel::with_slowdown`]); empty: none.
    slowdown: Vec<f64>,
    /// Requests in internal queues (shared or per server), not in service.
    queued: usize,
    next_seq: u64,
    /// Latest time seen (debug check that time never goes backwards).
    now: Nanos,
}

/// Key of an idle server: after every real key.
const IDLE: u128 = u128::MAX;

/// (finish, submission seq) as one integer with the same order.
#[inline(always)]
fn completion_key(finish: Nanos, seq: u64) -> u128 {
    (finish as u128) << 64 | seq as u128
}

/// A node of the [`Completions`] tree: the smallest key of its subtree and its server.
#[derive(Clone, Copy, Debug)]
struct Node {
    key: u128,
    server: usize,
}

/// The in-service completions, at most one per server, in a tournament (winner) tree:
/// leaf `s` holds server `s`'s (finish, seq) key ([`IDLE`] when it serves nothing), every
/// inner node the smaller of its children's, so the root is the first completion. Keys
/// are distinct (seq is unique), so the order is the (finish, seq) order of a min-heap.
/// Starting or finishing a request replays one leaf-to-root path: log₂ k comparisons,
/// each a select by index rather than a branch, where rescanning the k keys after every
/// completion compared k times and mispredicted about as often as it found a new first.
#[derive(Clone, Debug)]
struct Completions {
    /// Number of leaves: the server count rounded up to a power of two (the spare leaves
    /// stay [`IDLE`]).
    leaves: usize,
    /// The tree in heap order (root 1, children of `i` at `2i` and `2i + 1`, server `s`'s
    /// leaf at `leaves + s`), stored by sibling pairs: node `i` is `pairs[i / 2][i % 2]`,
    /// so a parent reads both its children from one pair. `pairs[0][0]` is unused.
    pairs: Vec<[Node; 2]>,
    busy: usize,
}

impl Completions {
    fn new(servers: usize) -> Self {
        let leaves = servers.next_power_of_two();
        let idle = Node { key: IDLE, server: 0 };
        let mut c = Completions { leaves, pairs: vec![[idle; 2]; leaves], busy: 0 };
        for s in 0..servers {
            c.update(s, IDLE);
        }
        c
    }
    /// Node `i`.
    #[inline(always)]
    fn node(&mut self, i: usize) -> &mut Node {
        &mut self.pairs[i / 2][i % 2]
    }
    /// Set server `s`'s key and replay its path to the root: at each level the carried
    /// node is stored and the smaller of it and its sibling goes up (ties, between idle
    /// servers only, go left; which idle server wins is never read). The winner is
    /// picked by indexing the pair, not by a branch the data would mispredict.
    #[inline]
    fn update(&mut self, s: usize, key: u128) {
        let mut node = Node { key, server: s };
        let mut i = self.leaves + s;
        loop {
            let pair = &mut self.pairs[i / 2];
            pair[i % 2] = node;
            if i == 1 {
                return;
            }
            node = pair[(pair[1].key < pair[0].key) as usize];
            i /= 2;
        }
    }
    /// Server `s` (idle) starts a request finishing at `finish`.
    #[inline]
    fn set(&mut self, s: usize, finish: Nanos, seq: u64) {
        debug_assert_eq!(self.node(self.leaves + s).key, IDLE);
        self.busy += 1;
        self.update(s, completion_key(finish, seq));
    }
    /// Server `s` finished and starts another request right away: its leaf is marked
    /// idle and the [`Completions::set`] that follows replays its path.
    #[inline]
    fn vacate(&mut self, s: usize) {
        self.node(self.leaves + s).key = IDLE;
        self.busy -= 1;
    }
    /// Server `s` finished.
    #[inline]
    fn clear(&mut self, s: usize) {
        self.busy -= 1;
        self.update(s, IDLE);
    }
    /// The server finishing first and its finish time.
    #[inline]
    fn first(&self) -> Option<(usize, Nanos)> {
        let root = self.pairs[0][1];
        (self.busy > 0).then_some((root.server, (root.key >> 64) as Nanos))
    }
    fn len(&self) -> usize {
        self.busy
    }
}

impl Parallel {
    /// `servers` (≥ 1) servers assigned by `assign`, each serving by `service`, up to
    /// [`DEFAULT_DEPTH`] outstanding requests.
    pub fn new(servers: usize, assign: Assign, service: ServiceModel) -> Result<Self> {
        if servers == 0 {
            return config("array: servers must be >= 1, got 0");
        }
        if servers > MAX_SERVERS {
            return config(format!("array: servers must be at most {MAX_SERVERS}, got {servers}"));
        }
        if let Assign::Striped { stripe_bytes: 0 } = assign {
            return config("array: stripe_bytes must be > 0");
        }
        service.validate()?;
        let policy = service.queue_policy();
        Ok(Parallel {
            assign,
            depth: DEFAULT_DEPTH,
            servers: (0..servers)
                .map(|_| Server { head: Head::default(), busy: None, queue: WaitQueue::new(policy) })
                .collect(),
            shared: WaitQueue::new(policy),
            idle: (0..servers).map(Reverse).collect(),
            events: Completions::new(servers),
            pow2: match assign {
                Assign::Striped { stripe_bytes } if stripe_bytes.is_power_of_two() && servers.is_power_of_two() => {
                    Some((stripe_bytes.trailing_zeros(), servers.trailing_zeros()))
                }
                _ => None,
            },
            outstanding: 0,
            slowdown: Vec::new(),
            queued: 0,
            next_seq: 0,
            now: 0,
            prepared: service.prepare(),
            service,
        })
    }

    /// `servers` servers fed by one common queue (M/M/k, M/D/k).
    pub fn shared(servers: usize, service: ServiceModel) -> Result<Self> {
        Self::new(servers, Assign::Shared, service)
    }

    /// `servers` disks striped by `stripe_bytes`, each with its own queue (RAID-0/5).
    pub fn striped(servers: usize, stripe_bytes: u64, service: ServiceModel) -> Result<Self> {
        Self::new(servers, Assign::Striped { stripe_bytes }, service)
    }

    /// Scale each request's service time by `factors[n - 1]`, `n` the requests in
    /// service once it starts (itself included; past the list's end, its last
    /// factor): a device whose time per request rises with the requests it serves at
    /// once, as a measured one's does when its queue depth rises (the requests share
    /// its CPUs, channels or firmware). On a closed loop of `d ≤ k` requests each then
    /// takes `factors[d - 1]` × its time, so the array gives back a measured depth
    /// curve's latencies. Each factor finite and > 0; empty: none.
    pub fn with_slowdown(mut self, factors: Vec<f64>) -> Result<Self> {
        if let Some(f) = factors.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
            return config(format!("array: slowdown factors must be finite and > 0, got {f}"));
        }
        self.slowdown = factors;
        Ok(self)
    }

    /// Limit outstanding requests (queued + in service) to `depth` (≥ 1).
    pub fn with_depth(mut self, depth: usize) -> Result<Self> {
        if depth == 0 {
            return config("array: depth must be >= 1, got 0");
        }
        self.depth = depth;
        Ok(self)
    }

    /// The service model of every server.
    pub fn service(&self) -> &ServiceModel {
        &self.service
    }

    /// Number of servers.
    pub fn servers(&self) -> usize {
        self.servers.len()
    }

    /// Servers currently serving a request.
    pub fn busy_servers(&self) -> usize {
        self.events.len()
    }

    /// Requests waiting in internal queues (not in service).
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Which server `offset` belongs to, and its offset local to that server.
    #[inline]
    fn locate(&self, offset: u64) -> (usize, u64) {
        match self.assign {
            Assign::Shared => (usize::MAX, offset),
            Assign::Striped { stripe_bytes } => {
                if let Some((sb, kb)) = self.pow2 {
                    // The same arithmetic with shifts and masks (divisions are slow).
                    let unit = offset >> sb;
                    let k_mask = (1u64 << kb) - 1;
                    return ((unit & k_mask) as usize, ((unit >> kb) << sb) | (offset & (stripe_bytes - 1)));
                }
                let k = self.servers.len() as u64;
                let unit = offset / stripe_bytes;
                ((unit % k) as usize, (unit / k) * stripe_bytes + offset % stripe_bytes)
            }
        }
    }

    /// Start `w` on server `s` at `now`.
    fn start(&mut self, s: usize, w: Waiting, now: Nanos, rng: &mut SimRng) {
        let server = &mut self.servers[s];
        debug_assert!(server.busy.is_none(), "server {s} already busy");
        let mut service = self.prepared.serve(&mut server.head, w.pos, w.req.op, w.req.bytes, rng);
        if !self.slowdown.is_empty() {
            let n = self.events.len() + 1; // in service once it starts
            let f = self.slowdown[n.min(self.slowdown.len()) - 1];
            service = (service as f64 * f).round() as Nanos;
        }
        let finish = now + service;
        server.busy = Some(Completion { req: w.req, dispatch: w.dispatch, finish });
        self.events.set(s, finish, w.seq);
    }
}

impl Device for Parallel {
    fn name(&self) -> String {
        let k = self.servers.len();
        match self.assign {
            Assign::Shared => format!("array({k} × {}, shared, depth {})", self.service.name(), self.depth),
            Assign::Striped { stripe_bytes } => format!(
                "array({k} × {}, striped {} KiB, depth {})",
                self.service.name(),
                stripe_bytes / 1024,
                self.depth
            ),
        }
    }

    #[inline]
    fn state(&self) -> DeviceState {
        DeviceState { outstanding: self.outstanding, free_slots: self.depth - self.outstanding }
    }

    fn submit(&mut self, req: Request, now: Nanos, rng: &mut SimRng) {
        debug_assert!(self.outstanding < self.depth, "array submitted to with no free slot");
        debug_assert!(now >= self.now, "time went backwards: {now} < {}", self.now);
        self.now = now;
        let (s, local) = self.locate(req.offset);
        let w = Waiting { req, dispatch: now, pos: self.prepared.position(local), seq: self.next_seq };
        self.next_seq += 1;
        self.outstanding += 1;
        match self.assign {
            Assign::Shared => match self.idle.pop() {
                Some(Reverse(s)) => {
                    debug_assert_eq!(self.shared.len(), 0, "a server idles while requests wait");
                    self.start(s, w, now, rng)
                }
                None => {
                    self.shared.push(w);
                    self.queued += 1;
                }
            },
            Assign::Striped { .. } => {
                if self.servers[s].busy.is_none() {
                    self.start(s, w, now, rng);
                } else {
                    self.servers[s].queue.push(w);
                    self.queued += 1;
                }
            }
        }
        debug_assert!(self.outstanding <= self.depth);
        debug_assert_eq!(self.outstanding, self.events.len() + self.queued);
    }

    #[inline]
    fn next_completion(&self) -> Option<Nanos> {
        self.events.first().map(|(_, t)| t)
    }

    fn pop_completion(&mut self, rng: &mut SimRng) -> Option<Completion> {
        let (s, finish) = self.events.first()?;
        debug_assert!(finish >= self.now, "completion at {finish} before {}", self.now);
        self.now = finish;
        let done = self.servers[s].busy.take().expect("event for an idle server");
        self.outstanding -= 1;
        let server = &mut self.servers[s];
        let next = match self.assign {
            Assign::Shared => self.shared.pop_next(&mut server.head),
            Assign::Striped { .. } => server.queue.pop_next(&mut server.head),
        };
        match next {
            Some(w) => {
                self.queued -= 1;
                // The server's next request replaces its key: one replay of its path.
                self.events.vacate(s);
                self.start(s, w, finish, rng)
            }
            None => {
                self.events.clear(s);
                if self.assign == Assign::Shared {
                    self.idle.push(Reverse(s));
                }
            }
        }
        debug_assert_eq!(self.outstanding, self.events.len() + self.queued);
        Some(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_MS;

    fn req(id: u64, offset: u64) -> Request {
        Request { offset, ..Request::new(id, 0, 0, 4096) }
    }

    fn drain(d: &mut Parallel, rng: &mut SimRng) -> Vec<(u64, Nanos)> {
        std::iter::from_fn(|| d.pop_completion(rng)).map(|c| (c.req.id, c.finish)).collect()
    }

    #[test]
    fn slowdown_scales_a_request_by_the_requests_in_service_when_it_starts() {
        // 2 servers of 10 ms; a request alone keeps its time, two at once take 1.5x each.
        let d = Parallel::shared(2, ServiceModel::constant(100.0).unwrap()).unwrap();
        let mut d = d.with_slowdown(vec![1.0, 1.5]).unwrap();
        let mut rng = SimRng::new(1);
        d.submit(req(0, 0), 0, &mut rng);
        assert_eq!(drain(&mut d, &mut rng), vec![(0, 10 * NS_PER_MS)]);
        // At 20 ms: the first starts alone (10 ms), the second beside it (15 ms); a
        // third queues and starts at 30 ms beside the second (15 ms more: 45 ms).
        for id in 1..=3 {
            d.submit(req(id, 0), 20 * NS_PER_MS, &mut rng);
        }
        assert_eq!(drain(&mut d, &mut rng), vec![(1, 30 * NS_PER_MS), (2, 35 * NS_PER_MS), (3, 45 * NS_PER_MS)]);
        let bad = Parallel::shared(2, ServiceModel::constant(1.0).unwrap()).unwrap().with_slowdown(vec![1.0, 0.0]);
        assert!(bad.unwrap_err().to_string().contains("slowdown factors must be finite and > 0, got 0"));
    }

    #[test]
    fn shared_constant_servers_form_md_k() {
        // 2 servers of 100 IOPS (10 ms), 5 requests at t = 0: finishes 10, 10, 20, 20, 30.
        let mut d = Parallel::shared(2, ServiceModel::constant(100.0).unwrap()).unwrap();
        let mut rng = SimRng::new(1);
        for i in 0..5 {
            d.submit(req(i, 0), 0, &mut rng);
        }
        assert_eq!(d.state(), DeviceState { outstanding: 5, free_slots: DEFAULT_DEPTH - 5 });
        assert_eq!(d.busy_servers(), 2);
        assert_eq!(d.queued(), 3);
        let ms = NS_PER_MS;
        assert_eq!(drain(&mut d, &mut rng), vec![(0, 10 * ms), (1, 10 * ms), (2, 20 * ms), (3, 20 * ms), (4, 30 * ms)]);
        assert_eq!(d.state().outstanding, 0);
    }

    #[test]
    fn striping_maps_offsets_to_disks() {
        let d = Parallel::striped(4, 65536, ServiceModel::constant(100.0).unwrap()).unwrap();
        assert_eq!(d.locate(0), (0, 0));
        assert_eq!(d.locate(65536 + 10), (1, 10));
        assert_eq!(d.locate(4 * 65536 + 7), (0, 65536 + 7));
        assert_eq!(d.locate(7 * 65536), (3, 65536));
    }

    #[test]
    fn striped_requests_queue_per_disk() {
        // Two requests on disk 0 and one on disk 1: disk 0 serves them one after the other.
        let mut d = Parallel::striped(2, 4096, ServiceModel::constant(100.0).unwrap()).unwrap();
        let mut rng = SimRng::new(1);
        d.submit(req(0, 0), 0, &mut rng);
        d.submit(req(1, 8192), 0, &mut rng);
        d.submit(req(2, 4096), 0, &mut rng);
        let ms = NS_PER_MS;
        assert_eq!(drain(&mut d, &mut rng), vec![(0, 10 * ms), (2, 10 * ms), (1, 20 * ms)]);
    }

    #[test]
    fn depth_bounds_free_slots_and_dispatch_times_are_kept() {
        let mut d = Parallel::shared(1, ServiceModel::constant(1000.0).unwrap()).unwrap().with_depth(2).unwrap();
        let mut rng = SimRng::new(1);
        d.submit(req(0, 0), 5, &mut rng);
        d.submit(req(1, 0), 7, &mut rng);
        assert_eq!(d.state().free_slots, 0);
        let a = d.pop_completion(&mut rng).unwrap();
        let b = d.pop_completion(&mut rng).unwrap();
        assert_eq!((a.dispatch, a.finish), (5, 5 + NS_PER_MS));
        assert_eq!((b.dispatch, b.finish), (7, 5 + 2 * NS_PER_MS));
    }

    #[test]
    fn random_operations_keep_the_books() {
        // Interleave submissions and completions on a striped SPTF disk array; every request
        // completes once, in time order, and the queue counters stay consistent.
        use crate::devices::{DiskProfile, QueuePolicy};
        let service = ServiceModel::disk(DiskProfile::enterprise_10k(), QueuePolicy::Sptf).unwrap();
        let mut d = Parallel::striped(3, 65536, service).unwrap().with_depth(10).unwrap();
        let mut rng = SimRng::new(9);
        let (mut now, mut next_id, mut done) = (0, 0u64, Vec::new());
        while done.len() < 5000 {
            if d.state().free_slots > 0 && (next_id < 5000) && rng.bernoulli(0.6) {
                d.submit(req(next_id, rng.below(1 << 30)), now, &mut rng);
                next_id += 1;
            } else if let Some(c) = d.pop_completion(&mut rng) {
                assert!(c.finish >= now);
                now = c.finish;
                done.push(c.req.id);
            }
            let per_server: usize = d.servers.iter().map(|s| s.queue.len()).sum();
            assert_eq!(d.queued(), per_server + d.shared.len());
            assert_eq!(d.state().outstanding, d.queued() + d.busy_servers());
            assert!(d.state().outstanding <= 10);
        }
        done.sort_unstable();
        assert_eq!(done, (0..5000).collect::<Vec<_>>());
    }

    #[test]
    fn bad_parameters_are_named() {
        let s = ServiceModel::constant(1.0).unwrap();
        assert!(Parallel::shared(0, s.clone()).unwrap_err().to_string().contains("servers"));
        assert!(Parallel::striped(2, 0, s.clone()).unwrap_err().to_string().contains("stripe_bytes"));
        assert!(Parallel::shared(2, s).unwrap().with_depth(0).unwrap_err().to_string().contains("depth"));
        assert!(ServiceModel::exponential(-1.0).unwrap_err().to_string().contains("iops"));
    }
}
