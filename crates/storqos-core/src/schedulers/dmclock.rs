//! dmClock: mClock across servers (Gulati, Merchant & Varman, "mClock: Handling
//! Throughput Variability for Hypervisor IO Scheduling", OSDI 2010, §4 "Distributed
//! mClock"; Ceph's `dmclock` library: the client's `ServiceTracker` with its
//! `OrigTracker` in `src/dmclock_client.h`, the server's `RequestTag` in
//! `src/dmclock_server.h`).
//!
//! A tenant's reservation `r`, weight `w` and limit `l` are promises about its *total*
//! service, while each server sees only the requests sent to it. dmClock keeps one
//! mClock per server with the tenant's global parameters and lets the tenant's client
//! say, with each request, how much service it received elsewhere since its previous
//! request to this server:
//!
//! ```text
//! δ = completions of the tenant at the other servers since its previous request here
//! ρ = those of them served in the reservation phase
//!
//! R = max(R_prev + (ρ + c) / r, t)      L = max(L_prev + (δ + c) / l, t)
//! P = max(P_prev + (δ + c) / w, V)
//! ```
//!
//! so each server's tags advance as if it had served the tenant's total. The client
//! side is [`ServiceTracker`] (one per tenant: completions counted per server and
//! phase); the server side is [`crate::schedulers::Mclock::enqueue_dist`], which tags a
//! request with its [`DistParams`] instead of 0 and 0. On one server δ = ρ = 0 and
//! dmClock is mClock exactly.
//!
//! ## Choices (where we depart from, or pin down, the library)
//!
//! 1. **A server's first request is (0, 0).** dmclock answers (1, 1) for a server the
//!    tracker has not seen, which charges the first request twice; we charge what was
//!    served elsewhere, which before any request here is nothing we could attribute.
//! 2. **Weight-phase service gives back its own cost only.** A request served by weight
//!    lowers its tenant's reservation tags by `c / r` (mClock's adjustment); dmclock's
//!    `reduce_reservation_tags` gives back `(c + ρ) / r`, which forgives reservation
//!    service received at other servers too and so lets the tenant's reservation phase
//!    run ahead of `r` in total.
//! 3. **A report is charged once, at the first tag after it arrives** ([`DistCharge`]).
//!    The paper and the library charge a request's own δ and ρ to its own tags. A
//!    client that keeps many requests queued at a server (it offers more than its
//!    limit) then reports at every send the completions elsewhere since its previous
//!    send, while the server tags one of its requests per service: the head carries a
//!    report from when it was sent, long ago, about an interval far shorter than the
//!    one since the previous head was served. Completions elsewhere go uncharged and
//!    the tenant's total runs past its limit and its reservation (ceph/dmclock#21:
//!    clients limited to 30 IOPS got 55-86). Charged at arrival instead, every report
//!    the server has received — the freshest rides on the newest queued request —
//!    advances the next head's tags, so each server's tags follow the tenant's total
//!    service to within one send interval. [`DistCharge::Request`] keeps the
//!    library's behaviour for comparison.
//!    A report rides only on a new request: when the client stops sending (its trace
//!    ends, its backlog drains), a server hears nothing more and, charging its own
//!    service alone, would serve the tenant at its whole limit, every server at once.
//!    So the server also charges each own request the service elsewhere it expects
//!    with it — the reports' running ratio of completions elsewhere to its own
//!    ([`ReportLedger`]) — and each report then settles the difference between what
//!    happened and what was expected. What is charged sums to what was reported, but
//!    arrives smoothly: no server bursts at the end of a backlog, nor all servers at once
//!    on old news.
//! 4. **Counts, not costs.** δ and ρ count completions; a request's own cost `c` comes
//!    from the server's cost model as in mClock.
//!
//! The promises (tests below, with explicit times): a tenant whose requests spread over
//! several servers gets its total reservation however they spread, and never more than
//! its total limit plus one request per server (the requests in flight when δ was
//! taken).

/// What a tenant's client sends with a request to one server: the service it received
/// at the other servers since its previous request to this one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DistParams {
    /// Completions at the other servers (any phase).
    pub delta: u32,
    /// Of those, completions served in the reservation phase.
    pub rho: u32,
}

/// When a server charges the (δ, ρ) a request brings (see the module's choice 3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DistCharge {
    /// Every report received is charged to the next head tagged (storqos).
    #[default]
    Arrival,
    /// A request's own report is charged to its own tags when it becomes head (the
    /// paper, Ceph's dmclock).
    Request,
}

/// Weight of a new sample in [`ReportLedger`]'s running ratio.
pub const REPORT_RATIO_WEIGHT: f64 = 0.25;

/// A server's ledger of one tenant's reports, charged at arrival (the module's choice 3):
/// what the reports said and what has been charged for them, and the running ratio of
/// completions elsewhere to this server's own service, charged ahead of the reports.
/// With no report ever, every head is charged its own cost (mClock).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReportLedger {
    /// Reported minus charged, for δ and ρ (negative: charged ahead of the reports).
    unpaid: [f64; 2],
    /// Completions elsewhere (δ, ρ) expected per unit of own cost.
    ratio: [f64; 2],
    /// Expectations charged since the last report.
    expected: [f64; 2],
    /// Reports since the ratio last moved, and own cost charged meanwhile.
    reported: [f64; 2],
    own: f64,
    /// The ratio has had a first sample.
    seeded: bool,
}

impl ReportLedger {
    /// A report `d` arrived (with a request).
    pub fn report(&mut self, d: DistParams) {
        let v = [d.delta as f64, d.rho as f64];
        for (i, &x) in v.iter().enumerate() {
            self.unpaid[i] += x - self.expected[i];
            self.expected[i] = 0.0;
            if self.own > 0.0 || self.seeded {
                // (Reports before this server served anything say nothing of its share.)
                self.reported[i] += x;
            }
        }
        if self.own > 0.0 {
            for i in 0..2 {
                let sample = self.reported[i] / self.own;
                self.ratio[i] = if self.seeded {
                    (1.0 - REPORT_RATIO_WEIGHT) * self.ratio[i] + REPORT_RATIO_WEIGHT * sample
                } else {
                    sample
                };
                self.reported[i] = 0.0;
            }
            self.own = 0.0;
            self.seeded = true;
        }
    }

    /// What a new head of own cost `c` advances the tags by: (weight and limit tags'
    /// units, reservation tags' units), each at least 0; a credit left by expectations
    /// beyond the reports is carried to the next head.
    pub fn charge(&mut self, c: f64) -> (f64, f64) {
        let mut out = [0.0; 2];
        for (i, o) in out.iter_mut().enumerate() {
            let e = c * self.ratio[i];
            self.expected[i] += e;
            let want = c + e + self.unpaid[i];
            *o = want.max(0.0);
            self.unpaid[i] = want - *o;
        }
        self.own += c;
        (out[0], out[1])
    }
}

/// How a server served a request, as dmClock's client counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServedBy {
    /// In the constraint-based (reservation) phase.
    Reservation,
    /// In the weight phase (or past a limit, where allowed).
    Weight,
}

/// One server as a tenant's tracker knows it: the tenant's counters when it last sent
/// there, and the completions there since.
#[derive(Clone, Copy, Debug, Default)]
struct ServerMark {
    /// The tracker's `delta` / `rho` when the last request went to this server.
    delta_prev: u32,
    rho_prev: u32,
    /// Completions at this server since then (all, and in the reservation phase).
    own_delta: u32,
    own_rho: u32,
    /// A request has gone to this server.
    seen: bool,
}

/// The client side of dmClock for one tenant (dmclock's `ServiceTracker` with its
/// `OrigTracker`): counts the tenant's completions by server and phase and yields the
/// [`DistParams`] of its next request to a server. Servers are dense indices; counters
/// wrap (differences stay exact while fewer than 2³² completions separate two requests
/// to one server).
#[derive(Clone, Debug, Default)]
pub struct ServiceTracker {
    /// Completions of the tenant at every server, and those in the reservation phase.
    delta: u32,
    rho: u32,
    servers: Vec<ServerMark>,
}

impl ServiceTracker {
    /// A tracker that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn mark(&mut self, server: u32) -> &mut ServerMark {
        let i = server as usize;
        if i >= self.servers.len() {
            self.servers.resize(i + 1, ServerMark::default());
        }
        &mut self.servers[i]
    }

    /// The parameters of the tenant's next request to `server`, which is sent now:
    /// completions elsewhere since the previous request to it (0, 0 for a first one).
    pub fn params_for(&mut self, server: u32) -> DistParams {
        let (delta, rho) = (self.delta, self.rho);
        let m = self.mark(server);
        let out = if m.seen {
            DistParams {
                delta: delta.wrapping_sub(m.delta_prev).wrapping_sub(m.own_delta),
                rho: rho.wrapping_sub(m.rho_prev).wrapping_sub(m.own_rho),
            }
        } else {
            DistParams::default()
        };
        *m = ServerMark { delta_prev: delta, rho_prev: rho, own_delta: 0, own_rho: 0, seen: true };
        out
    }

    /// A request of the tenant completed at `server`, served `by` a phase.
    pub fn completed(&mut self, server: u32, by: ServedBy) {
        let reservation = by == ServedBy::Reservation;
        self.delta = self.delta.wrapping_add(1);
        self.rho = self.rho.wrapping_add(reservation as u32);
        let m = self.mark(server);
        m.own_delta = m.own_delta.wrapping_add(1);
        m.own_rho = m.own_rho.wrapping_add(reservation as u32);
    }

    /// Completions counted so far (all servers, all phases).
    pub fn completions(&self) -> u32 {
        self.delta
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracker_counts_service_elsewhere_since_the_last_request_here() {
        let mut t = ServiceTracker::new();
        assert_eq!(t.params_for(0), DistParams::default(), "first request to a server");
        assert_eq!(t.params_for(1), DistParams::default());
        // Two completions at server 1 (one by reservation), one at server 0.
        t.completed(1, ServedBy::Reservation);
        t.completed(1, ServedBy::Weight);
        t.completed(0, ServedBy::Weight);
        // Server 0 hears of server 1's two, not of its own.
        assert_eq!(t.params_for(0), DistParams { delta: 2, rho: 1 });
        // Server 1 hears of server 0's one.
        assert_eq!(t.params_for(1), DistParams { delta: 1, rho: 0 });
        // Nothing completed since: nothing to report.
        assert_eq!(t.params_for(0), DistParams::default());
        t.completed(2, ServedBy::Reservation);
        assert_eq!(t.params_for(0), DistParams { delta: 1, rho: 1 });
        assert_eq!(t.params_for(1), DistParams { delta: 1, rho: 1 });
        assert_eq!(t.completions(), 4);
    }

    #[test]
    fn a_ledger_without_reports_charges_the_own_cost() {
        let mut l = ReportLedger::default();
        for _ in 0..5 {
            assert_eq!(l.charge(1.0), (1.0, 1.0));
        }
    }

    #[test]
    fn a_ledger_charges_what_was_reported_smoothly_and_goes_on_when_reports_stop() {
        // Reports of 3 completions elsewhere (1 by reservation) per own service.
        let mut l = ReportLedger::default();
        let (mut sum_d, mut sum_r, mut reported_d) = (0.0, 0.0, 0.0);
        let mut last = (0.0, 0.0);
        for i in 0..200 {
            l.report(DistParams { delta: 3, rho: 1 });
            reported_d += 3.0;
            last = l.charge(1.0);
            sum_d += last.0;
            sum_r += last.1;
            assert!(i < 3 || (last.0 - 4.0).abs() < 1e-9, "{i}: {last:?}");
        }
        // Everything reported is charged, plus the expectation of the last service.
        assert!((sum_d - (200.0 + reported_d + 3.0)).abs() < 1e-9, "{sum_d}");
        assert!((sum_r - (200.0 + 200.0 + 1.0)).abs() < 1e-9, "{sum_r}");
        assert_eq!(last, (4.0, 2.0));
        // The client stops sending: its backlog is still charged its share elsewhere.
        assert_eq!(l.charge(1.0), (4.0, 2.0));
        // A report of less than expected gives the difference back on the next heads.
        l.report(DistParams { delta: 0, rho: 0 });
        let next = l.charge(1.0);
        assert!(next.0 < 4.0, "{next:?}");
    }

    #[test]
    fn tracker_differences_survive_wrapping() {
        let mut t = ServiceTracker { delta: u32::MAX - 1, rho: u32::MAX, servers: Vec::new() };
        t.params_for(0);
        for _ in 0..5 {
            t.completed(1, ServedBy::Reservation);
        }
        assert_eq!(t.params_for(0), DistParams { delta: 5, rho: 5 });
    }
}
