//! The discrete-event loop.
//!
//! State: the next open-loop arrival (a peeked iterator, so a 100 M-request generator is
//! never materialised), a min-heap of closed-loop client wake-ups, the device's next
//! completion and the scheduler's next timer. Each step takes the earliest of the
//! three event kinds; ties are broken deterministically in the order
//! **completion → timer → arrival** (a freed slot and fresh credits are visible to a
//! request arriving at the same nanosecond), and within a kind by submission order
//! (devices) or sequence number (client wake-ups). Once every event of the current
//! nanosecond has been handled, the loop offers the scheduler every free device slot, so
//! a policy chooses among all requests that arrived at that instant. The run is a pure function of its inputs and seed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use crate::device::Device;
use crate::error::{Error, Result};
use crate::request::{Completion, Request};
use crate::rng::SimRng;
use crate::scheduler::Scheduler;
use crate::sim::summary::{GaugeSeries, GroupSummary, Recorder, RequestLog, WindowSeries};
use crate::sim::workload::ClosedClient;
use crate::spec::{AnyDevice, AnyScheduler};
use crate::time::{Nanos, NS_PER_SEC};

/// Hashes a request id by one multiplication (Fibonacci hashing): ids are unique
/// integers, so this spreads them over the table's buckets and control bytes at a
/// fraction of SipHash's cost.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// First id of closed-loop requests (open-loop requests keep their trace ids).
pub const CLOSED_ID_BASE: u64 = 1 << 62;

/// Simulation options.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Seed of the run's random number generator (devices, closed clients).
    pub seed: u64,
    /// Length of the summary windows (ns).
    pub window: Nanos,
    /// Keep a per-request log (memory grows with the run); otherwise summaries only.
    pub keep_requests: bool,
    /// Stop at this time (required when closed clients never stop).
    pub until: Option<Nanos>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig { seed: 1, window: NS_PER_SEC, keep_requests: false, until: None }
    }
}

/// Everything a run produces.
#[derive(Debug)]
pub struct SimResult {
    /// Per-tenant summaries, indexed by tenant.
    pub tenants: Vec<GroupSummary>,
    /// Per-class summaries, indexed by class.
    pub classes: Vec<GroupSummary>,
    /// All completions together.
    pub total: GroupSummary,
    /// Per-window, per-tenant series.
    pub windows: WindowSeries,
    /// Scheduler gauges per window.
    pub gauges: GaugeSeries,
    /// Per-request log when [`SimConfig::keep_requests`] was set.
    pub log: Option<RequestLog>,
    /// Requests that arrived.
    pub arrived: u64,
    /// Requests that arrived but had not completed (nor been rejected) when the run ended.
    pub unfinished: u64,
    /// Requests the policy rejected at arrival ([`Scheduler::admit`]), per tenant
    /// (empty when none was): answered at once, never served. A closed-loop client
    /// whose request is rejected thinks and tries again.
    pub rejected: Vec<u64>,
    /// Time of the last event processed.
    pub end: Nanos,
    /// Events processed (arrivals + completions + timers).
    pub events: u64,
}

/// "No event": the sentinel time of an absent event.
pub(crate) const NEVER: Nanos = Nanos::MAX;

/// What happens next in the event loop. At one instant completions come first, then
/// timers, then arrivals (the declaration order): a request that finishes at `t` frees
/// its slot before a timer fires or a request arriving at `t` is queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    /// The device finishes a request.
    Completion,
    /// The scheduler's timer fires.
    Timer,
    /// A request arrives: from the open-loop stream or a closed client waking up.
    Arrival,
}

/// The earliest of the three next-event times and its [`Event`]; ties go to the earlier
/// variant. Absent events are [`NEVER`]; when all are, the time is [`NEVER`] (and the
/// event meaningless).
#[inline(always)]
fn earliest(t_done: Nanos, t_timer: Nanos, t_arr: Nanos) -> (Nanos, Event) {
    let (mut t_next, mut event) = (t_done, Event::Completion);
    if t_timer < t_next {
        (t_next, event) = (t_timer, Event::Timer);
    }
    if t_arr < t_next {
        (t_next, event) = (t_arr, Event::Arrival);
    }
    (t_next, event)
}

/// The open-loop stream with its next request taken out ahead (`next`, valid while
/// `t != NEVER`): its arrival time `t` is the stream's next event time ([`NEVER`] once
/// the stream is exhausted).
pub(crate) struct OpenSource<I> {
    it: I,
    pub(crate) next: Request,
    /// Arrival of `next`, or [`NEVER`].
    pub(crate) t: Nanos,
    /// Arrival of the request taken last (the stream must not go back in time).
    last: Nanos,
}

impl<I: Iterator<Item = Request>> OpenSource<I> {
    pub(crate) fn new(mut it: I) -> Self {
        match it.next() {
            Some(next) => OpenSource { t: next.arrival, next, it, last: 0 },
            None => OpenSource { it, next: Request::default(), t: NEVER, last: 0 },
        }
    }

    /// Check that `next` does not arrive before the request taken last (an input error
    /// naming it), and remember its arrival.
    #[inline(always)]
    pub(crate) fn in_order(&mut self) -> Result<()> {
        if self.next.arrival < self.last {
            return Err(out_of_order(&self.next, self.last));
        }
        self.last = self.next.arrival;
        Ok(())
    }

    /// Replace `next` by the stream's following request (after `next` was used).
    #[inline(always)]
    pub(crate) fn advance(&mut self) {
        match self.it.next() {
            Some(n) => {
                self.next = n;
                self.t = n.arrival;
            }
            None => self.t = NEVER,
        }
    }
}

/// The error of an open-loop request that arrives before its predecessor (out of the
/// loop's hot path).
#[cold]
#[inline(never)]
fn out_of_order(r: &Request, last: Nanos) -> Error {
    Error::InvalidInput(format!(
        "request {} arrives at {} ns, before the previous request ({} ns): sort the trace by time",
        r.id, r.arrival, last
    ))
}

/// The run's parameters can run: a window > 0, valid closed clients that stop (or a run
/// length that stops them).
pub(crate) fn check_run(closed: &[ClosedClient], cfg: &SimConfig) -> Result<()> {
    if cfg.window == 0 {
        return Err(Error::InvalidConfig("summary window must be > 0".into()));
    }
    for c in closed {
        c.validate()?;
        if c.stop == Nanos::MAX && cfg.until.is_none() {
            return Err(Error::InvalidConfig(format!(
                "closed client of tenant {} never stops: give it a stop time or set a run length (until)",
                c.tenant
            )));
        }
    }
    Ok(())
}

/// The closed-loop clients of a run: when each outstanding request's client wakes
/// next, and which client issued each request in flight.
pub(crate) struct ClosedLoop<'a> {
    clients: &'a [ClosedClient],
    /// (time, sequence, client index), earliest first; ties go to the earlier push.
    wakes: BinaryHeap<Reverse<(Nanos, u64, usize)>>,
    seq: u64,
    /// Which client issued each in-flight request, by request id: an entry lives from
    /// issue to completion, so the table holds at most the requests the clients keep
    /// outstanding, however long the run.
    owner: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    next_id: u64,
}

impl<'a> ClosedLoop<'a> {
    /// One wake-up per outstanding request of each client, at its first active instant.
    pub(crate) fn new(clients: &'a [ClosedClient]) -> Self {
        let mut this = ClosedLoop {
            clients,
            wakes: BinaryHeap::new(),
            seq: 0,
            owner: HashMap::default(),
            next_id: CLOSED_ID_BASE,
        };
        for (i, c) in clients.iter().enumerate() {
            if let Some(t) = c.next_active(0) {
                for _ in 0..c.outstanding {
                    this.wake(t, i);
                }
            }
        }
        this
    }

    fn wake(&mut self, t: Nanos, client: usize) {
        self.wakes.push(Reverse((t, self.seq, client)));
        self.seq += 1;
    }

    /// The next wake-up, or [`NEVER`].
    #[inline(always)]
    pub(crate) fn next_wake(&self) -> Nanos {
        self.wakes.peek().map_or(NEVER, |w| w.0 .0)
    }

    /// Whether request `id` was issued by a closed client (else it is open-loop).
    #[inline(always)]
    pub(crate) fn issued(id: u64) -> bool {
        id >= CLOSED_ID_BASE
    }

    /// Closed request `id` completed at `now`: its client thinks and wakes again (while
    /// it is active). Returns the next wake-up.
    pub(crate) fn completed(&mut self, id: u64, now: Nanos, rng: &mut SimRng) -> Nanos {
        let ci = self.owner.remove(&id).expect("a closed request completes once") as usize;
        let client = &self.clients[ci];
        let t = now + client.draw_think(rng);
        if let Some(t) = client.next_active(t) {
            self.wake(t, ci);
        }
        self.next_wake()
    }

    /// The earliest waking client issues its next request at `now`.
    pub(crate) fn issue(&mut self, now: Nanos, rng: &mut SimRng) -> Request {
        let Reverse((_, _, ci)) = self.wakes.pop().expect("a client was due");
        let r = self.clients[ci].make_request(self.next_id, now, rng);
        self.owner.insert(self.next_id, ci as u32);
        self.next_id += 1;
        r
    }
}

/// Count a request of `tenant` rejected at arrival (cold: only mClock's reject mode).
#[cold]
fn count_rejected(rejected: &mut Vec<u64>, tenant: u32) {
    let t = tenant as usize;
    if rejected.len() <= t {
        rejected.resize(t + 1, 0);
    }
    rejected[t] += 1;
}

/// Offer every free device slot to the scheduler at `now` until it has nothing to send or
/// the device is full; true if anything was submitted.
#[inline(always)]
fn offer_free_slots<S, D>(sched: &mut S, dev: &mut D, now: Nanos, rng: &mut SimRng) -> bool
where
    S: Scheduler + ?Sized,
    D: Device + ?Sized,
{
    let mut submitted = false;
    loop {
        let st = dev.state();
        if st.free_slots == 0 {
            return submitted;
        }
        match sched.dispatch(now, &st) {
            Some(r) => {
                dev.submit(r, now, rng);
                submitted = true;
            }
            None => return submitted,
        }
    }
}

/// Run `open` (arrival-ordered requests) and `closed` clients through `sched` in front of
/// `dev`.
///
/// Errors: an open-loop arrival earlier than its predecessor (the message gives the
/// request id), an invalid closed client, a zero window, or closed clients that never
/// stop without `until`.
pub fn simulate<I, S, D>(
    open: I,
    closed: &[ClosedClient],
    sched: &mut S,
    dev: &mut D,
    cfg: &SimConfig,
) -> Result<SimResult>
where
    I: IntoIterator<Item = Request>,
    S: Scheduler + ?Sized,
    D: Device + ?Sized,
{
    check_run(closed, cfg)?;
    // The last instant handled; below NEVER, so `t_next > until` also ends the run when no
    // event is left.
    let until = cfg.until.unwrap_or(NEVER).min(NEVER - 1);
    let mut rng = SimRng::new(cfg.seed);
    let mut open = OpenSource::new(open.into_iter());
    let mut clients = ClosedLoop::new(closed);
    let mut rec = Recorder::new(cfg.window, cfg.keep_requests);
    let mut arrived = 0u64;
    let mut completed = 0u64;
    let mut rejected: Vec<u64> = Vec::new();
    let mut events = 0u64;
    let mut now: Nanos = 0;
    let mut pending_dispatch = false;

    // Every event source's next time is kept here and refreshed only where it can
    // change: the device's next completion when a request is submitted or a completion
    // popped, the scheduler's next timer after its `&mut` calls, the next arrival when
    // one is taken or a client wake-up is pushed or popped.
    let mut t_done = dev.next_completion().unwrap_or(NEVER);
    let mut t_timer = sched.next_timer().unwrap_or(NEVER);
    let mut t_wake = clients.next_wake();
    loop {
        let t_arr = open.t.min(t_wake);
        let (mut t_next, mut kind) = earliest(t_done, t_timer, t_arr);
        // All events of this nanosecond are in: offer every free slot to the scheduler
        // (so a policy sees every request that arrived at `now` before choosing).
        // Dispatch changes only the device's and the scheduler's next times.
        if pending_dispatch && t_next > now {
            // (`pending_dispatch` is set again by the event handled below.)
            if offer_free_slots(sched, dev, now, &mut rng) {
                t_done = dev.next_completion().unwrap_or(NEVER);
            }
            t_timer = sched.next_timer().unwrap_or(NEVER);
            (t_next, kind) = earliest(t_done, t_timer, t_arr);
        }
        // Past the end of the run, or no event left.
        if t_next > until {
            break;
        }
        // Nothing left but timers: the run is over once no work remains anywhere.
        if kind == Event::Timer && t_done == NEVER && t_arr == NEVER && sched.queued() == 0 {
            break;
        }
        debug_assert!(t_next >= now || kind == Event::Arrival, "time went backwards");
        now = now.max(t_next);
        events += 1;
        if rec.crossed(now) {
            rec.advance(now, &mut |sink| sched.gauges(sink));
        }
        match kind {
            Event::Completion => {
                let c: Completion = dev.pop_completion(&mut rng).expect("device announced a completion");
                debug_assert!(c.finish == now);
                t_done = dev.next_completion().unwrap_or(NEVER);
                completed += 1;
                sched.complete(&c, now);
                rec.completion(c);
                if ClosedLoop::issued(c.req.id) {
                    t_wake = clients.completed(c.req.id, now, &mut rng);
                }
            }
            Event::Timer => sched.on_timer(now),
            Event::Arrival => {
                arrived += 1;
                if open.t <= t_wake {
                    open.in_order()?;
                    rec.arrival(open.next.tenant);
                    if sched.admit(&open.next, now) {
                        // Handed over straight from the source's slot, which is then refilled.
                        sched.enqueue(open.next, now);
                    } else {
                        count_rejected(&mut rejected, open.next.tenant);
                    }
                    open.advance();
                } else {
                    let r = clients.issue(now, &mut rng);
                    t_wake = clients.next_wake();
                    rec.arrival(r.tenant);
                    if sched.admit(&r, now) {
                        sched.enqueue(r, now);
                    } else {
                        // Answered at once: the client thinks and tries again.
                        count_rejected(&mut rejected, r.tenant);
                        t_wake = clients.completed(r.id, now, &mut rng);
                    }
                }
            }
        }
        t_timer = sched.next_timer().unwrap_or(NEVER);
        // Offering slots is only useful when the device has one free.
        pending_dispatch = dev.state().free_slots > 0;
    }
    // Flush the last window.
    let (tenants, classes, total, windows, gauges, log) = rec.finish(&mut |sink| sched.gauges(sink), true);
    Ok(SimResult {
        tenants,
        classes,
        total,
        windows,
        gauges,
        log,
        arrived,
        unfinished: arrived - completed - rejected.iter().sum::<u64>(),
        rejected,
        end: now,
        events,
    })
}

/// [`simulate`] over the spec enums (what Python and the examples build), run by the loop
/// monomorphised for the concrete scheduler type, so its calls are inlined instead of
/// going through a `match` each time (≈ 120 fewer instructions per request than the
/// enums on both sides); the device stays an enum, except in the pairings every sweep
/// leans on — FCFS in front of the constant, exponential and array devices, and the
/// two-level SARC schedulers (seed 001) in front of the array, their storage utility, and
/// the models of real systems in front of the constant-rate device, where they are
/// compared with FCFS (≈ 75 fewer a request) — where both are concrete (≈ 100 fewer again
/// on the FCFS benchmark). The same code and the same results either way.
pub fn simulate_spec<I>(
    open: I,
    closed: &[ClosedClient],
    sched: &mut AnyScheduler,
    dev: &mut AnyDevice,
    cfg: &SimConfig,
) -> Result<SimResult>
where
    I: IntoIterator<Item = Request>,
{
    match (sched, dev) {
        (AnyScheduler::Fcfs(s), AnyDevice::Constant(d)) => simulate(open, closed, s, d, cfg),
        (AnyScheduler::Fcfs(s), AnyDevice::Exponential(d)) => simulate(open, closed, s, d, cfg),
        (AnyScheduler::Fcfs(s), AnyDevice::Parallel(d)) => simulate(open, closed, s, d, cfg),
        (AnyScheduler::SarcAvatar(s), AnyDevice::Parallel(d)) => simulate(open, closed, &mut **s, d, cfg),
        (AnyScheduler::SarcFacade(s), AnyDevice::Parallel(d)) => simulate(open, closed, &mut **s, d, cfg),
        (AnyScheduler::Stack(s), AnyDevice::Constant(d)) => simulate(open, closed, &mut **s, d, cfg),
        (AnyScheduler::Fcfs(s), d) => simulate(open, closed, s, d, cfg),
        (AnyScheduler::Edf(s), d) => simulate(open, closed, s, d, cfg),
        (AnyScheduler::Wf2q(s), d) => simulate(open, closed, s, d, cfg),
        (AnyScheduler::Sfq(s), d) => simulate(open, closed, s, d, cfg),
        (AnyScheduler::Mclock(s), d) => simulate(open, closed, s, d, cfg),
        (AnyScheduler::Rtt(s), d) => simulate(open, closed, &mut **s, d, cfg),
        (AnyScheduler::Miser(s), d) => simulate(open, closed, s, d, cfg),
        (AnyScheduler::SarcAvatar(s), d) => simulate(open, closed, &mut **s, d, cfg),
        (AnyScheduler::SarcFacade(s), d) => simulate(open, closed, &mut **s, d, cfg),
        (AnyScheduler::Stack(s), d) => simulate(open, closed, &mut **s, d, cfg),
        (AnyScheduler::Boxed(s), d) => simulate(open, closed, &mut **s, d, cfg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::devices::ConstantRate;
    use crate::schedulers::Fcfs;
    use crate::time::NS_PER_MS;

    fn reqs(times: &[Nanos]) -> Vec<Request> {
        times.iter().enumerate().map(|(i, &t)| Request::new(i as u64, 0, t, 4096)).collect()
    }

    #[test]
    fn fcfs_constant_rate_is_the_lindley_recursion() {
        // 100 IOPS → 10 ms per request. Arrivals at 0, 0, 5 ms, 40 ms.
        let trace = reqs(&[0, 0, 5 * NS_PER_MS, 40 * NS_PER_MS]);
        let mut s = Fcfs::new();
        let mut d = ConstantRate::new(100.0).unwrap();
        let cfg = SimConfig { keep_requests: true, ..Default::default() };
        let r = simulate(trace, &[], &mut s, &mut d, &cfg).unwrap();
        let log = r.log.unwrap();
        assert_eq!(log.finish, [10, 20, 30, 50].iter().map(|x| x * NS_PER_MS).collect::<Vec<_>>());
        assert_eq!(log.dispatch, [0, 10, 20, 40].iter().map(|x| x * NS_PER_MS).collect::<Vec<_>>());
        assert_eq!(r.unfinished, 0);
        assert_eq!(r.total.completed, 4);
        assert_eq!(r.total.max_response, 25 * NS_PER_MS);
    }

    #[test]
    fn unsorted_trace_is_an_input_error() {
        let trace = reqs(&[10, 5]);
        let e = simulate(trace, &[], &mut Fcfs::new(), &mut ConstantRate::new(1.0).unwrap(), &SimConfig::default())
            .unwrap_err();
        assert!(e.to_string().contains("request 1 arrives at 5 ns"), "{e}");
    }

    #[test]
    fn closed_clients_keep_n_outstanding() {
        // One client, 4 outstanding, no think time, 100 IOPS server for 1 s:
        // throughput = 100 IOPS, response = 4 × 10 ms in steady state (Little's law).
        let c = ClosedClient { outstanding: 4, stop: NS_PER_SEC, ..Default::default() };
        let cfg = SimConfig { until: Some(NS_PER_SEC), ..Default::default() };
        let r = simulate(Vec::new(), &[c], &mut Fcfs::new(), &mut ConstantRate::new(100.0).unwrap(), &cfg).unwrap();
        assert_eq!(r.total.completed, 100);
        assert_eq!(r.total.quantile(0.99), 40 * NS_PER_MS);
        // With think time 30 ms the client's loop is 4 requests per (40 ms + 30 ms) at most.
        let c = ClosedClient { outstanding: 1, think: 30 * NS_PER_MS, stop: NS_PER_SEC, ..Default::default() };
        let r = simulate(Vec::new(), &[c], &mut Fcfs::new(), &mut ConstantRate::new(100.0).unwrap(), &cfg).unwrap();
        assert_eq!(r.total.completed, 25); // one request per 10 ms service + 30 ms think
    }

    #[test]
    fn windows_report_exact_per_window_percentiles() {
        let trace = reqs(&[0, 0, 0, 1_500 * NS_PER_MS]);
        let mut d = ConstantRate::new(10.0).unwrap(); // 100 ms each
        let r = simulate(trace, &[], &mut Fcfs::new(), &mut d, &SimConfig::default()).unwrap();
        assert_eq!(r.windows.start, vec![0, NS_PER_SEC]);
        assert_eq!(r.windows.completed, vec![3, 1]);
        assert_eq!(r.windows.arrivals, vec![3, 1]);
        assert_eq!(r.windows.p95_response[0], 300 * NS_PER_MS);
        assert_eq!(r.windows.max_response[1], 100 * NS_PER_MS);
    }

    #[test]
    fn same_seed_same_result() {
        let c = ClosedClient {
            outstanding: 3,
            think: NS_PER_MS,
            think_exponential: true,
            span_bytes: 1 << 30,
            stop: NS_PER_SEC,
            ..Default::default()
        };
        let run = |seed| {
            let cfg = SimConfig { seed, keep_requests: true, ..Default::default() };
            simulate(
                Vec::new(),
                std::slice::from_ref(&c),
                &mut Fcfs::new(),
                &mut ConstantRate::new(1000.0).unwrap(),
                &cfg,
            )
            .unwrap()
            .log
            .unwrap()
        };
        assert_eq!(run(7).finish, run(7).finish);
        assert_ne!(run(7).finish, run(8).finish);
    }

    /// Bit-for-bit pins of whole runs (summaries, window series, gauges, logs): any
    /// speed-up of the loop, the summaries, the generators or the devices must leave
    /// these numbers unchanged. The fingerprint is FNV-1a over every output column.
    mod golden {
        use super::*;
        use crate::spec::{from_json, merge_streams, DeviceSpec, GeneratorSpec, SchedulerSpec};

        struct Fnv(u64);
        impl Fnv {
            fn u(&mut self, x: u64) {
                for b in x.to_le_bytes() {
                    self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
                }
            }
        }

        fn group(h: &mut Fnv, g: &GroupSummary) {
            for x in [g.completed, g.bytes, g.max_response, g.first_arrival, g.last_finish] {
                h.u(x);
            }
            h.u(g.sum_response as u64);
            h.u((g.sum_response >> 64) as u64);
            h.u(g.sum_wait as u64);
            h.u((g.sum_wait >> 64) as u64);
            for q in [0.0, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0] {
                h.u(g.quantile(q));
            }
            // As hdrhistogram's len, min_nz, max and recorded iteration hashed them
            // (the golden fingerprints predate LatencyHistogram).
            use crate::sim::latency_hist::{hdr_highest_value, hdr_index, hdr_lowest_value};
            let empty = g.hist.is_empty();
            h.u(g.hist.len());
            h.u(if empty { u64::MAX } else { hdr_lowest_value(hdr_index(g.hist.min())) });
            h.u(if empty { 0 } else { hdr_highest_value(hdr_index(g.hist.max())) });
            for (i, c) in g.hist.buckets() {
                h.u(hdr_highest_value(i));
                h.u(c);
            }
        }

        fn fingerprint(r: &SimResult) -> u64 {
            let mut h = Fnv(0xcbf2_9ce4_8422_2325);
            for g in r.tenants.iter().chain(&r.classes).chain([&r.total]) {
                group(&mut h, g);
            }
            let w = &r.windows;
            for i in 0..w.start.len() {
                for x in [w.start[i], w.tenant[i] as u64, w.arrivals[i], w.completed[i], w.bytes[i]] {
                    h.u(x);
                }
                h.u(w.mean_response[i].to_bits());
                for x in [w.p50_response[i], w.p95_response[i], w.p99_response[i], w.max_response[i]] {
                    h.u(x);
                }
            }
            for i in 0..r.gauges.start.len() {
                h.u(r.gauges.start[i]);
                for b in r.gauges.name(i).bytes() {
                    h.u(b as u64);
                }
                h.u(r.gauges.value[i].to_bits());
            }
            if let Some(l) = &r.log {
                for i in 0..l.len() {
                    for x in [l.id[i], l.tenant[i] as u64, l.class[i] as u64, l.arrival[i], l.dispatch[i], l.finish[i]]
                    {
                        h.u(x);
                    }
                    h.u(l.target[i] as u64 | (l.bytes[i] as u64) << 8 | (l.is_read[i] as u64) << 40);
                }
            }
            for x in [r.arrived, r.unfinished, r.end, r.events] {
                h.u(x);
            }
            h.0
        }

        fn gens(n: u64, classes: u32) -> impl Iterator<Item = Request> + Send {
            let per = n / classes as u64;
            let gens = (0..classes)
                .map(|i| {
                    let json = format!(
                        r#"{{"kind":"poisson","rate":187.5,"count":{per},"tenant":{i},"bytes":8192,"span_bytes":{},"seed":{}}}"#,
                        64u64 << 30,
                        100 + i
                    );
                    from_json::<GeneratorSpec>("generator", &json).unwrap().build().unwrap()
                })
                .collect();
            merge_streams(gens)
        }

        fn device(json: &str) -> AnyDevice {
            from_json::<DeviceSpec>("device", json).unwrap().build().unwrap()
        }

        fn policy(json: &str) -> AnyScheduler {
            from_json::<SchedulerSpec>("policy", json).unwrap().build().unwrap()
        }

        const EXP_ARRAY: &str = r#"{"kind":"array","servers":8,"assign":"striped","stripe_bytes":65536,
            "service":{"kind":"exponential","iops":250}}"#;
        const DISK_ARRAY: &str = r#"{"kind":"array","servers":8,"assign":"striped","stripe_bytes":65536,
            "service":{"kind":"disk","profile":"enterprise-10k","queue":"sptf"}}"#;

        fn sarc_avatar() -> String {
            let slo: Vec<String> =
                (0..8).map(|_| r#"{"rate_iops":187.5,"latency_ns":200000000}"#.to_string()).collect();
            format!(r#"{{"kind":"sarc_avatar","slo":[{}]}}"#, slo.join(","))
        }

        fn show(name: &str, r: &SimResult) -> u64 {
            let f = fingerprint(r);
            eprintln!(
                "{name}: fingerprint {f:#018x} completed {} sum {} max {} p99 {} windows {} events {} end {}",
                r.total.completed,
                r.total.sum_response,
                r.total.max_response,
                r.total.quantile(0.99),
                r.windows.start.len(),
                r.events,
                r.end
            );
            f
        }

        #[test]
        fn fcfs_constant_poisson() {
            let trace = crate::sim::generate::Poisson::new(900.0, 200_000, Nanos::MAX, Default::default(), 7).unwrap();
            let r =
                simulate(trace, &[], &mut Fcfs::new(), &mut ConstantRate::new(1000.0).unwrap(), &SimConfig::default())
                    .unwrap();
            let f = show("fcfs_constant", &r);
            let trace = crate::sim::generate::Poisson::new(900.0, 200_000, Nanos::MAX, Default::default(), 7).unwrap();
            let mut s = AnyScheduler::Fcfs(Fcfs::new());
            let mut d = AnyDevice::Constant(ConstantRate::new(1000.0).unwrap());
            assert_eq!(fingerprint(&simulate_spec(trace, &[], &mut s, &mut d, &SimConfig::default()).unwrap()), f);
            // Independently of the event loop: FCFS on one server of 1 ms per request is
            // the Lindley recursion finish_i = max(arrival_i, finish_{i-1}) + 1 ms.
            let (mut finish, mut sum, mut max) = (0u64, 0u128, 0u64);
            for q in crate::sim::generate::Poisson::new(900.0, 200_000, Nanos::MAX, Default::default(), 7).unwrap() {
                finish = finish.max(q.arrival) + NS_PER_MS;
                sum += u128::from(finish - q.arrival);
                max = max.max(finish - q.arrival);
            }
            assert_eq!((r.total.sum_response, r.total.max_response, r.end), (sum, max, finish));
            assert_eq!(
                (r.total.completed, r.total.sum_response, r.total.max_response),
                (200_000, 1_116_089_260_278, 44_670_034)
            );
            assert_eq!(r.total.quantile(0.99), 22_872_063);
            assert_eq!((r.windows.start.len(), r.events, r.end), (222, 400_000, 221_922_228_493));
            assert_eq!(f, 0xb419_668f_0d0d_7441);
        }

        #[test]
        fn fcfs_exponential_array_merged_generators() {
            let cfg = SimConfig { keep_requests: true, ..Default::default() };
            let r = simulate(gens(80_000, 8), &[], &mut policy(r#"{"kind":"fcfs"}"#), &mut device(EXP_ARRAY), &cfg)
                .unwrap();
            let f = show("fcfs_exp_array", &r);
            let r2 =
                simulate_spec(gens(80_000, 8), &[], &mut policy(r#"{"kind":"fcfs"}"#), &mut device(EXP_ARRAY), &cfg);
            assert_eq!(fingerprint(&r2.unwrap()), f);
            assert_eq!(
                (r.total.completed, r.total.sum_response, r.total.max_response),
                (80_000, 1_244_524_751_773, 132_278_747)
            );
            assert_eq!((r.total.quantile(0.99), r.end), (69_861_375, 54_433_011_844));
            assert_eq!(f, 0xd0cf_7ef5_34a2_32c2);
        }

        #[test]
        fn sarc_avatar_arrays() {
            let r = simulate(
                gens(80_000, 8),
                &[],
                &mut policy(&sarc_avatar()),
                &mut device(EXP_ARRAY),
                &SimConfig::default(),
            )
            .unwrap();
            let f = show("sarc_avatar_exp_array", &r);
            let r2 = simulate_spec(
                gens(80_000, 8),
                &[],
                &mut policy(&sarc_avatar()),
                &mut device(EXP_ARRAY),
                &SimConfig::default(),
            );
            assert_eq!(fingerprint(&r2.unwrap()), f);
            assert_eq!(
                (r.total.completed, r.total.sum_response, r.total.max_response),
                (80_000, 2_254_750_513_885, 381_423_729)
            );
            assert_eq!((r.total.quantile(0.99), r.events), (214_040_575, 160_138));
            assert_eq!(f, 0x7d78_849f_0cc0_e429);
            let cfg = SimConfig { keep_requests: true, window: NS_PER_SEC / 4, ..Default::default() };
            let r = simulate(gens(40_000, 8), &[], &mut policy(&sarc_avatar()), &mut device(DISK_ARRAY), &cfg).unwrap();
            let f = show("sarc_avatar_disk_array", &r);
            assert_eq!((r.total.completed, r.total.sum_response, r.events), (40_000, 1_910_275_219_216, 80_873));
            assert_eq!(f, 0x5955_d366_d2ac_51f0);
        }

        #[test]
        fn closed_clients_and_trace_together() {
            // Two closed clients (one exponential think, one duty cycle) beside an
            // open-loop trace, under EDF on an exponential server; the log is kept.
            let c = [
                ClosedClient {
                    tenant: 1,
                    outstanding: 3,
                    think: NS_PER_MS,
                    think_exponential: true,
                    span_bytes: 1 << 30,
                    stop: 20 * NS_PER_SEC,
                    ..Default::default()
                },
                ClosedClient {
                    tenant: 2,
                    outstanding: 2,
                    on_off: Some((300 * NS_PER_MS, 200 * NS_PER_MS)),
                    stop: 20 * NS_PER_SEC,
                    ..Default::default()
                },
            ];
            let trace = crate::sim::generate::Poisson::new(300.0, 5_000, Nanos::MAX, Default::default(), 3).unwrap();
            let cfg = SimConfig { seed: 5, keep_requests: true, window: NS_PER_SEC / 2, until: Some(30 * NS_PER_SEC) };
            let mut s = policy(r#"{"kind":"edf","deadlines_ns":[5000000,20000000],"default_deadline_ns":50000000}"#);
            let r = simulate(trace, &c, &mut s, &mut device(r#"{"kind":"exponential","iops":900}"#), &cfg).unwrap();
            let f = show("closed_edf_exponential", &r);
            // simulate_spec runs EDF monomorphised (device through the enum): the same run.
            let trace = crate::sim::generate::Poisson::new(300.0, 5_000, Nanos::MAX, Default::default(), 3).unwrap();
            let mut s = policy(r#"{"kind":"edf","deadlines_ns":[5000000,20000000],"default_deadline_ns":50000000}"#);
            let r2 =
                simulate_spec(trace, &c, &mut s, &mut device(r#"{"kind":"exponential","iops":900}"#), &cfg).unwrap();
            assert_eq!(fingerprint(&r2), f);
            assert_eq!((r.total.completed, r.total.sum_response, r.events), (17_835, 87_735_664_681, 35_670));
            assert_eq!(f, 0x18c1_a43b_5c30_6c3a);
        }

        /// Requests to tenants drawn uniformly at random (as `benches/tenants_scale.py`
        /// draws them), Poisson arrivals at `rate`, 1–4 pages each.
        fn random_tenants(n: u64, tenants: u32, rate: f64, seed: u64) -> Vec<Request> {
            let mut rng = crate::rng::SimRng::new(seed);
            let mut t = 0.0f64;
            (0..n)
                .map(|id| {
                    t += rng.exp(1e9 / rate);
                    let tenant = rng.below(u64::from(tenants)) as u32;
                    Request::new(id, tenant, t as Nanos, 4096 * (1 + rng.below(4) as u32))
                })
                .collect()
        }

        /// A fingerprint of FCLB's own record: every workload's monitor (whole-run
        /// summary, counts, last p95) and final rate.
        fn fclb_state<S: Scheduler>(h: &mut Fnv, f: &crate::fclb::Fclb<S>) {
            for i in 0..f.workloads() {
                let m = f.monitor(i);
                group(h, &m.summary());
                h.u(m.completed());
                h.u(m.violations());
                h.u(m.last_p95().unwrap_or(u64::MAX));
                h.u(f.rate_iops(i).to_bits());
            }
            h.u(f.periods());
        }

        /// FCLB over YFQ with hundreds of workloads, as the tenants benchmark runs it
        /// (and with an online K, unequal buckets, references and weights, batches and
        /// byte costs on an exponential server), and YFQ alone with unequal weights:
        /// per-request logs, summaries, window series, gauges and FCLB's monitors.
        #[test]
        fn fclb_and_yfq_many_tenants() {
            use crate::fclb::{FclbParams, Gain, Mode, WorkloadSpec};
            use crate::schedulers::tags::{CostModel, FairQueue};
            use crate::schedulers::yfq::Yfq;
            let cfg = SimConfig { keep_requests: true, window: NS_PER_SEC / 2, ..Default::default() };
            let mut got = Vec::new();
            // 1. The benchmark's shape: 300 workloads at 0.9 x capacity / 300, RT 100 ms.
            let (n, cap) = (300u32, 10_000.0);
            let params = FclbParams {
                workloads: vec![WorkloadSpec::new(0.9 * cap / f64::from(n), 100 * NS_PER_MS); n as usize],
                ..Default::default()
            };
            let mut s = params.build(Yfq::new(vec![], 1).unwrap()).unwrap();
            let r = simulate(
                random_tenants(120_000, n, 0.9 * cap, 11),
                &[],
                &mut s,
                &mut ConstantRate::new(cap).unwrap(),
                &cfg,
            )
            .unwrap();
            let mut h = Fnv(show("fclb_yfq_300", &r));
            fclb_state(&mut h, &s);
            got.push(h.0);
            // 2. Online K, unequal workloads (some over their rate, some references below
            // the demand, buckets 1..4), YFQ weights 1..4, batches of 3, byte cost.
            let n = 257u32;
            let workloads = (0..n)
                .map(|i| {
                    let mut w =
                        WorkloadSpec::new(8.0 + f64::from(i % 5) * 6.0, (20 + u64::from(i % 7) * 10) * NS_PER_MS);
                    w.bucket = Some(f64::from(1 + i % 4));
                    if i % 3 == 0 {
                        w.ref_ns = Some(15 * NS_PER_MS);
                    }
                    if i % 11 == 0 {
                        w.ceiling_iops = Some(60.0);
                    }
                    w
                })
                .collect();
            let params = FclbParams {
                workloads,
                gain_iops_per_ms: Some(Gain::Online),
                pole: Some(0.6),
                period_ns: Some(NS_PER_SEC / 2),
                ..Default::default()
            };
            let weights = (0..n).map(|i| f64::from(1 + i % 4)).collect();
            let back = Yfq::new(weights, 3).unwrap().with_cost(CostModel::Bytes);
            let mut s = params.build(back).unwrap();
            let mut d = crate::devices::Exponential::new(7_000.0).unwrap();
            let r = simulate(random_tenants(80_000, n + 20, 6_500.0, 12), &[], &mut s, &mut d, &cfg).unwrap();
            let mut h = Fnv(show("fclb_online_yfq_257", &r));
            fclb_state(&mut h, &s);
            got.push(h.0);
            // 3. The same workloads, fixed buckets.
            let mut p = params.clone();
            p.mode = Mode::Fixed;
            p.gain_iops_per_ms = Some(Gain::IopsPerMs(1.0));
            p.pole = None;
            let mut s = p.build(Yfq::new(vec![2.0, 1.0, 3.0], 2).unwrap()).unwrap();
            let mut d = crate::devices::Exponential::new(7_000.0).unwrap();
            let r = simulate(random_tenants(80_000, n, 6_500.0, 13), &[], &mut s, &mut d, &cfg).unwrap();
            let mut h = Fnv(show("fixed_bucket_yfq_257", &r));
            fclb_state(&mut h, &s);
            got.push(h.0);
            // 4. YFQ alone, weights 1..3, batches of 2, through the spec.
            let weights: Vec<String> = (0..500).map(|i| format!("{}", 1 + i % 3)).collect();
            let spec = format!(r#"{{"kind":"yfq","weights":[{}],"batch":2}}"#, weights.join(","));
            let r = simulate_spec(
                random_tenants(150_000, 500, 9_500.0, 14),
                &[],
                &mut policy(&spec),
                &mut device(r#"{"kind":"exponential","iops":10000}"#),
                &cfg,
            )
            .unwrap();
            got.push(show("yfq_500", &r));
            // As before YFQ's queues moved into one slab and FCLB's monitors took their
            // completions in batches.
            assert_eq!(
                got,
                [0x4200_4776_ee17_8ab3, 0x2059_27d9_2c40_34a0, 0xc3a5_827c_0d4d_0805, 0x6451_f2a2_d274_af9c]
            );
        }
    }
}
