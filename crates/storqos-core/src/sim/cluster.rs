//! A cluster in the simulator: `S` servers, each a device model with its own scheduler,
//! and tenants whose requests a placement function spreads over them (the setting of
//! dmClock, Gulati, Merchant & Varman, OSDI 2010, §4; Ceph's OSDs behind RBD images).
//!
//! - **Placement** ([`PlacementSpec`]): a request's object (its tenant and
//!   `offset / object_bytes`) hashes, with a seed, to a primary server; its replicas are
//!   the next servers round the ring. A read goes to the primary, a write to every
//!   replica and completes when the last one does (what the client waits for). Or the
//!   caller names each request's server (a trace's own device column).
//! - **Coordination** ([`Coordination`]) of the tenants' promises, which are about their
//!   total service:
//!   - `none`: every server runs the policy on its own (a tenant's reservation and
//!     limit hold per server, so its total is their sum over the servers it uses);
//!   - `dmclock`: every server runs mClock with the tenants' global parameters and each
//!     request carries its tenant's δ and ρ ([`crate::schedulers::dmclock`]);
//!   - `split`: every server runs mClock with a share of each tenant's global
//!     reservation, weight and limit, recomputed every period from the tenant's demand
//!     at each server (its arrivals in the period and its backlog), as bQueue and pShift
//!     allocate: a server where the tenant asks nothing keeps a floor of 1 % of an even
//!     share, and the shares always sum to the global figure. The weight's shares keep
//!     the cluster weighted-fair: a tenant that spreads over many servers does not get
//!     its whole weight at each.
//!
//! One event loop over all servers: the earliest of the next arrival, the servers'
//! next completions and timers (a heap over servers) and the allocator's period; at one
//! instant, completions and timers come before arrivals, and every server touched at
//! that instant is offered its free slots once all of the instant's events are in, as
//! in [`crate::sim::simulate`]. The run is a pure function of its inputs and seed.
//!
//! Results: per tenant as its client sees it (arrival to the last replica's
//! completion) with per-window series, and per server as the server sees its share.

use std::collections::HashMap;

use serde::Deserialize;

use crate::device::Device;
use crate::error::{config, Error, Result};
use crate::request::{Completion, Op, Request, MAX_TENANTS};
use crate::rng::SimRng;
use crate::scheduler::Scheduler;
use crate::schedulers::dmclock::{DistCharge, ServedBy, ServiceTracker};
use crate::schedulers::indexed_heap::IndexedHeap;
use crate::schedulers::AtLimit;
use crate::sim::engine::{check_run, ClosedLoop, OpenSource, SimConfig, NEVER};
use crate::sim::summary::{GroupSummary, Recorder, WindowSeries};
use crate::sim::workload::ClosedClient;
use crate::spec::{AnyDevice, AnyScheduler, DeviceSpec, SchedulerSpec};
use crate::time::{Nanos, NS_PER_MS};

/// Most servers a cluster may have (server indices are `u32`; per-server state is kept
/// in vectors, so the bound keeps a typo an error instead of an allocation).
pub const MAX_SERVERS: u32 = 65_536;

/// Most replicas of an object.
pub const MAX_REPLICAS: u32 = 16;

/// Object size of hash placement when none is given: 4 MiB (an RBD image's objects).
pub const DEFAULT_OBJECT_BYTES: u64 = 4 << 20;

/// Period of the `split` allocator when none is given: 500 ms.
pub const DEFAULT_SPLIT_PERIOD: Nanos = 500 * NS_PER_MS;

/// A server that saw none of a tenant's demand in a period keeps this fraction of an
/// even share of the tenant's reservation and limit under `split` (so a tenant moving
/// to it is not stopped dead for a period).
pub const SPLIT_FLOOR: f64 = 0.01;

/// The `split` allocator's rule: a server's share of a tenant's global `total` (a
/// reservation or a limit, IOPS) when the server saw demand `d` of the tenant's `sum_d`
/// over all `servers`: [`SPLIT_FLOOR`] of an even share, and the rest by demand, so the
/// shares over all servers sum to `total`. A tenant with no demand anywhere (`sum_d`
/// 0) is split evenly. The live gateways of a cluster split by the same rule.
pub fn split_share(total: f64, servers: u32, d: f64, sum_d: f64) -> f64 {
    let n = servers.max(1) as f64;
    if sum_d <= 0.0 {
        return total / n;
    }
    let floor = SPLIT_FLOOR * total / n;
    floor + (total - floor * n) * d / sum_d
}

/// Which server(s) serve a request.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PlacementSpec {
    /// Hash of (tenant, offset / object_bytes) with the seed picks the primary; the
    /// replicas are the next servers round the ring; reads to the primary, writes to all.
    Hash {
        /// Object size in bytes (> 0).
        #[serde(default = "default_object_bytes")]
        object_bytes: u64,
        /// Copies of each object (1..=16, at most the servers).
        #[serde(default = "one")]
        replicas: u32,
        /// Seed of the hash (another seed, another placement).
        #[serde(default)]
        seed: u64,
    },
    /// The caller gives each open-loop request's server (a trace's device column).
    Given,
}

impl Default for PlacementSpec {
    fn default() -> Self {
        PlacementSpec::Hash { object_bytes: DEFAULT_OBJECT_BYTES, replicas: 1, seed: 0 }
    }
}

fn default_object_bytes() -> u64 {
    DEFAULT_OBJECT_BYTES
}
fn one() -> u32 {
    1
}
fn default_split_period() -> Nanos {
    DEFAULT_SPLIT_PERIOD
}

/// How the servers keep the tenants' global promises.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Coordination {
    /// Each server on its own.
    #[default]
    None,
    /// dmClock: global parameters at every server, δ and ρ with every request.
    Dmclock {
        /// When a server charges the reports: `"arrival"` (default, storqos) or
        /// `"request"` (each request its own, as the paper and Ceph's dmclock).
        #[serde(default)]
        charge: DistCharge,
    },
    /// Local mClock with the global reservations, weights and limits split by demand
    /// every period.
    Split {
        /// Allocation period (ns, > 0).
        #[serde(default = "default_split_period")]
        period_ns: Nanos,
    },
}

/// A cluster: how many servers, how requests are placed, how promises are kept.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSpec {
    /// Servers (1..=65,536), each with the run's device model and its own scheduler.
    pub servers: u32,
    /// Placement of requests on servers.
    #[serde(default)]
    pub placement: PlacementSpec,
    /// Coordination of the tenants' promises.
    #[serde(default)]
    pub coordination: Coordination,
}

impl ClusterSpec {
    /// Check the numbers and that the policy fits the coordination (dmclock and split
    /// coordinate mClock's promises: the policy must be mClock, and waiting at a limit).
    pub fn validate(&self, policy: &SchedulerSpec) -> Result<()> {
        if self.servers == 0 || self.servers > MAX_SERVERS {
            return config(format!("cluster: servers must be 1..={MAX_SERVERS}, got {}", self.servers));
        }
        if let PlacementSpec::Hash { object_bytes, replicas, .. } = self.placement {
            if object_bytes == 0 {
                return config("cluster: placement object_bytes must be > 0");
            }
            if replicas == 0 || replicas > MAX_REPLICAS.min(self.servers) {
                return config(format!(
                    "cluster: placement replicas must be 1..={} (at most the {} servers), got {replicas}",
                    MAX_REPLICAS.min(self.servers),
                    self.servers
                ));
            }
        }
        if let Coordination::Split { period_ns: 0 } = self.coordination {
            return config("cluster: split period_ns must be > 0");
        }
        if self.coordination != Coordination::None {
            let what = match self.coordination {
                Coordination::Dmclock { .. } => "dmclock",
                _ => "split",
            };
            match policy {
                SchedulerSpec::Mclock { at_limit: AtLimit::Reject, .. } => {
                    return config(format!(
                        "cluster: {what} coordination waits at a limit: the mclock policy's at_limit \"reject\" is not supported there"
                    ))
                }
                SchedulerSpec::Mclock { .. } => {}
                _ => {
                    return config(format!(
                        "cluster: {what} coordination keeps mClock's promises: give the mclock policy (got another)"
                    ))
                }
            }
        }
        Ok(())
    }
}

/// What one server did in a cluster run (its share, as the server sees it).
#[derive(Clone, Debug, Default)]
pub struct ServerSummary {
    /// Sub-requests it served (a write counts once per replica), their bytes, and
    /// response times from arrival at this server to completion here.
    pub served: GroupSummary,
    /// Of those, served in mClock's reservation phase (dmclock and split).
    pub by_reservation: u64,
    /// Sub-requests still queued or in service when the run ended.
    pub unfinished: u64,
}

/// Everything a cluster run produces.
#[derive(Debug)]
pub struct ClusterResult {
    /// Per tenant, as its client sees its requests (arrival to last replica's completion).
    pub tenants: Vec<GroupSummary>,
    /// All requests together.
    pub total: GroupSummary,
    /// Per-window, per-tenant series (client view).
    pub windows: WindowSeries,
    /// Per server.
    pub servers: Vec<ServerSummary>,
    /// Requests that arrived.
    pub arrived: u64,
    /// Requests not completed when the run ended.
    pub unfinished: u64,
    /// Time of the last event processed.
    pub end: Nanos,
    /// Events processed (arrivals, server events, allocator periods).
    pub events: u64,
}

/// One server: its scheduler, its device, what it served.
struct Node {
    sched: AnyScheduler,
    dev: AnyDevice,
    summary: ServerSummary,
    /// Touched at the current instant: offer its free slots before time moves on.
    dirty: bool,
}

/// Mark server `s` as touched at the current instant (once).
#[inline]
fn touch(nodes: &mut [Node], dirty: &mut Vec<u32>, s: u32) {
    let node = &mut nodes[s as usize];
    if !node.dirty {
        node.dirty = true;
        dirty.push(s);
    }
}

impl Node {
    /// The earliest of its next completion and its scheduler's timer.
    #[inline]
    fn next_event(&self) -> Nanos {
        self.dev.next_completion().unwrap_or(NEVER).min(self.sched.next_timer().unwrap_or(NEVER))
    }
}

/// A request in flight: its replicas not yet done, when the first was dispatched and
/// the last finished.
#[derive(Clone, Copy)]
struct Flight {
    req: Request,
    pending: u32,
    dispatch: Nanos,
    finish: Nanos,
}

/// Bit of a sub-request's id that says it was served in the reservation phase (set at
/// dispatch, read at completion: the client's tracker counts it).
const RESERVATION_BIT: u64 = 1 << 63;

/// The servers of one request.
#[derive(Clone, Copy)]
struct Targets {
    first: u32,
    count: u32,
}

/// splitmix64: a well-mixed 64-bit hash of `x`.
#[inline]
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The primary server of `tenant`'s object at byte `offset` under hash placement
/// ([`PlacementSpec::Hash`]) over `servers` servers (> 0): what the simulator places, and
/// what a live replay spread over several gateways uses so that the simulator predicts it.
#[inline]
pub fn hash_primary(tenant: u32, offset: u64, object_bytes: u64, seed: u64, servers: u32) -> u32 {
    let object = offset / object_bytes;
    let h = mix(mix(object ^ seed.rotate_left(17)) ^ (tenant as u64));
    (h % servers as u64) as u32
}

/// A tenant's global reservation, weight and limit under `split`.
#[derive(Clone, Copy, Debug)]
struct Promise {
    reservation: f64,
    weight: f64,
    limit: Option<f64>,
}

/// The `split` allocator's state: each tenant's global promises, its demand per server
/// in the current period, and the pairs above the floor.
struct Split {
    period: Nanos,
    next: Nanos,
    /// Global promises per tenant: those the policy's lists name (the others are left
    /// alone, at the default weight and no reservation or limit everywhere).
    global: Vec<Promise>,
    /// (tenant, server) → arrivals in the current period.
    demand: HashMap<(u32, u32), u64>,
    /// Pairs given more than the floor at the last allocation, in (tenant, server) order.
    above_floor: Vec<(u32, u32)>,
}

impl Split {
    fn new(policy: &SchedulerSpec, period: Nanos) -> Self {
        let SchedulerSpec::Mclock { reservations, limits, weights, .. } = policy else {
            unreachable!("validated: split coordinates mclock")
        };
        let n = reservations.len().max(limits.len()).max(weights.len());
        let global = (0..n)
            .map(|i| Promise {
                reservation: reservations.get(i).copied().unwrap_or(0.0),
                weight: weights.get(i).copied().unwrap_or(crate::schedulers::tags::DEFAULT_WEIGHT),
                limit: limits.get(i).copied().flatten(),
            })
            .collect();
        Split { period, next: period, global, demand: HashMap::new(), above_floor: Vec::new() }
    }

    fn share(total: f64, servers: u32, d: f64, sum_d: f64) -> f64 {
        split_share(total, servers, d, sum_d)
    }

    fn set(nodes: &mut [Node], t: u32, s: u32, g: Promise, d: f64, sum_d: f64, now: Nanos) -> Result<()> {
        let n = nodes.len() as u32;
        let r = Split::share(g.reservation, n, d, sum_d);
        let w = Split::share(g.weight, n, d, sum_d);
        let l = g.limit.map(|l| Split::share(l, n, d, sum_d));
        if let AnyScheduler::Mclock(m) = &mut nodes[s as usize].sched {
            m.set_reservation_limit(t, r, l, now)?;
            m.set_weight(t, w, now)?;
        }
        Ok(())
    }

    /// Before any demand is known: an even share everywhere.
    fn even(&mut self, nodes: &mut [Node]) -> Result<()> {
        let n = nodes.len() as u32;
        for t in 0..self.global.len() as u32 {
            let g = self.global[t as usize];
            for s in 0..n {
                Split::set(nodes, t, s, g, 1.0, n as f64, 0)?;
                self.above_floor.push((t, s));
            }
        }
        Ok(())
    }

    /// Set the shares from the period's demand (arrivals, and the backlog where a
    /// tenant had more than the floor). A tenant with no demand keeps its shares.
    fn allocate(&mut self, nodes: &mut [Node], now: Nanos) -> Result<()> {
        let mut demand: Vec<((u32, u32), f64)> = self.demand.drain().map(|(k, d)| (k, d as f64)).collect();
        for &(t, s) in &self.above_floor {
            if let AnyScheduler::Mclock(m) = &nodes[s as usize].sched {
                let q = m.queued_in(t);
                if q > 0 {
                    demand.push(((t, s), q as f64));
                }
            }
        }
        demand.sort_by_key(|&(k, _)| k);
        demand.dedup_by(|b, a| {
            let same = a.0 == b.0;
            if same {
                a.1 += b.1;
            }
            same
        });
        let prev = std::mem::take(&mut self.above_floor);
        let (mut di, mut pi) = (0, 0);
        while di < demand.len() || pi < prev.len() {
            let t = match (demand.get(di), prev.get(pi)) {
                (Some(&((a, _), _)), Some(&(b, _))) => a.min(b),
                (Some(&((a, _), _)), None) => a,
                (None, Some(&(b, _))) => b,
                (None, None) => unreachable!(),
            };
            let d_end = di + demand[di..].iter().take_while(|((x, _), _)| *x == t).count();
            let p_end = pi + prev[pi..].iter().take_while(|(x, _)| *x == t).count();
            let (ds, ps) = (&demand[di..d_end], &prev[pi..p_end]);
            let Some(&g) = self.global.get(t as usize) else {
                (di, pi) = (d_end, p_end);
                continue;
            };
            if ds.is_empty() {
                self.above_floor.extend_from_slice(ps);
            } else {
                let sum_d: f64 = ds.iter().map(|&(_, d)| d).sum();
                for &((_, s), d) in ds {
                    Split::set(nodes, t, s, g, d, sum_d, now)?;
                    self.above_floor.push((t, s));
                }
                for &(_, s) in ps {
                    if ds.binary_search_by_key(&(t, s), |&(k, _)| k).is_err() {
                        Split::set(nodes, t, s, g, 0.0, sum_d, now)?;
                    }
                }
            }
            (di, pi) = (d_end, p_end);
        }
        Ok(())
    }
}

/// Run `open` (arrival-ordered requests; with [`PlacementSpec::Given`], `given[i]` is the
/// `i`-th request's server) and `closed` clients through a cluster of
/// `cluster.servers` servers, each a `device` behind its own `policy`.
///
/// Errors: those of [`crate::sim::simulate`], a cluster spec that does not hold
/// ([`ClusterSpec::validate`]), a given server out of range or missing, closed clients
/// with given placement (they have no device column).
#[allow(clippy::too_many_arguments)]
pub fn simulate_cluster<I>(
    open: I,
    given: Option<&[u32]>,
    closed: &[ClosedClient],
    policy: &SchedulerSpec,
    device: &DeviceSpec,
    cluster: &ClusterSpec,
    cfg: &SimConfig,
) -> Result<ClusterResult>
where
    I: IntoIterator<Item = Request>,
{
    check_run(closed, cfg)?;
    cluster.validate(policy)?;
    let given = match (&cluster.placement, given) {
        (PlacementSpec::Given, Some(g)) => {
            if !closed.is_empty() {
                return config("cluster: closed-loop clients have no server column: use hash placement with them");
            }
            Some(g)
        }
        (PlacementSpec::Given, None) => return config("cluster: given placement needs each request's server"),
        (PlacementSpec::Hash { .. }, _) => None,
    };
    let n = cluster.servers;
    let dmclock = matches!(cluster.coordination, Coordination::Dmclock { .. });
    // mClock's servers are clones of one, sharing its parameter lists, each giving a
    // tenant's queue storage back when the tenant leaves it; other policies are built
    // for each server.
    let mclock = match policy.build()? {
        AnyScheduler::Mclock(mut m) => {
            m.set_compact(true);
            if let Coordination::Dmclock { charge } = cluster.coordination {
                m.set_dist_charge(charge);
            }
            Some(m)
        }
        _ => None,
    };
    let mut nodes = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let sched = match &mclock {
            Some(m) => AnyScheduler::Mclock(m.clone()),
            None => policy.build()?,
        };
        nodes.push(Node { sched, dev: device.build()?, summary: ServerSummary::default(), dirty: false });
    }
    let mut split = match cluster.coordination {
        Coordination::Split { period_ns } => Some(Split::new(policy, period_ns)),
        _ => None,
    };
    if let Some(sp) = split.as_mut() {
        // Even shares from the start (demand is unknown until a period has passed).
        sp.even(&mut nodes)?;
    }
    let mut trackers: Vec<ServiceTracker> = Vec::new();
    let until = cfg.until.unwrap_or(NEVER).min(NEVER - 1);
    let mut rng = SimRng::new(cfg.seed);
    let mut open = OpenSource::new(open.into_iter());
    let mut clients = ClosedLoop::new(closed);
    let mut rec = Recorder::new(cfg.window, false);
    let mut heap: IndexedHeap<Nanos> = IndexedHeap::default();
    let mut flights: Vec<Flight> = Vec::new();
    let mut free: Vec<u32> = Vec::new();
    let mut dirty: Vec<u32> = Vec::new();
    let (mut arrived, mut completed, mut events, mut in_servers, mut index) = (0u64, 0u64, 0u64, 0u64, 0usize);
    let mut now: Nanos = 0;
    let mut t_wake = clients.next_wake();

    loop {
        let t_arr = open.t.min(t_wake);
        let t_srv = heap.top().map_or(NEVER, |(t, _)| t);
        let t_split = split.as_ref().map_or(NEVER, |s| s.next);
        let mut t_next = t_srv.min(t_split).min(t_arr);
        if !dirty.is_empty() && t_next > now {
            for &s in &dirty {
                let node = &mut nodes[s as usize];
                node.dirty = false;
                loop {
                    let st = node.dev.state();
                    if st.free_slots == 0 {
                        break;
                    }
                    let Some(mut r) = node.sched.dispatch(now, &st) else { break };
                    if let AnyScheduler::Mclock(m) = &node.sched {
                        if m.last_served_by() == Some(ServedBy::Reservation) {
                            r.id |= RESERVATION_BIT;
                        }
                    }
                    node.dev.submit(r, now, &mut rng);
                }
                let t = node.next_event();
                if t == NEVER {
                    heap.remove(s);
                } else {
                    heap.set(s, t);
                }
            }
            dirty.clear();
            let t_srv = heap.top().map_or(NEVER, |(t, _)| t);
            t_next = t_srv.min(t_split).min(t_arr);
        }
        let t_srv = heap.top().map_or(NEVER, |(t, _)| t);
        if t_next > until {
            break;
        }
        // Nothing left but timers and the allocator: over once no work remains.
        if t_arr == NEVER && in_servers == 0 {
            break;
        }
        now = now.max(t_next);
        events += 1;
        if rec.crossed(now) {
            rec.advance(now, &mut |_| {});
        }
        if t_srv == t_next {
            // A server's completions and timer at `now`.
            let (_, s) = heap.top().expect("a server was due");
            let node = &mut nodes[s as usize];
            while node.dev.next_completion() == Some(now) {
                let mut c: Completion = node.dev.pop_completion(&mut rng).expect("device announced a completion");
                let by_resv = c.req.id & RESERVATION_BIT != 0;
                c.req.id &= !RESERVATION_BIT;
                node.sched.complete(&c, now);
                node.summary.served.record(&c);
                node.summary.by_reservation += by_resv as u64;
                node.summary.unfinished -= 1;
                in_servers -= 1;
                let f = &mut flights[c.req.id as usize];
                if dmclock {
                    let by = if by_resv { ServedBy::Reservation } else { ServedBy::Weight };
                    trackers[f.req.tenant as usize].completed(s, by);
                }
                f.pending -= 1;
                f.dispatch = f.dispatch.min(c.dispatch);
                f.finish = f.finish.max(c.finish);
                if f.pending == 0 {
                    let done = Completion { req: f.req, dispatch: f.dispatch, finish: f.finish };
                    free.push(c.req.id as u32);
                    completed += 1;
                    rec.completion(done);
                    if ClosedLoop::issued(done.req.id) {
                        t_wake = clients.completed(done.req.id, now, &mut rng);
                    }
                }
            }
            if node.sched.next_timer().is_some_and(|t| t <= now) {
                node.sched.on_timer(now);
            }
            touch(&mut nodes, &mut dirty, s);
            // Re-keyed when its slots are offered (before time moves on).
            heap.remove(s);
        } else if t_split == t_next {
            let sp = split.as_mut().expect("the allocator was due");
            sp.allocate(&mut nodes, now)?;
            sp.next = now + sp.period;
            for s in 0..n {
                if nodes[s as usize].sched.queued() > 0 {
                    touch(&mut nodes, &mut dirty, s);
                }
            }
        } else {
            // An arrival: from the open stream (first at a tie) or a closed client.
            let req = if open.t <= t_wake {
                open.in_order()?;
                let r = open.next;
                open.advance();
                r
            } else {
                let r = clients.issue(now, &mut rng);
                t_wake = clients.next_wake();
                r
            };
            if req.tenant >= MAX_TENANTS {
                return Err(Error::InvalidInput(format!(
                    "request {}: tenant {} is not below {MAX_TENANTS}",
                    req.id, req.tenant
                )));
            }
            arrived += 1;
            rec.arrival(req.tenant);
            let targets = match (&cluster.placement, given) {
                (PlacementSpec::Hash { object_bytes, replicas, seed }, _) => {
                    let count = if req.op == Op::Write { *replicas } else { 1 };
                    Targets { first: hash_primary(req.tenant, req.offset, *object_bytes, *seed, n), count }
                }
                (PlacementSpec::Given, Some(g)) => {
                    let s = *g.get(index).ok_or_else(|| {
                        Error::InvalidInput(format!(
                            "cluster: no server given for request {} (the {}th)",
                            req.id, index
                        ))
                    })?;
                    if s >= n {
                        return Err(Error::InvalidInput(format!(
                            "cluster: request {} is placed on server {s}, but the cluster has {n} (0..{})",
                            req.id,
                            n - 1
                        )));
                    }
                    Targets { first: s, count: 1 }
                }
                (PlacementSpec::Given, None) => unreachable!("checked above"),
            };
            if !ClosedLoop::issued(req.id) {
                index += 1;
            }
            let slot = match free.pop() {
                Some(i) => {
                    flights[i as usize] = Flight { req, pending: targets.count, dispatch: NEVER, finish: 0 };
                    i
                }
                None => {
                    flights.push(Flight { req, pending: targets.count, dispatch: NEVER, finish: 0 });
                    (flights.len() - 1) as u32
                }
            };
            if dmclock && trackers.len() <= req.tenant as usize {
                trackers.resize(req.tenant as usize + 1, ServiceTracker::new());
            }
            for j in 0..targets.count {
                let s = (targets.first + j) % n;
                let mut sub = req;
                sub.id = slot as u64;
                let node = &mut nodes[s as usize];
                if let Some(sp) = split.as_mut() {
                    *sp.demand.entry((req.tenant, s)).or_insert(0) += 1;
                }
                match &mut node.sched {
                    AnyScheduler::Mclock(m) if dmclock => {
                        let p = trackers[req.tenant as usize].params_for(s);
                        m.enqueue_dist(sub, now, p);
                    }
                    sched => sched.enqueue(sub, now),
                }
                in_servers += 1;
                node.summary.unfinished += 1;
                touch(&mut nodes, &mut dirty, s);
            }
        }
    }
    let (tenants, _, total, windows, _gauges, _log) = rec.finish(&mut |_| {}, false);
    let servers: Vec<ServerSummary> = nodes.into_iter().map(|n| n.summary).collect();
    Ok(ClusterResult { tenants, total, windows, servers, arrived, unfinished: arrived - completed, end: now, events })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::simulate_spec;
    use crate::time::NS_PER_SEC;

    fn mclock(r: f64, w: f64, l: Option<f64>, tenants: usize) -> SchedulerSpec {
        SchedulerSpec::Mclock {
            reservations: vec![r; tenants],
            weights: vec![w; tenants],
            limits: vec![l; tenants],
            cost: Default::default(),
            limit_break: false,
            at_limit: AtLimit::Wait,
            reject_threshold_ns: 0,
            by: Default::default(),
        }
    }

    fn constant(iops: f64) -> DeviceSpec {
        DeviceSpec::Constant { iops, bandwidth: None }
    }

    /// ceph/dmclock#21's limit break: `clients` clients each asking 100 IOPS (evenly spaced) for
    /// `secs` seconds, client `i`'s `k`-th request to server `(i·S/C + k mod 10) mod S`
    /// (its simulator's "alt range" of 10 servers).
    fn limit_break_setting(clients: u32, servers: u32, secs: u64) -> (Vec<Request>, Vec<u32>) {
        let (mut reqs, mut at) = (Vec::new(), Vec::new());
        let per = 100 * secs;
        let factor = servers as f64 / clients as f64;
        for k in 0..per {
            for i in 0..clients {
                let t = k * NS_PER_SEC / 100 + i as u64 * 1_000;
                let mut r = Request::new(reqs.len() as u64, i, t, 4096);
                r.offset = k * 4096;
                reqs.push(r);
                at.push(((0.5 + i as f64 * factor) as u64 + k % 10) as u32 % servers);
            }
        }
        (reqs, at)
    }

    /// Completions per tenant in each whole 1 s window from `from` s to `to` s.
    fn per_window(res: &ClusterResult, from: u64, to: u64) -> Vec<u64> {
        let w = &res.windows;
        (0..w.start.len())
            .filter(|&i| w.start[i] >= from * NS_PER_SEC && w.start[i] < to * NS_PER_SEC)
            .map(|i| w.completed[i])
            .collect()
    }

    fn run(
        cluster: &ClusterSpec,
        policy: &SchedulerSpec,
        reqs: Vec<Request>,
        at: &[u32],
        window: Nanos,
    ) -> ClusterResult {
        let cfg = SimConfig { window, ..SimConfig::default() };
        simulate_cluster(reqs, Some(at), &[], policy, &constant(80.0), cluster, &cfg).unwrap()
    }

    #[test]
    fn one_server_is_the_single_server_simulator() {
        // Same requests through simulate_spec and a one-server cluster: same summaries.
        let reqs: Vec<Request> = (0..2_000u64)
            .map(|i| {
                let mut r = Request::new(i, (i % 3) as u32, i * 3_000_000 / 4, 4096);
                r.offset = i * 8192;
                r
            })
            .collect();
        let policy = mclock(50.0, 1.0, Some(400.0), 3);
        let dev = constant(1_000.0);
        let single = simulate_spec(
            reqs.clone(),
            &[],
            &mut policy.build().unwrap(),
            &mut dev.build().unwrap(),
            &SimConfig::default(),
        )
        .unwrap();
        for coordination in [
            Coordination::None,
            Coordination::Dmclock { charge: DistCharge::Arrival },
            Coordination::Dmclock { charge: DistCharge::Request },
        ] {
            let spec = ClusterSpec { servers: 1, placement: PlacementSpec::default(), coordination };
            let c = simulate_cluster(reqs.clone(), None, &[], &policy, &dev, &spec, &SimConfig::default()).unwrap();
            for t in 0..3 {
                assert_eq!(c.tenants[t].completed, single.tenants[t].completed);
                assert_eq!(c.tenants[t].sum_response, single.tenants[t].sum_response);
                assert_eq!(c.tenants[t].quantile(0.99), single.tenants[t].quantile(0.99));
            }
            assert_eq!(c.windows.completed, single.windows.completed);
            assert_eq!(c.servers[0].served.completed, 2_000);
        }
    }

    #[test]
    fn hash_placement_spreads_objects_and_writes_every_replica() {
        // 20,000 requests over 10,000 objects of 2 tenants on 8 servers, 3 replicas,
        // one in four a write: each server serves its share within 10 %, and the
        // servers together serve reads + 3 × writes.
        let reqs: Vec<Request> = (0..20_000u64)
            .map(|i| {
                let mut r = Request::new(i, (i % 2) as u32, i * 10_000, 4096);
                r.offset = (i % 10_000) * DEFAULT_OBJECT_BYTES;
                if i % 4 == 0 {
                    r.op = Op::Write;
                }
                r
            })
            .collect();
        let spec = ClusterSpec {
            servers: 8,
            placement: PlacementSpec::Hash { object_bytes: DEFAULT_OBJECT_BYTES, replicas: 3, seed: 7 },
            coordination: Coordination::None,
        };
        let c =
            simulate_cluster(reqs, None, &[], &SchedulerSpec::Fcfs, &constant(100_000.0), &spec, &SimConfig::default())
                .unwrap();
        let served: Vec<u64> = c.servers.iter().map(|s| s.served.completed).collect();
        assert_eq!(served.iter().sum::<u64>(), 15_000 + 3 * 5_000);
        let mean = 30_000.0 / 8.0;
        for &s in &served {
            assert!((s as f64 - mean).abs() < 0.1 * mean, "{served:?}");
        }
        assert_eq!(c.total.completed, 20_000);
        assert_eq!(c.unfinished, 0);
        assert!(c.servers.iter().all(|s| s.unfinished == 0));
    }

    #[test]
    fn dmclock_holds_the_total_limit_where_local_limits_break_it() {
        // ceph/dmclock#21: 100 clients x 100 servers of 80 IOPS, each client reserving
        // 20 IOPS and limited to 30 in total, asking 100 IOPS over 10 of the servers, so
        // that some hundreds of its requests wait at each server.
        let (reqs, at) = limit_break_setting(100, 100, 12);
        let policy = mclock(20.0, 1.0, Some(30.0), 100);
        let cluster = |coordination| ClusterSpec { servers: 100, placement: PlacementSpec::Given, coordination };
        let sec2 = 2 * NS_PER_SEC;
        // Each request charged its own report, as the library does: the reports are
        // stale and the limit breaks, as it did in dmclock's own simulator (55-86 IOPS
        // in a client's 2 s intervals).
        let lib =
            run(&cluster(Coordination::Dmclock { charge: DistCharge::Request }), &policy, reqs.clone(), &at, sec2);
        let w = per_window(&lib, 2, 10);
        assert!(w.iter().filter(|&&n| n > 2 * 45).count() > w.len() / 20, "{:?}", (w.iter().min(), w.iter().max()));
        // Charged at arrival: every client's 2 s intervals within 20 % of 30 IOPS, and
        // their mean within 2 % (what a server hears lags by one send, 0.1 s).
        let dm = run(&cluster(Coordination::Dmclock { charge: DistCharge::Arrival }), &policy, reqs.clone(), &at, sec2);
        let w = per_window(&dm, 2, 10);
        assert_eq!(w.len(), 400);
        assert!(w.iter().all(|&n| (48..=72).contains(&n)), "{:?}", (w.iter().min(), w.iter().max()));
        let mean = w.iter().sum::<u64>() as f64 / w.len() as f64 / 2.0;
        assert!((mean / 30.0 - 1.0).abs() < 0.02, "{mean}");
        // Split by demand every 500 ms: every client's every second within 5 % of 30.
        let split = Coordination::Split { period_ns: DEFAULT_SPLIT_PERIOD };
        let w = per_window(&run(&cluster(split), &policy, reqs.clone(), &at, NS_PER_SEC), 2, 10);
        assert!(w.iter().all(|&n| (28.5..=31.5).contains(&(n as f64))), "{:?}", (w.iter().min(), w.iter().max()));
        // Each server alone: the limit holds per server, so a client takes what its 10
        // servers give it (80 IOPS each shared by 10 clients: 80 in total).
        let local = run(&cluster(Coordination::None), &policy, reqs, &at, NS_PER_SEC);
        let w = per_window(&local, 2, 10);
        assert!(w.iter().all(|&n| n >= 76), "{:?}", (w.iter().min(), w.iter().max()));
    }

    #[test]
    fn dmclock_gives_the_total_reservation_under_contention() {
        // 10 servers of 100 IOPS; tenant 0 reserves 150 IOPS in total and spreads over
        // all of them; 9 heavy tenants (weight 10, 100 IOPS each at one server apiece)
        // overload every server. dmClock gives tenant 0 its 150 (its weight share is
        // small); local mClock gives it 150 at every server it uses, capped by what it
        // asks (300).
        let mut reqs = Vec::new();
        let mut at = Vec::new();
        for k in 0..1_000u64 {
            let t = k * NS_PER_SEC / 100;
            for rep in 0..3u64 {
                reqs.push(Request::new(0, 0, t + rep, 4096));
                at.push(((3 * k + rep) % 10) as u32);
            }
            for h in 1..10u32 {
                for s in 0..10u32 {
                    reqs.push(Request::new(0, h, t + 10 + (h * 10 + s) as u64, 4096));
                    at.push(s);
                }
            }
        }
        for (i, r) in reqs.iter_mut().enumerate() {
            r.id = i as u64;
        }
        let mut policy = mclock(0.0, 10.0, None, 10);
        if let SchedulerSpec::Mclock { reservations, weights, .. } = &mut policy {
            reservations[0] = 150.0;
            weights[0] = 1.0;
        }
        let spec = |coordination| ClusterSpec { servers: 10, placement: PlacementSpec::Given, coordination };
        let run = |c| {
            simulate_cluster(reqs.clone(), Some(&at), &[], &policy, &constant(100.0), &spec(c), &SimConfig::default())
                .unwrap()
        };
        let t0 = |res: &ClusterResult| {
            let w = &res.windows;
            (0..w.start.len())
                .filter(|&i| w.tenant[i] == 0 && w.start[i] >= 2 * NS_PER_SEC && w.start[i] < 10 * NS_PER_SEC)
                .map(|i| w.completed[i])
                .collect::<Vec<_>>()
        };
        let dm = t0(&run(Coordination::Dmclock { charge: DistCharge::Arrival }));
        assert_eq!(dm.len(), 8);
        assert!(dm.iter().all(|&n| (147..=165).contains(&n)), "{dm:?}");
        let local = t0(&run(Coordination::None));
        assert!(local.iter().all(|&n| n >= 290), "{local:?}");
    }

    #[test]
    fn bad_clusters_are_refused_in_one_line() {
        let ok = ClusterSpec {
            servers: 4,
            placement: PlacementSpec::default(),
            coordination: Coordination::Dmclock { charge: DistCharge::Arrival },
        };
        let e = ok.validate(&SchedulerSpec::Fcfs).unwrap_err().to_string();
        assert!(e.contains("dmclock coordination keeps mClock's promises"), "{e}");
        let e = ClusterSpec { servers: 0, ..ok.clone() }.validate(&SchedulerSpec::Fcfs).unwrap_err().to_string();
        assert!(e.contains("servers must be 1..=65536, got 0"), "{e}");
        let bad = ClusterSpec {
            placement: PlacementSpec::Hash { object_bytes: 1, replicas: 5, seed: 0 },
            coordination: Coordination::None,
            ..ok.clone()
        };
        let e = bad.validate(&SchedulerSpec::Fcfs).unwrap_err().to_string();
        assert!(e.contains("replicas must be 1..=4 (at most the 4 servers), got 5"), "{e}");
        let given = ClusterSpec { placement: PlacementSpec::Given, coordination: Coordination::None, ..ok };
        let reqs = vec![Request::new(0, 0, 0, 4096)];
        let e = simulate_cluster(
            reqs,
            Some(&[9]),
            &[],
            &SchedulerSpec::Fcfs,
            &constant(1.0),
            &given,
            &SimConfig::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("request 0 is placed on server 9, but the cluster has 4 (0..3)"), "{e}");
    }
}
