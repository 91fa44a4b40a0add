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
//!    the tenant's total runs past its limit and its reservation (dmclock's issue 21:
//!    clients limited to 30 IOPS got 55-86). Charged at arrival instead, every report
//!    the server has received — the freshest rides on the newest queued request —
//!    advances the next head's tags, so each server's tags follow the tenant's total
//!    service to within one send interval. [`DistCharge::Request`] keeps the
//!    library's behaviour for comparison.
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
    fn tracker_differences_survive_wrapping() {
        let mut t = ServiceTracker { delta: u32::MAX - 1, rho: u32::MAX, servers: Vec::new() };
        t.params_for(0);
        for _ in 0..5 {
            t.completed(1, ServedBy::Reservation);
        }
        assert_eq!(t.params_for(0), DistParams { delta: 5, rho: 5 });
    }
}
