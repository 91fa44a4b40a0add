//! Time: integer nanoseconds, simulated or wall-clock, always injected by the caller.

/// A point in time or a duration, in nanoseconds. Simulated time starts at 0.
pub type Nanos = u64;

/// Nanoseconds per microsecond.
pub const NS_PER_US: Nanos = 1_000;
/// Nanoseconds per millisecond.
pub const NS_PER_MS: Nanos = 1_000_000;
/// Nanoseconds per second.
pub const NS_PER_SEC: Nanos = 1_000_000_000;

/// Service time of one request at `iops` operations per second, rounded to the nearest
/// nanosecond (at least 1 ns so that time always advances).
#[inline]
pub fn per_op(iops: f64) -> Nanos {
    debug_assert!(iops > 0.0);
    ((NS_PER_SEC as f64 / iops).round() as Nanos).max(1)
}

/// Convert seconds (f64) to nanoseconds, rounding to the nearest nanosecond.
#[inline]
pub fn secs(s: f64) -> Nanos {
    (s * NS_PER_SEC as f64).round() as Nanos
}

/// Convert nanoseconds to seconds as f64.
#[inline]
pub fn to_secs(ns: Nanos) -> f64 {
    ns as f64 / NS_PER_SEC as f64
}
