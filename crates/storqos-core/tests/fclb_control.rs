//! Seed 003 §3.2 (Eqs. 3–8): the FCLB control loop on its linear plant model, the
//! stability bound, and tuning from a profile of the simulated disk.

use storqos_core::fclb::controller::{check_gain, closed_loop_pole, periods_to_settle, stable_gain_bound};
use storqos_core::fclb::experiment::{candidates, profile_config};
use storqos_core::fclb::tuning::{estimate_gain, pole_placement, MixEntry};
use storqos_core::fclb::{IntegralController, LinearPlant, RateLimits};
use storqos_core::scheduler::Scheduler;
use storqos_core::spec::{from_json, SchedulerSpec};

/// The paper's G (§4.4) around an operating point of 60 IOPS at 29 ms.
const PLANT: LinearPlant = LinearPlant { gain_ms_per_iops: 0.3, r0_iops: 60.0, rt0_ms: 29.0 };
/// No floor or ceiling: the linear model alone.
const FREE: RateLimits = RateLimits { floor_iops: f64::NEG_INFINITY, ceiling_iops: None };
/// Start 30 IOPS above the operating point: e(0) = 29 − (29 + 0.3·30) = −9 ms.
const R_START: f64 = 90.0;
const REF_MS: f64 = 29.0;
/// "Reached the reference": within 0.1 ms.
const TOL_MS: f64 = 0.1;

/// First period k (1-based: RT(k) is the k-th measurement) with |RT(k) − ref| ≤ tol.
fn periods_to_reach(rts: &[f64]) -> usize {
    rts.iter().position(|rt| (rt - REF_MS).abs() <= TOL_MS).expect("reached") + 1
}

#[test]
fn closed_loop_reaches_the_reference_in_the_periods_the_pole_predicts() {
    for pole in [0.0, 0.3, 0.5, 0.7, 0.85, -0.4, -0.7] {
        let t = pole_placement(PLANT.gain_ms_per_iops, pole).unwrap();
        assert!((closed_loop_pole(t.gain_iops_per_ms, PLANT.gain_ms_per_iops) - pole).abs() < 1e-12);
        let ctl = IntegralController::new(t.gain_iops_per_ms).unwrap();
        let rts = PLANT.closed_loop(&ctl, &FREE, R_START, REF_MS, 200);
        let e0 = REF_MS - rts[0];
        // RT(1) answers r(0); the error after n controller updates is p^n·e0, seen in RT(n+1).
        let predicted = periods_to_settle(pole, e0, TOL_MS) as usize + 1;
        let measured = periods_to_reach(&rts);
        assert!(measured.abs_diff(predicted) <= 1, "pole {pole}: reached in {measured} periods, predicted {predicted}");
        // Error shrinks by |p| each period, alternating in sign for p < 0.
        for w in rts.windows(2).take(5) {
            let (a, b) = (w[0] - REF_MS, w[1] - REF_MS);
            assert!((b - pole * a).abs() < 1e-9, "pole {pole}: {a} -> {b}");
        }
    }
}

#[test]
fn unstable_gain_oscillates_and_diverges_as_eq8_predicts() {
    let g = PLANT.gain_ms_per_iops;
    let bound = stable_gain_bound(g);
    // K = 2.6/G: p = −1.6, outside the unit circle.
    let k = 2.6 / g;
    assert!(k > bound);
    let e = check_gain(k, g).unwrap_err().to_string();
    assert!(e.contains(&format!("0 < K < 2/G = {bound:.4} IOPS/ms")), "{e}");
    let ctl = IntegralController::new(k).unwrap();
    let rts = PLANT.closed_loop(&ctl, &FREE, R_START, REF_MS, 12);
    let errs: Vec<f64> = rts.iter().map(|rt| rt - REF_MS).collect();
    for w in errs.windows(2) {
        assert!(w[0] * w[1] < 0.0, "sign alternates: {errs:?}");
        assert!((w[1].abs() / w[0].abs() - 1.6).abs() < 1e-9, "grows by |p| = 1.6: {errs:?}");
    }
    // On the stability bound itself (p = −1) it oscillates without decaying.
    let ctl = IntegralController::new(bound).unwrap();
    let rts = PLANT.closed_loop(&ctl, &FREE, R_START, REF_MS, 10);
    assert!(rts.iter().all(|rt| ((rt - REF_MS).abs() - 9.0).abs() < 1e-9), "{rts:?}");
    // A stable K just inside the bound converges, slowly and alternating.
    let ctl = IntegralController::new(0.95 * bound).unwrap();
    let rts = PLANT.closed_loop(&ctl, &FREE, R_START, REF_MS, 200);
    assert!((rts[199] - REF_MS).abs() < 1e-3);
}

#[test]
fn floor_keeps_the_demanded_iops_even_when_the_loop_would_go_lower() {
    // A reference the plant meets only at 20 IOPS, a demand of 40 IOPS: the rate stops
    // at 40 (§3.1: decreased "to its demanded IOPS_i maximumly").
    let lim = RateLimits { floor_iops: 40.0, ceiling_iops: None };
    let ctl = IntegralController::new(1.0).unwrap();
    let rts = PLANT.closed_loop(&ctl, &lim, 60.0, PLANT.response_ms(20.0), 50);
    assert!((rts[49] - PLANT.response_ms(40.0)).abs() < 1e-9);
}

#[test]
fn specs_reject_an_unstable_gain_with_the_bound() {
    let json = r#"{"kind":"fclb","workloads":[{"iops":40,"rt_ns":35000000}],
        "gain_iops_per_ms":8,"plant_gain_ms_per_iops":0.3,"then":{"kind":"yfq","weights":[2,1]}}"#;
    let spec: SchedulerSpec = from_json("policy", json).unwrap();
    let e = spec.validate().unwrap_err().to_string();
    assert!(e.contains("outside the stable range 0 < K < 2/G = 6.6667 IOPS/ms") && !e.contains('\n'), "{e}");
    let ok = json.replace("\"gain_iops_per_ms\":8", "\"pole\":0.5");
    let spec: SchedulerSpec = from_json("policy", &ok).unwrap();
    assert!(spec.validate().is_ok());
    let bad_pole = json.replace("\"gain_iops_per_ms\":8", "\"pole\":1.2");
    let spec: SchedulerSpec = from_json("policy", &bad_pole).unwrap();
    assert!(spec.validate().unwrap_err().to_string().contains("pole must lie in (-1, 1)"));
}

#[test]
fn profiled_gain_of_the_disk_is_positive_and_steeper_near_the_knee() {
    let cfg = profile_config();
    let mix: Vec<MixEntry> = candidates().iter().map(|c| MixEntry { iops: c.iops, bytes: c.bytes }).collect();
    let low = estimate_gain(&cfg, &mix, 60.0).unwrap();
    let knee = estimate_gain(&cfg, &mix, 77.0).unwrap();
    assert!(low.gain_ms_per_iops > 0.0 && knee.gain_ms_per_iops > 0.0);
    // The disk is non-linear (§4.4): the gain near the end of the stable area is many
    // times the gain at the admission point, so K must be tuned where the loop operates.
    assert!(
        knee.gain_ms_per_iops > 5.0 * low.gain_ms_per_iops,
        "{} vs {}",
        knee.gain_ms_per_iops,
        low.gain_ms_per_iops
    );
    let t = pole_placement(knee.gain_ms_per_iops, 0.4).unwrap();
    assert!(t.gain_iops_per_ms < t.bound_iops_per_ms);
}

#[test]
fn specs_take_an_online_gain_or_name_the_bad_value() {
    let json = r#"{"kind":"fclb","workloads":[{"iops":40,"rt_ns":35000000}],"gain_iops_per_ms":"online",
        "pole":0.5,"plant_gain_ms_per_iops":0.25,"then":{"kind":"yfq","weights":[1]}}"#;
    let spec: SchedulerSpec = from_json("policy", json).unwrap();
    let built = spec.build().unwrap();
    assert!(built.name().starts_with("fclb(K online: p=0.50, G0=0.250 ms/IOPS)"), "{}", built.name());
    // The start value defaults to the paper's G = 0.3.
    let paper = json.replace(r#""plant_gain_ms_per_iops":0.25,"#, "");
    assert!(from_json::<SchedulerSpec>("policy", &paper).unwrap().build().unwrap().name().contains("G0=0.300"));
    let bad = json.replace(r#""online""#, r#""foo""#);
    let e = from_json::<SchedulerSpec>("policy", &bad).unwrap_err().to_string();
    assert!(e.contains("foo") && e.contains("online") && !e.contains('\n'), "{e}");
    let bad_pole = json.replace(r#""pole":0.5"#, r#""pole":1.0"#);
    let e = from_json::<SchedulerSpec>("policy", &bad_pole).unwrap().validate().unwrap_err().to_string();
    assert!(e.contains("pole must lie in (-1, 1)"), "{e}");
}
