//! YFQ ("Yet another Fair Queueing"): proportional-share disk scheduling in batches
//! (Bruno, Brustoloni, Gabber, Özden & Silberschatz, "Disk scheduling with quality of
//! service guarantees", IEEE ICMCS 1999). Seed 003 (`seeds/003_7fda7344ad8e71aa.txt`,
//! §1 and §3.1, Fig. 2) uses it as the back end of the feedback-controlled leaky bucket
//! ([`crate::fclb`]), with weights `φ1 : φ2 = 2 : 1` (§4.1).
//!
//! YFQ approximates GPS for a disk: each flow (tenant, or class) has a weight `w_i` and,
//! whenever several flows are backlogged, receives disk operations in proportion to it;
//! an idle flow's share goes to the others (work conserving). A request costs 1 (IOPS
//! fairness, default) or its bytes.
//!
//! ## The algorithm (our reading; tags as in start-time fair queuing)
//! 1. **Tags at arrival** of request `p` of flow `f` with cost `c`:
//!    `S(p) = max(v, F(p_prev))`, `F(p) = S(p) + c / w_f`.
//! 2. **Virtual time** `v` is the smallest start tag among the requests that are *busy*:
//!    queued here or in service at the disk. It never decreases; when nothing is busy
//!    (end of a busy period) it jumps to the largest finish tag handed out, so a flow
//!    that was idle gets no credit for its absence.
//! 3. **Selection**: the queued request with the smallest *finish* tag (ties: earlier
//!    arrival, then lower flow index).
//! 4. **Batches**: when the previous batch has completed, YFQ selects up to `batch`
//!    requests by rule 3 and sends them to the disk together; the disk (its own queue
//!    policy: FIFO, SCAN, SPTF) may reorder inside the batch for throughput. No new
//!    request is sent until the whole batch has completed. The batch size trades
//!    throughput (deeper disk queue, shorter seeks) against fairness: the unfairness
//!    bound grows with it.
//!
//! ## How it differs from SFQ(D) ([`super::Sfq`])
//! - SFQ(D) picks the smallest *start* tag; YFQ the smallest *finish* tag (as WFQ), so
//!   among flows that start together the heavier one goes first.
//! - SFQ(D) refills the device continuously whenever fewer than D requests are
//!   outstanding; YFQ sends whole batches and waits for each to drain, so the disk sees
//!   a fixed set it may reorder freely, and the virtual time cannot run ahead while a
//!   batch is in service.
//! - SFQ(D)'s `v` is the start tag of the last dispatched request; YFQ's is the minimum
//!   start tag of the busy requests (including those in service).
//!
//! The scheduler learns of completions through [`Scheduler::complete`]; a wrapping
//! policy ([`crate::fclb::Fclb`]) forwards them.
//!
//! ## Cost
//! Per-flow FIFO queues (finish tags grow within a flow) and two heaps of the backlogged
//! flows, one entry per flow: keyed by their head's finish tag (rule 3) and by its start
//! tag (rule 2's smallest start tag of the queued requests): `O(log #backlogged flows)`
//! per enqueue and dispatch. The heaps know where each flow sits (`IndexedHeap`), so a
//! dispatch moves its flow's entries to the next head in place (or removes them) instead
//! of leaving stale entries behind. The requests in service (at most `batch`) sit in a
//! small vector scanned for the minimum.
//!
//! The queues are linked lists through one slab of queued requests whose freed slots are
//! reused first, so a flow's state is 24 bytes and a request lands in a slot that is
//! still in cache rather than in its own flow's buffer (with thousands of flows of one
//! or two requests each, one cache miss per request less); the slab holds as many
//! slots as requests were ever queued at once.

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::request::{Completion, Request};
use crate::scheduler::Scheduler;
use crate::schedulers::indexed_heap::IndexedHeap;
use crate::schedulers::tags::{tags, FairQueue, FlowState, Sharing, VTime};
use crate::time::Nanos;

/// Policy name used in errors and reports.
const NAME: &str = "yfq";

/// Default batch size: one request at a time. Seed 003 serves its single disk FIFO
/// (§4.1), where a larger batch cannot shorten seeks and only loosens the 2:1 split.
pub const DEFAULT_BATCH: usize = 1;

/// A queued request with its tags.
#[derive(Clone, Copy, Debug)]
struct Tagged {
    req: Request,
    start: f64,
    finish: f64,
}

/// The end of a list of [`Slot`]s.
const NIL: u32 = u32::MAX;

/// A queued request in the slab: its tags and the next slot of its flow's queue (or of
/// the free list).
#[derive(Clone, Copy, Debug)]
struct Slot {
    t: Tagged,
    next: u32,
}

/// One flow: its FIFO queue (first and last slot, [`NIL`] when idle), weight and the
/// finish tag of its last arrival.
#[derive(Clone, Debug)]
struct Flow {
    head: u32,
    tail: u32,
    weight: f64,
    last_finish: f64,
}

impl FlowState for Flow {
    fn with_weight(weight: f64) -> Self {
        Flow { head: NIL, tail: NIL, weight, last_finish: 0.0 }
    }
    fn weight(&self) -> f64 {
        self.weight
    }
}

/// YFQ between tenants (or classes), sending batches of up to `batch` requests.
#[derive(Clone, Debug)]
pub struct Yfq {
    share: Sharing,
    batch: usize,
    flows: Vec<Flow>,
    /// Every flow's queued requests, linked from [`Flow::head`].
    slots: Vec<Slot>,
    /// First free slot ([`NIL`]: none), linked through [`Slot::next`].
    free: u32,
    /// Virtual time v (monotone).
    vtime: f64,
    /// Largest finish tag handed out (the busy-period reset target).
    max_finish: f64,
    /// Backlogged flows keyed by their head: (F, head arrival, flow).
    heads: IndexedHeap<(VTime, Nanos, u32)>,
    /// Backlogged flows keyed by their head's start tag: rule 2's smallest start tag of
    /// the queued requests (the least head's, as starts grow within a flow) in `O(1)`.
    starts: IndexedHeap<VTime>,
    /// Requests of the current batch in service: (request id, start tag).
    in_service: Vec<(u64, f64)>,
    /// Requests the current batch may still take (0 once it is closed).
    batch_left: usize,
    queued: usize,
    batches: u64,
}

impl Yfq {
    /// YFQ between tenants with `weights[i]` for tenant `i` (others weight 1), unit cost,
    /// batches of up to `batch` (≥ 1) requests.
    pub fn new(weights: Vec<f64>, batch: usize) -> Result<Self> {
        if batch == 0 {
            return config("yfq: batch must be >= 1");
        }
        Ok(Yfq {
            share: Sharing::new(NAME, weights)?,
            batch,
            flows: Vec::new(),
            slots: Vec::new(),
            free: NIL,
            vtime: 0.0,
            max_finish: 0.0,
            heads: IndexedHeap::default(),
            starts: IndexedHeap::default(),
            in_service: Vec::new(),
            batch_left: 0,
            queued: 0,
            batches: 0,
        })
    }

    /// The batch size.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// The weight of `flow`.
    pub fn weight(&self, flow: u32) -> f64 {
        self.share.weight(&self.flows, flow)
    }

    /// The virtual time v.
    pub fn virtual_time(&self) -> f64 {
        self.vtime
    }

    /// Requests of the current batch still in service.
    pub fn in_service(&self) -> usize {
        self.in_service.len()
    }

    /// Batches started so far.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// The head of flow `k`'s queue.
    #[inline]
    fn front(&self, k: u32) -> Option<&Tagged> {
        let head = self.flows[k as usize].head;
        (head != NIL).then(|| &self.slots[head as usize].t)
    }

    /// Append `t` to flow `k`'s queue, in a free slot if there is one; true if the flow
    /// was idle.
    #[inline]
    fn push_back(&mut self, k: u32, t: Tagged) -> bool {
        let slot = Slot { t, next: NIL };
        let at = if self.free == NIL {
            self.slots.push(slot);
            u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 - 1 queued requests")
        } else {
            let at = self.free;
            self.free = self.slots[at as usize].next;
            self.slots[at as usize] = slot;
            at
        };
        let f = &mut self.flows[k as usize];
        let tail = std::mem::replace(&mut f.tail, at);
        if tail == NIL {
            f.head = at;
            true
        } else {
            self.slots[tail as usize].next = at;
            false
        }
    }

    /// Take the head of flow `k`'s queue (which is not empty), freeing its slot.
    #[inline]
    fn pop_front(&mut self, k: u32) -> Tagged {
        let f = &mut self.flows[k as usize];
        let at = f.head;
        debug_assert_ne!(at, NIL, "a flow in the heap has a head");
        let Slot { t, next } = self.slots[at as usize];
        f.head = next;
        if next == NIL {
            f.tail = NIL;
        }
        self.slots[at as usize].next = self.free;
        self.free = at;
        t
    }

    /// Bring v up to the smallest start tag of the busy requests (rule 2).
    fn update_vtime(&mut self) {
        let queued_min = self.starts.top().map_or(f64::INFINITY, |(VTime(start), _)| start);
        let busy_min = self.in_service.iter().map(|&(_, s)| s).fold(queued_min, f64::min);
        if busy_min.is_finite() {
            self.vtime = self.vtime.max(busy_min);
        } else {
            // Nothing busy: end of a busy period.
            self.vtime = self.vtime.max(self.max_finish);
        }
    }
}

impl FairQueue for Yfq {
    fn sharing_mut(&mut self) -> &mut Sharing {
        &mut self.share
    }
    fn waiting(&self) -> usize {
        self.queued
    }
}

impl Scheduler for Yfq {
    fn name(&self) -> String {
        format!("yfq(batch={})", self.batch)
    }

    fn enqueue(&mut self, req: Request, _now: Nanos) {
        self.update_vtime();
        let k = self.share.by.of(&req);
        let cost = self.share.cost.of(&req);
        let vtime = self.vtime;
        let f = self.share.flow(&mut self.flows, k);
        let (start, finish) = tags(vtime, f.last_finish, cost, f.weight);
        debug_assert!(finish > start);
        f.last_finish = finish;
        let was_idle = self.push_back(k, Tagged { req, start, finish });
        self.max_finish = self.max_finish.max(finish);
        self.queued += 1;
        if was_idle {
            self.heads.set(k, (VTime::new(finish), req.arrival, k));
            self.starts.set(k, VTime::new(start));
        }
    }

    fn dispatch(&mut self, _now: Nanos, _dev: &DeviceState) -> Option<Request> {
        if self.batch_left == 0 {
            if !self.in_service.is_empty() || self.queued == 0 {
                return None; // the current batch is still at the disk (or nothing to send)
            }
            // Open a new batch from what is queued now.
            self.batch_left = self.batch.min(self.queued);
            self.batches += 1;
        }
        let ((fin, _, _), k) = self.heads.top()?;
        let t = self.pop_front(k);
        debug_assert_eq!(t.finish, fin.0);
        if let Some(next) = self.front(k).copied() {
            debug_assert!(next.finish >= t.finish, "finish tags grow within a flow");
            // Both tags grow within a flow: the flow's entries move down in place.
            self.heads.set(k, (VTime::new(next.finish), next.req.arrival, k));
            self.starts.set(k, VTime::new(next.start));
        } else {
            self.heads.remove(k);
            self.starts.remove(k);
        }
        self.queued -= 1;
        self.batch_left -= 1;
        self.in_service.push((t.req.id, t.start));
        debug_assert!(self.in_service.len() <= self.batch);
        Some(t.req)
    }

    fn complete(&mut self, done: &Completion, _now: Nanos) {
        let pos = self.in_service.iter().position(|&(id, _)| id == done.req.id);
        debug_assert!(pos.is_some(), "completion of a request yfq did not dispatch");
        if let Some(i) = pos {
            self.in_service.swap_remove(i);
        }
        self.update_vtime();
    }

    #[inline]
    fn queued(&self) -> usize {
        self.queued
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        sink("yfq_virtual_time", self.vtime);
        sink("yfq_in_service", self.in_service.len() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::tags::CostModel;

    const FREE: DeviceState = DeviceState { outstanding: 0, free_slots: 64 };

    fn fill(s: &mut Yfq, tenant: u32, n: u64, id0: u64, at: Nanos) {
        for i in 0..n {
            s.enqueue(Request::new(id0 + i, tenant, at, 4096), at);
        }
    }

    /// Serve `n` batches: dispatch a whole batch, then complete it.
    fn serve(s: &mut Yfq, n: usize) -> Vec<Vec<u32>> {
        let mut out = Vec::new();
        for _ in 0..n {
            let batch: Vec<Request> = std::iter::from_fn(|| s.dispatch(0, &FREE)).collect();
            if batch.is_empty() {
                break;
            }
            for r in &batch {
                s.complete(&Completion { req: *r, dispatch: 0, finish: 0 }, 0);
            }
            out.push(batch.iter().map(|r| r.tenant).collect());
        }
        out
    }

    #[test]
    fn two_to_one_in_every_prefix() {
        let mut s = Yfq::new(vec![2.0, 1.0], 1).unwrap();
        fill(&mut s, 0, 60, 0, 0);
        fill(&mut s, 1, 60, 100, 0);
        let order: Vec<u32> = serve(&mut s, 60).into_iter().flatten().collect();
        assert_eq!(order.len(), 60);
        for n in 1..=order.len() {
            let a = order[..n].iter().filter(|&&t| t == 0).count() as f64;
            assert!((a - 2.0 * n as f64 / 3.0).abs() <= 1.0, "prefix {n}: {order:?}");
        }
        // Smallest finish tag first: the heavier flow (F = 0.5) leads.
        assert_eq!(order[0], 0);
    }

    #[test]
    fn batches_wait_for_the_previous_batch() {
        let mut s = Yfq::new(vec![1.0, 1.0], 4).unwrap();
        fill(&mut s, 0, 10, 0, 0);
        fill(&mut s, 1, 10, 100, 0);
        let first: Vec<Request> = std::iter::from_fn(|| s.dispatch(0, &FREE)).collect();
        assert_eq!(first.len(), 4);
        assert_eq!(first.iter().filter(|r| r.tenant == 0).count(), 2);
        // Nothing more until all four complete.
        assert!(s.dispatch(0, &FREE).is_none());
        for r in &first[..3] {
            s.complete(&Completion { req: *r, dispatch: 0, finish: 1 }, 1);
        }
        assert!(s.dispatch(1, &FREE).is_none());
        s.complete(&Completion { req: first[3], dispatch: 0, finish: 2 }, 2);
        assert_eq!(serve(&mut s, 10).iter().map(Vec::len).sum::<usize>(), 16);
        assert_eq!(s.batches(), 5);
        // A batch never takes more than is queued when it opens.
        fill(&mut s, 0, 1, 500, 10);
        assert_eq!(serve(&mut s, 1), vec![vec![0]]);
    }

    /// YFQ as its rules read, with nothing kept between calls but the queued and in-service
    /// requests: v by a scan of every busy request, the next request by a scan of every
    /// flow's head for the least (finish tag, head arrival, flow).
    struct Reference {
        share: Sharing,
        batch: usize,
        /// Queued requests in arrival order: (request, flow, start, finish).
        queued: Vec<(Request, u32, f64, f64)>,
        last_finish: Vec<f64>,
        in_service: Vec<(u64, f64)>,
        batch_left: usize,
        vtime: f64,
        max_finish: f64,
    }

    impl Reference {
        fn new(weights: Vec<f64>, batch: usize, cost: CostModel) -> Self {
            let mut share = Sharing::new("yfq", weights).unwrap();
            share.cost = cost;
            Reference {
                share,
                batch,
                queued: Vec::new(),
                last_finish: Vec::new(),
                in_service: Vec::new(),
                batch_left: 0,
                vtime: 0.0,
                max_finish: 0.0,
            }
        }

        fn update_vtime(&mut self) {
            let busy = self.queued.iter().map(|q| q.2).chain(self.in_service.iter().map(|s| s.1));
            let min = busy.fold(f64::INFINITY, f64::min);
            self.vtime = self.vtime.max(if min.is_finite() { min } else { self.max_finish });
        }

        fn enqueue(&mut self, req: Request) {
            self.update_vtime();
            let k = req.tenant;
            if self.last_finish.len() <= k as usize {
                self.last_finish.resize(k as usize + 1, 0.0);
            }
            let w = self.share.weights.get(k);
            let (start, finish) = tags(self.vtime, self.last_finish[k as usize], self.share.cost.of(&req), w);
            self.last_finish[k as usize] = finish;
            self.max_finish = self.max_finish.max(finish);
            self.queued.push((req, k, start, finish));
        }

        fn dispatch(&mut self) -> Option<Request> {
            if self.batch_left == 0 {
                if !self.in_service.is_empty() || self.queued.is_empty() {
                    return None;
                }
                self.batch_left = self.batch.min(self.queued.len());
            }
            // Each flow's head is its first queued request.
            let key = |q: &(Request, u32, f64, f64)| (q.3, q.0.arrival, q.1);
            let mut seen = vec![false; self.last_finish.len()];
            let mut best: Option<usize> = None;
            for (i, q) in self.queued.iter().enumerate() {
                if std::mem::replace(&mut seen[q.1 as usize], true) {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some(b) => key(q).partial_cmp(&key(&self.queued[b])) == Some(std::cmp::Ordering::Less),
                };
                if better {
                    best = Some(i);
                }
            }
            let (req, _, start, _) = self.queued.remove(best?);
            self.batch_left -= 1;
            self.in_service.push((req.id, start));
            Some(req)
        }

        fn complete(&mut self, id: u64) {
            let i = self.in_service.iter().position(|s| s.0 == id).unwrap();
            self.in_service.swap_remove(i);
            self.update_vtime();
        }
    }

    /// Random arrivals, dispatches and completions over up to 40 flows with weights
    /// 1–5 (ties of finish tags everywhere: equal weights, equal arrivals, unit costs),
    /// batches of 1–4, unit and byte costs: the same requests in the same order as the
    /// reference, the same virtual time to the bit after every call.
    #[test]
    fn dispatch_order_matches_the_reference() {
        use crate::rng::SimRng;
        for seed in 0..60u64 {
            let mut rng = SimRng::new(seed);
            let flows = 1 + rng.below(40) as u32;
            let weights: Vec<f64> = (0..rng.below(flows as u64 + 1)).map(|_| (1 + rng.below(5)) as f64).collect();
            let batch = 1 + rng.below(4) as usize;
            let cost = if seed % 3 == 0 { CostModel::Bytes } else { CostModel::Iops };
            let mut s = Yfq::new(weights.clone(), batch).unwrap().with_cost(cost);
            let mut r = Reference::new(weights, batch, cost);
            let (mut now, mut id) = (0, 0);
            let mut out = Vec::new();
            let mut dispatched = 0;
            for _ in 0..3_000 {
                match rng.below(10) {
                    0..=3 => {
                        now += rng.below(3);
                        let req =
                            Request::new(id, rng.below(flows as u64) as u32, now, 512 * (1 + rng.below(8) as u32));
                        id += 1;
                        s.enqueue(req, now);
                        r.enqueue(req);
                    }
                    4..=6 => {
                        let got = s.dispatch(now, &FREE);
                        assert_eq!(got.map(|q| q.id), r.dispatch().map(|q| q.id), "seed {seed}, call {dispatched}");
                        out.extend(got);
                        dispatched += 1;
                    }
                    _ => {
                        if !out.is_empty() {
                            let q = out.swap_remove(rng.below(out.len() as u64) as usize);
                            s.complete(&Completion { req: q, dispatch: now, finish: now }, now);
                            r.complete(q.id);
                        }
                    }
                }
                assert_eq!(s.virtual_time().to_bits(), r.vtime.to_bits(), "seed {seed}");
                assert_eq!(s.queued(), r.queued.len());
            }
        }
    }

    #[test]
    fn idle_flow_gets_no_credit_and_work_is_conserved() {
        let mut s = Yfq::new(vec![1.0, 1.0], 1).unwrap();
        fill(&mut s, 0, 40, 0, 0);
        assert_eq!(serve(&mut s, 20).concat(), vec![0; 20]);
        fill(&mut s, 1, 20, 100, 5);
        let order = serve(&mut s, 20).concat();
        let ones = order.iter().filter(|&&t| t == 1).count();
        assert!((9..=11).contains(&ones), "{order:?}");
        // Drain, then both return level after the idle period.
        serve(&mut s, 100);
        assert_eq!(s.queued(), 0);
        let v = s.virtual_time();
        fill(&mut s, 1, 2, 300, 50);
        fill(&mut s, 0, 2, 400, 50);
        assert!(s.virtual_time() >= v);
        let order = serve(&mut s, 4).concat();
        assert_eq!(order.iter().filter(|&&t| t == 0).count(), 2, "{order:?}");
        assert!(Yfq::new(vec![], 0).unwrap_err().to_string().contains("yfq: batch must be >= 1"));
        assert!(Yfq::new(vec![1.0, -1.0], 1).unwrap_err().to_string().contains("yfq: weights[1]"));
    }
}
