//! Time for the engine: the policies never read a clock, they take `now`; the engine
//! reads it through [`Clock`], a monotonic nanosecond count since the gateway started.
//! [`SystemClock`] is the wall clock the gateway runs on; [`ManualClock`] is set by hand,
//! so that tests feed the engine explicit times (as governor's `FakeRelativeClock`, and
//! as the simulator drives the same policies in simulated time).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use storqos_core::time::Nanos;

/// A monotonic clock in nanoseconds.
pub trait Clock {
    /// Nanoseconds since the clock's start.
    fn now(&self) -> Nanos;
}

/// Monotonic nanoseconds since the gateway started (the wall clock).
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    start: Instant,
}

impl SystemClock {
    /// A clock reading 0 now.
    pub fn start() -> Self {
        SystemClock { start: Instant::now() }
    }
    /// Nanoseconds since the start.
    pub fn now(&self) -> Nanos {
        self.start.elapsed().as_nanos() as Nanos
    }
    /// The instant of clock time `t`.
    pub fn std_instant(&self, t: Nanos) -> Instant {
        self.start + Duration::from_nanos(t)
    }
    /// The tokio instant of clock time `t`.
    pub fn instant(&self, t: Nanos) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.start + Duration::from_nanos(t))
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Nanos {
        SystemClock::now(self)
    }
}

/// A clock that reads what it was last set to; its clones share the reading, so a test
/// keeps one and hands the other to the engine.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `t`.
    pub fn at(t: Nanos) -> Self {
        ManualClock { now: Arc::new(AtomicU64::new(t)) }
    }
    /// Set the reading to `t` (never back: the clock is monotonic).
    pub fn set(&self, t: Nanos) {
        let before = self.now.fetch_max(t, Ordering::Relaxed);
        debug_assert!(before <= t, "a monotonic clock set back from {before} to {t}");
    }
    /// Move the reading `dt` forward.
    pub fn advance(&self, dt: Nanos) {
        self.now.fetch_add(dt, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Nanos {
        self.now.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_reads_what_it_was_set_to_in_every_clone() {
        let c = ManualClock::at(5);
        let engine_side = c.clone();
        c.advance(10);
        assert_eq!(engine_side.now(), 15);
        c.set(1_000);
        assert_eq!(engine_side.now(), 1_000);
    }

    #[test]
    fn the_system_clock_starts_at_zero_and_maps_back_to_instants() {
        let c = SystemClock::start();
        let t = c.now();
        assert!(t < 1_000_000_000, "{t} ns since a clock started just now");
        assert_eq!(c.std_instant(2_000) - c.std_instant(1_000), Duration::from_nanos(1_000));
    }
}
