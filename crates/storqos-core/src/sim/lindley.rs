//! The Lindley recursion: FCFS in front of a constant-rate server, specialised.
//!
//! finish_i = max(arrival_i, finish_{i−1}) + service. This is what the general event loop
//! computes for `Fcfs` + `ConstantRate`; the kernel exists as the reference point of the
//! simulator benchmark (how close the general loop gets to a loop with nothing else in
//! it) and as the building block of fast capacity planning.

use crate::time::Nanos;

/// Completion times of FCFS at one server with a fixed `service` time per request.
/// `arrivals` must be non-decreasing.
pub fn fcfs_constant(arrivals: &[Nanos], service: Nanos) -> Vec<Nanos> {
    let mut out = Vec::with_capacity(arrivals.len());
    let mut last: Nanos = 0;
    for &a in arrivals {
        last = last.max(a) + service;
        out.push(last);
    }
    out
}

/// Mean response time of FCFS at one server with a fixed `service` time, without
/// storing completions (ns).
pub fn fcfs_constant_mean_response(arrivals: &[Nanos], service: Nanos) -> f64 {
    let mut last: Nanos = 0;
    let mut sum: u128 = 0;
    for &a in arrivals {
        last = last.max(a) + service;
        sum += (last - a) as u128;
    }
    if arrivals.is_empty() { 0.0 } else { sum as f64 / arrivals.len() as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recursion() {
        assert_eq!(fcfs_constant(&[0, 0, 5, 40], 10), vec![10, 20, 30, 50]);
        assert_eq!(fcfs_constant_mean_response(&[0, 0, 5, 40], 10), (10.0 + 20.0 + 25.0 + 10.0) / 4.0);
    }
}
