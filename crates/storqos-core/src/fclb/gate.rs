//! [`Fclb`]: the feedback-controlled leaky bucket as a [`Scheduler`] wrapping a back end
//! (seed 003 §3.1, Fig. 2): per workload a [`TokenBucket`] and a [`Monitor`], one
//! [`IntegralController`], and behind them a proportional-share back end (YFQ,
//! [`crate::schedulers::yfq::Yfq`]) that receives a request only once its workload has a
//! token.
//!
//! Driving (time is always injected):
//! - `enqueue`: the request joins its workload's FIFO at the bucket and passes at once if
//!   a whole token is there;
//! - `dispatch` / `on_timer`: requests whose tokens have arrived pass to the back end
//!   (workloads in index order at one instant), then the back end chooses;
//! - `complete`: the monitor records the response time since the request passed its
//!   bucket (with many workloads, in batches grouped by workload: [`Monitors`]), then
//!   the back end is told;
//! - `next_timer`: the next control period boundary, the next token of every workload
//!   with requests waiting (lazy refill: no 1 ms timer otherwise), and the back end's.
//!
//! Modes ([`Mode`]): `feedback` (the paper's FCLB), `fixed` (the same buckets with the
//! rates frozen at the demanded IOPS: a plain leaky bucket) and `off` (no bucket: the
//! back end alone, still monitored), so the three compare in identical runs.
//!
//! **Anti-windup** (ours, not in the paper): a rate is only raised in a period in which
//! the bucket actually held the workload back. A workload that sends less than its rate
//! would otherwise see low response times and integrate its rate up without bound; the
//! paper's closed-loop workloads are always throttled, so this never changes its cases.
//! Rates are held (not changed) in a period without completions (an idle workload keeps
//! its rate, and its bucket fills to `b_i`).
//!
//! Tenants without a configured workload pass straight to the back end, unmonitored.
//!
//! **Online gain** ([`Fclb::with_online_gain`], spec `"gain_iops_per_ms": "online"`):
//! each workload's K is placed every period on its own plant-gain estimate
//! ([`crate::fclb::estimator`]) instead of one K for all.
//!
//! **Live references** (the gateway's entry point, `crates/storqos-gateway/src/admission.rs`):
//! on the wall clock the admitted set changes as tenants connect, and with it each
//! workload's RT″ (admission control, [`crate::fclb::admission`]). [`References`] is a
//! board the admission side writes and [`Fclb::with_references`] reads at the end of
//! every control period (the only place a reference is used), so the policy still reads
//! no clock and runs the same code; the simulator never attaches one.

use std::cell::{Ref, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Deserialize;

use crate::device::DeviceState;
use crate::error::{config, Result};
use crate::fclb::bucket::{TokenBucket, MICRO_TOKENS};
use crate::fclb::controller::{
    check_gain, pole_placement, Gain, IntegralController, RateLimits, CONTROL_PERIOD, DEFAULT_POLE,
    PAPER_PLANT_GAIN_MS_PER_IOPS,
};
use crate::fclb::estimator::{EstimatorConfig, GainEstimator, OnlineGain};
use crate::fclb::monitor::{Monitor, Monitors};
use crate::request::{Completion, Request};
use crate::scheduler::Scheduler;
use crate::time::{Nanos, NS_PER_MS};

/// Default bucket size `b_i` (tokens) when a workload does not give one: the larger of
/// seed 003's Table 1 sizes (8 for W1, 4 for W2).
pub const DEFAULT_BUCKET_TOKENS: f64 = 8.0;

/// How the buckets' rates are set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// FCLB: rates follow the integral controller (seed 003).
    #[default]
    Feedback,
    /// A fixed leaky bucket: rates stay at the demanded IOPS (no feedback).
    Fixed,
    /// No bucket: requests go straight to the back end (plain YFQ).
    Off,
}

impl Mode {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Feedback => "feedback",
            Mode::Fixed => "fixed",
            Mode::Off => "off",
        }
    }
}

/// One workload's demanded performance `(size_i, IOPS_i, RT_i)` and bucket (seed 003
/// §2, Tables 1–2). Tenant `i` is workload `i`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Demanded IOPS_i: the initial replenish rate and its floor (> 0).
    pub iops: f64,
    /// Demanded response time RT_i (ns, > 0): completions above it are violations.
    pub rt_ns: Nanos,
    /// Controller reference RT_ref,i (ns); default `rt_ns`. Admission control's RT″
    /// (seed 003 §4.3: "RT″ is internally used for the feedback control as a
    /// reference value").
    #[serde(default)]
    pub ref_ns: Option<Nanos>,
    /// Bucket size b_i (tokens, ≥ 1); default [`DEFAULT_BUCKET_TOKENS`].
    #[serde(default)]
    pub bucket: Option<f64>,
    /// Optional ceiling on the replenish rate (IOPS, ≥ `iops`).
    #[serde(default)]
    pub ceiling_iops: Option<f64>,
}

impl WorkloadSpec {
    /// A workload demanding `iops` within `rt_ns`, default bucket, reference = demand.
    pub fn new(iops: f64, rt_ns: Nanos) -> Self {
        WorkloadSpec { iops, rt_ns, ref_ns: None, bucket: None, ceiling_iops: None }
    }
}

/// FCLB parameters (the JSON spec's fields besides the back end).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FclbParams {
    /// Workload i = tenant i.
    pub workloads: Vec<WorkloadSpec>,
    /// Controller gain K: a fixed one (IOPS per ms of error), or [`Gain::Online`]: the
    /// plant gain measured online and `pole` placed on it every period
    /// ([`crate::fclb::estimator`]), `plant_gain_ms_per_iops` its start value.
    pub gain_iops_per_ms: Option<Gain>,
    /// Plant gain G (ms per IOPS): with a fixed gain it is checked for stability, with
    /// `pole` it gives K = (1 − p)/G; with an online gain it is the estimate's start value.
    pub plant_gain_ms_per_iops: Option<f64>,
    /// Desired closed-loop pole p (−1 < p < 1).
    pub pole: Option<f64>,
    /// Feedback, fixed or off.
    pub mode: Mode,
    /// Control period (ns); default [`CONTROL_PERIOD`].
    pub period_ns: Option<Nanos>,
}

impl FclbParams {
    /// The controller gain K: given (checked against `0 < K < 2/G` when G is given), or
    /// from the pole (K = (1 − p)/G), or from [`DEFAULT_POLE`] and the paper's G = 0.3
    /// ms/IOPS when neither is given. With an online gain, the K of the start value.
    pub fn resolve_gain(&self) -> Result<f64> {
        let fixed = match self.gain_iops_per_ms {
            Some(Gain::IopsPerMs(k)) => Some(k),
            Some(Gain::Online) | None => None,
        };
        match (fixed, self.pole, self.plant_gain_ms_per_iops) {
            (Some(_), Some(_), _) => config("fclb: give either gain_iops_per_ms or pole, not both"),
            (Some(k), None, Some(g)) => check_gain(k, g).map(|_| k),
            (Some(k), None, None) => {
                IntegralController::new(k)?;
                if k <= 0.0 {
                    return config(format!("fclb: controller gain K must be > 0 IOPS/ms, got {k}"));
                }
                Ok(k)
            }
            (None, Some(p), g) => Ok(pole_placement(g.unwrap_or(PAPER_PLANT_GAIN_MS_PER_IOPS), p)?.gain_iops_per_ms),
            (None, None, g) => {
                Ok(pole_placement(g.unwrap_or(PAPER_PLANT_GAIN_MS_PER_IOPS), DEFAULT_POLE)?.gain_iops_per_ms)
            }
        }
    }

    /// Build the policy in front of `inner`.
    pub fn build<S: Scheduler>(&self, inner: S) -> Result<Fclb<S>> {
        let k = self.resolve_gain()?;
        let mut f = Fclb::new(inner, &self.workloads, k, self.mode)?;
        if let Some(p) = self.period_ns {
            f = f.with_period(p)?;
        }
        if self.gain_iops_per_ms == Some(Gain::Online) {
            let start = self.plant_gain_ms_per_iops.unwrap_or(PAPER_PLANT_GAIN_MS_PER_IOPS);
            f = f.with_online_gain(self.pole.unwrap_or(DEFAULT_POLE), start)?;
        }
        Ok(f)
    }
}

/// Controller references written from outside the policy (the live gateway's admission
/// control): one slot per workload, in ns, 0 meaning "the configured reference". Read at
/// the end of each control period.
#[derive(Clone, Debug, Default)]
pub struct References(Arc<[AtomicU64]>);

impl References {
    /// A board for `n` workloads, every slot 0 (the configured references).
    pub fn new(n: usize) -> Self {
        References((0..n).map(|_| AtomicU64::new(0)).collect())
    }

    /// Use `ns` as workload `i`'s reference from the next control period on (0: the
    /// configured one again). Out-of-range workloads are ignored.
    pub fn set(&self, i: usize, ns: Nanos) {
        if let Some(slot) = self.0.get(i) {
            slot.store(ns, Ordering::Relaxed);
        }
    }

    /// Workload `i`'s reference from the board, if one is set.
    pub fn get(&self, i: usize) -> Option<Nanos> {
        self.0.get(i).map(|s| s.load(Ordering::Relaxed)).filter(|&ns| ns > 0)
    }
}

/// What every request of a workload reaches: its bucket and the requests waiting for a
/// token, together in one cache line (the rest of a workload's state is read once per
/// control period, or when the bucket holds a request back).
#[derive(Clone, Debug)]
#[repr(align(64))]
struct Gate {
    bucket: TokenBucket,
    waiting: VecDeque<Request>,
}

/// One workload's state besides its [`Gate`] and its monitor.
#[derive(Clone, Debug)]
struct Workload {
    limits: RateLimits,
    reference: Nanos,
    /// The bucket held a request back during the current period.
    throttled: bool,
    /// The workload has an entry in [`Fclb::due`].
    in_due: bool,
    /// Its own K placed on its plant-gain estimate, with an online gain.
    online: Option<OnlineGain>,
}

/// The feedback-controlled leaky bucket in front of a back-end scheduler.
#[derive(Clone, Debug)]
pub struct Fclb<S> {
    inner: S,
    mode: Mode,
    controller: IntegralController,
    period: Nanos,
    anti_windup: bool,
    /// Per workload: bucket and waiting requests.
    gates: Vec<Gate>,
    workloads: Vec<Workload>,
    /// Per workload: the monitor, fed in batches ([`Monitors`]). In a cell because
    /// reading a monitor (`&self`: [`Fclb::monitor`], the gauges) first hands it the
    /// completions gathered so far; nothing else borrows it.
    monitors: RefCell<Monitors>,
    /// Release time of every request passed to the back end and not yet completed.
    released: FxHashMap<u64, Nanos>,
    /// Workloads with requests waiting, by the time their next token arrives: a release
    /// visits only the workloads whose token is due, not all of them (the rates, and so
    /// these times, change only at the end of a control period, which rebuilds it).
    due: BinaryHeap<Reverse<(Nanos, usize)>>,
    /// Scratch list of the workloads a release visits (kept to spare an allocation).
    ready: Vec<usize>,
    held: usize,
    next_control: Nanos,
    /// The latest time any call brought (for gauges and timers).
    now: Nanos,
    periods: u64,
    /// References set from outside (the live gateway's admission), if attached.
    board: Option<References>,
}

impl<S: Scheduler> Fclb<S> {
    /// FCLB with `workloads` (workload i = tenant i), controller gain `K` (IOPS/ms) and
    /// `mode`, in front of `inner`.
    pub fn new(inner: S, workloads: &[WorkloadSpec], gain_iops_per_ms: f64, mode: Mode) -> Result<Self> {
        let controller = IntegralController::new(gain_iops_per_ms)?;
        let mut ws = Vec::with_capacity(workloads.len());
        let mut gates = Vec::with_capacity(workloads.len());
        for (i, w) in workloads.iter().enumerate() {
            let what = format!("fclb: workload {i}");
            if !(w.iops > 0.0 && w.iops.is_finite()) {
                return config(format!("{what}: demanded IOPS must be > 0, got {}", w.iops));
            }
            if w.rt_ns == 0 || w.ref_ns == Some(0) {
                return config(format!("{what}: response times must be > 0 ns"));
            }
            if let Some(c) = w.ceiling_iops {
                if !(c >= w.iops && c.is_finite()) {
                    return config(format!("{what}: ceiling {c} IOPS must be >= the demanded {} IOPS", w.iops));
                }
            }
            gates.push(Gate {
                bucket: TokenBucket::new(&what, w.iops, w.bucket.unwrap_or(DEFAULT_BUCKET_TOKENS))?,
                waiting: VecDeque::new(),
            });
            ws.push(Workload {
                limits: RateLimits { floor_iops: w.iops, ceiling_iops: w.ceiling_iops },
                reference: w.ref_ns.unwrap_or(w.rt_ns),
                throttled: false,
                in_due: false,
                online: None,
            });
        }
        Ok(Fclb {
            inner,
            mode,
            controller,
            period: CONTROL_PERIOD,
            anti_windup: true,
            gates,
            workloads: ws,
            monitors: RefCell::new(Monitors::new(workloads.iter().map(|w| w.rt_ns))),
            released: FxHashMap::default(),
            due: BinaryHeap::new(),
            ready: Vec::new(),
            held: 0,
            next_control: CONTROL_PERIOD,
            now: 0,
            periods: 0,
            board: None,
        })
    }

    /// Use another control period (ns, > 0). Set before use.
    pub fn with_period(mut self, period: Nanos) -> Result<Self> {
        if period == 0 {
            return config("fclb: control period must be > 0 ns");
        }
        self.period = period;
        self.next_control = period;
        Ok(self)
    }

    /// Read the workloads' references from `board` at every control period (the live
    /// gateway's admission control writes RT″ there as tenants are admitted); a slot of 0
    /// keeps the configured reference. Set before use.
    pub fn with_references(mut self, board: References) -> Self {
        self.board = Some(board);
        self
    }

    /// The reference workload `i` is controlled to now (ns).
    pub fn reference(&self, i: usize) -> Nanos {
        self.board.as_ref().and_then(|b| b.get(i)).unwrap_or(self.workloads[i].reference)
    }

    /// Measure each workload's plant gain online, starting from `start_ms_per_iops`, and
    /// place `pole` on it every period: `K_i = (1 − p)/Ĝ_i` ([`crate::fclb::estimator`],
    /// default bounds and forgetting). Set before use.
    pub fn with_online_gain(mut self, pole: f64, start_ms_per_iops: f64) -> Result<Self> {
        for w in &mut self.workloads {
            let est = GainEstimator::new(EstimatorConfig::around(start_ms_per_iops, w.limits.floor_iops)?)?;
            w.online = Some(OnlineGain::new(est, pole)?);
        }
        Ok(self)
    }

    /// The controller gain K workload `i` steps with (IOPS/ms): its online one, if
    /// measured online, else the policy's.
    pub fn gain_of(&self, i: usize) -> f64 {
        self.workloads[i].online.as_ref().map_or(self.controller.gain_iops_per_ms, OnlineGain::gain_iops_per_ms)
    }

    /// Workload `i`'s plant-gain estimate Ĝ (ms/IOPS), with an online gain.
    pub fn plant_gain_estimate(&self, i: usize) -> Option<f64> {
        self.workloads[i].online.as_ref().map(|o| o.estimator().gain_ms_per_iops())
    }

    /// Turn the anti-windup rule off (raise rates even when the bucket held nothing back).
    pub fn without_anti_windup(mut self) -> Self {
        self.anti_windup = false;
        self
    }

    /// The back end.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The controller gain K (IOPS/ms).
    pub fn gain(&self) -> f64 {
        self.controller.gain_iops_per_ms
    }

    /// Number of configured workloads.
    pub fn workloads(&self) -> usize {
        self.workloads.len()
    }

    /// Current replenish rate of workload `i` (IOPS).
    pub fn rate_iops(&self, i: usize) -> f64 {
        self.gates[i].bucket.rate_iops()
    }

    /// The monitor of workload `i`, up to date (it is handed the completions gathered
    /// since its last batch first).
    pub fn monitor(&self, i: usize) -> Ref<'_, Monitor> {
        Ref::map(self.monitors_now(), |m| &m.recorded()[i])
    }

    /// The monitors, handed the completions gathered so far. (If the cell is borrowed,
    /// a reader took it since the last `&mut` call, and flushed it then.)
    fn monitors_now(&self) -> Ref<'_, Monitors> {
        if let Ok(mut m) = self.monitors.try_borrow_mut() {
            m.flush();
        }
        self.monitors.borrow()
    }

    /// Control periods completed.
    pub fn periods(&self) -> u64 {
        self.periods
    }

    /// Pass every request whose token has arrived to the back end, workload by workload
    /// in index order.
    fn release(&mut self, now: Nanos) {
        let mut ready = std::mem::take(&mut self.ready);
        while let Some(&Reverse((t, i))) = self.due.peek() {
            if t > now {
                break;
            }
            self.due.pop();
            self.workloads[i].in_due = false;
            ready.push(i);
        }
        ready.sort_unstable();
        for &i in &ready {
            let g = &mut self.gates[i];
            while let Some(req) = g.waiting.front().copied() {
                if !g.bucket.try_take(now) {
                    self.workloads[i].throttled = true;
                    break;
                }
                g.waiting.pop_front();
                self.held -= 1;
                self.released.insert(req.id, now);
                self.inner.enqueue(req, now);
            }
            self.wait_for_token(i, now);
        }
        ready.clear();
        self.ready = ready;
    }

    /// Workload `i`, if it has requests waiting, waits for its next token.
    fn wait_for_token(&mut self, i: usize, now: Nanos) {
        let (w, g) = (&mut self.workloads[i], &self.gates[i]);
        if !w.in_due && !g.waiting.is_empty() {
            w.in_due = true;
            self.due.push(Reverse((g.bucket.next_token_at(now), i)));
        }
    }

    /// End of a control period: Eqs. 1–2 per workload.
    fn control(&mut self, now: Nanos) {
        self.periods += 1;
        let monitors = self.monitors.get_mut().all_mut();
        for (i, ((w, g), m)) in self.workloads.iter_mut().zip(&mut self.gates).zip(monitors).enumerate() {
            let measured = m.close_period();
            if self.mode == Mode::Feedback {
                let r = g.bucket.rate_iops();
                let controller = match &mut w.online {
                    // The period informs the estimate if the bucket's rate was its input.
                    Some(on) => IntegralController {
                        gain_iops_per_ms: on
                            .period(measured.filter(|_| w.throttled).map(|rt| (r, rt as f64 / NS_PER_MS as f64))),
                    },
                    None => self.controller,
                };
                if let Some(rt) = measured {
                    let reference = self.board.as_ref().and_then(|b| b.get(i)).unwrap_or(w.reference);
                    let mut next = controller.step(r, reference, rt, &w.limits);
                    if self.anti_windup && next > r && !w.throttled {
                        next = r;
                    }
                    g.bucket.set_rate(now, next);
                }
            }
            w.throttled = !g.waiting.is_empty();
        }
        // New rates, new token times.
        self.due.clear();
        for i in 0..self.workloads.len() {
            self.workloads[i].in_due = false;
            self.wait_for_token(i, now);
        }
    }

    #[inline]
    fn touch(&mut self, now: Nanos) {
        debug_assert!(now >= self.now, "time went backwards: {now} < {}", self.now);
        self.now = now;
    }
}

impl<S: Scheduler> Scheduler for Fclb<S> {
    fn name(&self) -> String {
        match self.mode {
            Mode::Feedback => match self.workloads.first().and_then(|w| w.online.as_ref()) {
                Some(on) => format!(
                    "fclb(K online: p={:.2}, G0={:.3} ms/IOPS) > {}",
                    on.pole(),
                    on.estimator().config().start_ms_per_iops,
                    self.inner.name()
                ),
                None => format!("fclb(K={:.3} IOPS/ms) > {}", self.controller.gain_iops_per_ms, self.inner.name()),
            },
            Mode::Fixed => format!("leaky-bucket(fixed) > {}", self.inner.name()),
            Mode::Off => self.inner.name(),
        }
    }

    fn enqueue(&mut self, req: Request, now: Nanos) {
        self.touch(now);
        let i = req.tenant as usize;
        if i < self.workloads.len() && self.mode != Mode::Off {
            let g = &mut self.gates[i];
            // A workload with nothing waiting and a whole token passes at once, when no
            // other workload's token is due now: what the general path below does then
            // (it would queue the request, mark the workload due now and release it
            // alone), without touching the heap.
            if g.waiting.is_empty()
                && g.bucket.level_at(now) >= MICRO_TOKENS
                && self.due.peek().is_none_or(|&Reverse((t, _))| t > now)
            {
                let took = g.bucket.try_take(now);
                debug_assert!(took);
                self.released.insert(req.id, now);
                self.inner.enqueue(req, now);
                return;
            }
            g.waiting.push_back(req);
            self.held += 1;
            self.wait_for_token(i, now);
            self.release(now);
            if !self.gates[i].waiting.is_empty() {
                self.workloads[i].throttled = true;
            }
        } else {
            if i < self.workloads.len() {
                self.released.insert(req.id, now);
            }
            self.inner.enqueue(req, now);
        }
    }

    fn dispatch(&mut self, now: Nanos, dev: &DeviceState) -> Option<Request> {
        self.touch(now);
        self.release(now);
        self.inner.dispatch(now, dev)
    }

    fn complete(&mut self, done: &Completion, now: Nanos) {
        self.touch(now);
        if let Some(rel) = self.released.remove(&done.req.id) {
            self.monitors.get_mut().record(done, rel);
        }
        self.inner.complete(done, now);
    }

    fn next_timer(&self) -> Option<Nanos> {
        let mut t = self.inner.next_timer();
        let mut earliest = |x: Nanos| t = Some(t.map_or(x, |y: Nanos| y.min(x)));
        if !self.workloads.is_empty() {
            earliest(self.next_control);
        }
        if let Some(&Reverse((at, _))) = self.due.peek() {
            earliest(at.max(self.now));
        }
        t
    }

    fn on_timer(&mut self, now: Nanos) {
        self.touch(now);
        if now >= self.next_control && !self.workloads.is_empty() {
            self.control(now);
            while self.next_control <= now {
                self.next_control += self.period;
            }
        }
        self.release(now);
        if self.inner.next_timer().is_some_and(|t| t <= now) {
            self.inner.on_timer(now);
        }
    }

    #[inline]
    fn queued(&self) -> usize {
        self.held + self.inner.queued()
    }

    fn gauges(&self, sink: &mut dyn FnMut(&str, f64)) {
        // One buffer for every name (thousands of workloads sample seven gauges each
        // per window: no allocation per name).
        let mut name = String::new();
        let mut put = |family: &str, i: usize, value: f64| {
            name.clear();
            let _ = write!(name, "{family}.{i}");
            sink(&name, value);
        };
        let monitors = self.monitors_now();
        let mut scratch = Vec::new();
        for (i, ((w, g), m)) in self.workloads.iter().zip(&self.gates).zip(monitors.recorded()).enumerate() {
            put("fclb_rate_iops", i, g.bucket.rate_iops());
            put("fclb_tokens", i, g.bucket.tokens_at(self.now));
            put("fclb_waiting", i, g.waiting.len() as f64);
            let p95 = m.current_p95_in(&mut scratch).map_or(f64::NAN, |ns| ns as f64 / NS_PER_MS as f64);
            put("fclb_rt_p95_ms", i, p95);
            // The p95 the controller used at the last period's end (Eq. 1's RT_i(k)).
            let last = m.last_p95().map_or(f64::NAN, |ns| ns as f64 / NS_PER_MS as f64);
            put("fclb_period_p95_ms", i, last);
            put("fclb_completed", i, m.completed() as f64);
            put("fclb_violations", i, m.violations() as f64);
            if let Some(on) = &w.online {
                put("fclb_gain_iops_per_ms", i, on.gain_iops_per_ms());
                put("fclb_plant_gain_ms_per_iops", i, on.estimator().gain_ms_per_iops());
            }
        }
        self.inner.gauges(sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedulers::Fcfs;
    use crate::time::NS_PER_SEC;

    const FREE: DeviceState = DeviceState { outstanding: 0, free_slots: 64 };

    fn two(mode: Mode) -> Fclb<Fcfs> {
        let mut w0 = WorkloadSpec::new(100.0, 10 * NS_PER_MS);
        w0.bucket = Some(2.0);
        let mut w1 = WorkloadSpec::new(50.0, 20 * NS_PER_MS);
        w1.bucket = Some(1.0);
        Fclb::new(Fcfs::new(), &[w0, w1], 1.0, mode).unwrap()
    }

    fn done(req: Request, at: Nanos) -> Completion {
        Completion { req, dispatch: at, finish: at }
    }

    #[test]
    fn bucket_holds_requests_until_tokens_arrive() {
        let mut f = two(Mode::Fixed);
        for i in 0..4 {
            f.enqueue(Request::new(i, 0, 0, 4096), 0);
        }
        // Bucket of 2: two pass at once, two wait; the next token in 10 ms (100 IOPS).
        let out: Vec<u64> = std::iter::from_fn(|| f.dispatch(0, &FREE)).map(|r| r.id).collect();
        assert_eq!(out, vec![0, 1]);
        assert_eq!(f.queued(), 2);
        assert_eq!(f.next_timer(), Some(10 * NS_PER_MS));
        f.on_timer(10 * NS_PER_MS);
        assert_eq!(f.dispatch(10 * NS_PER_MS, &FREE).map(|r| r.id), Some(2));
        assert_eq!(f.next_timer(), Some(20 * NS_PER_MS));
        // Tenants beyond the workloads pass unthrottled.
        f.enqueue(Request::new(9, 5, 10 * NS_PER_MS, 4096), 10 * NS_PER_MS);
        assert_eq!(f.dispatch(10 * NS_PER_MS, &FREE).map(|r| r.id), Some(9));
    }

    #[test]
    fn controller_raises_and_lowers_the_rate_with_floor() {
        let mut f = two(Mode::Feedback);
        // Workload 0 throttled all period, fast completions (2 ms < 10 ms reference).
        let mut id = 0;
        let mut t = 0;
        while t < NS_PER_SEC {
            f.enqueue(Request::new(id, 0, t, 4096), t);
            f.enqueue(Request::new(id + 1, 0, t, 4096), t);
            f.enqueue(Request::new(id + 2, 0, t, 4096), t);
            let out: Vec<Request> = std::iter::from_fn(|| f.dispatch(t, &FREE)).collect();
            for r in out {
                f.complete(&done(r, t + 2 * NS_PER_MS), t + 2 * NS_PER_MS);
            }
            id += 3;
            t += 5 * NS_PER_MS;
        }
        f.on_timer(NS_PER_SEC);
        // e = 10 − 2 = 8 ms, K = 1 IOPS/ms: 100 → 108 IOPS.
        assert!((f.rate_iops(0) - 108.0).abs() < 1e-9, "{}", f.rate_iops(0));
        // Workload 1 had nothing: rate held.
        assert_eq!(f.rate_iops(1), 50.0);
        // A slow period pushes the rate down, but never below the demanded 100 IOPS.
        let r = Request::new(1_000_000, 0, NS_PER_SEC, 4096);
        f.enqueue(r, NS_PER_SEC);
        let out: Vec<Request> = std::iter::from_fn(|| f.dispatch(NS_PER_SEC + 5 * NS_PER_MS, &FREE)).collect();
        assert!(!out.is_empty());
        for r in out {
            f.complete(&done(r, NS_PER_SEC + 900 * NS_PER_MS), NS_PER_SEC + 900 * NS_PER_MS);
        }
        f.on_timer(2 * NS_PER_SEC);
        assert_eq!(f.rate_iops(0), 100.0);
        assert!(f.monitor(0).violations() > 0);
        let mut g = Vec::new();
        f.gauges(&mut |n, v| g.push((n.to_string(), v)));
        assert!(g.iter().any(|(n, v)| n == "fclb_rate_iops.0" && *v == 100.0));
        assert!(g.iter().any(|(n, _)| n == "fclb_tokens.1"));
    }

    #[test]
    fn a_reference_board_moves_the_reference_at_the_next_period() {
        let board = References::new(2);
        let mut f = two(Mode::Feedback).with_references(board.clone());
        assert_eq!(f.reference(0), 10 * NS_PER_MS);
        // Throttled all period with 2 ms completions; the board asks for 5 ms instead of 10.
        board.set(0, 5 * NS_PER_MS);
        board.set(7, NS_PER_MS); // no such workload: ignored
        let mut t = 0;
        for id in (0..600).step_by(3) {
            for k in 0..3 {
                f.enqueue(Request::new(id + k, 0, t, 4096), t);
            }
            let out: Vec<Request> = std::iter::from_fn(|| f.dispatch(t, &FREE)).collect();
            for r in out {
                f.complete(&done(r, t + 2 * NS_PER_MS), t + 2 * NS_PER_MS);
            }
            t += 5 * NS_PER_MS;
        }
        f.on_timer(NS_PER_SEC);
        // e = 5 − 2 = 3 ms, K = 1 IOPS/ms: 100 → 103 IOPS (not 108 as with 10 ms).
        assert!((f.rate_iops(0) - 103.0).abs() < 1e-9, "{}", f.rate_iops(0));
        assert_eq!(f.reference(0), 5 * NS_PER_MS);
        board.set(0, 0);
        assert_eq!(f.reference(0), 10 * NS_PER_MS);
        let mut g = Vec::new();
        f.gauges(&mut |n, v| g.push((n.to_string(), v)));
        assert!(g.iter().any(|(n, v)| n == "fclb_period_p95_ms.0" && (*v - 2.0).abs() < 1e-9), "{g:?}");
    }

    #[test]
    fn anti_windup_holds_an_unthrottled_rate() {
        let mut f = two(Mode::Feedback);
        // One request, never waiting for a token, completing fast.
        f.enqueue(Request::new(0, 0, 0, 4096), 0);
        let r = f.dispatch(0, &FREE).unwrap();
        f.complete(&done(r, NS_PER_MS), NS_PER_MS);
        f.on_timer(NS_PER_SEC);
        assert_eq!(f.rate_iops(0), 100.0);
    }

    #[test]
    fn off_mode_is_the_back_end_monitored() {
        let mut f = two(Mode::Off);
        for i in 0..4 {
            f.enqueue(Request::new(i, 0, 0, 4096), 0);
        }
        let out: Vec<Request> = std::iter::from_fn(|| f.dispatch(0, &FREE)).collect();
        assert_eq!(out.len(), 4);
        for r in out {
            f.complete(&done(r, 30 * NS_PER_MS), 30 * NS_PER_MS);
        }
        assert_eq!(f.monitor(0).violations(), 4);
        assert_eq!(f.name(), "fcfs");
    }

    #[test]
    fn bad_parameters_are_named() {
        let e = Fclb::new(Fcfs::new(), &[WorkloadSpec::new(0.0, 1)], 1.0, Mode::Feedback).unwrap_err().to_string();
        assert!(e.contains("fclb: workload 0: demanded IOPS must be > 0"), "{e}");
        let mut w = WorkloadSpec::new(10.0, 1);
        w.ceiling_iops = Some(5.0);
        let e = Fclb::new(Fcfs::new(), &[w], 1.0, Mode::Feedback).unwrap_err().to_string();
        assert!(e.contains("ceiling 5 IOPS must be >= the demanded 10 IOPS"), "{e}");
        let p = FclbParams {
            gain_iops_per_ms: Some(Gain::IopsPerMs(10.0)),
            plant_gain_ms_per_iops: Some(0.3),
            ..Default::default()
        };
        let e = p.resolve_gain().unwrap_err().to_string();
        assert!(e.contains("outside the stable range 0 < K < 2/G = 6.6667 IOPS/ms"), "{e}");
    }
}
