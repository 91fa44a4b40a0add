//! mClock scheduling rate: add + pull pairs per second on one core, 100 tenants, with a
//! steady backlog of 10 requests per tenant and a deep backlog of 10 M requests (100 000
//! per tenant). The point: the rate must not depend on the backlog depth.
//!
//! Mix: tenants 0–29 reserve 5k IOPS each, weights cycle 1–4, tenants 80–99 are limited
//! to 4k IOPS (below their weighted share, so limits bind); simulated time advances 1 µs
//! per pull (a 1 M IOPS device), so all three phases run. Each pull is followed by an add
//! to the same tenant, keeping every queue at its depth.
//!
//! Each case runs [`REPEATS`] times and reports the best (the machine is shared).
//!
//! `cargo run --release -p storqos-core --example mclock_rate -- [PAIRS]`
use std::hint::black_box;
use std::time::Instant;

use storqos_core::schedulers::Mclock;
use storqos_core::{DeviceState, Request, Scheduler};

/// Tenants in every run.
const TENANTS: u32 = 100;
/// Runs per case; the best rate is reported.
const REPEATS: usize = 3;
/// Simulated time between pulls (ns): a 1 M IOPS device.
const STEP_NS: u64 = 1_000;

fn policy(mixed: bool) -> Mclock {
    if !mixed {
        return Mclock::new(vec![], (0..TENANTS).map(|t| 1.0 + (t % 4) as f64).collect(), vec![]).unwrap();
    }
    let res = (0..TENANTS).map(|t| if t < 30 { 5_000.0 } else { 0.0 }).collect();
    let wts = (0..TENANTS).map(|t| 1.0 + (t % 4) as f64).collect();
    let lim = (0..TENANTS).map(|t| if t >= 80 { Some(4_000.0) } else { None }).collect();
    Mclock::new(res, wts, lim).unwrap()
}

/// Add+pull pairs per second with `per_tenant` requests queued per tenant.
fn rate(per_tenant: u64, pairs: u64, mixed: bool) -> (f64, [u64; 3]) {
    let mut s = policy(mixed);
    let mut id = 0u64;
    for _ in 0..per_tenant {
        for t in 0..TENANTS {
            s.enqueue(Request::new(id, t, 0, 4096), 0);
            id += 1;
        }
    }
    let dev = DeviceState { outstanding: 0, free_slots: 1 };
    let mut now = 0u64;
    let t0 = Instant::now();
    for _ in 0..pairs {
        now += STEP_NS;
        let r = match s.dispatch(now, &dev) {
            Some(r) => r,
            None => {
                now = s.next_timer().expect("backlogged");
                s.on_timer(now);
                s.dispatch(now, &dev).expect("due at its timer")
            }
        };
        s.enqueue(Request::new(id, black_box(r).tenant, now, 4096), now);
        id += 1;
    }
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(s.queued() as u64, per_tenant * TENANTS as u64);
    (pairs as f64 / secs, s.served_by_phase())
}

fn main() {
    let pairs: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(20_000_000);
    println!("mClock add+pull, {TENANTS} tenants, {pairs} pairs per run (one core)");
    for mixed in [false, true] {
        let label = if mixed { "reservations+weights+limits" } else { "weights only" };
        for per_tenant in [10u64, 100_000] {
            let runs: Vec<(f64, [u64; 3])> = (0..REPEATS).map(|_| rate(per_tenant, pairs, mixed)).collect();
            let (r, phases) = runs.into_iter().fold((0.0, [0; 3]), |a, b| if b.0 > a.0 { b } else { a });
            println!(
                "{label:<28} backlog {:>10} requests: {:6.2} M add+pull/s  (phases R/W/break: {:?})",
                per_tenant * TENANTS as u64,
                r / 1e6,
                phases
            );
        }
    }
}
