//! The LRU cache tier of seed 002 (`{"kind": "cache"}`) driven by the event loop:
//! system work with a larger working set evicts the user working set, and the explicit
//! sequential warm-up (a warm tenant) brings it back, so the user's requests go from
//! hits to misses and back to hits.

use storqos_core::device::Device;
use storqos_core::schedulers::Fcfs;
use storqos_core::sim::{simulate, SimConfig};
use storqos_core::spec::{from_json, DeviceSpec};
use storqos_core::time::NS_PER_MS;
use storqos_core::Request;

const USER: u32 = 0;
const SYSTEM: u32 = 1;
const WARM: u32 = 2;
const BLOCK: u64 = 4096;
/// Cache of 100 blocks = the user working set.
const SPEC: &str = r#"{"kind": "cache", "fast": {"kind": "constant", "iops": 10000},
    "slow": {"kind": "constant", "iops": 200}, "capacity_bytes": 409600, "warm_tenants": [2]}"#;

/// One request every 20 ms from `start_ms`: `blocks` of `tenant`, each `size` blocks long.
fn phase(reqs: &mut Vec<Request>, start_ms: u64, tenant: u32, blocks: impl Iterator<Item = u64>, size: u64) {
    for (i, b) in blocks.enumerate() {
        let at = (start_ms + 20 * i as u64) * NS_PER_MS;
        let id = reqs.len() as u64;
        reqs.push(Request { offset: b * BLOCK, ..Request::new(id, tenant, at, (size * BLOCK) as u32) });
    }
}

#[test]
fn system_work_evicts_the_user_set_and_warm_up_restores_it() {
    let mut reqs = Vec::new();
    phase(&mut reqs, 0, USER, 0..100, 1); // cold: misses
    phase(&mut reqs, 3_000, USER, 0..100, 1); // warm: hits
    phase(&mut reqs, 6_000, SYSTEM, 10_000..10_200, 1); // 200 system blocks evict all
    phase(&mut reqs, 11_000, WARM, (0..100).step_by(10), 10); // sequential warm-up, 40 KiB reads
    phase(&mut reqs, 12_000, USER, 0..100, 1); // warm again: hits
    let mut dev = from_json::<DeviceSpec>("device", SPEC).unwrap().build().unwrap();
    assert!(dev.name().starts_with("cache(100 blocks of 4096 B"), "{}", dev.name());
    let mut sched = Fcfs::new();
    let cfg = SimConfig { keep_requests: true, ..SimConfig::default() };
    let res = simulate(reqs, &[], &mut sched, &mut dev, &cfg).unwrap();
    let log = res.log.expect("request log");
    let hits = |lo_ms: u64, hi_ms: u64, tenant: u32| {
        (0..log.id.len())
            .filter(|&i| log.tenant[i] == tenant && (lo_ms * NS_PER_MS..hi_ms * NS_PER_MS).contains(&log.arrival[i]))
            .map(|i| (log.target[i] == 0) as u32)
            .collect::<Vec<_>>()
    };
    assert!(hits(0, 3_000, USER).iter().all(|&h| h == 0));
    assert!(hits(3_000, 6_000, USER).iter().all(|&h| h == 1));
    assert!(hits(6_000, 11_000, SYSTEM).iter().all(|&h| h == 0));
    let warm = hits(11_000, 12_000, WARM);
    assert_eq!((warm.len(), warm.iter().sum::<u32>()), (10, 0)); // read from the slow tier
    let after = hits(12_000, 15_000, USER);
    assert_eq!((after.len(), after.iter().sum::<u32>()), (100, 100));
    assert_eq!(res.unfinished, 0);
}

#[test]
fn bad_cache_specs_name_the_parameter() {
    for (json, want) in [
        (
            r#"{"kind": "cache", "fast": {"kind": "constant", "iops": 1}, "slow": {"kind": "constant", "iops": 1}, "capacity_bytes": 100}"#,
            "cache: capacity_bytes must hold at least one block of 4096 bytes, got 100",
        ),
        (
            r#"{"kind": "cache", "fast": {"kind": "constant", "iops": 1}, "slow": {"kind": "constant", "iops": 1}, "capacity_bytes": 8192, "block_bytes": 0}"#,
            "block_bytes must be > 0",
        ),
        (
            r#"{"kind": "cache", "fast": {"kind": "constant", "iops": 1}, "slow": {"kind": "exponential", "iops": 0}, "capacity_bytes": 8192}"#,
            "cache.slow: exponential device: iops must be > 0",
        ),
        (
            r#"{"kind": "cache", "fast": {"kind": "constant", "iops": 1}, "slow": {"kind": "constant", "iops": 1}}"#,
            "missing field `capacity_bytes`",
        ),
    ] {
        let e = match from_json::<DeviceSpec>("device", json).and_then(|s| s.build()) {
            Ok(d) => panic!("{json} built {}", d.name()),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(want), "{e}\n want: {want}");
    }
}
