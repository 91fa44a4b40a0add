use storqos_core::fclb::experiment::*;
use storqos_core::fclb::*;
use storqos_core::time::*;

#[test]
fn explore() {
    let cfg = profile_config();
    let mix1 = [MixEntry { iops: 40.0, bytes: 4096 }];
    let rates: Vec<f64> = (1..=18).map(|k| 5.0 * k as f64).collect();
    let curve = profile_curve(&cfg, &mix1, &rates).unwrap();
    for p in &curve {
        println!("single T={:.0} ach={:.1} p95={:.1} mean={:.1}", p.offered_iops, p.achieved_iops, p.p95_all_ns as f64/1e6, p.mean_ns/1e6);
    }
    println!("stable limit {:?}", stable_limit(&curve));
    let (setup, d) = Setup::derive_default().unwrap();
    println!("admission {:?}", d.admission.rows);
    println!("G {:.4} K {:.4} pts {:?}", d.tuning.plant_gain_ms_per_iops, d.tuning.gain_iops_per_ms, d.gain.points.iter().map(|p|(p.offered_iops, p.p95_all_ns as f64/1e6)).collect::<Vec<_>>());
    for case in Case::ALL {
        for pol in Policy::ALL {
            let r = run_case(case, pol, &setup).unwrap();
            let ws: Vec<String> = r.workloads.iter().enumerate().filter_map(|(i,o)| o.as_ref().map(|o| format!("W{}: {:.1} IOPS viol {:.1}% p95 {:.1} r {:.1}", i+1, o.throughput_iops, o.violation_pct, o.p95_ms, o.final_rate_iops))).collect();
            println!("{:12} {:13} total {:.1} ratio {:?} | {}", case.name(), pol.name(), r.total_iops, r.throughput_ratio.map(|x| (x*100.0).round()/100.0), ws.join(" | "));
        }
    }
}
