//! Streaming results: per-group latency summaries (HDR histograms, bounded memory),
//! per-window series (exact per-window percentiles from a buffer that is reused every
//! window), scheduler gauges, and the optional per-request log.

use rustc_hash::FxHashMap;

use crate::request::Completion;
pub use crate::sim::latency_hist::{LatencyHistogram, HIST_MAX_NS, HIST_SIGFIGS};
pub use crate::sim::quantile::{exact_quantile, exact_quantiles};
use crate::time::Nanos;

/// Latency summary of one group (a tenant or a class), in memory that grows with the
/// spread of its response times, never with their number (see [`LatencyHistogram`]).
#[derive(Clone, Debug)]
pub struct GroupSummary {
    /// Requests completed.
    pub completed: u64,
    /// Bytes completed.
    pub bytes: u64,
    /// Sum of response times (ns).
    pub sum_response: u128,
    /// Sum of scheduler waits (dispatch − arrival, ns).
    pub sum_wait: u128,
    /// Largest response time (ns).
    pub max_response: Nanos,
    /// First arrival and last completion seen.
    pub first_arrival: Nanos,
    /// Last completion time.
    pub last_finish: Nanos,
    /// Response-time histogram (ns, 3 significant digits; responses of 0 count as 1).
    pub hist: LatencyHistogram,
}

impl Default for GroupSummary {
    fn default() -> Self {
        GroupSummary {
            completed: 0,
            bytes: 0,
            sum_response: 0,
            sum_wait: 0,
            max_response: 0,
            first_arrival: Nanos::MAX,
            last_finish: 0,
            hist: LatencyHistogram::new(),
        }
    }
}

impl GroupSummary {
    /// Account one completion.
    #[inline]
    pub fn record(&mut self, c: &Completion) {
        let r = c.response();
        self.completed += 1;
        self.bytes += c.req.bytes as u64;
        self.sum_response += r as u128;
        self.sum_wait += c.wait() as u128;
        self.max_response = self.max_response.max(r);
        self.first_arrival = self.first_arrival.min(c.req.arrival);
        self.last_finish = self.last_finish.max(c.finish);
        self.hist.record(r.clamp(1, HIST_MAX_NS));
    }
    /// Mean response time (ns), 0 when empty.
    pub fn mean_response(&self) -> f64 {
        if self.completed == 0 {
            0.0
        } else {
            self.sum_response as f64 / self.completed as f64
        }
    }
    /// Mean scheduler wait (ns), 0 when empty.
    pub fn mean_wait(&self) -> f64 {
        if self.completed == 0 {
            0.0
        } else {
            self.sum_wait as f64 / self.completed as f64
        }
    }
    /// Response-time quantile q in [0, 1] (ns, within 0.1 %, never above the maximum); 0
    /// when empty.
    pub fn quantile(&self, q: f64) -> Nanos {
        if self.completed == 0 {
            0
        } else {
            self.hist.value_at_quantile(q).min(self.max_response)
        }
    }
    /// [`GroupSummary::quantile`] of each of `qs` (ascending), in one pass.
    pub fn quantiles<const N: usize>(&self, qs: [f64; N]) -> [Nanos; N] {
        if self.completed == 0 {
            return [0; N];
        }
        self.hist.values_at_quantiles(qs).map(|v| v.min(self.max_response))
    }

    /// Add another summary's counts into this one.
    pub fn merge(&mut self, o: &GroupSummary) {
        self.completed += o.completed;
        self.bytes += o.bytes;
        self.sum_response += o.sum_response;
        self.sum_wait += o.sum_wait;
        self.max_response = self.max_response.max(o.max_response);
        self.first_arrival = self.first_arrival.min(o.first_arrival);
        self.last_finish = self.last_finish.max(o.last_finish);
        self.hist.add(&o.hist);
    }

    /// Fraction of requests with response time ≤ `deadline` (within histogram precision).
    pub fn fraction_within(&self, deadline: Nanos) -> f64 {
        if self.completed == 0 {
            return 1.0;
        }
        self.hist.count_at_most(deadline) as f64 / self.completed as f64
    }
}

/// A [`GroupSummary`] under construction, for the simulator's hot loops: the same sums
/// and histogram, with a run of completions of one group accounted with the sums in
/// registers ([`FastSummary::record_run`]). [`FastSummary::finish`] gives exactly what
/// recording every completion into a [`GroupSummary`] one by one gives.
#[derive(Clone, Debug)]
pub struct FastSummary {
    completed: u64,
    bytes: u64,
    sum_response: u128,
    sum_wait: u128,
    max_response: Nanos,
    first_arrival: Nanos,
    last_finish: Nanos,
    hist: LatencyHistogram,
    /// While the histogram is sparse: bucket indices not yet counted in it, with their
    /// count, smallest and largest value (sorting a batch beats inserting one by one).
    pending: Vec<u32>,
    pending_lo: Nanos,
    pending_hi: Nanos,
}

/// Indices gathered before a sparse histogram takes them in.
const PENDING_BATCH: usize = 128;

impl Default for FastSummary {
    fn default() -> Self {
        FastSummary {
            completed: 0,
            bytes: 0,
            sum_response: 0,
            sum_wait: 0,
            max_response: 0,
            first_arrival: Nanos::MAX,
            last_finish: 0,
            hist: LatencyHistogram::new(),
            pending: Vec::new(),
            pending_lo: Nanos::MAX,
            pending_hi: 0,
        }
    }
}

impl FastSummary {
    /// Account one completion (as [`GroupSummary::record`]).
    #[inline(always)]
    pub fn record(&mut self, c: &Completion) {
        let r = c.response();
        self.completed += 1;
        self.bytes += c.req.bytes as u64;
        self.sum_response += r as u128;
        self.sum_wait += c.wait() as u128;
        self.max_response = self.max_response.max(r);
        self.first_arrival = self.first_arrival.min(c.req.arrival);
        self.last_finish = self.last_finish.max(c.finish);
        self.record_value(r.clamp(1, HIST_MAX_NS));
    }

    /// Count one response time (clamped) in the histogram, or in the pending batch
    /// while the histogram is sparse.
    #[inline(always)]
    fn record_value(&mut self, v: Nanos) {
        if self.hist.is_dense() {
            self.hist.record(v);
        } else {
            self.pending.push(crate::sim::latency_hist::hdr_index(v));
            self.pending_lo = self.pending_lo.min(v);
            self.pending_hi = self.pending_hi.max(v);
            if self.pending.len() >= PENDING_BATCH {
                self.flush_pending();
            }
        }
    }

    /// Account completions in order (as [`FastSummary::record`] on each), with the sums
    /// and extremes kept in registers across the run.
    #[inline]
    pub fn record_run(&mut self, cs: &[Completion]) {
        let (mut bytes, mut sum_r, mut sum_w) = (0u64, 0u128, 0u128);
        let (mut first, mut last, mut max_r) = (self.first_arrival, self.last_finish, self.max_response);
        for c in cs {
            let r = c.response();
            bytes += c.req.bytes as u64;
            sum_r += r as u128;
            sum_w += c.wait() as u128;
            max_r = max_r.max(r);
            first = first.min(c.req.arrival);
            last = last.max(c.finish);
        }
        let values = cs.iter().map(|c| c.response().clamp(1, HIST_MAX_NS));
        if self.hist.is_dense() {
            self.hist.record_all(values);
        } else {
            for v in values {
                self.record_value(v);
            }
        }
        self.completed += cs.len() as u64;
        self.bytes += bytes;
        self.sum_response += sum_r;
        self.sum_wait += sum_w;
        (self.first_arrival, self.last_finish, self.max_response) = (first, last, max_r);
    }

    #[cold]
    fn flush_pending(&mut self) {
        let n = self.pending.len() as u64;
        self.hist.record_indices(&mut self.pending, n, self.pending_lo, self.pending_hi);
        self.pending.clear();
        (self.pending_lo, self.pending_hi) = (Nanos::MAX, 0);
        if self.hist.is_dense() {
            self.pending = Vec::new();
        }
    }

    /// The finished summary.
    pub fn finish(&self) -> GroupSummary {
        self.clone().into_summary()
    }

    /// The finished summary, taking this one's histogram (compacted: the merges of a
    /// run's end copy it once per view).
    pub fn into_summary(mut self) -> GroupSummary {
        self.flush_pending();
        self.hist.compact();
        GroupSummary {
            completed: self.completed,
            bytes: self.bytes,
            sum_response: self.sum_response,
            sum_wait: self.sum_wait,
            max_response: self.max_response,
            first_arrival: self.first_arrival,
            last_finish: self.last_finish,
            hist: self.hist,
        }
    }
}

/// Summaries per (tenant, class) pair: one histogram update per completion; the
/// per-tenant, per-class and overall views are merged from it at the end of a run.
#[derive(Debug, Default)]
pub(crate) struct PairTable {
    keys: Vec<(u32, u32)>,
    groups: Vec<FastSummary>,
    /// Per tenant: its first class seen and that pair's group ([`NO_GROUP`]: none yet).
    /// Most tenants have one class (most policies make it the tenant's id), so one read
    /// of a dense array finds the group.
    first: Vec<(u32, u32)>,
    /// The groups of every other (tenant, class) pair.
    more: FxHashMap<(u32, u32), u32>,
}

/// "No group yet" in [`PairTable::first`].
const NO_GROUP: u32 = u32::MAX;

impl PairTable {
    /// Account completions in order; each run of consecutive ones of the same (tenant,
    /// class) is one group lookup, and a run longer than one is one batch with the sums
    /// in registers.
    #[inline]
    pub fn record_all(&mut self, cs: &[Completion]) {
        let mut i = 0;
        while i < cs.len() {
            let k = (cs[i].req.tenant, cs[i].req.class);
            let mut j = i + 1;
            while j < cs.len() && (cs[j].req.tenant, cs[j].req.class) == k {
                j += 1;
            }
            let g = self.group(k.0, k.1);
            if j == i + 1 {
                self.groups[g].record(&cs[i]);
            } else {
                self.groups[g].record_run(&cs[i..j]);
            }
            i = j;
        }
    }

    /// The group index of (tenant, class), created on first use.
    #[inline(always)]
    fn group(&mut self, tenant: u32, class: u32) -> usize {
        match self.first.get(tenant as usize) {
            Some(&(c, g)) if c == class && g != NO_GROUP => g as usize,
            _ => self.insert(tenant, class),
        }
    }

    /// The group of a (tenant, class) pair that is not its tenant's first: found in
    /// `more`, or a new one.
    #[cold]
    fn insert(&mut self, tenant: u32, class: u32) -> usize {
        let t = tenant as usize;
        if t >= self.first.len() {
            self.first.resize(t + 1, (NO_GROUP, NO_GROUP));
        }
        if self.first[t].1 != NO_GROUP {
            if let Some(&g) = self.more.get(&(tenant, class)) {
                return g as usize;
            }
        }
        self.keys.push((tenant, class));
        self.groups.push(FastSummary::default());
        let g = (self.keys.len() - 1) as u32;
        if self.first[t].1 == NO_GROUP {
            self.first[t] = (class, g);
        } else {
            self.more.insert((tenant, class), g);
        }
        g as usize
    }

    /// (per tenant, per class, overall), indexed by tenant / class id; the per-class view
    /// only if `classes` (else empty). A tenant with one pair takes that pair's summary
    /// itself: a run of many tenants ends with one copy of their histograms per view
    /// wanted, not one more.
    pub fn finish(self, classes: bool) -> (Vec<GroupSummary>, Vec<GroupSummary>, GroupSummary) {
        let mut pairs_of: Vec<u32> = Vec::new();
        for &(t, _) in &self.keys {
            let t = t as usize;
            if t >= pairs_of.len() {
                pairs_of.resize(t + 1, 0);
            }
            pairs_of[t] += 1;
        }
        let mut tenants: Vec<GroupSummary> = Vec::new();
        let mut by_class: Vec<GroupSummary> = Vec::new();
        let mut total = GroupSummary::default();
        tenants.resize_with(pairs_of.len(), GroupSummary::default);
        for ((t, c), g) in self.keys.iter().zip(self.groups) {
            let g = g.into_summary();
            total.merge(&g);
            if classes {
                let c = *c as usize;
                if c >= by_class.len() {
                    by_class.resize_with(c + 1, GroupSummary::default);
                }
                by_class[c].merge(&g);
            }
            let t = *t as usize;
            if pairs_of[t] == 1 {
                tenants[t] = g;
            } else {
                tenants[t].merge(&g);
            }
        }
        (tenants, by_class, total)
    }
}

/// Samples a scheduler's gauges into the sink it is given (`|sink| sched.gauges(sink)`).
pub(crate) type GaugeSampler<'a> = dyn FnMut(&mut dyn FnMut(&str, f64)) + 'a;

/// Completions accounted per batch by [`Recorder`]: the event loop only appends each
/// completion to a buffer of this many; the summaries take them up together in one tight
/// loop, away from the loop's hard-to-predict event branches.
const RECORD_BATCH: usize = 256;

/// With at least [`MANY_TENANTS`] tenants, [`Recorder`] takes completions up in batches
/// of this many, put in tenant order first (see [`Recorder::flush`]).
const SORTED_BATCH: usize = 16_384;

/// From this many tenants on, a batch is put in tenant order before it is accounted.
const MANY_TENANTS: usize = 32;

/// A stable counting sort of completions by tenant, its buffers kept from one batch to
/// the next: each tenant's completions keep their order, so whatever takes them tenant by
/// tenant ends exactly as it would have in completion order, while reaching each
/// tenant's state once per batch. Used by [`Recorder`] and by FCLB's monitors
/// ([`crate::fclb::Monitors`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct TenantOrder {
    sorted: Vec<Completion>,
    /// Per tenant, where its next completion goes in `sorted`.
    starts: Vec<u32>,
}

impl TenantOrder {
    /// `batch` in tenant order (stable); every tenant id in it is below `tenants`.
    pub(crate) fn sort(&mut self, batch: &[Completion], tenants: usize) -> &[Completion] {
        self.sorted.clear();
        let Some(&first) = batch.first() else { return &self.sorted };
        let starts = &mut self.starts;
        starts.clear();
        starts.resize(tenants + 1, 0);
        for c in batch {
            starts[c.req.tenant as usize + 1] += 1;
        }
        for t in 1..starts.len() {
            starts[t] += starts[t - 1];
        }
        self.sorted.resize(batch.len(), first);
        for c in batch {
            let at = &mut starts[c.req.tenant as usize];
            self.sorted[*at as usize] = *c;
            *at += 1;
        }
        &self.sorted
    }
}

/// Everything a run records: per-(tenant, class) summaries, the per-window series and
/// gauges, and the optional per-request log.
///
/// Completions are buffered and accounted in order in batches; the buffer is emptied
/// before every window change, so each completion lands in the window, the summaries and
/// the log exactly as if it had been accounted on the spot.
#[derive(Debug)]
pub(crate) struct Recorder {
    pairs: PairTable,
    win: WindowAccumulator,
    log: Option<RequestLog>,
    pending: Vec<Completion>,
    /// Size of a batch: [`RECORD_BATCH`], or [`SORTED_BATCH`] once tenants are many.
    batch: usize,
    /// Tenants seen so far (one more than the largest id).
    tenants: usize,
    /// A batch put in tenant order (buffers reused).
    order: TenantOrder,
}

impl Recorder {
    /// An empty record with `window`-long windows, keeping a per-request log if `keep`.
    pub fn new(window: Nanos, keep: bool) -> Self {
        Recorder {
            pairs: PairTable::default(),
            win: WindowAccumulator::new(window),
            log: keep.then(RequestLog::default),
            pending: Vec::with_capacity(RECORD_BATCH),
            batch: RECORD_BATCH,
            tenants: 0,
            order: TenantOrder::default(),
        }
    }

    /// A request of `tenant` arrived (in the current window).
    #[inline(always)]
    pub fn arrival(&mut self, tenant: u32) {
        self.win.arrival(tenant);
    }

    /// A request completed (at or after the last window change).
    #[inline(always)]
    pub fn completion(&mut self, c: Completion) {
        if self.pending.len() >= self.batch {
            self.flush();
        }
        self.pending.push(c);
    }

    /// Is `now` past the current window?
    #[inline(always)]
    pub fn crossed(&self, now: Nanos) -> bool {
        self.win.crossed(now)
    }

    /// Close the current window (rows and `gauges`) and move to `now`'s.
    pub fn advance(&mut self, now: Nanos, gauges: &mut GaugeSampler) {
        self.flush();
        self.win.advance(now, gauges);
    }

    /// Account the buffered completions. The log takes them in completion order. With
    /// many tenants, the summaries and the window take them in tenant order (a stable
    /// counting sort: each tenant's completions keep their order, so every sum, list and
    /// histogram ends exactly as in completion order): a tenant's summary, histogram and
    /// window buffer are then reached once per batch instead of once per completion, the
    /// difference between one cache miss per batch and several per request once the
    /// tenants' state outgrows the caches.
    #[inline(never)]
    fn flush(&mut self) {
        if let Some(l) = self.log.as_mut() {
            for c in &self.pending {
                l.push(c);
            }
        }
        let top = self.pending.iter().map(|c| c.req.tenant as usize + 1).max().unwrap_or(0);
        self.tenants = self.tenants.max(top);
        if self.tenants < MANY_TENANTS || self.pending.len() < 2 * MANY_TENANTS {
            self.pairs.record_all(&self.pending);
            self.win.completions(&self.pending);
        } else {
            self.batch = SORTED_BATCH;
            let sorted = self.order.sort(&self.pending, self.tenants);
            self.pairs.record_all(sorted);
            self.win.completions(sorted);
        }
        self.pending.clear();
    }

    /// Flush the last window; (per tenant, per class, overall, windows, gauges, log), the
    /// per-class view only if `classes` (else empty).
    #[allow(clippy::type_complexity)]
    pub fn finish(
        mut self,
        gauges: &mut GaugeSampler,
        classes: bool,
    ) -> (Vec<GroupSummary>, Vec<GroupSummary>, GroupSummary, WindowSeries, GaugeSeries, Option<RequestLog>) {
        self.advance(Nanos::MAX, gauges);
        let (tenants, classes, total) = self.pairs.finish(classes);
        (tenants, classes, total, self.win.series, self.win.gauges, self.log)
    }
}

/// Long-format per-window rows: one row per (window, tenant) with activity.
#[derive(Clone, Debug, Default)]
pub struct WindowSeries {
    /// Window start time (ns).
    pub start: Vec<Nanos>,
    /// Tenant.
    pub tenant: Vec<u32>,
    /// Arrivals in the window.
    pub arrivals: Vec<u64>,
    /// Completions in the window.
    pub completed: Vec<u64>,
    /// Bytes completed in the window.
    pub bytes: Vec<u64>,
    /// Mean response time of the window's completions (ns).
    pub mean_response: Vec<f64>,
    /// Exact median response time (ns).
    pub p50_response: Vec<Nanos>,
    /// Exact 95th percentile response time (ns).
    pub p95_response: Vec<Nanos>,
    /// Exact 99th percentile response time (ns).
    pub p99_response: Vec<Nanos>,
    /// Largest response time (ns).
    pub max_response: Vec<Nanos>,
}

/// Long-format scheduler gauges sampled at each window end. Each distinct name is kept
/// once (a policy of 65,536 classes samples as many gauges per window, under the same
/// names every window): samples hold an index into [`GaugeSeries::names`].
#[derive(Clone, Debug, Default)]
pub struct GaugeSeries {
    /// Window start time (ns).
    pub start: Vec<Nanos>,
    /// Index of the sample's gauge name in `names`.
    pub name_id: Vec<u32>,
    /// Value.
    pub value: Vec<f64>,
    /// The distinct gauge names, in the order first sampled.
    pub names: Vec<String>,
    index: FxHashMap<String, u32>,
    /// The name expected next: a policy samples its gauges in the same order every
    /// window, so the name after the last one pushed is usually the next (checked by
    /// comparing the strings, no hashing; the map answers otherwise).
    next: u32,
}

impl GaugeSeries {
    /// Append one sample.
    pub fn push(&mut self, start: Nanos, name: &str, value: f64) {
        let guess = self.next as usize;
        let id = if self.names.get(guess).is_some_and(|n| n == name) {
            self.next
        } else {
            match self.index.get(name) {
                Some(&id) => id,
                None => {
                    let id = u32::try_from(self.names.len()).expect("fewer than 2^32 gauge names");
                    self.names.push(name.to_owned());
                    self.index.insert(name.to_owned(), id);
                    id
                }
            }
        };
        self.next = id + 1;
        self.start.push(start);
        self.name_id.push(id);
        self.value.push(value);
    }

    /// Name of sample `i`.
    pub fn name(&self, i: usize) -> &str {
        &self.names[self.name_id[i] as usize]
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// True when nothing was sampled.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    /// The samples of gauge `name`: (window start, value) pairs in time order.
    pub fn series(&self, name: &str) -> Vec<(Nanos, f64)> {
        let Some(&id) = self.index.get(name) else { return Vec::new() };
        (0..self.len()).filter(|&i| self.name_id[i] == id).map(|i| (self.start[i], self.value[i])).collect()
    }
}

/// Per-request log in columns (only when asked for: memory grows with the run).
#[derive(Clone, Debug, Default)]
pub struct RequestLog {
    /// Request id.
    pub id: Vec<u64>,
    /// Tenant.
    pub tenant: Vec<u32>,
    /// Class assigned by the policy.
    pub class: Vec<u32>,
    /// Arrival (ns).
    pub arrival: Vec<Nanos>,
    /// Dispatch to the device (ns).
    pub dispatch: Vec<Nanos>,
    /// Completion (ns).
    pub finish: Vec<Nanos>,
    /// Device target where it was served.
    pub target: Vec<u8>,
    /// Size (bytes).
    pub bytes: Vec<u32>,
    /// True for reads.
    pub is_read: Vec<bool>,
}

impl RequestLog {
    /// Append one completion.
    #[inline]
    pub fn push(&mut self, c: &Completion) {
        self.id.push(c.req.id);
        self.tenant.push(c.req.tenant);
        self.class.push(c.req.class);
        self.arrival.push(c.req.arrival);
        self.dispatch.push(c.dispatch);
        self.finish.push(c.finish);
        self.target.push(c.req.target);
        self.bytes.push(c.req.bytes);
        self.is_read.push(c.req.op == crate::request::Op::Read);
    }
    /// Number of requests logged.
    pub fn len(&self) -> usize {
        self.id.len()
    }
    /// True when nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.id.is_empty()
    }
}

/// One tenant's share of the current window.
#[derive(Debug, Default)]
struct TenantWindow {
    arrivals: u64,
    bytes: u64,
    latencies: Vec<Nanos>,
}

/// Accumulates the current window per tenant and flushes it into a [`WindowSeries`].
/// Public for the benchmark kernels (`benches/kernels`), which keep the same summaries.
#[derive(Debug, Default)]
pub struct WindowAccumulator {
    /// Window length (ns).
    pub window: Nanos,
    /// Index of the current window (it starts at `current · window`).
    pub current: u64,
    end: Nanos,
    tenants: Vec<TenantWindow>,
    /// The rows of the windows closed so far.
    pub series: WindowSeries,
    /// The gauges sampled at each closed window's end.
    pub gauges: GaugeSeries,
}

impl WindowAccumulator {
    /// An accumulator of `window`-long windows, the first starting at 0.
    pub fn new(window: Nanos) -> Self {
        WindowAccumulator { window, end: window, ..Default::default() }
    }

    /// Tenant `t`'s window, created on first use.
    #[inline]
    fn tenant(&mut self, t: usize) -> &mut TenantWindow {
        // One bounds check on the hot path; the first use of a tenant takes the cold one.
        if t < self.tenants.len() {
            return &mut self.tenants[t];
        }
        self.grow(t)
    }

    #[cold]
    fn grow(&mut self, t: usize) -> &mut TenantWindow {
        self.tenants.resize_with(t + 1, TenantWindow::default);
        &mut self.tenants[t]
    }

    /// Is `now` past the current window?
    #[inline]
    pub fn crossed(&self, now: Nanos) -> bool {
        now >= self.end
    }

    /// Close the current window (emitting rows and gauges) and move to `now`'s window.
    pub fn advance(&mut self, now: Nanos, gauges: &mut GaugeSampler) {
        let start = self.current * self.window;
        let mut any = false;
        for (t, w) in self.tenants.iter_mut().enumerate() {
            let lat = &mut w.latencies;
            if w.arrivals == 0 && lat.is_empty() {
                continue;
            }
            any = true;
            let n = lat.len();
            let (mean, p50, p95, p99, max) = if n == 0 {
                (0.0, 0, 0, 0, 0)
            } else {
                let mean = lat.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
                let max = *lat.iter().max().unwrap();
                let [p50, p95, p99] = exact_quantiles(lat, [0.50, 0.95, 0.99]);
                (mean, p50, p95, p99, max)
            };
            let s = &mut self.series;
            s.start.push(start);
            s.tenant.push(t as u32);
            s.arrivals.push(w.arrivals);
            s.completed.push(n as u64);
            s.bytes.push(w.bytes);
            s.mean_response.push(mean);
            s.p50_response.push(p50);
            s.p95_response.push(p95);
            s.p99_response.push(p99);
            s.max_response.push(max);
            w.arrivals = 0;
            w.bytes = 0;
            lat.clear();
        }
        if any {
            let g = &mut self.gauges;
            gauges(&mut |name: &str, v: f64| g.push(start, name, v));
        }
        self.current = now / self.window;
        self.end = self.current.saturating_add(1).saturating_mul(self.window);
    }

    /// Count an arrival of `tenant` in the current window.
    #[inline]
    pub fn arrival(&mut self, tenant: u32) {
        self.tenant(tenant as usize).arrivals += 1;
    }

    /// Count a completion (its bytes and response time) in the current window.
    #[inline]
    pub fn completion(&mut self, c: &Completion) {
        let r = c.response();
        let w = self.tenant(c.req.tenant as usize);
        w.bytes += c.req.bytes as u64;
        w.latencies.push(r);
    }

    /// [`WindowAccumulator::completion`] on each of `cs`, in order.
    #[inline]
    pub fn completions(&mut self, cs: &[Completion]) {
        for c in cs {
            self.completion(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion(arrival: Nanos, dispatch: Nanos, finish: Nanos) -> Completion {
        Completion { req: crate::request::Request::new(0, 0, arrival, 4096), dispatch, finish }
    }

    fn same(a: &GroupSummary, b: &GroupSummary) {
        assert_eq!(a.hist, b.hist);
        assert_eq!((a.hist.len(), a.hist.max(), a.hist.min()), (b.hist.len(), b.hist.max(), b.hist.min()));
        assert_eq!(
            (a.completed, a.bytes, a.sum_response, a.sum_wait),
            (b.completed, b.bytes, b.sum_response, b.sum_wait)
        );
        assert_eq!((a.max_response, a.first_arrival, a.last_finish), (b.max_response, b.first_arrival, b.last_finish));
        for q in [0.0, 0.1, 0.5, 0.99, 1.0] {
            assert_eq!(a.quantile(q), b.quantile(q));
        }
    }

    /// The batched `Recorder` leaves exactly what accounting each event on the spot
    /// leaves: more completions than one batch, interleaved tenants and classes, windows
    /// closing mid-batch, and the log in completion order; with few tenants (batches in
    /// completion order) and with many (batches put in tenant order).
    #[test]
    fn recorder_equals_accounting_on_the_spot() {
        check_recorder(3, 3 * RECORD_BATCH as u64 + 17, 9_000);
        check_recorder(200, 4 * SORTED_BATCH as u64 + 17, 60);
    }

    fn check_recorder(tenants: u64, n: u64, gap: u64) {
        let mut rng = crate::rng::SimRng::new(9);
        let window = 1_000_000;
        let mut rec = Recorder::new(window, true);
        let (mut groups, mut keys): (Vec<FastSummary>, Vec<(u32, u32)>) = (Vec::new(), Vec::new());
        let mut win = WindowAccumulator::new(window);
        let mut log = RequestLog::default();
        let mut now = 0;
        for i in 0..n {
            now += rng.below(gap);
            let tenant = rng.below(tenants) as u32;
            let mut req = crate::request::Request::new(i, tenant, now.saturating_sub(rng.below(50_000)), 4096);
            req.class = rng.below(2) as u32;
            let c = Completion { req, dispatch: now - rng.below(now - req.arrival + 1), finish: now };
            if rec.crossed(now) {
                rec.advance(now, &mut |_| {});
                win.advance(now, &mut |_| {});
            }
            rec.arrival(tenant);
            win.arrival(tenant);
            rec.completion(c);
            let k = (tenant, req.class);
            let g = keys.iter().position(|x| *x == k).unwrap_or_else(|| {
                keys.push(k);
                groups.push(FastSummary::default());
                keys.len() - 1
            });
            groups[g].record(&c);
            win.completion(&c);
            log.push(&c);
        }
        let (by_tenant, _, total, series, _, got_log) = rec.finish(&mut |_| {}, true);
        win.advance(Nanos::MAX, &mut |_| {});
        let mut want = GroupSummary::default();
        let mut want_tenant = vec![GroupSummary::default(); tenants as usize];
        for (g, k) in groups.iter().zip(&keys) {
            want.merge(&g.finish());
            want_tenant[k.0 as usize].merge(&g.finish());
        }
        same(&total, &want);
        assert_eq!(by_tenant.len(), tenants as usize);
        for (got, want) in by_tenant.iter().zip(&want_tenant) {
            same(got, want);
        }
        assert_eq!(series.start, win.series.start);
        assert_eq!(series.tenant, win.series.tenant);
        assert_eq!(series.completed, win.series.completed);
        assert_eq!(series.arrivals, win.series.arrivals);
        assert_eq!(series.bytes, win.series.bytes);
        assert_eq!(series.mean_response, win.series.mean_response);
        assert_eq!(series.p50_response, win.series.p50_response);
        assert_eq!(series.p95_response, win.series.p95_response);
        assert_eq!(series.max_response, win.series.max_response);
        let got_log = got_log.unwrap();
        assert_eq!((got_log.id.clone(), got_log.finish.clone()), (log.id, log.finish));
        let mut starts = series.start.clone();
        starts.dedup();
        assert!(starts.len() >= 2, "the run spans windows");
        assert!(series.start.len() > 10, "many (window, tenant) rows");
    }

    #[test]
    fn fast_summary_equals_one_by_one_recording() {
        let mut rng = crate::rng::SimRng::new(5);
        for case in 0..6 {
            let (mut slow, mut fast) = (GroupSummary::default(), FastSummary::default());
            let n = [0, 1, 2, 3, 1000, 100_000][case];
            for i in 0..n {
                let a = rng.below(1 << 40);
                let r = match i % 7 {
                    0 => 0,
                    1 => rng.below(3000),
                    2 => HIST_MAX_NS + rng.below(1000),
                    _ => (rng.exp(1e6 * (1 + case) as f64)) as u64,
                };
                let c = completion(a, a + r / 2, a + r);
                slow.record(&c);
                fast.record(&c);
            }
            same(&fast.finish(), &slow);
        }
        // One bucket holding both the minimum and the maximum.
        let (mut slow, mut fast) = (GroupSummary::default(), FastSummary::default());
        for r in [1_000_001, 1_000_300, 1_000_100] {
            slow.record(&completion(0, 0, r));
            fast.record(&completion(0, 0, r));
        }
        same(&fast.finish(), &slow);
    }

    #[test]
    fn gauge_names_are_kept_once_whatever_the_order_of_the_windows() {
        // Window 1 in one order, window 2 with a name dropped, one added and two swapped:
        // each sample keeps its own name, and each name is kept once.
        let mut g = GaugeSeries::default();
        let w1 = ["a.0", "b.0", "a.1", "b.1"];
        let w2 = ["a.0", "a.1", "c.0", "b.0"];
        for (k, n) in w1.iter().enumerate() {
            g.push(0, n, k as f64);
        }
        for (k, n) in w2.iter().enumerate() {
            g.push(10, n, 10.0 + k as f64);
        }
        let got: Vec<(&str, f64)> = (0..g.len()).map(|i| (g.name(i), g.value[i])).collect();
        let want: Vec<(&str, f64)> =
            w1.iter().chain(w2.iter()).copied().zip([0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0]).collect();
        assert_eq!(got, want);
        assert_eq!(g.names, ["a.0", "b.0", "a.1", "b.1", "c.0"]);
    }
}
