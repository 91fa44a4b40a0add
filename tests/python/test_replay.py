"""`storqos replay`: a trace sent over NBD (libnbd) to a gateway on
loopback, at the trace's timing or closed loop; its log reads like the simulator's; bad
URIs, exports and traces are one line, exit 2, with no partial output."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import assert_one_line_error, run_cli, until_calm
from storqos.live.cpu_latency import cpu_latency_us
from storqos.live.host_steal import STAT
from storqos.live.replay import MAX_REQUEST, place, replay, split_large
from storqos.model.sim import simulate
from test_cpu_latency import may_hold
from test_serve import Server, _image

MiB = 1 << 20


def _trace(n: int, rate: float, tenants: int = 1, size: int = 4096, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1e9 / rate, n)).astype(np.int64)
    return pl.DataFrame({
        "arrival_ns": arrival, "is_read": rng.random(n) < 0.7,
        "offset": (rng.integers(0, 4096, n) * 4096).astype(np.uint64), "size": np.full(n, size, np.uint32),
        "tenant": (np.arange(n) % tenants).astype(np.uint32)})


@pytest.fixture
def gateway(tmp_path: Path):
    """A two-export gateway (16 MiB each) without emulation; yields its port."""
    a, b = _image(tmp_path / "a.img", 16 * MiB), _image(tmp_path / "b.img", 16 * MiB)
    s = Server("--export", f"a={a}:0", "--export", f"b={b}:1", "--listen", "127.0.0.1:0", "--for", "300s")
    _, port = s.ready()
    yield port
    code, _, err = s.finish(signal.SIGTERM)
    assert code == 0, err


def test_the_log_has_the_simulators_columns_and_the_schedule_is_kept(gateway: int) -> None:
    df = _trace(3000, 3000.0, tenants=2)
    res = until_calm(
        lambda: replay(df, {0: f"nbd://127.0.0.1:{gateway}/a", 1: f"nbd://127.0.0.1:{gateway}/b"}),
        lambda r: r.schedule()["late_fraction"] < 0.02)
    sim = simulate(df, "fcfs", "constant", capacity="10k", keep_requests=True)
    assert sim.requests is not None
    assert res.requests.schema == sim.requests.schema  # one analysis reads both
    assert res.requests.height == 3000 and not res.errors
    assert res.requests.group_by("tenant").len().sort("tenant")["len"].to_list() == [1500, 1500]
    # Open loop at the trace's times: the replay lasts the trace's span, and requests go
    # out on time (generous bounds: the gateway and the replay share 2 cores; on a CI
    # machine that stayed busy through four attempts, 6.5 % were over 1 ms late with the
    # median 9 µs, so the late share is bounded at 10 %: a loop that drifted or slept
    # through its deadlines would have most requests late).
    assert res.span_s == pytest.approx(res.scheduled_span_s, abs=0.05)
    sch = res.schedule()
    assert sch["issue_error_p50_us"] < 200 and sch["late_fraction"] < 0.1, sch
    if STAT.exists():  # Linux counts the time the host took from the machine meanwhile
        assert sch["steal_ms"] >= 0
    # Issue times follow the trace's inter-arrival times.
    gaps = np.diff(res.requests.sort("id")["arrival_ns"].to_numpy().astype(np.int64))
    want = np.diff(df["arrival_ns"].to_numpy())
    assert np.median(np.abs(gaps - want)) < 100_000


def test_the_loop_yields_its_cpu_while_it_spins(gateway: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Waiting out the last SPIN_NS before an issue, the loop hands its CPU to whatever
    else is runnable there at every turn (the storage's threads, on a small machine);
    waiting longer, it sleeps in select and does not spin. Requests 100 µs apart keep it
    spinning from one to the next; 50 ms apart, it spins only before each one. It runs
    with the live tests, alone: the turns it counts are the CPU the loop got (beside the
    other tests on 2 cores, 309 turns for 200 requests)."""
    import storqos.live.replay as rp

    calls: list[int] = []
    monkeypatch.setattr(rp, "yield_cpu", lambda: calls.append(1))
    n = 200
    close = pl.DataFrame({"arrival_ns": np.arange(n, dtype=np.int64) * 100_000, "is_read": np.ones(n, dtype=bool),
                          "offset": (np.arange(n) * 4096).astype(np.uint64), "size": np.full(n, 4096, np.uint32),
                          "tenant": np.zeros(n, np.uint32)})
    res = replay(close, {0: f"nbd://127.0.0.1:{gateway}/a"})
    assert res.requests.height == n and not res.errors
    # At least one turn per request (100 µs < SPIN_NS: it spins all the way), and many:
    # a turn (select with no wait, then the yield) takes microseconds, not 100.
    assert len(calls) >= 2 * n, len(calls)
    spaced = close.head(5).with_columns(pl.col("arrival_ns") * 500)  # 50 ms apart
    calls.clear()
    replay(spaced, {0: f"nbd://127.0.0.1:{gateway}/a"})
    # It spins for SPIN_NS (300 µs) before each of the five, not through the 50 ms
    # between: a turn makes two system calls (at least 0.5 µs), so at most 2 turns a µs
    # of spin, where 50 ms of spinning would make tens of thousands.
    assert 5 <= len(calls) < 5 * 2 * rp.SPIN_NS // 1_000, len(calls)


@pytest.mark.untimed
@may_hold
def test_the_cpus_are_kept_awake_while_the_requests_go(gateway: int) -> None:
    """With --awake-cpus yes the kernel's CPU latency request reads 0 µs at every
    progress report of the run, and the result says it was held; with no, it says not."""
    df = _trace(3000, 20_000.0)
    seen: list[int | None] = []
    res = replay(df, {0: f"nbd://127.0.0.1:{gateway}/a"}, awake="yes",
                 progress=lambda _done, _n: seen.append(cpu_latency_us()))
    assert res.cpus_awake and len(seen) >= 2 and set(seen) == {0}, seen
    assert not replay(df.head(100), {0: f"nbd://127.0.0.1:{gateway}/a"}, awake="no").cpus_awake


def test_closed_loop_keeps_the_emulated_device_busy(tmp_path: Path) -> None:
    """Closed loop with 4 in flight against a 1k-IOPS emulated device: it completes at
    the device's rate, whatever the trace's times say (they are hours apart here)."""
    a = _image(tmp_path / "a.img", 16 * MiB)
    s = Server("--export", f"a={a}", "--listen", "127.0.0.1:0", "--iops", "1k", "--for", "300s")
    _, port = s.ready()
    try:
        df = _trace(1500, 0.001)
        res = until_calm(lambda: replay(df, {0: f"nbd://127.0.0.1:{port}/a"}, closed=4),
                                 lambda r: 1000 * 0.93 < 1500 / r.span_s)
    finally:
        s.finish(signal.SIGTERM)
    assert res.mode == "closed:4" and res.requests.height == 1500
    assert 1000 * 0.93 < 1500 / res.span_s < 1000 * 1.03, res.span_s


def test_cli_writes_parquet_and_names_tenants(gateway: int, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    _trace(400, 2000.0, tenants=2).write_csv(trace)
    out = tmp_path / "live.parquet"
    r = run_cli("replay", str(trace), f"nbd://127.0.0.1:{gateway}/a", "--tenant-map", "1=b", "--out", str(out),
                columns=80)
    assert r.code == 0, r.err
    assert "issue-time error p50" in r.out and "µs" in r.out
    assert all(len(line) <= 80 for line in r.out.splitlines()), r.out
    log = pl.read_parquet(out)
    assert log.height == 400 and sorted(log["tenant"].unique().to_list()) == [0, 1]
    assert (log["response_ns"] > 0).all() and (log["finish_ns"] >= log["arrival_ns"]).all()


@pytest.mark.untimed
def test_bad_uris_exports_and_traces_are_one_line(gateway: int, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    _trace(50, 1000.0).write_csv(trace)
    out = tmp_path / "x.parquet"
    assert_one_line_error(run_cli("replay", str(trace), "nbd://127.0.0.1:1/a", "--out", str(out)),
                          "cannot open nbd://127.0.0.1:1/a", "refused")
    assert_one_line_error(run_cli("replay", str(trace), f"nbd://127.0.0.1:{gateway}/nope", "--out", str(out)),
                          "no export named 'nope'")
    assert_one_line_error(run_cli("replay", str(trace), "http://x/a"), "not an NBD URI")
    # urllib's own ValueErrors (an unclosed IPv6 bracket, a port out of range) were
    # internal errors with exit 1
    assert_one_line_error(run_cli("replay", str(trace), "nbd://[::1:10809/a"), "URI: malformed URI",
                          "Invalid IPv6 URL")
    assert_one_line_error(run_cli("replay", str(trace), "nbd://127.0.0.1:99999/a"), "URI: malformed URI",
                          "Port out of range")
    assert_one_line_error(run_cli("replay", str(trace), f"nbd://127.0.0.1:{gateway}/a", "-t", "0=nbd://h:port/b"),
                          "--tenant-map: malformed URI")
    big = tmp_path / "big.csv"
    _trace(50, 1000.0).with_columns(pl.col("offset") + 64 * MiB).write_csv(big)
    assert_one_line_error(run_cli("replay", str(big), f"nbd://127.0.0.1:{gateway}/a", "--offsets", "error",
                                  "--out", str(out)), "beyond the export", "--offsets wrap")
    huge = tmp_path / "huge.csv"
    _trace(5, 1000.0, size=32 * MiB).write_csv(huge)
    assert_one_line_error(run_cli("replay", str(huge), f"nbd://127.0.0.1:{gateway}/a", "--out", str(out)),
                          "larger than the export")
    assert_one_line_error(run_cli("replay", str(trace), f"nbd://127.0.0.1:{gateway}/a", "--tenant-map", "7=b"),
                          "no tenant")
    assert not out.exists() and not list(tmp_path.glob(".x.parquet*"))  # nothing partial left


@pytest.mark.untimed
def test_storage_that_stops_answering_ends_the_replay_in_one_line(tmp_path: Path) -> None:
    """A server that takes the connection and says nothing, or that answers the
    handshake and then no request, kept the replay waiting for ever; `--timeout` bounds
    both, with one line, exit 2 and no output."""
    trace = tmp_path / "t.csv"
    _trace(50, 1000.0).write_csv(trace)
    out = tmp_path / "x.parquet"
    with socket.socket() as mute:  # the kernel completes connections to it: nothing answers
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        port = mute.getsockname()[1]
        t0 = time.monotonic()
        assert_one_line_error(run_cli("replay", str(trace), f"nbd://127.0.0.1:{port}/a", "--timeout", "1s",
                                      "--out", str(out)),
                              f"cannot open nbd://127.0.0.1:{port}/a: no NBD handshake within 1 s")
        assert time.monotonic() - t0 < 30
    img = _image(tmp_path / "a.img", 16 * MiB)
    slow = Server("--export", f"a={img}", "--iops", "0.01", "--listen", "127.0.0.1:0", "--for", "120s")
    _, port = slow.ready()
    try:  # one request per 100 s
        t0 = time.monotonic()
        assert_one_line_error(run_cli("replay", str(trace), f"nbd://127.0.0.1:{port}/a", "--timeout", "2s",
                                      "--out", str(out)),
                              "no reply for 2 s with", f"request(s) in flight to nbd://127.0.0.1:{port}/a",
                              "--timeout")
        assert time.monotonic() - t0 < 30
    finally:
        code, _, err = slow.finish(signal.SIGTERM)
    assert code == 0, err
    assert not out.exists() and not list(tmp_path.glob(".x.parquet*"))
    assert_one_line_error(run_cli("replay", str(trace), f"nbd://127.0.0.1:{port}/a", "--timeout", "0s"),
                          "--timeout: must be > 0")


@pytest.mark.untimed
def test_a_tenant_goes_to_one_export() -> None:
    """``--tenant-map 0=b --tenant-map 0=a`` once sent tenant 0 to the last one given
    without a word; a tenant mapped twice, by id or by name, is refused."""
    from storqos.base.errors import InputError
    from storqos.cli.commands.replay import tenant_uris

    uri = "nbd://127.0.0.1:10809/a"
    got = tenant_uris(uri, ["1=b", "web=nbds://h:1/c"], [0, 1], {0: "web", 1: "batch"})
    assert got == {0: "nbds://h:1/c", 1: "nbd://127.0.0.1:10809/b"}
    for mapping in (["0=b", "0=a"], ["0=b", "web=c"]):
        with pytest.raises(InputError, match=r"--tenant-map: '[^']+': tenant 0 is mapped already \('0=b'\)"):
            tenant_uris(uri, mapping, [0, 1], {0: "web", 1: "batch"})


@pytest.mark.untimed
def test_a_closed_loop_takes_no_speed() -> None:
    """``--closed 4 --speed 2`` ran the closed loop, --speed ignored: refused before any
    connection is made."""
    import storqos

    assert_one_line_error(run_cli("replay", str(storqos.bundled_trace()), "nbd://127.0.0.1:1/a", "--closed", "4",
                                  "--speed", "2"), "--speed: a closed loop ignores the trace's times")


def test_offsets_wrap_into_the_export_and_large_requests_split() -> None:
    off = np.array([0, 10 * MiB, 17 * MiB, 31 * MiB + 512], dtype=np.uint64)
    size = np.array([4096, 4096, 4096, 2 * MiB], dtype=np.uint64)
    placed, moved = place(off, size, 16 * MiB, wrap=True, where="t")
    assert moved == 2
    assert placed.tolist()[:3] == [0, 10 * MiB, MiB]
    assert placed[3] + size[3] <= 16 * MiB and placed[3] % 512 == 0
    df = pl.DataFrame({"arrival_ns": [0, 5], "is_read": [True, False], "offset": [0, MiB],
                       "size": [80 * MiB, 4096], "tenant": [0, 0]},
                      schema={"arrival_ns": pl.Int64, "is_read": pl.Boolean, "offset": pl.UInt64,
                              "size": pl.UInt32, "tenant": pl.UInt32})
    out, added = split_large(df)
    assert added == 2 and out.height == 4
    first = out.filter(pl.col("arrival_ns") == 0)
    assert first["size"].to_list() == [MAX_REQUEST, MAX_REQUEST, 16 * MiB]
    assert first["offset"].to_list() == [0, MAX_REQUEST, 2 * MAX_REQUEST]


def test_a_replay_that_falls_behind_says_so(tmp_path: Path) -> None:
    """1k IOPS offered, one request in flight at a time, a 500-IOPS device: the replay
    cannot keep to the trace and says so on a warning line (and still logs every request)."""
    a = _image(tmp_path / "a.img", 16 * MiB)
    s = Server("--export", f"a={a}", "--listen", "127.0.0.1:0", "--iops", "500", "--for", "60s")
    _, port = s.ready()
    trace = tmp_path / "t.csv"
    _trace(300, 1000.0).write_csv(trace)
    try:
        r = run_cli("replay", str(trace), f"nbd://127.0.0.1:{port}/a", "--max-outstanding", "1", "--json")
    finally:
        s.finish(signal.SIGTERM)
    assert r.code == 0, r.err
    warn = [ln for ln in r.err.splitlines() if ln.startswith("warning:")]
    assert len(warn) == 1 and "fell behind the trace" in warn[0] and "lower --speed" in warn[0], r.err
    summary = json.loads(r.out)
    assert summary["schedule"]["late_fraction"] > 0.5
    assert sum(t["completed"] for t in summary["tenants"]) == 300
