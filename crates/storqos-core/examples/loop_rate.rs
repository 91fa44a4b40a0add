//! Event-loop rate from Rust alone: FCFS + constant-rate over N Poisson requests,
//! monomorphised and through the spec enums (what Python uses), vs the Lindley kernel. `cargo run --release --example loop_rate -- 10000000`
use std::time::Instant;

use storqos_core::devices::ConstantRate;
use storqos_core::request::Request;
use storqos_core::schedulers::Fcfs;
use storqos_core::sim::generate::{Poisson, Shape};
use storqos_core::sim::lindley::fcfs_constant;
use storqos_core::sim::{simulate, SimConfig};

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10_000_000);
    let reqs: Vec<Request> = Poisson::new(900.0, n, u64::MAX, Shape::default(), 7).unwrap().collect();
    let cfg = SimConfig::default();
    let t = Instant::now();
    let r = simulate(reqs.iter().copied(), &[], &mut Fcfs::new(), &mut ConstantRate::new(1000.0).unwrap(), &cfg).unwrap();
    let mono = t.elapsed().as_secs_f64();
    let mut s = storqos_core::spec::AnyScheduler::Fcfs(Fcfs::new());
    let mut d = storqos_core::spec::AnyDevice::Constant(ConstantRate::new(1000.0).unwrap());
    let t = Instant::now();
    let r2 = simulate(reqs.iter().copied(), &[], &mut s, &mut d, &cfg).unwrap();
    let boxed = t.elapsed().as_secs_f64();
    let arr: Vec<u64> = reqs.iter().map(|r| r.arrival).collect();
    let t = Instant::now();
    let f = fcfs_constant(&arr, 1_000_000);
    let lind = t.elapsed().as_secs_f64();
    assert_eq!(r.total.completed, r2.total.completed);
    println!("n={n} generic {:.1} M/s, spec enums {:.1} M/s, lindley {:.1} M/s (last {})", n as f64 / mono / 1e6, n as f64 / boxed / 1e6, n as f64 / lind / 1e6, f[f.len() - 1]);
}
