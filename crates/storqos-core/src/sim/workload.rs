//! Workloads: open-loop request streams (trace replay, synthetic generators) and
//! closed-loop clients that keep N requests outstanding with optional think time.

use crate::error::{config, Result};
use crate::request::{Op, Request, MAX_TENANTS, TARGET_ANY};
use crate::rng::SimRng;
use crate::time::Nanos;

/// Most requests one closed-loop client keeps in flight (2^20). Each is an entry in the
/// loop's wake-up heap from the start: a mistyped depth (2^31) would be tens of GiB and
/// an out-of-memory kill instead of an error. Real queue depths stay in the thousands.
pub const MAX_OUTSTANDING: u32 = 1 << 20;

/// A closed-loop client: keeps `outstanding` requests in flight; after each completion
/// it thinks (constant or exponential time) and issues the next request.
///
/// Activity: from `start` to `stop`; with `on_off = Some((on, off))` it alternates
/// `on` ns active and `off` ns idle from `start` (a pulse workload). Requests due in an
/// idle period are issued at the start of the next active period.
#[derive(Clone, Debug, PartialEq)]
pub struct ClosedClient {
    /// Tenant index of every request this client issues (below [`MAX_TENANTS`]).
    pub tenant: u32,
    /// Requests kept in flight (1 ..= [`MAX_OUTSTANDING`]).
    pub outstanding: u32,
    /// Mean think time between a completion and the next request (0 = none).
    pub think: Nanos,
    /// Think time exponentially distributed (true) or constant (false).
    pub think_exponential: bool,
    /// Request size in bytes.
    pub bytes: u32,
    /// Probability that a request is a read.
    pub read_fraction: f64,
    /// Offsets uniform over [0, span_bytes), aligned to `bytes` (0 = always offset 0).
    pub span_bytes: u64,
    /// When the client starts issuing.
    pub start: Nanos,
    /// When it stops issuing (requests in flight still complete).
    pub stop: Nanos,
    /// Optional (on, off) duty cycle.
    pub on_off: Option<(Nanos, Nanos)>,
    /// Device target for its requests (tier), or [`TARGET_ANY`].
    pub target: u8,
}

impl Default for ClosedClient {
    fn default() -> Self {
        ClosedClient {
            tenant: 0,
            outstanding: 1,
            think: 0,
            think_exponential: false,
            bytes: 4096,
            read_fraction: 1.0,
            span_bytes: 0,
            start: 0,
            stop: Nanos::MAX,
            on_off: None,
            target: TARGET_ANY,
        }
    }
}

impl ClosedClient {
    /// Check the parameters, naming the bad one.
    pub fn validate(&self) -> Result<()> {
        if self.tenant >= MAX_TENANTS {
            return config(format!("closed client: tenant must be below {MAX_TENANTS}, got {}", self.tenant));
        }
        if self.outstanding == 0 || self.outstanding > MAX_OUTSTANDING {
            return config(format!(
                "closed client of tenant {}: outstanding must be between 1 and {MAX_OUTSTANDING}, got {}",
                self.tenant, self.outstanding
            ));
        }
        if self.bytes == 0 {
            return config(format!("closed client of tenant {}: request size must be > 0 bytes", self.tenant));
        }
        if !(0.0..=1.0).contains(&self.read_fraction) {
            return config(format!(
                "closed client of tenant {}: read fraction must be in [0, 1], got {}",
                self.tenant, self.read_fraction
            ));
        }
        if self.stop <= self.start {
            return config(format!("closed client of tenant {}: stop must be after start", self.tenant));
        }
        if let Some((on, _)) = self.on_off {
            if on == 0 {
                return config(format!("closed client of tenant {}: on period must be > 0", self.tenant));
            }
        }
        Ok(())
    }

    /// The earliest time ≥ `t` at which the client is active, or `None` if it has
    /// stopped by then.
    pub fn next_active(&self, t: Nanos) -> Option<Nanos> {
        let t = t.max(self.start);
        if t >= self.stop {
            return None;
        }
        let t = match self.on_off {
            None => t,
            Some((on, off)) => {
                let period = on + off;
                let phase = (t - self.start) % period;
                if phase < on {
                    t
                } else {
                    t + (period - phase)
                }
            }
        };
        (t < self.stop).then_some(t)
    }

    /// Draw the think time after a completion.
    pub fn draw_think(&self, rng: &mut SimRng) -> Nanos {
        if self.think == 0 {
            0
        } else if self.think_exponential {
            rng.exp(self.think as f64).round() as Nanos
        } else {
            self.think
        }
    }

    /// Build the client's next request issued at `at`.
    pub fn make_request(&self, id: u64, at: Nanos, rng: &mut SimRng) -> Request {
        let blocks = self.span_bytes / self.bytes as u64;
        draw_request(id, at, self.tenant, self.bytes, self.read_fraction, blocks, self.target, rng)
    }
}

/// One synthetic request: a read with probability `read_fraction`, at a uniformly drawn
/// `bytes`-aligned offset among `blocks` blocks (offset 0 when `blocks` ≤ 1). The draws
/// come in this order (op, then offset), shared by closed-loop clients and the
/// open-loop generators so both consume the RNG alike.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn draw_request(
    id: u64,
    at: Nanos,
    tenant: u32,
    bytes: u32,
    read_fraction: f64,
    blocks: u64,
    target: u8,
    rng: &mut SimRng,
) -> Request {
    let op = if read_fraction >= 1.0 || rng.bernoulli(read_fraction) { Op::Read } else { Op::Write };
    let offset = if blocks > 1 { rng.below(blocks) * bytes as u64 } else { 0 };
    Request { id, arrival: at, offset, bytes, tenant, class: tenant, op, target }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duty_cycle_defers_to_next_on_period() {
        let c = ClosedClient { start: 100, on_off: Some((10, 5)), stop: 1000, ..Default::default() };
        assert_eq!(c.next_active(0), Some(100));
        assert_eq!(c.next_active(105), Some(105));
        assert_eq!(c.next_active(110), Some(115));
        assert_eq!(c.next_active(114), Some(115));
        assert_eq!(c.next_active(995), None);
        assert!(c.validate().is_ok());
        assert!(ClosedClient { outstanding: 0, ..Default::default() }.validate().is_err());
        let e = ClosedClient { outstanding: 1 << 31, ..Default::default() }.validate().unwrap_err().to_string();
        assert!(e.contains("outstanding must be between 1 and 1048576, got 2147483648"), "{e}");
        assert!(ClosedClient { outstanding: MAX_OUTSTANDING, ..Default::default() }.validate().is_ok());
        // A tenant id indexes per-tenant state: a huge one is an error, not an abort.
        let e = ClosedClient { tenant: u32::MAX, ..Default::default() }.validate().unwrap_err().to_string();
        assert!(e.contains("closed client: tenant must be below 65536, got 4294967295"), "{e}");
    }
}
