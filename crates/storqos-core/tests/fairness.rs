//! Fairness and deadline properties of the baseline schedulers, run through the
//! simulator (`sim::simulate`) in simulated time:
//!
//! - WF2Q+ and SFQ(D) (D = 1, 4) give two always-backlogged tenants with weights 2:1
//!   completions within 1 % of 2:1 over a long run; D caps the device queue.
//! - A tenant that returns from idle gets no burst: in every run of consecutive
//!   dispatches after its return its service stays within its weighted share + 1.
//! - EDF meets every deadline whenever some work-conserving schedule does (random
//!   instances with a witness schedule), its maximum lateness never exceeds FCFS's, FCFS
//!   misses a deadline EDF meets, and on unit jobs released on the service grid EDF's
//!   maximum lateness equals the brute-force optimum.

use std::collections::VecDeque;

use storqos_core::devices::ConstantRate;
use storqos_core::schedulers::{Edf, Fcfs, Sfq, Wf2q};
use storqos_core::sim::{simulate, ClosedClient, SimConfig, SimResult};
use storqos_core::time::{NS_PER_MS, NS_PER_SEC};
use storqos_core::{Completion, Device, DeviceState, Nanos, Request, Scheduler, SimRng};

/// Capacity of the device in the fairness runs (IOPS).
const IOPS: f64 = 1000.0;
/// Service time of one request at [`IOPS`].
const SERVICE: Nanos = NS_PER_MS;
/// Length of the long fairness runs: 100 s ≈ 100 000 requests.
const LONG_RUN: Nanos = 100 * NS_PER_SEC;
/// Accepted relative deviation from the 2:1 target.
const RATIO_TOLERANCE: f64 = 0.01;
/// Weights of the two tenants.
const WEIGHTS: [f64; 2] = [2.0, 1.0];

/// A device of `k` identical constant-rate servers behind one FIFO queue accepting up to
/// `slots` outstanding requests (a stand-in for an array with internal parallelism). It
/// records the deepest outstanding count it saw.
struct Servers {
    k: usize,
    slots: usize,
    service: Nanos,
    running: Vec<(Nanos, u64, Completion)>,
    waiting: VecDeque<(Request, Nanos)>,
    seq: u64,
    max_outstanding: usize,
}

impl Servers {
    fn new(k: usize, slots: usize, service: Nanos) -> Self {
        Servers { k, slots, service, running: Vec::new(), waiting: VecDeque::new(), seq: 0, max_outstanding: 0 }
    }
    fn start(&mut self, req: Request, dispatch: Nanos, at: Nanos) {
        let finish = at + self.service;
        self.running.push((finish, self.seq, Completion { req, dispatch, finish }));
        self.seq += 1;
    }
    fn earliest(&self) -> Option<usize> {
        (0..self.running.len()).min_by_key(|&i| (self.running[i].0, self.running[i].1))
    }
}

impl Device for Servers {
    fn name(&self) -> String {
        format!("{} servers", self.k)
    }
    fn state(&self) -> DeviceState {
        let outstanding = self.running.len() + self.waiting.len();
        DeviceState { outstanding, free_slots: self.slots - outstanding }
    }
    fn submit(&mut self, req: Request, now: Nanos, _rng: &mut SimRng) {
        if self.running.len() < self.k {
            self.start(req, now, now);
        } else {
            self.waiting.push_back((req, now));
        }
        self.max_outstanding = self.max_outstanding.max(self.running.len() + self.waiting.len());
    }
    fn next_completion(&self) -> Option<Nanos> {
        self.earliest().map(|i| self.running[i].0)
    }
    fn pop_completion(&mut self, _rng: &mut SimRng) -> Option<Completion> {
        let (t, _, c) = self.running.swap_remove(self.earliest()?);
        if let Some((r, d)) = self.waiting.pop_front() {
            self.start(r, d, t);
        }
        Some(c)
    }
}

/// Two closed clients (tenants 0 and 1) keeping `outstanding` requests each.
fn backlogged_pair(outstanding: u32) -> Vec<ClosedClient> {
    (0..2).map(|t| ClosedClient { tenant: t, outstanding, ..Default::default() }).collect()
}

fn run<S: Scheduler, D: Device>(sched: &mut S, dev: &mut D, clients: &[ClosedClient], keep: bool) -> SimResult {
    let cfg = SimConfig { until: Some(LONG_RUN), keep_requests: keep, ..Default::default() };
    simulate(Vec::new(), clients, sched, dev, &cfg).unwrap()
}

/// Completion ratio tenant 0 : tenant 1, checked against 2:1.
fn check_two_to_one(label: &str, r: &SimResult) -> f64 {
    let (a, b) = (r.tenants[0].completed, r.tenants[1].completed);
    let ratio = a as f64 / b as f64;
    eprintln!("{label}: tenant 0 = {a}, tenant 1 = {b}, ratio = {ratio:.5}");
    assert!(a + b > 90_000, "{label}: device not kept busy ({a} + {b})");
    assert!((ratio / 2.0 - 1.0).abs() < RATIO_TOLERANCE, "{label}: ratio {ratio} not within 1 % of 2");
    ratio
}

#[test]
fn wf2q_two_backlogged_tenants_share_two_to_one() {
    let mut s = Wf2q::new(WEIGHTS.to_vec()).unwrap();
    let r = run(&mut s, &mut ConstantRate::new(IOPS).unwrap(), &backlogged_pair(8), false);
    check_two_to_one("wf2q+", &r);
}

#[test]
fn sfq_d1_two_backlogged_tenants_share_two_to_one() {
    let mut s = Sfq::new(WEIGHTS.to_vec(), 1).unwrap();
    let r = run(&mut s, &mut ConstantRate::new(IOPS).unwrap(), &backlogged_pair(8), false);
    check_two_to_one("sfq(d=1)", &r);
}

#[test]
fn sfq_d4_shares_two_to_one_and_caps_the_device_queue() {
    // 4 servers of 4 ms each = 1000 IOPS; the device would take 16 requests.
    let mut dev = Servers::new(4, 16, 4 * SERVICE);
    let mut s = Sfq::new(WEIGHTS.to_vec(), 4).unwrap();
    let r = run(&mut s, &mut dev, &backlogged_pair(16), false);
    check_two_to_one("sfq(d=4)", &r);
    assert_eq!(dev.max_outstanding, 4, "D = 4 must cap the device queue");
    // Without the cap (D = 16) the same device fills all its slots.
    let mut dev = Servers::new(4, 16, 4 * SERVICE);
    run(&mut Sfq::new(WEIGHTS.to_vec(), 16).unwrap(), &mut dev, &backlogged_pair(16), false);
    assert_eq!(dev.max_outstanding, 16);
}

/// Time tenant 1 is away in the returning-tenant runs, and how long it is active.
const ON: Nanos = 2 * NS_PER_SEC;
const OFF: Nanos = 3 * NS_PER_SEC;
/// How long after a return the dispatch sequence is checked (both tenants backlogged).
const CHECK_SPAN: Nanos = NS_PER_SEC;

/// Tenant 0 always backlogged; tenant 1 active `ON`, idle `OFF`, repeatedly, 8 requests
/// outstanding while active (weights 2:1). Returns, per return of tenant 1, the tenants
/// of the dispatches in `[return, return + CHECK_SPAN)` in dispatch order.
fn dispatches_after_returns<S: Scheduler>(sched: &mut S) -> Vec<Vec<u32>> {
    let clients = [
        ClosedClient { tenant: 0, outstanding: 8, ..Default::default() },
        ClosedClient { tenant: 1, outstanding: 8, on_off: Some((ON, OFF)), ..Default::default() },
    ];
    let r = run(sched, &mut ConstantRate::new(IOPS).unwrap(), &clients, true);
    let log = r.log.unwrap();
    let mut order: Vec<(Nanos, u32)> = log.dispatch.iter().copied().zip(log.tenant.iter().copied()).collect();
    order.sort_unstable();
    let period = ON + OFF;
    (1..LONG_RUN / period - 1)
        .map(|i| {
            let back = i * period;
            order.iter().filter(|(t, _)| (back..back + CHECK_SPAN).contains(t)).map(|&(_, x)| x).collect()
        })
        .collect()
}

/// In every run of `n` consecutive dispatches, tenant 1 (share 1/3) gets at most
/// `n/3 + 1`; and its 8 queued requests do not all go first.
fn check_no_burst(label: &str, runs: &[Vec<u32>]) {
    assert!(runs.len() >= 10, "{label}: too few returns");
    let mut worst = f64::MIN;
    for seq in runs {
        assert!(seq.len() > 900, "{label}: device idle after a return");
        let mut prefix = vec![0usize; seq.len() + 1];
        for (i, &t) in seq.iter().enumerate() {
            prefix[i + 1] = prefix[i] + (t == 1) as usize;
        }
        for i in 0..seq.len() {
            for j in i + 1..=seq.len() {
                let excess = (prefix[j] - prefix[i]) as f64 - (j - i) as f64 / 3.0;
                worst = worst.max(excess);
            }
        }
        let first8 = seq[..8].iter().filter(|&&t| t == 1).count();
        assert!(first8 <= 4, "{label}: returning tenant took {first8} of the first 8 dispatches: {:?}", &seq[..8]);
    }
    eprintln!("{label}: largest excess of the returning tenant over its 1/3 share in any interval = {worst:.3}");
    assert!(worst <= 1.0, "{label}: returning tenant exceeded its share by {worst} requests");
}

#[test]
fn wf2q_returning_tenant_gets_no_burst() {
    let runs = dispatches_after_returns(&mut Wf2q::new(WEIGHTS.to_vec()).unwrap());
    check_no_burst("wf2q+", &runs);
}

#[test]
fn sfq_returning_tenant_gets_no_burst() {
    let runs = dispatches_after_returns(&mut Sfq::new(WEIGHTS.to_vec(), 1).unwrap());
    check_no_burst("sfq(d=1)", &runs);
}

// ---------------------------------------------------------------------------------------
// EDF

/// One EDF test instance: requests (class = index, so each has its own deadline) and
/// their absolute deadlines.
struct Instance {
    reqs: Vec<Request>,
    deadlines: Vec<Nanos>,
}

impl Instance {
    /// EDF configured with each request's relative deadline as its class's.
    fn edf(&self) -> Edf {
        let rel = self.reqs.iter().zip(&self.deadlines).map(|(r, &d)| d - r.arrival).collect();
        Edf::new(rel, Nanos::MAX).unwrap()
    }
    /// Maximum lateness (finish − deadline, may be negative) of `sched` on a constant
    /// device of [`IOPS`], through the simulator.
    fn max_lateness<S: Scheduler>(&self, sched: &mut S) -> i64 {
        let cfg = SimConfig { keep_requests: true, ..Default::default() };
        let r = simulate(self.reqs.clone(), &[], sched, &mut ConstantRate::new(IOPS).unwrap(), &cfg).unwrap();
        assert_eq!(r.unfinished, 0);
        let log = r.log.unwrap();
        log.id.iter().zip(&log.finish).map(|(&id, &f)| f as i64 - self.deadlines[id as usize] as i64).max().unwrap()
    }
}

fn request(id: usize, arrival: Nanos) -> Request {
    let mut r = Request::new(id as u64, 0, arrival, 4096);
    r.class = id as u32;
    r
}

/// Random arrivals (distinct, gaps uniform in [0, 2·SERVICE) so the device is loaded
/// about 100 % with idle gaps) and a witness schedule: at each work-conserving service
/// slot a *random* waiting request is served (exactly the slots the simulator produces:
/// a request arriving at the instant a slot starts is not yet waiting). Deadlines are the
/// witness finish times plus a random slack of 0..3 services, so the witness meets every
/// deadline.
fn feasible_instance(rng: &mut SimRng, n: usize) -> Instance {
    let mut t = 0;
    let reqs: Vec<Request> = (0..n)
        .map(|i| {
            t += 1 + rng.below(2 * SERVICE);
            request(i, t)
        })
        .collect();
    let mut deadlines = vec![0; n];
    let mut waiting: Vec<usize> = Vec::new();
    let (mut next, mut clock) = (0, 0);
    while next < n || !waiting.is_empty() {
        while next < n && reqs[next].arrival < clock {
            waiting.push(next);
            next += 1;
        }
        if waiting.is_empty() {
            // Idle device: the next arrival starts a slot by itself.
            clock = reqs[next].arrival;
            waiting.push(next);
            next += 1;
        }
        let j = waiting.swap_remove(rng.below(waiting.len() as u64) as usize);
        clock += SERVICE;
        deadlines[j] = clock + rng.below(3 * SERVICE + 1);
    }
    Instance { reqs, deadlines }
}

#[test]
fn edf_meets_every_deadline_of_feasible_instances() {
    let mut rng = SimRng::new(2024);
    for round in 0..300 {
        let inst = feasible_instance(&mut rng, 5 + round % 60);
        let late = inst.max_lateness(&mut inst.edf());
        assert!(late <= 0, "round {round}: EDF missed a deadline by {late} ns on a feasible instance");
    }
}

#[test]
fn edf_max_lateness_never_exceeds_fcfs() {
    let mut rng = SimRng::new(7);
    let mut fcfs_missed = 0;
    for round in 0..300 {
        // Random relative deadlines between 1 and 10 services on a loaded device.
        let mut inst = feasible_instance(&mut rng, 10 + round % 50);
        for (r, d) in inst.reqs.iter().zip(inst.deadlines.iter_mut()) {
            *d = r.arrival + SERVICE * (1 + rng.below(10));
        }
        let edf = inst.max_lateness(&mut inst.edf());
        let fcfs = inst.max_lateness(&mut Fcfs::new());
        assert!(edf <= fcfs, "round {round}: EDF max lateness {edf} > FCFS {fcfs}");
        fcfs_missed += (fcfs > 0 && edf <= 0) as u32;
    }
    eprintln!("instances where FCFS misses and EDF meets every deadline: {fcfs_missed} / 300");
    assert!(fcfs_missed > 0);
}

#[test]
fn fcfs_misses_a_deadline_edf_meets() {
    // Two lax requests (10 ms) then an urgent one (1.9 ms) arriving while the first is
    // in service: FCFS serves it third (response 2.8 ms), EDF second (1.8 ms).
    let reqs = vec![request(0, 0), request(1, 100_000), request(2, 200_000)];
    let deadlines = vec![10 * NS_PER_MS, 100_000 + 10 * NS_PER_MS, 200_000 + 1_900_000];
    let inst = Instance { reqs, deadlines };
    assert_eq!(inst.max_lateness(&mut Fcfs::new()), 900_000);
    assert!(inst.max_lateness(&mut inst.edf()) <= 0);
}

/// Drive `sched` in front of one server of service time [`SERVICE`] with explicit times,
/// enqueueing *every* arrival of an instant before dispatching at it (the textbook model
/// in which EDF is optimal for unit jobs). Returns the finish time of each request id.
fn single_server<S: Scheduler>(sched: &mut S, reqs: &[Request]) -> Vec<Nanos> {
    let mut finish = vec![0; reqs.len()];
    let free = DeviceState { outstanding: 0, free_slots: 1 };
    let (mut next, mut busy_until) = (0, None::<Nanos>);
    while next < reqs.len() || sched.queued() > 0 || busy_until.is_some() {
        let t_arr = reqs.get(next).map(|r| r.arrival);
        let now = match (busy_until, t_arr) {
            (Some(b), Some(a)) => b.min(a),
            (b, a) => b.or(a).unwrap_or_else(|| panic!("scheduler holds work on an idle device")),
        };
        if busy_until == Some(now) {
            busy_until = None;
        }
        while next < reqs.len() && reqs[next].arrival == now {
            sched.enqueue(reqs[next], now);
            next += 1;
        }
        if busy_until.is_none() {
            if let Some(r) = sched.dispatch(now, &free) {
                finish[r.id as usize] = now + SERVICE;
                busy_until = Some(now + SERVICE);
            }
        }
    }
    finish
}

/// Smallest maximum lateness over every order of serving the requests (each started as
/// early as its release and the previous one allow: optimal for a given order).
fn brute_force_min_max_lateness(reqs: &[Request], deadlines: &[Nanos]) -> i64 {
    fn go(reqs: &[Request], dl: &[Nanos], used: &mut [bool], clock: Nanos, worst: i64, best: &mut i64) {
        if worst >= *best {
            return;
        }
        if used.iter().all(|&u| u) {
            *best = worst;
            return;
        }
        for i in 0..reqs.len() {
            if !used[i] {
                used[i] = true;
                let f = clock.max(reqs[i].arrival) + SERVICE;
                go(reqs, dl, used, f, worst.max(f as i64 - dl[i] as i64), best);
                used[i] = false;
            }
        }
    }
    let mut best = i64::MAX;
    go(reqs, deadlines, &mut vec![false; reqs.len()], 0, i64::MIN, &mut best);
    best
}

#[test]
fn edf_matches_brute_force_on_unit_jobs_released_on_the_grid() {
    let mut rng = SimRng::new(99);
    let mut feasible = 0;
    for round in 0..400 {
        let n = 2 + round % 6;
        let mut arrivals: Vec<Nanos> = (0..n).map(|_| rng.below(n as u64) * SERVICE).collect();
        arrivals.sort_unstable();
        let reqs: Vec<Request> = arrivals.iter().enumerate().map(|(i, &a)| request(i, a)).collect();
        let deadlines: Vec<Nanos> = reqs.iter().map(|r| r.arrival + SERVICE * (1 + rng.below(n as u64))).collect();
        let inst = Instance { reqs, deadlines };
        let finish = single_server(&mut inst.edf(), &inst.reqs);
        let edf = finish.iter().zip(&inst.deadlines).map(|(&f, &d)| f as i64 - d as i64).max().unwrap();
        let best = brute_force_min_max_lateness(&inst.reqs, &inst.deadlines);
        assert_eq!(edf, best, "round {round}: EDF max lateness {edf}, optimum {best}");
        feasible += (best <= 0) as u32;
    }
    eprintln!("feasible grid instances (EDF met every deadline): {feasible} / 400");
    assert!(feasible > 50);
}
