//! Time the reference kernels on the arrivals the Python benchmark wrote, for
//! `benches/event_loop.py`: `kernels ARRIVALS SERVICE_NS WINDOW_NS REPEATS` where ARRIVALS
//! is a file of little-endian u64 ns. Prints one JSON object: the median seconds of each
//! kernel and the mean response each computes (the benchmark checks they agree).
use std::time::Instant;

use storqos_bench_kernels::lindley::{fcfs_constant, fcfs_constant_summary};
use storqos_bench_kernels::minimal_des::fcfs_constant_des_summary;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn time<T>(repeats: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut secs = Vec::with_capacity(repeats);
    let mut last = None;
    for _ in 0..repeats.max(1) {
        let t0 = Instant::now();
        last = Some(std::hint::black_box(f()));
        secs.push(t0.elapsed().as_secs_f64());
    }
    (median(secs), last.expect("ran at least once"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        eprintln!("usage: kernels ARRIVALS SERVICE_NS WINDOW_NS REPEATS");
        std::process::exit(2);
    }
    let bytes = std::fs::read(&args[0]).unwrap_or_else(|e| {
        eprintln!("error: {}: {e}", args[0]);
        std::process::exit(2)
    });
    let num = |i: usize| -> u64 {
        args[i].parse().unwrap_or_else(|_| {
            eprintln!("error: argument {i}: not a whole number: {:?}", args[i]);
            std::process::exit(2)
        })
    };
    let (service, window, repeats) = (num(1), num(2), num(3) as usize);
    let arrivals: Vec<u64> = bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    let n = arrivals.len() as f64;
    let (t_rk, fin) = time(repeats, || fcfs_constant(&arrivals, service));
    let mean_rk = fin.iter().zip(&arrivals).map(|(f, a)| (f - a) as f64).sum::<f64>() / n;
    let (t_rs, (g_rs, _)) = time(repeats, || fcfs_constant_summary(&arrivals, service, window));
    let (t_md, (g_md, _)) = time(repeats, || fcfs_constant_des_summary(&arrivals, service, window));
    println!(
        "{{\"lindley_s\": {t_rk}, \"lindley_summary_s\": {t_rs}, \"minimal_des_s\": {t_md}, \
         \"mean_lindley_ns\": {mean_rk}, \"mean_lindley_summary_ns\": {}, \"mean_minimal_des_ns\": {}}}",
        g_rs.mean_response(),
        g_md.mean_response()
    );
}
