//! The local replay engine (`storqos_gateway::local_replay`) on real files: timing of an
//! open-loop train, results, writes, the errors it names, and (as root, with loop devices
//! and cgroup v1 blkio) a tenant whose reads a blk-throttle cgroup slows while another's
//! are not.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use storqos_gateway::local_replay::{replay_local, LocalError, LocalLog, LocalOptions, LocalRequests};

/// A scratch file of `len` bytes (written, not sparse) in Cargo's temp directory for
/// integration tests, which is beside `target/` and so not on a tmpfs; removed on drop.
fn scratch(tag: &str, len: usize) -> tempfile::TempPath {
    let f =
        tempfile::Builder::new().prefix(&format!(".storqos-{tag}-")).tempfile_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    std::fs::write(f.path(), bytes).unwrap();
    f.into_temp_path()
}

/// `n` 4 KiB reads of tenant `tenant`, `gap_ns` apart from `first_ns`, spread over 4 MiB.
fn reads(n: usize, tenant: u32, first_ns: u64, gap_ns: u64) -> LocalRequests {
    LocalRequests {
        at_ns: (0..n as u64).map(|i| first_ns + i * gap_ns).collect(),
        tenant: vec![tenant; n],
        offset: (0..n as u64).map(|i| (i * 37 % 1024) * 4096).collect(),
        size: vec![4096; n],
        is_read: vec![true; n],
    }
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// 200 reads 1 ms apart: all complete with 4096 bytes, none before its time, and the
/// requests counted late are those issued more than 1 ms after it. How close to its time
/// each goes is a benchmark's question, not a test's: under `make test` these run beside
/// a build on the same two CPUs (a median of 1.5 ms was seen there, 0-45 µs alone).
fn check_train(log: &LocalLog, reqs: &LocalRequests) {
    assert_eq!(log.result, vec![4096i64; 200], "every read returns its size");
    let errors: Vec<u64> = log.issue_ns.iter().zip(&reqs.at_ns).map(|(&i, &a)| i.abs_diff(a)).collect();
    for (k, (&i, &a)) in log.issue_ns.iter().zip(&reqs.at_ns).enumerate() {
        assert!(i >= a, "request {k} issued at {i} ns, before its time {a} ns");
        assert!(log.finish_ns[k] >= i, "request {k} finished before it was issued");
    }
    let med = median(errors.clone());
    eprintln!("{}: median issue error {} µs, max {} µs", log.engine, med / 1000, errors.iter().max().unwrap() / 1000);
    assert_eq!(log.late, errors.iter().filter(|&&e| e > 1_000_000).count() as u64, "late counts those > 1 ms");
}

#[test]
fn a_train_of_reads_is_issued_on_time_and_completes() {
    let file = scratch("lr-train", 8 << 20);
    let reqs = reads(200, 0, 0, 1_000_000);
    let log = replay_local(&file, &reqs, &LocalOptions::default()).unwrap();
    assert!(log.engine == "io_uring" || log.engine == "threads", "engine {}", log.engine);
    if std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled").is_ok_and(|s| s.trim() == "0") {
        assert_eq!(log.engine, "io_uring", "io_uring is allowed here");
    }
    check_train(&log, &reqs);
}

#[test]
fn the_thread_engine_keeps_time_too() {
    let file = scratch("lr-threads", 8 << 20);
    let reqs = reads(200, 3, 0, 1_000_000);
    let log = replay_local(&file, &reqs, &LocalOptions { force_threads: true, ..Default::default() }).unwrap();
    assert_eq!(log.engine, "threads");
    check_train(&log, &reqs);
}

#[test]
fn tenants_run_at_once_and_offsets_wrap_and_round() {
    let file = scratch("lr-wrap", 1 << 20);
    // Two tenants, all due at once; offsets beyond the 1 MiB file; unaligned sizes.
    let reqs = LocalRequests {
        at_ns: vec![0; 8],
        tenant: vec![0, 1, 0, 1, 0, 1, 0, 1],
        offset: vec![0, 6144, 5 << 20, (1 << 20) - 100, 4096, 0, 123, 1 << 40],
        size: vec![4096, 512, 4096, 4096, 100, 8192, 4000, 4096],
        is_read: vec![true; 8],
    };
    for direct in [true, false] {
        let log = replay_local(&file, &reqs, &LocalOptions { direct, depth: 2, ..Default::default() }).unwrap();
        let want: Vec<i64> = if direct {
            vec![4096, 4096, 4096, 4096, 4096, 8192, 4096, 4096]
        } else {
            reqs.size.iter().map(|&s| i64::from(s)).collect()
        };
        assert_eq!(log.result, want, "direct {direct}");
        // 5 MiB and 1 TiB wrap, and 1 MiB - 100 unless rounded down to 1 MiB - 4 KiB.
        assert_eq!(log.wrapped, if direct { 2 } else { 3 }, "direct {direct}");
    }
}

#[test]
fn writes_are_refused_unless_asked_and_then_written() {
    let file = scratch("lr-writes", 1 << 20);
    let reqs = LocalRequests {
        at_ns: vec![0, 100_000],
        tenant: vec![0, 0],
        offset: vec![0, 8192],
        size: vec![4096, 4096],
        is_read: vec![true, false],
    };
    let e = replay_local(&file, &reqs, &LocalOptions::default()).unwrap_err();
    assert!(matches!(e, LocalError::Invalid { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("a write (the first is request 1)") && msg.contains("writes=true"), "{msg}");
    assert!(msg.starts_with(&file.display().to_string()), "{msg}");
    assert_eq!(std::fs::read(&file).unwrap()[8192], (8192 % 251) as u8, "nothing written");

    let log = replay_local(&file, &reqs, &LocalOptions { writes: true, ..Default::default() }).unwrap();
    assert_eq!(log.result, vec![4096, 4096]);
    let back = std::fs::read(&file).unwrap();
    assert!(back[8192..12288].iter().all(|&b| b == 0xA5), "the write wrote its pattern");
    assert_eq!(back[12288], (12288 % 251) as u8, "and nothing past it");
}

#[test]
fn a_missing_file_is_named() {
    let path = Path::new("/nonexistent-storqos-dir/disk.img");
    let e = replay_local(path, &reads(1, 0, 0, 0), &LocalOptions::default()).unwrap_err();
    assert!(matches!(e, LocalError::Open { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("/nonexistent-storqos-dir/disk.img") && msg.contains("cannot open"), "{msg}");
    assert!(!msg.contains('\n'));
}

#[test]
fn a_missing_cgroup_is_named() {
    let file = scratch("lr-cgroup", 1 << 20);
    let cgroup = PathBuf::from("/nonexistent-storqos-cgroup/tenant1");
    let mut reqs = reads(4, 0, 0, 0);
    reqs.tenant = vec![0, 1, 0, 1];
    let opts = LocalOptions { cgroups: vec![None, Some(cgroup.clone())], ..Default::default() };
    let e = replay_local(&file, &reqs, &opts).unwrap_err();
    assert!(matches!(e, LocalError::Cgroup { tenant: 1, .. }), "{e:?}");
    let msg = e.to_string();
    assert!(msg.contains("/nonexistent-storqos-cgroup/tenant1/tasks") && msg.contains("tenant 1"), "{msg}");
    // Nor is a directory that is not a cgroup given a `tasks` file.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let opts = LocalOptions { cgroups: vec![Some(dir.path().into())], force_threads: true, ..Default::default() };
    assert!(matches!(replay_local(&file, &reqs, &opts), Err(LocalError::Cgroup { tenant: 0, .. })));
    assert!(!dir.path().join("tasks").exists());
}

#[test]
fn bad_columns_and_options_are_refused() {
    let file = scratch("lr-bad", 1 << 20);
    let mut reqs = reads(3, 0, 0, 0);
    reqs.size.pop();
    assert!(replay_local(&file, &reqs, &LocalOptions::default()).unwrap_err().to_string().contains("length"));
    let mut reqs = reads(3, 0, 0, 0);
    reqs.size[1] = 0;
    assert!(replay_local(&file, &reqs, &LocalOptions::default()).unwrap_err().to_string().contains("request 1"));
    let reqs = reads(3, 0, 0, 0);
    let e = replay_local(&file, &reqs, &LocalOptions { depth: 0, ..Default::default() }).unwrap_err();
    assert!(e.to_string().contains("depth"), "{e}");
    let mut reqs = reads(1, 0, 0, 0);
    reqs.size[0] = 2 << 20;
    let e = replay_local(&file, &reqs, &LocalOptions::default()).unwrap_err();
    assert!(e.to_string().contains("larger than the file"), "{e}");
    let log = replay_local(&file, &LocalRequests::default(), &LocalOptions::default()).unwrap();
    assert!(log.result.is_empty());
}

/// Run `cmd args`, its stdout if it succeeded.
fn run(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd).args(args).output().map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{cmd} {args:?}: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A loop device and a blkio cgroup, detached and removed on drop (a failing test too).
struct LoopAndCgroup {
    device: Option<String>,
    cgroup: Option<PathBuf>,
}

impl Drop for LoopAndCgroup {
    fn drop(&mut self) {
        if let Some(dev) = self.device.take() {
            if let Err(e) = run("losetup", &["-d", &dev]) {
                eprintln!("could not detach {dev}: {e}");
            }
        }
        if let Some(dir) = self.cgroup.take() {
            // The replay's threads have ended, or end once the kernel is done with their
            // reads (a stall test's, throttled): wait for them up to 5 s.
            for _ in 0..250 {
                if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            eprintln!("could not remove cgroup {}", dir.display());
        }
    }
}

/// A loop device over a 16 MiB scratch file and a new blkio cgroup that limits reads of
/// it to `read_iops`, all removed on drop; `None` (having said why) where this machine
/// cannot (not root, no cgroup v1 blkio with blk-throttle, no losetup or loop devices).
struct Throttled {
    guard: LoopAndCgroup,
    /// Dropped after `guard`: once the loop device over it is detached.
    _backing: tempfile::TempPath,
    device: String,
    majmin: String,
    cgroup: PathBuf,
}

impl Throttled {
    fn new(tag: &str, read_iops: u32) -> Option<Throttled> {
        let blkio = Path::new("/sys/fs/cgroup/blkio");
        if !blkio.join("blkio.throttle.read_iops_device").exists() {
            eprintln!("skipped: needs /sys/fs/cgroup/blkio (cgroup v1 blkio with blk-throttle)");
            return None;
        }
        if let Err(e) = run("losetup", &["--version"]) {
            eprintln!("skipped: needs losetup: {e}");
            return None;
        }
        let mut guard = LoopAndCgroup { device: None, cgroup: None };
        let cgroup = blkio.join(format!("storqos-local-replay-{tag}-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir(&cgroup) {
            eprintln!("skipped: cannot create the cgroup {} (needs root): {e}", cgroup.display());
            return None;
        }
        guard.cgroup = Some(cgroup.clone());
        let backing = scratch(tag, 16 << 20);
        let device = match run("losetup", &["-f", "--show", &backing.display().to_string()]) {
            Ok(dev) => dev,
            Err(e) => {
                eprintln!("skipped: no loop device: {e}");
                return None;
            }
        };
        guard.device = Some(device.clone());
        let name = device.trim_start_matches("/dev/");
        let majmin = std::fs::read_to_string(format!("/sys/block/{name}/dev")).unwrap().trim().to_string();
        let limit = cgroup.join("blkio.throttle.read_iops_device");
        std::fs::write(limit, format!("{majmin} {read_iops}\n")).unwrap();
        Some(Throttled { guard, _backing: backing, device, majmin, cgroup })
    }

    /// Reads of the device the cgroup was charged.
    fn reads_charged(&self) -> u64 {
        let serviced = std::fs::read_to_string(self.cgroup.join("blkio.throttle.io_serviced")).unwrap();
        let prefix = format!("{} Read ", self.majmin);
        serviced.lines().filter_map(|l| l.strip_prefix(&prefix)).filter_map(|v| v.trim().parse::<u64>().ok()).sum()
    }
}

/// Tenant 0 in a cgroup with a read IOPS limit of 50 on a loop device, tenant 1 outside:
/// tenant 0's 20 reads take about 0.3 s, tenant 1's a few ms; the cgroup's statistics
/// count tenant 0's reads, the bios charged to it.
#[test]
fn a_throttled_cgroup_slows_its_tenant_only() {
    let Some(t) = Throttled::new("slow", 50) else { return };
    let n = 20;
    let mut reqs = reads(2 * n, 0, 0, 0);
    for k in 0..2 * n {
        reqs.tenant[k] = (k % 2) as u32;
        reqs.at_ns[k] = (k as u64 / 2) * 100_000;
    }
    let opts = LocalOptions { cgroups: vec![Some(t.cgroup.clone()), None], depth: 4, ..Default::default() };
    let log = replay_local(Path::new(&t.device), &reqs, &opts).unwrap();
    assert_eq!(log.result, vec![4096i64; 2 * n]);
    let last = |tenant: usize| (tenant..2 * n).step_by(2).map(|k| log.finish_ns[k]).max().unwrap();
    let (slow, fast) = (last(0), last(1));
    eprintln!("{}: throttled tenant done at {} ms, the other at {} ms", log.engine, slow / 1_000_000, fast / 1_000_000);
    assert!(slow >= 200_000_000, "the throttled tenant finished at {slow} ns");
    assert!(fast < 100_000_000, "the free tenant finished at {fast} ns");
    let charged = t.reads_charged();
    assert!(charged >= n as u64, "the cgroup was charged {charged} reads");
    drop(t.guard);
}

/// A tenant throttled to 2 reads a second, with 0.2 s allowed without a completion: the
/// replay stops with a stall naming it, without waiting for the reads the kernel holds,
/// through io_uring and through the worker threads alike.
#[test]
fn a_stall_is_reported_and_does_not_hang() {
    let Some(t) = Throttled::new("stall", 2) else { return };
    let reqs = reads(3, 0, 0, 0);
    for force_threads in [false, true] {
        let cgroups = vec![Some(t.cgroup.clone())];
        let opts = LocalOptions { cgroups, stall_ns: 200_000_000, force_threads, ..Default::default() };
        let began = std::time::Instant::now();
        let e = replay_local(Path::new(&t.device), &reqs, &opts).unwrap_err();
        let took = began.elapsed();
        assert!(matches!(e, LocalError::Stall { tenant: 0, .. }), "threads {force_threads}: {e:?}");
        assert!(e.to_string().contains("no completion for 0.2 s"), "{e}");
        assert!(took < Duration::from_millis(1000), "threads {force_threads}: took {took:?}, waited for the reads");
    }
    drop(t.guard);
}
