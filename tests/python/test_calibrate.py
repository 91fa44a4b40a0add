"""`storqos calibrate` and device profiles: a profile of the
gateway's own 2k-IOPS emulation comes out as 2k IOPS ± 3 %; simulate and serve take the
profile; a profile of another version, or a bad target, is one line, exit 2."""

from __future__ import annotations

import signal
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from conftest import Run, assert_one_line_error, run_cli, until_calm
from storqos.live.host_steal import STAT
from storqos.model.device_profile import BurstPoint, DepthPoint, DeviceProfile, ServicePoint, load_profile
from storqos.model.sim import ClosedClient, simulate
from test_serve import Server, _image

MiB = 1 << 20


def _calibrate_2k(tmp: Path, *args: str, columns: int = 200) -> Run:
    """`storqos calibrate ARGS --out P` against a gateway emulating a 2k-IOPS device
    (stopped after). Made again (``until_calm``) while the measured capacity is off by
    more than 3 %: the emulated device makes up at most 10 ms of lost time."""
    a = _image(tmp / "a.img", 256 * MiB)
    out = Path(args[args.index("--out") + 1])

    def once() -> Run:
        s = Server("--export", f"a={a}", "--listen", "127.0.0.1:0", "--iops", "2k", "--for", "120s")
        _, port = s.ready()
        try:
            return run_cli("calibrate", f"nbd://127.0.0.1:{port}/a", *args, columns=columns)
        finally:
            s.finish(signal.SIGTERM)

    return until_calm(once, lambda r: r.code != 0 or abs(load_profile(out).capacity_iops / 2000 - 1) <= 0.03)


@pytest.fixture(scope="module")
def profile_2k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Calibrate a gateway emulating a 2k-IOPS device (short points; reads and writes)."""
    tmp = tmp_path_factory.mktemp("cal")
    out = tmp / "p.toml"
    r = _calibrate_2k(tmp, "--sizes", "4k,64k", "--queue-depths", "1,4,8", "--time", "0.4", "--writes",
                      "--out", str(out), columns=80)
    assert r.code == 0, r.err
    assert "capacity" in r.out and "IOPS" in r.out and all(len(ln) <= 80 for ln in r.out.splitlines()), r.out
    return out


def test_the_emulated_2k_device_measures_2k_iops(profile_2k: Path) -> None:
    p = load_profile(profile_2k)
    assert p.capacity_iops == pytest.approx(2000, rel=0.03)
    assert p.parallelism == 1  # one emulated server: depth 4 and 8 add no throughput
    depth = {d.qd: d.iops for d in p.queue_depth}
    assert depth[8] == pytest.approx(2000, rel=0.03) and depth[1] < depth[8]
    assert {(s.op, s.pattern, s.size) for s in p.service} == {
        (op, pat, size) for op in ("read", "write") for pat in ("random", "sequential") for size in (4096, 65536)}
    # The fitted server takes 1 / capacity per 4 KiB read: 0.5 ms.
    assert p.op_time_us == pytest.approx(500, rel=0.03)
    # The CPUs were left as the machine has them (--awake-cpus no, the default), and the
    # profile says so.
    assert p.cpus_awake is False
    # It took at least its points' time (8 classes and 3 depths of 0.4 s per pass), and
    # says what the host took from the machine meanwhile where Linux counts it.
    assert p.measured_s is not None and p.measured_s >= 11 * 0.4 * p.passes
    assert (p.steal_ms is not None and p.steal_ms >= 0) == STAT.exists()


def test_simulating_with_the_profile_predicts_the_devices_capacity(profile_2k: Path) -> None:
    """A saturating closed-loop-like burst through the profile's model completes at the
    measured capacity, as the constant 2k device does."""
    n = 4000
    df = pl.DataFrame({"arrival_ns": np.zeros(n, np.int64), "is_read": np.ones(n, bool),
                       "offset": (np.arange(n) * 8192).astype(np.uint64), "size": np.full(n, 4096, np.uint32),
                       "tenant": np.zeros(n, np.uint32)})
    prof = load_profile(profile_2k)
    res = simulate(df, "fcfs", prof.sim_device())
    assert n / (res.end_ns / 1e9) == pytest.approx(prof.capacity_iops, rel=0.02)


def _curve_profile(parallelism: int, depths: list[tuple[int, float]]) -> DeviceProfile:
    """A profile of constant 100 µs 4 KiB reads whose closed-loop mean time at each
    measured depth is ``depths`` (qd, µs), at the capacity of ``parallelism`` servers."""
    flat = ServicePoint(op="read", pattern="random", size=4096, iops=10_000, mean_us=100, min_us=100,
                        percentiles_us=[(50.0, 100.0), (99.0, 100.0)])
    return DeviceProfile(version=1, storqos_version="t", target="t", engine="replay", direct=True, created="t",
                         time_per_point_s=1, capacity_iops=parallelism * 10_000, parallelism=parallelism,
                         op_time_us=100, bandwidth_bytes_per_s=1e9, service=[flat],
                         queue_depth=[DepthPoint(qd=q, iops=q / us * 1e6, mean_us=us, p50_us=us, p99_us=us)
                                      for q, us in depths])


def test_the_slowdown_follows_the_depth_curve_and_never_speeds_a_request_up() -> None:
    """Per requests in service 1 … k: the mean time at that depth over depth 1's,
    linear between measured depths, at least 1."""
    curve = [(1, 100.0), (2, 150.0), (4, 150.0), (8, 300.0)]
    # n = 3: between 150 and 150; n = 5, 6: 150 + (300 - 150) / 4 per step.
    assert _curve_profile(6, curve).slowdown() == pytest.approx([1.0, 1.5, 1.5, 1.5, 1.875, 2.25])
    quicker = _curve_profile(4, [(1, 100.0), (2, 60.0), (4, 80.0)])  # quicker awake than alone
    assert quicker.slowdown() == [1.0, 1.0, 1.0, 1.0]
    assert "slowdown" not in quicker.sim_device()
    assert _curve_profile(6, curve).sim_device()["slowdown"] == pytest.approx([1.0, 1.5, 1.5, 1.5, 1.875, 2.25])


def test_bursts_answered_faster_than_the_depth_curve_cap_the_slowdown() -> None:
    """A closed loop holds the client's turn-around; a queue in the gateway does not.
    Six servers of 100 µs reads (60,000/s) whose bursts' replies came 20 µs apart
    (50,000/s) may slow by 60,000 × 20 µs = 1.2 at most, whatever the curve says; four
    servers (40,000/s) whose bursts' replies came 10 µs apart (cap 0.4) keep the plain
    servers."""
    curve = [(1, 100.0), (2, 150.0), (4, 150.0), (8, 300.0)]
    prof = _curve_profile(6, curve)

    def burst(finish_us: float) -> list[BurstPoint]:
        return [BurstPoint(op="read", requests=32, bursts=10, period_us=20_000, issue_us=10.0,
                           finish_us=finish_us, response_us=[100.0, 120.0])]

    capped = prof.model_copy(update={"burst": burst(20.0)})
    assert capped.burst_cap() == pytest.approx(1.2)
    assert capped.slowdown() == pytest.approx([1.0, 1.2, 1.2, 1.2, 1.2, 1.2])
    # The model then answers a queue of reads at 60,000 / 1.2 = 50,000 per second, the
    # bursts' rate.
    n = 3000
    df = pl.DataFrame({"arrival_ns": np.zeros(n, np.int64), "is_read": np.ones(n, bool),
                       "offset": (np.arange(n) * 8192).astype(np.uint64), "size": np.full(n, 4096, np.uint32),
                       "tenant": np.zeros(n, np.uint32)})
    res = simulate(df, "fcfs", capped.sim_device())
    assert n / (res.end_ns / 1e9) == pytest.approx(50_000, rel=0.02)
    slow = _curve_profile(4, [(1, 100.0), (4, 200.0)]).model_copy(update={"burst": burst(10.0)})
    assert slow.burst_cap() == 1.0 and slow.slowdown() == [1.0, 1.0, 1.0, 1.0]
    # Without bursts the curve alone decides.
    assert prof.burst_cap() == float("inf")
    assert prof.slowdown() == pytest.approx([1.0, 1.5, 1.5, 1.5, 1.875, 2.25])


def test_the_simulated_device_gives_back_the_measured_depth_curve() -> None:
    """A closed loop of d outstanding 4 KiB reads through the profile's model runs at
    about the IOPS measured at depth d (d / its mean time), where plain k servers of
    the depth-1 time would run at d / 100 µs."""
    curve = [(1, 100.0), (2, 150.0), (4, 150.0), (8, 300.0)]
    prof = _curve_profile(8, curve)
    for d, us in curve:
        res = simulate(None, "fcfs", prof.sim_device(), closed=[ClosedClient(outstanding=d)], until="2s")
        iops = res.tenants["completed"][0] / 2
        assert iops == pytest.approx(d / us * 1e6, rel=0.03), (d, iops)


def test_simulate_and_serve_take_the_profile(profile_2k: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    pl.DataFrame({"arrival_ns": np.arange(200) * 1_000_000, "is_read": [True] * 200,
                  "offset": np.arange(200) * 4096, "size": [4096] * 200, "tenant": [0] * 200}).write_csv(trace)
    r = run_cli("simulate", str(trace), "--device-profile", str(profile_2k), "--json")
    assert r.code == 0, r.err
    assert "measured" in r.out
    img = _image(tmp_path / "d.img", MiB)
    r = run_cli("serve", "--export", f"d={img}", "--device-profile", str(profile_2k), "--check")
    assert r.code == 0, r.err
    assert "depth 1" in r.out  # the profile's parallelism
    assert_one_line_error(run_cli("serve", "--export", f"d={img}", "--device-profile", str(profile_2k), "--iops",
                                  "1k", "--check"), "not both")
    assert_one_line_error(run_cli("simulate", str(trace), "--device-profile", str(profile_2k), "--capacity", "1k"),
                          "not both")


def test_a_profile_of_another_version_or_a_bad_target_is_one_line(profile_2k: Path, tmp_path: Path) -> None:
    text = profile_2k.read_text()
    old = tmp_path / "old.toml"
    old.write_text(text.replace("version = 1\n", "version = 99\n", 1))
    assert tomllib.loads(old.read_text())["version"] == 99
    trace = tmp_path / "t.csv"
    pl.DataFrame({"arrival_ns": [0], "is_read": [True], "offset": [0], "size": [4096], "tenant": [0]}).write_csv(trace)
    assert_one_line_error(run_cli("simulate", str(trace), "--device-profile", str(old)),
                          "format version 99", "run `storqos calibrate` again")
    junk = tmp_path / "junk.toml"
    junk.write_text('capacity = "fast"\n')
    assert_one_line_error(run_cli("simulate", str(trace), "--device-profile", str(junk)), "not a storqos device profile")
    small = _image(tmp_path / "small.img", MiB)
    assert_one_line_error(run_cli("calibrate", str(small), "--out", str(tmp_path / "p.toml")), "at least 64 MiB")
    assert_one_line_error(run_cli("calibrate", str(tmp_path / "none.img")), "no such file")
    assert_one_line_error(run_cli("calibrate", "nbd://127.0.0.1:1/x", "--out", str(tmp_path / "p.toml")),
                          "fio failed on nbd://127.0.0.1:1/x")
    assert not (tmp_path / "p.toml").exists()
    for engine in ("fio", "replay"):
        assert_one_line_error(run_cli("calibrate", "nbd://[::1/x", "--engine", engine),
                              "TARGET: malformed URI 'nbd://[::1/x'", "Invalid IPv6 URL")
    assert_one_line_error(run_cli("calibrate", str(small), "--engine", "replay"), "NBD URIs only")
    assert_one_line_error(run_cli("calibrate", "nbd://127.0.0.1:1/x", "--engine", "dd"), "unknown engine 'dd'")
    assert_one_line_error(run_cli("calibrate", "nbd://127.0.0.1:1/x", "--passes", "0"), "--passes", "1..9, got 0")
    assert_one_line_error(run_cli("calibrate", "nbd://127.0.0.1:1/x", "--idle-spacings", "10ms,50us"),
                          "--idle-spacings", "100 µs to 10 s, other than the 2 ms measured always, got 10 ms, 0.05 ms")
    assert_one_line_error(run_cli("calibrate", "nbd://127.0.0.1:1/x", "--idle-spacings", "later"),
                          "--idle-spacings", "malformed duration 'later'")
    assert_one_line_error(run_cli("calibrate", "nbd://127.0.0.1:1/x", "--engine", "replay"),
                          "cannot open nbd://127.0.0.1:1/x")
    # Once taken: an endless point (inf, nan) and a page cache an NBD target has not got.
    for t in ("inf", "nan"):
        assert_one_line_error(run_cli("calibrate", "nbd://127.0.0.1:1/x", "--time", t),
                              "--time: must be > 0 and at most 3600 seconds")
    assert_one_line_error(run_cli("calibrate", "nbd://127.0.0.1:1/x", "--buffered"),
                          "--buffered: nbd://127.0.0.1:1/x is served over NBD")


def test_a_target_that_says_nothing_ends_the_calibration_in_one_line(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """fio waits for ever on an NBD server that takes the connection and says nothing;
    its time limit was an internal error (subprocess.TimeoutExpired), exit 1."""
    import socket

    from storqos.base.errors import InputError
    from storqos.live import calibrate as cal

    monkeypatch.setattr(cal, "FIO_MIN_TIMEOUT_S", 2.0)
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        uri = f"nbd://127.0.0.1:{mute.getsockname()[1]}/a"
        with pytest.raises(InputError, match=rf"^calibrate: fio did not finish within 2 s on {uri} \(randread, "
                                             r"4096 B, depth 1\): the target stopped answering$"):
            cal.run_point(cal.target(uri, direct=False), "read", "random", 4096, 1, 0.1, tmp_path)


def test_the_replay_engine_measures_the_same_2k_device(tmp_path: Path) -> None:
    """storqos replay's own client, in closed loop, finds the same 2k IOPS; the reads at
    rest (one every 2 ms) are measured, and what they pay beyond the emulated 0.5 ms
    service is the path's wake-ups, well under the service time."""
    out = tmp_path / "p.toml"
    r = _calibrate_2k(tmp_path, "--engine", "replay", "--sizes", "4k", "--queue-depths", "1,4", "--time", "0.6",
                      "--passes", "2", "--out", str(out))
    assert r.code == 0, r.err
    p = load_profile(out)
    assert p.engine == "replay" and p.at_rest is not None and p.passes == 2
    assert p.capacity_iops == pytest.approx(2000, rel=0.03)
    path = dict(p.path_at_rest_us())
    # Under the 500 µs of service, not tighter: a calibration in an hour when wake-ups
    # were slow measured 283-310 µs at every quantile; a path that took in the service
    # itself would be 500 µs or more.
    assert 0 <= path[0.5] < 450, p.path_at_rest_us()


def test_passes_keep_each_points_median_and_outvote_a_disturbed_one() -> None:
    """Three passes of a point, one slowed threefold by a disturbance: the profile keeps
    the median of every number (element by element in tables), so the slowed pass is
    outvoted, the percentile table still rises and what was the same stays."""
    from storqos.live.calibrate import median_point
    from storqos.model.device_profile import BurstPoint, DepthPoint, ServicePoint

    def svc(f: float) -> ServicePoint:
        return ServicePoint(op="write", pattern="random", size=4096, iops=1e4 / f, mean_us=100 * f, min_us=20 * f,
                            percentiles_us=[(50.0, 80 * f), (99.0, 300 * f)])

    got = median_point([svc(1.0), svc(3.0), svc(1.2)])
    assert (got.op, got.pattern, got.size) == ("write", "random", 4096)
    assert got.mean_us == pytest.approx(120) and got.min_us == pytest.approx(24) and got.iops == pytest.approx(1e4 / 1.2)
    assert got.percentiles_us == [(50.0, pytest.approx(96)), (99.0, pytest.approx(360))]
    d = median_point([DepthPoint(qd=8, iops=i, mean_us=m, p50_us=m, p99_us=3 * m)
                      for i, m in ((7e4, 110), (2e4, 400), (6e4, 130))])
    assert (d.qd, d.iops, d.mean_us, d.p99_us) == (8, 6e4, 130, 390)
    b = median_point([BurstPoint(op="read", requests=3, bursts=30, period_us=5e3, issue_us=i, finish_us=f,
                                 response_us=r)
                      for i, f, r in ((12, 20, [100, 110, 130]), (40, 90, [400, 500, 600]), (14, 22, [90, 120, 140]))])
    assert (b.issue_us, b.finish_us, b.response_us, b.requests) == (14, 22, [100, 120, 140], 3)
    assert median_point([svc(2.0)]) == svc(2.0)


def test_the_path_at_rest_is_what_spaced_reads_pay_beyond_the_model() -> None:
    """Reads at rest that take the back-to-back reads' times plus 70 µs give a path of
    70 µs at every quantile, once the model's scale is applied to the back-to-back
    times; validate adds it to requests that arrive with nothing in flight; a profile
    without the measurement adds nothing."""
    from storqos.model.device_profile import DepthPoint, DeviceProfile, ServicePoint

    pcts = [(50.0, 100.0), (99.0, 200.0)]
    hot = ServicePoint(op="read", pattern="random", size=4096, iops=10_000, mean_us=100, min_us=50,
                       percentiles_us=pcts)
    # k = 1 server at 10k IOPS: 100 µs of service per read, against the mean of the
    # table 50 µs at 0, 100 at 0.5, 200 at 1 (the top percentile closes it):
    # (50+100)/2 * 0.5 + (100+200)/2 * 0.5 = 112.5 µs, so the scale is 100 / 112.5.
    scale = 100 / 112.5
    rest = hot.model_copy(update={"min_us": 50 * scale + 70,
                                  "percentiles_us": [(q, us * scale + 70) for q, us in pcts]})
    prof = DeviceProfile(version=1, storqos_version="t", target="t", engine="replay", direct=False, created="t",
                         time_per_point_s=1, capacity_iops=10_000, parallelism=1, op_time_us=100,
                         bandwidth_bytes_per_s=1e9, service=[hot],
                         queue_depth=[DepthPoint(qd=1, iops=10_000, mean_us=100, p50_us=100, p99_us=200)],
                         at_rest=rest)
    assert prof.scale() == pytest.approx(scale)
    assert [us for _, us in prof.path_at_rest_us()] == pytest.approx([70, 70, 70])
    # validate adds it to the requests that arrive with nothing in flight: the first,
    # and the third (the second arrives while the first is served), not the second.
    from storqos.model.live_path import with_path

    req = pl.DataFrame({"arrival_ns": [0, 50_000, 500_000], "finish_ns": [100_000, 180_000, 600_000],
                        "response_ns": [100_000, 130_000, 100_000]}, schema={c: pl.UInt64 for c in
                                                                            ("arrival_ns", "finish_ns", "response_ns")})
    got = with_path(req, prof)
    assert got["response_ns"].to_list() == [170_000, 130_000, 170_000]
    assert got["finish_ns"].to_list() == [170_000, 180_000, 670_000]
    # 101 lone requests of every rank: each pays the same 70 µs; without the at-rest
    # measurement, nothing.
    lone = pl.DataFrame({"arrival_ns": np.arange(101) * 2_000_000, "response_ns": np.linspace(50_000, 200_000, 101)}
                        ).cast(pl.UInt64).with_columns(finish_ns=pl.col("arrival_ns") + pl.col("response_ns"))
    added = with_path(lone, prof)["response_ns"].to_numpy() - lone["response_ns"].to_numpy()
    assert added.min() == added.max() == 70_000
    assert with_path(lone, prof.model_copy(update={"at_rest": None}))["response_ns"].equals(lone["response_ns"])


def test_the_path_by_rank_gives_back_the_reads_at_rest_when_back_to_back_times_are_bimodal() -> None:
    """A page-cached file on 2 vCPUs: back to back, a read takes 16 µs (threads awake)
    or 70 µs (one woke up), half and half; spaced out, 80-110 µs. Requests at rest whose
    simulated responses follow the back-to-back times, plus the path by rank, must follow
    the spaced reads' times: the median near 95 µs, not the back-to-back gap at the low
    quantiles (64 µs) carried up to every quantile (which predicted 1.5x the measured
    median)."""
    from storqos.model.device_profile import DepthPoint, DeviceProfile, ServicePoint
    from storqos.model.live_path import with_path

    hot = ServicePoint(op="read", pattern="random", size=4096, iops=23_000, mean_us=43, min_us=15,
                       percentiles_us=[(1.0, 16.0), (49.0, 17.0), (51.0, 69.0), (99.0, 71.0)])
    rest = ServicePoint(op="read", pattern="random", size=4096, iops=100, mean_us=95, min_us=80,
                        percentiles_us=[(1.0, 80.0), (50.0, 95.0), (99.0, 110.0)])
    prof = DeviceProfile(version=1, storqos_version="t", target="t", engine="replay", direct=False, created="t",
                         time_per_point_s=1, capacity_iops=100_000, parallelism=4, op_time_us=40,
                         bandwidth_bytes_per_s=1e9, service=[hot],
                         queue_depth=[DepthPoint(qd=1, iops=23_000, mean_us=43, p50_us=40, p99_us=71)],
                         at_rest=rest)
    s = prof.scale()
    u = (np.arange(2001) + 0.5) / 2001
    table = hot.quantile_table_us()
    service_ns = np.interp(u, [q for q, _ in table], [us * s * 1e3 for _, us in table])
    n = len(u)
    arrival = np.arange(n, dtype=np.int64) * 2_000_000  # 2 ms apart: every one at rest
    req = pl.DataFrame({"arrival_ns": arrival, "finish_ns": arrival + service_ns.astype(np.int64),
                        "response_ns": service_ns.astype(np.int64)}).cast(pl.UInt64)
    got = with_path(req, prof)["response_ns"].to_numpy() / 1e3
    assert np.median(got) == pytest.approx(95, rel=0.03)
    assert np.percentile(got, 10) == pytest.approx(np.interp(0.10, [0, 0.01, 0.5, 0.99, 1], [80, 80, 95, 110, 110]),
                                                    rel=0.05)


def test_writes_at_rest_get_their_own_path() -> None:
    """A profile that measured writes at rest (they also wake the gateway's I/O thread)
    gives writes that arrive with nothing in flight the writes' path, reads the reads';
    a profile without the writes' measurement gives writes the reads' path."""
    from storqos.model.device_profile import DepthPoint, DeviceProfile, ServicePoint
    from storqos.model.live_path import with_path

    def flat(op: str, us: float) -> ServicePoint:
        return ServicePoint(op=op, pattern="random", size=4096, iops=1e6 / us, mean_us=us, min_us=us,
                            percentiles_us=[(50.0, us), (99.0, us)])

    # k = 1 at 10k IOPS: 100 µs per read, the reads' table's mean is 100 µs: scale 1;
    # writes back to back 150 µs. At rest: reads 170 µs (path 70), writes 450 (path 300).
    prof = DeviceProfile(version=1, storqos_version="t", target="t", engine="replay", direct=False, created="t",
                         time_per_point_s=1, capacity_iops=10_000, parallelism=1, op_time_us=100,
                         bandwidth_bytes_per_s=1e9, service=[flat("read", 100), flat("write", 150)],
                         queue_depth=[DepthPoint(qd=1, iops=10_000, mean_us=100, p50_us=100, p99_us=100)],
                         at_rest=flat("read", 170), at_rest_write=flat("write", 450))
    assert dict(prof.path_at_rest_us())[0.5] == pytest.approx(70)
    assert dict(prof.path_at_rest_us("write"))[0.5] == pytest.approx(300)
    req = pl.DataFrame({"arrival_ns": [0, 1_000_000, 2_000_000], "finish_ns": [100_000, 1_150_000, 2_100_000],
                        "response_ns": [100_000, 150_000, 100_000], "is_read": [True, False, True]}).with_columns(
        pl.col("arrival_ns", "finish_ns", "response_ns").cast(pl.UInt64))
    assert with_path(req, prof)["response_ns"].to_list() == [170_000, 450_000, 170_000]
    reads_only = prof.model_copy(update={"at_rest_write": None})
    assert with_path(req, reads_only)["response_ns"].to_list() == [170_000, 220_000, 170_000]


def test_the_path_at_rest_grows_with_the_time_the_target_was_idle() -> None:
    """With requests at rest measured at 10 and 50 ms too, a lone request pays the path
    of the time the target was idle before it (arrival less the last completion before
    it), between two measured spacings on a log scale, held at the ends; the first
    request of a trace takes the longest. A profile of reads only gives writes the
    reads' spacings. A shorter spacing measured gives the requests that follow the last
    reply closely their own, smaller path; one that more than a tenth of its requests
    outlasted (they queued) gives none."""
    import math

    from storqos.model.device_profile import DepthPoint, DeviceProfile, RestPoint, ServicePoint
    from storqos.model.live_path import with_path

    def flat(us: float, spacing: float | None = None) -> ServicePoint:
        kw = {"op": "read", "pattern": "random", "size": 4096, "iops": 1e6 / us, "mean_us": us, "min_us": us,
              "percentiles_us": [(50.0, us), (99.0, us)]}
        return ServicePoint(**kw) if spacing is None else RestPoint(**kw, spacing_us=spacing)

    # Back to back 100 µs (scale 1); at rest: 170 µs every 2 ms (path 70, idle 1,830 µs),
    # 270 every 10 ms (path 170, idle 9,730), 370 every 50 ms (path 270, idle 49,630).
    prof = DeviceProfile(version=1, storqos_version="t", target="t", engine="replay", direct=False, created="t",
                         time_per_point_s=1, capacity_iops=10_000, parallelism=1, op_time_us=100,
                         bandwidth_bytes_per_s=1e9, service=[flat(100)],
                         queue_depth=[DepthPoint(qd=1, iops=10_000, mean_us=100, p50_us=100, p99_us=100)],
                         at_rest=flat(170), at_rest_idle=[flat(370, 50_000), flat(270, 10_000)])
    assert [idle for idle, _ in prof.rest_levels()] == pytest.approx([1830, 9730, 49630])
    assert [x for level in prof.rest_p50s_us("write") for x in level] == pytest.approx(
        [1830, 70, 9730, 170, 49630, 270])
    between_us = math.sqrt(9730 * 49630)  # halfway on a log scale
    idles_us = [1000, 9730, between_us, 1e6]
    arrival, finish, t = [0], [100_000], 100_000
    for idle in idles_us:
        t += round(idle * 1e3)
        arrival.append(t)
        t += 100_000
        finish.append(t)
    n = len(arrival)
    req = pl.DataFrame({"arrival_ns": arrival, "finish_ns": finish, "response_ns": [100_000] * n,
                        "is_read": [True, True, True, False, True]}).with_columns(
        pl.col("arrival_ns", "finish_ns", "response_ns").cast(pl.UInt64))
    got = [ns / 1e3 for ns in with_path(req, prof)["response_ns"].to_list()]
    # first (the longest), 1 ms (the 2 ms path), 9.73 ms, between, a write after 1 s.
    assert got == pytest.approx([370, 170, 270, 320, 370], abs=0.01)
    # Spacings at or under the 2 ms of the requests at rest are refused, before measuring.
    from storqos.base.errors import InputError
    from storqos.live.calibrate import calibrate

    for bad in ([2000], [10_000, 50], [20_000_000]):
        with pytest.raises(InputError, match="spacings must be 100 µs to 10 s, other than the 2 ms measured always, "):
            calibrate("nbd://127.0.0.1:1/x", idle_spacings_us=bad)
    # Without the other spacings, every request at rest pays the 2 ms path.
    old = prof.model_copy(update={"at_rest_idle": None})
    assert [ns / 1e3 for ns in with_path(req, old)["response_ns"].to_list()] == pytest.approx([170] * n)
    # Reads every 300 µs took 110 (path 10, idle 190 µs); every 150 µs, 160: they
    # queued, no level; every 250 µs, 120 at the mean but 260 at the p90: no level
    # either. A read 190 µs after the last reply pays 10, one 1 ms after it pays the
    # path between 190 µs (10) and 1,830 µs (70) on a log scale; those 50 and 150 µs
    # after it are held at the shortest level (10).
    skewed = RestPoint(op="read", pattern="random", size=4096, iops=8_000, mean_us=120, min_us=60,
                       percentiles_us=[(50.0, 90.0), (90.0, 260.0), (99.0, 400.0)], spacing_us=250)
    short = prof.model_copy(update={"at_rest_idle": [*(prof.at_rest_idle or []), flat(110, 300), flat(160, 150),
                                                     skewed]})
    assert [x for level in short.rest_p50s_us() for x in level] == pytest.approx(
        [190, 10, 1830, 70, 9730, 170, 49630, 270])
    at_1ms = 10 + 60 * math.log(1000 / 190) / math.log(1830 / 190)
    got = [ns / 1e3 for ns in with_path(req, short)["response_ns"].to_list()]
    assert got == pytest.approx([370, 100 + at_1ms, 270, 320, 370], abs=0.01)
    soon = req.with_columns(pl.Series("arrival_ns", [0, 150_000, 400_000, 650_000, 900_000], dtype=pl.UInt64),
                            pl.Series("finish_ns", [100_000, 250_000, 500_000, 750_000, 1_000_000], dtype=pl.UInt64))
    assert [ns / 1e3 for ns in with_path(soon, short)["response_ns"].to_list()] == pytest.approx(
        [370, 110, 110, 110, 110], abs=0.01)
    # A tail so heavy that the mean (300 µs) is past the spacing (250) while the p90
    # (240) is under it: no idle time, no level (its log was NaN and a prediction's
    # response time came out negative).
    heavy = RestPoint(op="read", pattern="random", size=4096, iops=3_000, mean_us=300, min_us=60,
                      percentiles_us=[(50.0, 90.0), (90.0, 240.0), (99.0, 9_000.0)], spacing_us=250)
    tailed = short.model_copy(update={"at_rest_idle": [*(short.at_rest_idle or []), heavy]})
    assert tailed.rest_levels() == short.rest_levels()
    assert with_path(req, tailed)["response_ns"].to_list() == with_path(req, short)["response_ns"].to_list()


@pytest.mark.untimed
def test_a_calibration_the_host_took_time_from_warns_and_the_profile_says_how_much(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host stole 30 s of CPU time during a measurement of a few seconds (a stand-in
    for the kernel's count): one warning line saying so, and the profile records it."""
    from storqos.live import calibrate as cal

    readings = iter([1_000.0, 31_000.0])
    monkeypatch.setattr(cal, "steal_ms", lambda: next(readings))
    img = _image(tmp_path / "a.img", 64 * MiB)
    with pytest.warns(Warning) as seen:
        p = cal.calibrate(str(img), sizes=[4096], depths=[1], seconds=0.2)
    msgs = [str(w.message) for w in seen]
    assert len(msgs) == 1 and msgs[0].startswith("the host took 30,000 ms of CPU time from this machine meanwhile ("), msgs
    assert msgs[0].endswith("calibrate again when it is quieter"), msgs
    assert p.steal_ms == 30_000.0 and p.measured_s is not None and p.measured_s > 0


def test_a_closed_loop_point_a_stall_emptied_is_measured_again_for_longer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A closed-loop point whose window a stall took (fewer than POINT_MIN_REQUESTS
    requests issued after the ramp) is measured again for twice as long, and its numbers
    are the new window's; a target that completes nothing in any window is still the
    one-line error. The replay is stood in for, so that the stall is certain."""
    import types

    import storqos.live.replay as replay_mod
    from storqos.base.errors import InputError
    from storqos.live import calibrate as cal

    calls: list[float] = []

    def fake(kept: int) -> Any:
        def replay(trace: pl.DataFrame, uris: dict[int, str], *, closed: int = 0, until_s: float = 0.0,
                   warmup: bool = False) -> Any:
            calls.append(until_s)
            k = kept if len(calls) > 1 else 1  # the first window: one request after the ramp
            # k requests of 200 µs each, issued after the 0.1 s ramp, plus one in the ramp.
            arrival = [0] + [100_000_000 + i * 200_000 for i in range(k)]
            resp = [300_000_000] + [200_000] * k
            df = pl.DataFrame({"arrival_ns": arrival, "response_ns": resp}).with_columns(
                finish_ns=pl.col("arrival_ns") + pl.col("response_ns")).cast(pl.Int64)
            return types.SimpleNamespace(errors={}, first_error=None, requests=df)
        return replay

    monkeypatch.setattr(replay_mod, "replay", fake(50))
    pt = cal.replay_point("nbd://x/e", 1 << 20, "write", "sequential", 4096, 1, 0.5, 0)
    assert calls == [0.5, 1.0]
    assert pt.mean_us == pytest.approx(200.0) and pt.iops == pytest.approx(50 / 0.01, rel=0.05)

    calls.clear()
    monkeypatch.setattr(replay_mod, "replay", fake(0))
    with pytest.raises(InputError, match="completed no sequential write of 4096 B in the time given"):
        cal.replay_point("nbd://x/e", 1 << 20, "write", "sequential", 4096, 1, 0.5, 0)
    assert calls == [0.5, 1.0, 2.0]


@pytest.mark.untimed
def test_trains_of_requests_come_spaced_within_a_train_and_periodic_between_trains() -> None:
    """The calibration's bursts and the trains benchmark's input: request j of train i is
    due at i x period + j x spacing, at a 4 KiB-aligned offset inside the export."""
    from storqos.live.calibrate import train_trace

    t = train_trace(4, 3, 1 << 20, spacing_us=80.0, period_us=10_000.0, is_read=False, seed=7)
    assert t["arrival_ns"].to_list() == [i * 10_000_000 + j * 80_000 for i in range(3) for j in range(4)]
    off = t["offset"].to_numpy()
    assert (off % 4096 == 0).all() and (off + 4096 <= 1 << 20).all()
    assert t["size"].to_list() == [4096] * 12 and not t["is_read"].any() and (t["tenant"] == 0).all()
    burst = train_trace(32, 2, 1 << 30)  # a burst: all of a train due at once
    assert burst["arrival_ns"].unique().sort().to_list() == [0, 10_000_000] and burst["is_read"].all()
    # Sequential: each request starts where the one before it ended, from one train to
    # the next too, wrapping at the export's end (256 slots of 4 KiB here).
    seq = train_trace(100, 3, 1 << 20, pattern="sequential", seed=7)["offset"].to_numpy().astype(np.int64)
    assert (seq == (seq[0] // 4096 + np.arange(300)) % 256 * 4096).all()
    assert len(set(train_trace(4, 1, 1 << 30, pattern="sequential", seed=s)["offset"][0] for s in range(5))) == 5
