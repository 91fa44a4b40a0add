//! storqos' dmClock extension of NBD: a client that spreads a tenant's requests over
//! several gateways sends with each request the service the tenant received at the
//! other gateways since its previous request to this one (dmClock's δ and ρ: Gulati,
//! Merchant & Varman, OSDI 2010, §4; [`storqos_core::schedulers::dmclock`]), and each
//! reply says in which phase the request was served, which the client's tracker counts.
//!
//! **Negotiation.** Before `NBD_OPT_GO` (or `NBD_OPT_EXPORT_NAME`) the client sends the
//! option [`OPT_STORQOS_DMCLOCK`] with no data. A storqos gateway answers `NBD_REP_ACK`
//! and the extension is on for the connection; any other server answers
//! `NBD_REP_ERR_UNSUP`, as the NBD spec requires for an option it does not know, and the
//! client goes on as a plain NBD client (its requests then carry nothing; the server
//! sees them as mClock's own). The extension frames every reply as a simple reply, so a
//! client asks for it or for structured replies, not both: the gateway refuses the second
//! of the two with `NBD_REP_ERR_INVALID`.
//!
//! **Transmission**, once on (all integers big-endian):
//!
//! ```text
//! request: the 28-byte header, then δ (u32), ρ (u32), then a write's payload
//! reply:   the 16-byte simple reply, then the phase (u32: 1 reservation, 0 other),
//!          then a successful read's data
//! ```
//!
//! δ counts the tenant's completions at the other gateways since its previous request
//! here, ρ those of them served in the reservation phase (0 and 0 for a first request).
//! Every command carries the trailer and every reply has its phase, flushes and errors
//! too (phase 0). A gateway whose policy is mClock tags the request with them
//! (`Mclock::enqueue_dist`, reports charged at arrival); another policy ignores them.

use storqos_core::schedulers::dmclock::DistParams;

/// The option that turns the extension on ("SQDC" in ASCII).
pub const OPT_STORQOS_DMCLOCK: u32 = 0x5351_4443;
/// Bytes after each request header: δ and ρ.
pub const REQUEST_TRAILER_LEN: usize = 8;
/// Bytes after each simple reply header: the phase.
pub const REPLY_TRAILER_LEN: usize = 4;
/// The reply's phase: served in the reservation phase.
pub const PHASE_RESERVATION: u32 = 1;
/// The reply's phase: served otherwise (weight phase, past a limit, not scheduled).
pub const PHASE_OTHER: u32 = 0;

/// δ and ρ from a request's trailer.
pub fn decode_request_trailer(b: &[u8; REQUEST_TRAILER_LEN]) -> DistParams {
    DistParams {
        delta: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
        rho: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
    }
}

/// The trailer a client sends after a request header.
pub fn encode_request_trailer(d: DistParams) -> [u8; REQUEST_TRAILER_LEN] {
    let mut b = [0u8; REQUEST_TRAILER_LEN];
    b[..4].copy_from_slice(&d.delta.to_be_bytes());
    b[4..].copy_from_slice(&d.rho.to_be_bytes());
    b
}

/// The trailer a gateway sends after a simple reply header.
pub fn encode_reply_trailer(reservation: bool) -> [u8; REPLY_TRAILER_LEN] {
    (if reservation { PHASE_RESERVATION } else { PHASE_OTHER }).to_be_bytes()
}

/// Whether a reply's trailer says the reservation phase (any value other than
/// [`PHASE_RESERVATION`] is another phase).
pub fn decode_reply_trailer(b: &[u8; REPLY_TRAILER_LEN]) -> bool {
    u32::from_be_bytes(*b) == PHASE_RESERVATION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailers_round_trip_in_network_order() {
        let d = DistParams { delta: 0x0102_0304, rho: 7 };
        let b = encode_request_trailer(d);
        assert_eq!(b, [1, 2, 3, 4, 0, 0, 0, 7]);
        assert_eq!(decode_request_trailer(&b), d);
        assert_eq!(encode_reply_trailer(true), [0, 0, 0, 1]);
        assert!(decode_reply_trailer(&encode_reply_trailer(true)));
        assert!(!decode_reply_trailer(&encode_reply_trailer(false)));
        assert!(!decode_reply_trailer(&[0, 0, 0, 2]));
        assert_eq!(&OPT_STORQOS_DMCLOCK.to_be_bytes(), b"SQDC");
    }
}
