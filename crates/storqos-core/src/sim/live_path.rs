//! The live path around a device, applied to a simulated run's completions: what a client
//! of the gateway sees of each request, where the simulator's device model holds only the
//! part that occupies the device (`storqos validate`'s prediction, and
//! `storqos simulate --device-profile`'s).
//!
//! Every number comes from a device profile, i.e. from what `storqos calibrate` measured
//! through a gateway with the replay engine (the profile's module, `storqos.model.device_profile`,
//! says how each is measured and what it came out at):
//!
//! - **At rest.** A request that arrives when nothing is in flight finds the client's and
//!   the gateway's threads asleep and pays the path at rest on top of its simulated time:
//!   calibrate's lone 4 KiB requests spaced out, less the model's service of the same
//!   requests back to back, as a table by quantile. The requests at rest of one op take
//!   it by rank (the quickest simulated response the table's least quantile), so that
//!   their times follow the measured spaced requests. The longer the threads slept, the
//!   more waking them costs: with several spacings measured ([`RestLevel`]), a request's
//!   path is interpolated on a log scale of the time the target was idle before it (its
//!   arrival less the last completion before it; the first request: the longest level).
//! - **In a burst.** Calibrate's bursts from rest give per op the replay's time per issue
//!   (it issues one request at a time) and the path's time between two completions (it
//!   answers one at a time): a request is issued at its time or one issue after the one
//!   before it, whichever is later, and its time counts from its issue, as the replay's
//!   log does; the lag it spent in the replay comes off its simulated queue wait (at most
//!   all of it). Its reply comes no sooner than one completion time after the reply
//!   before it (the device model's k servers may answer a burst k at a time); a request
//!   that continues its tenant's previous one of its op takes the sequential bursts'
//!   completion time. The first request of a burst is also answered later than at rest:
//!   the requests issued while it is in flight hold the CPUs, each putting its reply off
//!   by the **hold** share × its time to issue; the share is fitted to the first
//!   position of the op's random burst from rest ([`hold_share`]). A reply comes at the
//!   later of the two.
//!
//! A transform of the whole log, not a [`crate::Device`]: the rank of a request at rest
//! is over the run's requests at rest, known only once the run is over. Times are f64
//! where the measured tables are and are rounded half to even to whole nanoseconds where
//! the log keeps them.

use std::collections::HashMap;

use crate::error::{config, Result};

/// Halvings of the bisection that fits the hold share ([`hold_share`]): 2⁻⁶⁰ of its
/// first bracket, below a nanosecond's worth for any share a burst could measure.
const HOLD_BISECTIONS: usize = 60;

/// The path at rest after one measured time idle.
#[derive(Clone, Debug, PartialEq)]
pub struct RestLevel {
    /// How long the target was idle before the measured requests (µs, > 0): their spacing
    /// less their mean response.
    pub idle_us: f64,
    /// The path by rank: points `(u, µs)`, u rising in [0, 1], linear between them.
    pub path_us: Vec<(f64, f64)>,
}

/// What calibrate's random burst from rest of an op says of its first position, from
/// which its hold share is fitted ([`hold_share`]).
#[derive(Clone, Debug, PartialEq)]
pub struct HoldEvidence {
    /// Requests in the burst (≥ 2), due at once.
    pub requests: u32,
    /// The replay's time per issue in that burst (ns, > 0).
    pub issue_ns: f64,
    /// The op's median time at rest (µs).
    pub rest_p50_us: f64,
    /// The op's spread at rest (µs): the quantile of its times at rest that a first
    /// position must pass to count as evidence of a hold (the profile's `HOLD_EVIDENCE`, 0.9).
    pub rest_spread_us: f64,
    /// The burst's first position: its response time (µs).
    pub first_us: f64,
}

/// The path of one op in a burst.
#[derive(Clone, Debug, PartialEq)]
pub struct OpBurst {
    /// The replay's time per issue (ns).
    pub issue_ns: f64,
    /// The path's time between two completions in random bursts (ns).
    pub finish_ns: f64,
    /// The same in sequential bursts (ns), when they were measured.
    pub sequential_finish_ns: Option<f64>,
    /// The evidence of a hold, when the op's random burst and its time at rest were
    /// measured (without it the op holds nothing).
    pub hold: Option<HoldEvidence>,
}

/// The measured path of one op.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct OpPath {
    /// The path at rest by idle time, idle rising (empty: nothing at rest).
    pub rest: Vec<RestLevel>,
    /// The path in a burst (None: profiles measured without bursts).
    pub burst: Option<OpBurst>,
}

/// A device profile's live path: reads' and writes'.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct LivePathSpec {
    /// Reads.
    pub read: OpPath,
    /// Writes.
    pub write: OpPath,
}

/// One op's path, checked, with its hold share fitted.
#[derive(Clone, Debug)]
struct Built {
    rest: Vec<RestLevel>,
    /// ln of each level's idle time (µs).
    log_idle: Vec<f64>,
    issue_ns: f64,
    finish_ns: f64,
    sequential_finish_ns: Option<f64>,
    hold: f64,
}

/// The live path, ready to apply ([`LivePath::apply`]).
#[derive(Clone, Debug)]
pub struct LivePath {
    read: Built,
    write: Built,
    bursts: bool,
    sequential: bool,
}

/// A simulated run's completions, in arrival order (ties in the order given).
#[derive(Clone, Copy, Debug)]
pub struct Completions<'a> {
    /// Arrival (ns), not falling.
    pub arrival: &'a [i64],
    /// Completion (ns).
    pub finish: &'a [i64],
    /// Response time (ns).
    pub response: &'a [i64],
    /// Time waited in the simulated queues (ns; zeros when not kept).
    pub wait: &'a [i64],
    /// True for reads.
    pub is_read: &'a [bool],
    /// Which requests continue their tenant's previous one of the op ([`continues`]);
    /// None: every request takes the random bursts' completion time.
    pub sequential: Option<&'a [bool]>,
}

/// The same requests as a client of the live path sees them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// When the replay issues each request (ns): its arrival, later in a burst.
    pub arrival: Vec<i64>,
    /// Response time from the issue (ns).
    pub response: Vec<i64>,
    /// Reply (ns): issue + response.
    pub finish: Vec<i64>,
    /// What is left of the simulated queue wait once issued (ns).
    pub wait: Vec<i64>,
}

/// Linear interpolation of the points `(xs[i], ys[i])` at `x`, held at the ends. The
/// same arithmetic as numpy's `interp` (the slope of the segment times the distance from
/// its left end, a knot's own value at a knot), so that a prediction made before the model
/// moved here comes out bit for bit the same.
fn interp(x: f64, pts: &[(f64, f64)]) -> f64 {
    let (first, last) = (pts[0], pts[pts.len() - 1]);
    if x < first.0 {
        return first.1;
    }
    if x >= last.0 {
        return last.1;
    }
    let j = pts.partition_point(|&(p, _)| p <= x) - 1;
    let ((x0, y0), (x1, y1)) = (pts[j], pts[j + 1]);
    if x0 == x {
        return y0;
    }
    (y1 - y0) / (x1 - x0) * (x - x0) + y0
}

fn finite(what: &str, v: f64) -> Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        config(format!("live path: {what} must be finite and >= 0, got {v}"))
    }
}

impl Built {
    fn new(op: &str, p: &OpPath) -> Result<Self> {
        for (i, l) in p.rest.iter().enumerate() {
            if !(l.idle_us.is_finite() && l.idle_us > 0.0) {
                return config(format!("live path: {op} level {i}: idle_us must be finite and > 0, got {}", l.idle_us));
            }
            if i > 0 && l.idle_us <= p.rest[i - 1].idle_us {
                return config(format!("live path: {op}: the levels' idle times must rise"));
            }
            if l.path_us.is_empty() {
                return config(format!("live path: {op} level {i}: an empty path"));
            }
            for w in l.path_us.windows(2) {
                if w[1].0 <= w[0].0 {
                    return config(format!("live path: {op} level {i}: the path's quantiles must rise"));
                }
            }
            for &(u, us) in &l.path_us {
                finite("a path's quantile", u)?;
                finite("a path's time", us)?;
            }
        }
        let (issue_ns, finish_ns, sequential_finish_ns, hold) = match &p.burst {
            None => (0.0, 0.0, None, 0.0),
            Some(b) => {
                finite(&format!("{op} issue_ns"), b.issue_ns)?;
                finite(&format!("{op} finish_ns"), b.finish_ns)?;
                if let Some(s) = b.sequential_finish_ns {
                    finite(&format!("{op} sequential_finish_ns"), s)?;
                }
                let hold = match &b.hold {
                    None => 0.0,
                    Some(h) => {
                        if h.requests < 2 || !(h.issue_ns.is_finite() && h.issue_ns > 0.0) {
                            return config(format!(
                                "live path: {op} hold: needs 2 requests or more issued > 0 ns apart"
                            ));
                        }
                        for (what, v) in [
                            ("rest_p50_us", h.rest_p50_us),
                            ("rest_spread_us", h.rest_spread_us),
                            ("first_us", h.first_us),
                        ] {
                            finite(&format!("{op} hold {what}"), v)?;
                        }
                        fit_hold(h)
                    }
                };
                (b.issue_ns, b.finish_ns, b.sequential_finish_ns, hold)
            }
        };
        let log_idle = p.rest.iter().map(|l| l.idle_us.ln()).collect();
        Ok(Built { rest: p.rest.clone(), log_idle, issue_ns, finish_ns, sequential_finish_ns, hold })
    }

    /// The path at rest (ns, rounded) at rank `u` after `idle_ns` idle.
    fn at_rest_ns(&self, u: f64, idle_ns: f64) -> i64 {
        let paths = &self.rest;
        if paths.len() == 1 {
            return (interp(u, &paths[0].path_us) * 1e3).round_ties_even() as i64;
        }
        let xs = &self.log_idle;
        let (lo, hi) = (xs[0].exp(), xs[xs.len() - 1].exp());
        let x = (idle_ns / 1e3).max(lo).min(hi).ln();
        let j = (xs.partition_point(|&v| v <= x)).saturating_sub(1).min(xs.len() - 2);
        let w = (x - xs[j]) / (xs[j + 1] - xs[j]);
        let (a, b) = (interp(u, &paths[j].path_us), interp(u, &paths[j + 1].path_us));
        ((a * (1.0 - w) + b * w) * 1e3).round_ties_even() as i64
    }
}

/// How much later than its own time the first of a burst's requests is answered when
/// each of the others issued before its reply puts it off by `share` × `issue_ns`
/// (ns, rounded): the burst's requests due at once, issued `issue_ns` apart, the first
/// `own_ns` long on its own.
fn head_hold_ns(requests: u32, issue_ns: f64, own_ns: f64, share: f64) -> f64 {
    let mut reply = own_ns;
    let mut at = 0.0;
    for _ in 1..requests {
        at += issue_ns;
        if at >= reply {
            break;
        }
        reply += share * issue_ns;
    }
    (reply - 0.0 - own_ns).round_ties_even()
}

/// The hold share with which the first of `requests` due at once, issued `issue_ns`
/// apart and `own_ns` long on its own, is answered `late_ns` later than on its own
/// (the wait rises with the share: bisection); 0 when even one request issued after it
/// per its time to issue cannot make it that late (nothing is issued while it is in
/// flight).
pub fn hold_share(requests: u32, issue_ns: f64, own_ns: f64, late_ns: f64) -> f64 {
    let own = own_ns.round_ties_even();
    let head = |share: f64| head_hold_ns(requests, issue_ns, own, share);
    let (mut lo, mut hi) = (0.0, late_ns / issue_ns);
    if head(hi) < late_ns {
        return 0.0;
    }
    for _ in 0..HOLD_BISECTIONS {
        let mid = (lo + hi) / 2.0;
        if head(mid) < late_ns {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// The share fitted to a burst's first position: 0 when it came no later than the op's
/// spread at rest ([`HoldEvidence::rest_spread_us`]), else [`hold_share`] of its lateness over the
/// median at rest.
fn fit_hold(h: &HoldEvidence) -> f64 {
    if h.first_us <= h.rest_spread_us {
        return 0.0;
    }
    hold_share(h.requests, h.issue_ns, h.rest_p50_us * 1e3, (h.first_us - h.rest_p50_us) * 1e3)
}

/// Which requests continue their tenant's previous request of the same op (start where
/// it ended), in the order given: the sequential ones.
pub fn continues(tenant: &[u32], is_read: &[bool], offset: &[u64], bytes: &[u64]) -> Vec<bool> {
    let mut end: HashMap<(u32, bool), u64> = HashMap::new();
    (0..tenant.len())
        .map(|i| {
            let prev = end.insert((tenant[i], is_read[i]), offset[i].wrapping_add(bytes[i]));
            prev == Some(offset[i])
        })
        .collect()
}

impl LivePath {
    /// The path of `spec`, checked; each op's hold share fitted to its evidence. Both ops
    /// have bursts or neither, sequential ones too.
    pub fn new(spec: &LivePathSpec) -> Result<Self> {
        let read = Built::new("read", &spec.read)?;
        let write = Built::new("write", &spec.write)?;
        let bursts = match (&spec.read.burst, &spec.write.burst) {
            (Some(_), Some(_)) => true,
            (None, None) => false,
            _ => return config("live path: give bursts of both ops or of neither"),
        };
        let sequential = match (read.sequential_finish_ns, write.sequential_finish_ns) {
            (Some(_), Some(_)) => true,
            (None, None) => false,
            _ => return config("live path: give sequential bursts of both ops or of neither"),
        };
        Ok(LivePath { read, write, bursts, sequential })
    }

    fn op(&self, read: bool) -> &Built {
        if read {
            &self.read
        } else {
            &self.write
        }
    }

    /// Whether bursts were measured: then the times count from each request's issue.
    pub fn has_bursts(&self) -> bool {
        self.bursts
    }

    /// Whether sequential bursts were measured.
    pub fn has_sequential(&self) -> bool {
        self.sequential
    }

    /// The hold share of reads (`true`) or writes, as fitted.
    pub fn hold(&self, read: bool) -> f64 {
        self.op(read).hold
    }

    /// Each request's path at rest (ns): nothing for one that arrives while an earlier
    /// one is in flight; for the others, by op, by rank of their simulated response and
    /// by the time the target was idle before them.
    fn at_rest(&self, c: &Completions<'_>) -> Vec<i64> {
        let n = c.arrival.len();
        // How long the target was idle before each request (the first: ever); at rest: >= 0.
        let mut busy_until = i64::MIN;
        let idle: Vec<f64> = (0..n)
            .map(|i| {
                let idle = if i == 0 { f64::INFINITY } else { (c.arrival[i] - busy_until) as f64 };
                busy_until = busy_until.max(c.finish[i]);
                idle
            })
            .collect();
        let mut extra = vec![0i64; n];
        for read in [true, false] {
            let op = self.op(read);
            let mut at: Vec<usize> = (0..n).filter(|&i| idle[i] >= 0.0 && c.is_read[i] == read).collect();
            if at.is_empty() || op.rest.is_empty() {
                continue;
            }
            at.sort_by_key(|&i| c.response[i]); // stable: ties in time order
            let m = at.len() as f64;
            for (k, &i) in at.iter().enumerate() {
                extra[i] = op.at_rest_ns((k as f64 + 0.5) / m, idle[i]);
            }
        }
        extra
    }

    /// The requests of `c` as a client of the live path sees them (see the module's
    /// description).
    pub fn apply(&self, c: &Completions<'_>) -> Result<Seen> {
        let n = c.arrival.len();
        if [c.finish.len(), c.response.len(), c.wait.len(), c.is_read.len()].iter().any(|&l| l != n)
            || c.sequential.is_some_and(|s| s.len() != n)
        {
            return config("live path: the completions' columns have different lengths");
        }
        if c.arrival.windows(2).any(|w| w[1] < w[0]) {
            return config("live path: the completions must be in arrival order");
        }
        let extra = self.at_rest(c);
        if !self.bursts {
            return Ok(Seen {
                arrival: c.arrival.to_vec(),
                response: (0..n).map(|i| c.response[i] + extra[i]).collect(),
                finish: (0..n).map(|i| c.finish[i] + extra[i]).collect(),
                wait: c.wait.to_vec(),
            });
        }
        // When the replay issues each request: at its time, or one issue after the one
        // before it while that one is still being issued.
        let issue: Vec<f64> = c.is_read.iter().map(|&r| self.op(r).issue_ns).collect();
        let mut issued = vec![0.0; n];
        let mut free_at = f64::NEG_INFINITY;
        for i in 0..n {
            issued[i] = (c.arrival[i] as f64).max(free_at);
            free_at = issued[i] + issue[i];
        }
        let issued_ns: Vec<i64> = issued.iter().map(|t| t.round_ties_even() as i64).collect();
        let waited: Vec<i64> = (0..n).map(|i| (issued_ns[i] - c.arrival[i]).min(c.wait[i])).collect();
        let own: Vec<i64> = (0..n).map(|i| c.response[i] + extra[i] - waited[i]).collect();
        let sequential = if self.sequential { c.sequential } else { None };
        let serve: Vec<f64> = (0..n)
            .map(|i| {
                let op = self.op(c.is_read[i]);
                match (sequential, op.sequential_finish_ns) {
                    (Some(s), Some(f)) if s[i] => f,
                    _ => op.finish_ns,
                }
            })
            .collect();
        // One reply at a time: no sooner than a completion time after the one before it.
        let mut chained = vec![0i64; n];
        let mut last_reply = f64::NEG_INFINITY;
        for i in 0..n {
            let alone = issued[i] + own[i] as f64;
            let reply = alone.max(last_reply + serve[i]);
            chained[i] = (reply - alone).round_ties_even() as i64;
            last_reply = reply;
        }
        // The requests issued while it is in flight put its reply off.
        let mut held = vec![0i64; n];
        for i in 0..n {
            let share = self.op(c.is_read[i]).hold;
            if share <= 0.0 {
                continue;
            }
            let own_i = own[i] as f64;
            let mut reply = issued[i] + own_i;
            let mut j = i + 1;
            while j < n && issued[j] < reply {
                reply += share * issue[j];
                j += 1;
            }
            held[i] = (reply - issued[i] - own_i).round_ties_even() as i64;
        }
        let response: Vec<i64> = (0..n).map(|i| own[i] + chained[i].max(held[i])).collect();
        Ok(Seen {
            finish: (0..n).map(|i| issued_ns[i] + response[i]).collect(),
            wait: (0..n).map(|i| c.wait[i] - waited[i]).collect(),
            arrival: issued_ns,
            response,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: i64 = 1_000;

    fn bursts(read: (f64, f64), write: (f64, f64)) -> LivePathSpec {
        let b = |(issue, finish): (f64, f64)| OpBurst {
            issue_ns: issue * 1e3,
            finish_ns: finish * 1e3,
            sequential_finish_ns: None,
            hold: None,
        };
        LivePathSpec {
            read: OpPath { rest: vec![], burst: Some(b(read)) },
            write: OpPath { rest: vec![], burst: Some(b(write)) },
        }
    }

    /// `own` each request's simulated response, no queue wait, at `arrival`.
    fn run(path: &LivePath, arrival: &[i64], own: &[i64], is_read: &[bool], seq: Option<&[bool]>) -> Seen {
        let finish: Vec<i64> = arrival.iter().zip(own).map(|(a, o)| a + o).collect();
        let wait = vec![0; arrival.len()];
        let c = Completions { arrival, finish: &finish, response: own, wait: &wait, is_read, sequential: seq };
        path.apply(&c).unwrap()
    }

    #[test]
    fn a_burst_is_answered_one_completion_time_apart() {
        // Three reads due at once, 10 µs per issue, 30 µs between completions, 100 µs
        // each on its own: issued at 0, 10, 20; the first reply at its own 100 µs, each
        // next one 30 µs later (130, 160): responses 100, 120, 140 from their issues.
        let p = LivePath::new(&bursts((10.0, 30.0), (10.0, 30.0))).unwrap();
        let got = run(&p, &[0, 0, 0], &[100 * US; 3], &[true; 3], None);
        assert_eq!(got.arrival, vec![0, 10 * US, 20 * US]);
        assert_eq!(got.finish, vec![100 * US, 130 * US, 160 * US]);
        assert_eq!(got.response, vec![100 * US, 120 * US, 140 * US]);
    }

    #[test]
    fn requests_spaced_wider_than_the_path_take_their_own_time() {
        let p = LivePath::new(&bursts((10.0, 30.0), (10.0, 30.0))).unwrap();
        let got = run(&p, &[0, 100 * US, 200 * US], &[50 * US; 3], &[true; 3], None);
        assert_eq!(got.arrival, vec![0, 100 * US, 200 * US]);
        assert_eq!(got.response, vec![50 * US; 3]);
    }

    #[test]
    fn each_op_costs_its_own_and_sequential_requests_the_sequential_bursts() {
        // read, write, read due at once, 20 µs each; reads 10 µs per issue and 15
        // between completions, writes 12 and 80: issued at 0, 10, 22; replies at 20,
        // max(30, 20 + 80) = 100, max(42, 100 + 15) = 115.
        let p = LivePath::new(&bursts((10.0, 15.0), (12.0, 80.0))).unwrap();
        let got = run(&p, &[0, 0, 0], &[20 * US; 3], &[true, false, true], None);
        assert_eq!(got.arrival, vec![0, 10 * US, 22 * US]);
        assert_eq!(got.finish, vec![20 * US, 100 * US, 115 * US]);
        // Four writes 38 µs apart, 50 µs each: random, 80 µs apart in bursts, they
        // reply 0, 42, 84, 126 µs late; sequential ones, 25 µs apart, on time.
        let mut spec = bursts((10.0, 15.0), (12.0, 80.0));
        for op in [&mut spec.read, &mut spec.write] {
            op.burst.as_mut().unwrap().sequential_finish_ns = Some(25e3);
        }
        let p = LivePath::new(&spec).unwrap();
        let arrival: Vec<i64> = (0..4).map(|i| i * 38 * US).collect();
        let late = |s: &Seen| s.response.iter().map(|r| r - 50 * US).collect::<Vec<_>>();
        let random = run(&p, &arrival, &[50 * US; 4], &[false; 4], Some(&[false; 4]));
        assert_eq!(late(&random), vec![0, 42 * US, 84 * US, 126 * US]);
        let seq = run(&p, &arrival, &[50 * US; 4], &[false; 4], Some(&[false, true, true, true]));
        assert_eq!(late(&seq), vec![0; 4]);
    }

    #[test]
    fn a_request_issued_late_waited_in_the_replay_not_in_the_device_queue() {
        // One server of 100 µs, three reads due at once: simulated waits 0, 100, 200 µs.
        // Issued 10 µs apart, the third waited 20 of its 200 µs in the replay: it
        // answers at 300 µs as simulated, 280 after its issue.
        let p = LivePath::new(&bursts((10.0, 5.0), (10.0, 5.0))).unwrap();
        let (arrival, finish, response, wait) =
            ([0, 0, 0], [100 * US, 200 * US, 300 * US], [100 * US, 200 * US, 300 * US], [0, 100 * US, 200 * US]);
        let c = Completions {
            arrival: &arrival,
            finish: &finish,
            response: &response,
            wait: &wait,
            is_read: &[true; 3],
            sequential: None,
        };
        let got = p.apply(&c).unwrap();
        assert_eq!(got.response, vec![100 * US, 190 * US, 280 * US]);
        assert_eq!(got.finish, vec![100 * US, 200 * US, 300 * US]);
        assert_eq!(got.wait, vec![0, 90 * US, 180 * US]);
    }

    #[test]
    fn the_hold_share_gives_back_the_first_position_of_a_burst() {
        // 32 writes from rest, 8 µs per issue, 213 µs at rest, the first answered at
        // 585 µs: the 31 others are all issued before its reply, 585 = 213 + 31 × 8 × s,
        // s = 1.5.
        let s = hold_share(32, 8e3, 213e3, 372e3);
        assert!((s - 1.5).abs() < 1e-4, "{s}");
        // No request issued while it is in flight: no share makes it late.
        assert_eq!(hold_share(2, 1e6, 100e3, 50e3), 0.0);
        // A first position within the spread at rest is no evidence.
        let h =
            HoldEvidence { requests: 32, issue_ns: 8e3, rest_p50_us: 213.0, rest_spread_us: 600.0, first_us: 585.0 };
        assert_eq!(fit_hold(&h), 0.0);
    }

    #[test]
    fn the_writes_issued_while_one_is_in_flight_put_its_reply_off() {
        // Four writes due at once, 10 µs per issue, 100 µs each, share 1.5 (fitted to a
        // first position 45 µs late): the first sees the three others (+45 µs), the
        // second two (+30), the third one (+15), the last none; the chain of
        // completions 5 µs apart adds nothing.
        let mut spec = bursts((10.0, 5.0), (10.0, 5.0));
        spec.write.burst.as_mut().unwrap().hold = Some(HoldEvidence {
            requests: 4,
            issue_ns: 10e3,
            rest_p50_us: 100.0,
            rest_spread_us: 100.0,
            first_us: 145.0,
        });
        let p = LivePath::new(&spec).unwrap();
        assert!((p.hold(false) - 1.5).abs() < 1e-4 && p.hold(true) == 0.0, "{}", p.hold(false));
        let got = run(&p, &[0; 4], &[100 * US; 4], &[false; 4], None);
        // Within a nanosecond: the share is fitted to whole nanoseconds.
        let want = [145 * US, 130 * US, 115 * US, 100 * US];
        assert!(got.response.iter().zip(want).all(|(g, w)| (g - w).abs() <= 1), "{:?}", got.response);
        // Reads hold nothing.
        let reads = run(&p, &[0; 4], &[100 * US; 4], &[true; 4], None);
        assert_eq!(reads.response, vec![100 * US; 4]);
    }

    fn flat(idle_us: f64, us: f64) -> RestLevel {
        RestLevel { idle_us, path_us: vec![(0.0, us), (1.0, us)] }
    }

    #[test]
    fn a_request_at_rest_pays_the_path_of_the_time_the_target_was_idle() {
        // Levels 70 µs after 1,830 µs idle, 170 after 9,730, 270 after 49,630. Requests
        // of 100 µs: the first (idle forever: the longest), one 1 ms after the last
        // reply (held at the shortest), one 50 µs after an arrival while the one before
        // is in flight (nothing), one 9.73 ms idle.
        let spec = LivePathSpec {
            read: OpPath { rest: vec![flat(1830.0, 70.0), flat(9730.0, 170.0), flat(49630.0, 270.0)], burst: None },
            write: OpPath::default(),
        };
        let p = LivePath::new(&spec).unwrap();
        let arrival = [0, 1_100 * US, 1_150 * US, 1_250 * US + 9_730 * US];
        let got = run(&p, &arrival, &[100 * US; 4], &[true; 4], None);
        assert_eq!(got.response, vec![370 * US, 170 * US, 100 * US, 270 * US]);
        // Halfway between 9,730 and 49,630 µs on a log scale: halfway between 170 and 270.
        let mid = (9730.0f64 * 49630.0).sqrt();
        let second = 100 * US + (mid * 1e3).round() as i64;
        let got = run(&p, &[0, second], &[100 * US; 2], &[true; 2], None);
        assert_eq!(got.response[1], 320 * US);
        // Writes without a path of their own pay nothing at rest.
        assert_eq!(run(&p, &[0], &[100 * US], &[false], None).response, vec![100 * US]);
    }

    #[test]
    fn the_path_at_rest_goes_by_rank() {
        // Two reads at rest, the path 10 µs at u = 0 rising to 50 µs at 1: the quicker
        // one (u = 0.25) pays 20 µs, the slower (u = 0.75) 40 µs, whatever their order.
        let spec = LivePathSpec {
            read: OpPath {
                rest: vec![RestLevel { idle_us: 1000.0, path_us: vec![(0.0, 10.0), (1.0, 50.0)] }],
                burst: None,
            },
            write: OpPath::default(),
        };
        let p = LivePath::new(&spec).unwrap();
        let got = run(&p, &[0, 10_000 * US], &[300 * US, 100 * US], &[true; 2], None);
        assert_eq!(got.response, vec![340 * US, 120 * US]);
    }

    #[test]
    fn continues_follows_each_tenant_and_op() {
        let got = continues(
            &[0, 0, 1, 0, 0, 1, 1],
            &[false, false, false, true, false, false, false],
            &[0, 4096, 12288, 8192, 8192, 16384, 102400],
            &[4096, 4096, 4096, 4096, 4096, 8192, 4096],
        );
        assert_eq!(got, vec![false, true, false, false, true, true, false]);
    }

    #[test]
    fn bad_specs_are_refused() {
        let mut spec = bursts((10.0, 30.0), (10.0, 30.0));
        spec.write.burst = None;
        assert!(LivePath::new(&spec).is_err());
        let spec = LivePathSpec {
            read: OpPath { rest: vec![flat(100.0, 1.0), flat(50.0, 2.0)], burst: None },
            write: OpPath::default(),
        };
        assert!(LivePath::new(&spec).is_err());
        let p = LivePath::new(&LivePathSpec::default()).unwrap();
        let c = Completions {
            arrival: &[5, 0],
            finish: &[6, 1],
            response: &[1, 1],
            wait: &[0, 0],
            is_read: &[true; 2],
            sequential: None,
        };
        assert!(p.apply(&c).is_err());
    }
}
