//! Event-loop rate from Rust alone: FCFS + constant-rate over N Poisson requests,
//! monomorphised (`generic`), through the spec enums as Python runs it (`spec`:
//! `simulate_spec`, which monomorphises this pairing), with the scheduler concrete and
//! the device an enum (`sched`: what `simulate_spec` runs for most other pairings), the
//! other way round (`dev`), through the enums' `match` on every call (`enums`), vs the
//! Lindley kernel (`lindley`) and the leanest hand-written two-event loop (`des`).
//!
//! `cargo run --release -p storqos-bench-kernels --bin loop_rate -- [REQUESTS] [PATH]`, PATH one of `generic`,
//! `spec`, `sched`, `dev`, `enums`, `lindley`, `des` (run only that path, e.g. under callgrind)
//! or `all` (default).
use std::time::Instant;

use storqos_bench_kernels::lindley::{fcfs_constant, fcfs_constant_summary};
use storqos_bench_kernels::minimal_des::fcfs_constant_des_summary;
use storqos_core::devices::ConstantRate;
use storqos_core::request::Request;
use storqos_core::schedulers::Fcfs;
use storqos_core::sim::generate::{Poisson, Shape};
use storqos_core::sim::{simulate, simulate_spec, SimConfig};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000_000);
    let path = args.next().unwrap_or_else(|| "all".into());
    let run = |p: &str| path == "all" || path == p;
    let reqs: Vec<Request> = Poisson::new(900.0, n, u64::MAX, Shape::default(), 7).unwrap().collect();
    let cfg = SimConfig::default();
    let rate = |secs: f64| n as f64 / secs / 1e6;
    let mut out = format!("n={n}");
    let mut completed = Vec::new();
    if run("generic") {
        let t = Instant::now();
        let r = simulate(reqs.iter().copied(), &[], &mut Fcfs::new(), &mut ConstantRate::new(1000.0).unwrap(), &cfg)
            .unwrap();
        out += &format!(" generic {:.1} M/s,", rate(t.elapsed().as_secs_f64()));
        completed.push(r.total.completed);
    }
    if run("spec") {
        let mut s = storqos_core::spec::AnyScheduler::Fcfs(Fcfs::new());
        let mut d = storqos_core::spec::AnyDevice::Constant(ConstantRate::new(1000.0).unwrap());
        let t = Instant::now();
        let r = simulate_spec(reqs.iter().copied(), &[], &mut s, &mut d, &cfg).unwrap();
        out += &format!(" simulate_spec {:.1} M/s,", rate(t.elapsed().as_secs_f64()));
        completed.push(r.total.completed);
    }
    if run("enums") {
        let mut s = storqos_core::spec::AnyScheduler::Fcfs(Fcfs::new());
        let mut d = storqos_core::spec::AnyDevice::Constant(ConstantRate::new(1000.0).unwrap());
        let t = Instant::now();
        let r = simulate(reqs.iter().copied(), &[], &mut s, &mut d, &cfg).unwrap();
        out += &format!(" spec enums {:.1} M/s,", rate(t.elapsed().as_secs_f64()));
        completed.push(r.total.completed);
    }
    if run("sched") {
        let mut d = storqos_core::spec::AnyDevice::Constant(ConstantRate::new(1000.0).unwrap());
        let t = Instant::now();
        let r = simulate(reqs.iter().copied(), &[], &mut Fcfs::new(), &mut d, &cfg).unwrap();
        out += &format!(" concrete scheduler, device enum {:.1} M/s,", rate(t.elapsed().as_secs_f64()));
        completed.push(r.total.completed);
    }
    if run("dev") {
        let mut s = storqos_core::spec::AnyScheduler::Fcfs(Fcfs::new());
        let t = Instant::now();
        let r = simulate(reqs.iter().copied(), &[], &mut s, &mut ConstantRate::new(1000.0).unwrap(), &cfg).unwrap();
        out += &format!(" scheduler enum, concrete device {:.1} M/s,", rate(t.elapsed().as_secs_f64()));
        completed.push(r.total.completed);
    }
    if run("lindley") {
        let arr: Vec<u64> = reqs.iter().map(|r| r.arrival).collect();
        let t = Instant::now();
        let f = fcfs_constant(&arr, 1_000_000);
        out += &format!(" lindley {:.1} M/s (last {}),", rate(t.elapsed().as_secs_f64()), f[f.len() - 1]);
        let t = Instant::now();
        let (g, _) = fcfs_constant_summary(&arr, 1_000_000, cfg.window);
        out += &format!(" lindley+summaries {:.1} M/s,", rate(t.elapsed().as_secs_f64()));
        completed.push(g.completed);
    }
    if run("des") {
        let arr: Vec<u64> = reqs.iter().map(|r| r.arrival).collect();
        let t = Instant::now();
        let (g, _) = fcfs_constant_des_summary(&arr, 1_000_000, cfg.window);
        out += &format!(" minimal DES {:.1} M/s,", rate(t.elapsed().as_secs_f64()));
        completed.push(g.completed);
    }
    assert!(completed.windows(2).all(|w| w[0] == w[1]));
    println!("{}", out.trim_end_matches(','));
}
