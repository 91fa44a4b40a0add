"""Several gateways, one cluster on etcd (`storqos serve --cluster`): a tenant's limit and
reservation hold for its total over the gateways whatever the clients' spread; a gateway
that dies gives its shares to the others within 2 s; one that loses etcd keeps serving on
its last shares and says so; `storqos ctl set --cluster` changes every gateway at once;
conflicts at the start are one line, exit 2. A real etcd (Debian's etcd-server, which
`make test` installs) on loopback, real NBD clients (libnbd)."""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import assert_one_line_error, free_port, run_cli
from storqos.live.control_client import command
from storqos.live.etcd import LocalEtcd
from storqos.live.spread import DEFAULT_DEPTH
from test_serve import Server, _image

ETCD = shutil.which("etcd")
needs_etcd = pytest.mark.skipif(ETCD is None, reason="etcd not installed (make test installs Debian's etcd-server)")
MiB = 1 << 20


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[LocalEtcd]:
    e = LocalEtcd(tmp_path)
    yield e
    e.stop()


def _gateway(tmp_path: Path, uri: str, export: str, tenant: int = 0, *more: str,
             size: int = 16 * MiB) -> tuple[Server, int, Path]:
    """A gateway of cluster ``uri`` serving ``export`` (``size`` bytes, sparse) as
    ``tenant`` on an emulated 5k-IOPS device, with a control socket; it, its port, the
    socket."""
    img = _image(tmp_path / f"{export}.img", size)
    sock = tmp_path / f"{export}.sock"
    s = Server("--export", f"{export}={img}:{tenant}", "--policy", "mclock", "--listen", "127.0.0.1:0",
               "--iops", "5k", "--control", str(sock), "--cluster", uri, "--cluster-id", export, "--for", "120s", *more)
    _, port = s.ready()
    return s, port, sock


def _limit(sock: Path, tenant: int = 0) -> float | None:
    """The limit the gateway's mClock gives ``tenant`` now (its share)."""
    limits = command(sock, {"cmd": "stats"})["policy"].get("limits") or []
    return limits[tenant] if tenant < len(limits) else None


def _wait(cond, timeout_s: float) -> float:  # type: ignore[no-untyped-def]
    """Seconds until ``cond()`` holds (polled every 50 ms), failing after ``timeout_s``."""
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout_s, "not within the time"
        time.sleep(0.05)
    return time.monotonic() - t0


def _load(uris: list[str], seconds: float) -> list[int]:
    """Closed-loop 4 KiB reads, one client (connection, thread) per URI, for ``seconds``;
    the reads each completed."""
    import nbd

    done = [0] * len(uris)
    handles = []
    for u in uris:
        h = nbd.NBD()
        h.connect_uri(u)
        handles.append(h)

    def run(i: int) -> None:
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            handles[i].pread(4096, (n * 4096) % (8 * MiB))
            n += 1
        done[i] = n

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(uris))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for h in handles:
        h.shutdown()
    return done


@needs_etcd
def test_a_limit_holds_for_the_total_however_the_clients_spread(tmp_path: Path, etcd: LocalEtcd) -> None:
    """Limit 300 IOPS over two gateways, three clients on one and one on the other: the
    shares sum to 300, and the tenant's total is 300 within 5 % (each gateway alone
    would let it have 600). (Closed-loop clients ask what they are given, so how the
    300 divides depends on how it started: the benchmark's open-loop tenants show the
    shares following demand.)"""
    uri = etcd.cluster("limit")
    a, pa, sa = _gateway(tmp_path, uri, "a", 0, "--limits", "300")
    b, pb, sb = _gateway(tmp_path, uri, "b", 0, "--limits", "300")
    try:
        _load([f"nbd://127.0.0.1:{pa}/a"] * 3 + [f"nbd://127.0.0.1:{pb}/b"], 1.5)  # the shares settle
        t0 = time.monotonic()
        done = _load([f"nbd://127.0.0.1:{pa}/a"] * 3 + [f"nbd://127.0.0.1:{pb}/b"], 4.0)
        total = sum(done) / (time.monotonic() - t0)
        la, lb = _limit(sa), _limit(sb)
        assert la is not None and lb is not None
        assert la + lb == pytest.approx(300, rel=0.01), (la, lb)
        assert total == pytest.approx(300, rel=0.05), (done, total)
    finally:
        for s in (a, b):
            s.finish(signal.SIGTERM)


@needs_etcd
def test_clients_that_report_keep_the_whole_promise_at_every_gateway(tmp_path: Path, etcd: LocalEtcd) -> None:
    """A tenant whose client reports what it got elsewhere (dmClock, `storqos replay
    --spread`): each cluster gateway gives it its whole limit, not a share, and the
    reports keep its total at the limit (600 IOPS) while it is backlogged at both: at
    most 5 % over, nor much less (each gateway alone would allow 600, a share 300)."""
    import numpy as np
    import polars as pl

    uri = etcd.cluster("reports")
    # 256 MiB (sparse): 64 objects of 4 MiB, so the hash placement splits the requests
    # finely between the two gateways.
    a, pa, sa = _gateway(tmp_path, uri, "a", 0, "--limits", "600", size=256 * MiB)
    b, pb, sb = _gateway(tmp_path, uri, "b", 0, "--limits", "600", size=256 * MiB)
    try:
        rng = np.random.default_rng(5)
        n = 1200
        trace = tmp_path / "t.csv"
        pl.DataFrame({"arrival_ns": np.cumsum(rng.exponential(1e9 / 1800, n)).astype(np.int64),
                      "is_read": np.ones(n, bool), "offset": (rng.integers(0, 65536, n) * 4096).astype(np.uint64),
                      "size": np.full(n, 4096, np.uint32), "tenant": np.zeros(n, np.uint32)}).write_csv(trace)
        spread = ("replay", str(trace), f"nbd://127.0.0.1:{pa}/a", "--spread", f"nbd://127.0.0.1:{pb}/b", "--json")
        # A first half second of reports: the agents see them at their next window and give
        # the tenant its whole promise from then on (until then it has its shares).
        r = run_cli(*spread, "--max-requests", "300")
        assert r.code == 0, r.err
        _wait(lambda: (_limit(sa), _limit(sb)) == (600, 600), 3.0)
        log = tmp_path / "log.parquet"
        r = run_cli(*spread, "--out", str(log))
        assert r.code == 0, r.err
        out = json.loads(r.out)
        assert [g["dmclock"] for g in out["gateways"]] == [[0], [0]]
        # Over the whole replay, no more than the limit allows but for the requests sent
        # before any report came back: at most one window (`DEFAULT_DEPTH` in flight) per gateway.
        done = pl.read_parquet(log)
        span_s = int(done["finish_ns"].max()) / 1e9
        assert done.height - 600 * span_s <= 2 * DEFAULT_DEPTH, (done.height, span_s)
        # The rate while both gateways hold its requests: from a quarter second in (past
        # those first windows) to the first gateway's last answer (the other then drains
        # requests charged for its peer's service, as dmClock charges them).
        end = int(done.group_by("target").agg(pl.col("finish_ns").max())["finish_ns"].min())
        begin = 250_000_000
        served = done.filter(pl.col("finish_ns").is_between(begin, end, closed="right")).height
        iops = served / ((end - begin) / 1e9)
        assert 0.93 * 600 <= iops <= 1.05 * 600, (iops, out["gateways"])
        assert (_limit(sa), _limit(sb)) == (600, 600)
    finally:
        for s in (a, b):
            s.finish(signal.SIGTERM)


@needs_etcd
def test_a_gateway_that_dies_gives_its_shares_to_the_others_within_2_s(tmp_path: Path, etcd: LocalEtcd) -> None:
    uri = etcd.cluster("failover")
    a, _, sa = _gateway(tmp_path, uri, "a", 0, "--limits", "400", "--reservations", "100")
    b, _, _ = _gateway(tmp_path, uri, "b", 0, "--limits", "400", "--reservations", "100")
    try:
        _wait(lambda: _limit(sa) == pytest.approx(200, rel=0.01), 5)  # no demand yet: even halves
        b.p.send_signal(signal.SIGKILL)
        b.p.wait(10)
        took = _wait(lambda: (_limit(sa) or 0) >= 400 * 0.99, 5)
        assert took <= 2.0, took
        res = command(sa, {"cmd": "stats"})["policy"]["reservations"][0]
        assert res == pytest.approx(100, rel=0.01)
    finally:
        a.finish(signal.SIGTERM)


@needs_etcd
def test_a_gateway_that_loses_etcd_keeps_serving_on_its_last_shares(tmp_path: Path, etcd: LocalEtcd) -> None:
    uri = etcd.cluster("lost")
    metrics = f"127.0.0.1:{free_port()}"
    a, pa, sa = _gateway(tmp_path, uri, "a", 0, "--limits", "200", "--metrics", metrics)
    b, _, _ = _gateway(tmp_path, uri, "b", 0, "--limits", "200")
    try:
        _wait(lambda: _limit(sa) == pytest.approx(100, rel=0.01), 5)
        etcd.stop()
        a.said("lost etcd", timeout_s=5)
        t0 = time.monotonic()
        [n] = _load([f"nbd://127.0.0.1:{pa}/a"], 2.0)
        assert n / (time.monotonic() - t0) == pytest.approx(100, rel=0.1)  # served, at its last share
        assert _limit(sa) == pytest.approx(100, rel=0.01)
        body = urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5).read().decode()
        assert "storqos_cluster_etcd_up 0" in body
        failures = [ln for ln in body.splitlines() if ln.startswith("storqos_cluster_etcd_failures_total ")]
        assert failures and float(failures[0].split()[1]) >= 1, body
    finally:
        for s in (a, b):
            s.finish(signal.SIGTERM)


@needs_etcd
def test_ctl_set_cluster_changes_every_gateway_within_a_second(tmp_path: Path, etcd: LocalEtcd) -> None:
    uri = etcd.cluster("ctl")
    a, _, sa = _gateway(tmp_path, uri, "a", 0, "--limits", "300")
    b, _, sb = _gateway(tmp_path, uri, "b", 0, "--limits", "300")
    try:
        r = run_cli("ctl", "set", "0", "--limit", "1k", "--cluster", uri)
        assert r.code == 0 and "limit 1000 IOPS" in r.out, r.err
        took = _wait(lambda: (_limit(sa) or 0) + (_limit(sb) or 0) == pytest.approx(1000, rel=0.01), 3)
        assert took <= 1.0, took
        shown = json.loads(run_cli("ctl", "cluster", uri, "--json").out)
        assert set(shown["members"]) == {"a", "b"} and shown["tenants"]["0"]["limit"] == 1000
        r = run_cli("ctl", "set", "0", "--reservation", "2k", "--cluster", uri)
        assert_one_line_error(r, "reservation 2000 IOPS exceeds the limit 1000 IOPS")
    finally:
        for s in (a, b):
            s.finish(signal.SIGTERM)


@pytest.mark.untimed
@needs_etcd
def test_conflicts_at_the_start_are_one_line_exit_2(tmp_path: Path, etcd: LocalEtcd) -> None:
    uri = etcd.cluster("conflicts")
    a, _, _ = _gateway(tmp_path, uri, "a", 0, "--limits", "300")
    try:
        img = _image(tmp_path / "other.img", MiB)
        base = ["serve", "--policy", "mclock", "--listen", "127.0.0.1:0", "--cluster", uri, "--for", "5s"]
        # Another gateway serving an export of the same name.
        r = run_cli(*base, "--export", f"a={img}:0", "--limits", "300", "--cluster-id", "c")
        assert_one_line_error(r, "export 'a' is already served by gateway 'a' of cluster conflicts")
        # A tenant whose promises differ from the cluster's.
        r = run_cli(*base, "--export", f"c={img}:0", "--limits", "500", "--cluster-id", "c")
        assert_one_line_error(r, "tenant 0: the configuration promises", "limit 500 IOPS", "limit 300 IOPS")
        # The same gateway id twice.
        r = run_cli(*base, "--export", f"c={img}:0", "--cluster-id", "a")
        assert_one_line_error(r, "gateway id 'a' is already a live member")
        # Nothing was left claimed by the refused ones: c is free, and the failed joins
        # left no member behind.
        shown = json.loads(run_cli("ctl", "cluster", uri, "--json").out)
        assert set(shown["members"]) == {"a"}
    finally:
        a.finish(signal.SIGTERM)


@pytest.mark.untimed
def test_bad_cluster_settings_are_one_line_exit_2(tmp_path: Path) -> None:
    img = _image(tmp_path / "a.img", MiB)
    base = ["serve", "--export", f"a={img}:0", "--listen", "127.0.0.1:0", "--for", "5s"]
    port = free_port()  # nothing listens there
    assert_one_line_error(run_cli(*base, "--policy", "mclock", "--cluster", f"etcd://127.0.0.1:{port}/x"),
                          f"etcd at http://127.0.0.1:{port}", "unreachable")
    assert_one_line_error(run_cli(*base, "--policy", "mclock", "--cluster", "http://127.0.0.1:2379/x"),
                          "--cluster", "is not etcd://HOST:PORT/NAME")
    assert_one_line_error(run_cli(*base, "--policy", "mclock", "--cluster", "etcd://127.0.0.1:2379/a/b"),
                          "cluster name 'a/b'")
    assert_one_line_error(run_cli(*base, "--policy", "wf2q", "--cluster", "etcd://127.0.0.1:2379/x"),
                          "a cluster's gateways run mclock")
    assert_one_line_error(run_cli(*base, "--policy", "mclock", "--cluster-id", "g"), "--cluster-id", "give --cluster")
    assert_one_line_error(run_cli("ctl", "set", "web", "--limit", "1k"), "give the gateway's --socket, or the --cluster")
    assert_one_line_error(run_cli("ctl", "cluster", f"etcd://127.0.0.1:{port}/x"), "unreachable")


@pytest.mark.untimed
@needs_etcd
def test_the_config_files_cluster_and_a_flag_naming_another(tmp_path: Path, etcd: LocalEtcd) -> None:
    img = _image(tmp_path / "a.img", MiB)
    cfg = tmp_path / "gw.toml"
    cfg.write_text(f'listen = "127.0.0.1:0"\n[policy]\nkind = "mclock"\nlimits = [300]\n'
                   f'[cluster]\nurl = "{etcd.cluster("file")}"\nid = "gw-a"\n'
                   f'[[export]]\nname = "a"\npath = "{img}"\n')
    r = run_cli("serve", "--config", str(cfg), "--cluster", etcd.cluster("other"), "--for", "5s")
    assert_one_line_error(r, "--cluster", "names cluster 'other', the config file's [cluster] 'file'")
    s = Server("--config", str(cfg), "--for", "60s")
    try:
        s.ready()
        shown = json.loads(run_cli("ctl", "cluster", etcd.cluster("file"), "--json").out)
        assert list(shown["members"]) == ["gw-a"] and shown["tenants"]["0"]["limit"] == 300
    finally:
        s.finish(signal.SIGTERM)
    bad = tmp_path / "bad.toml"
    bad.write_text(cfg.read_text().replace(etcd.cluster("file"), "etcd://127.0.0.1/x"))
    assert_one_line_error(run_cli("serve", "--config", str(bad), "--check"), "[cluster]", "url",
                          "is not etcd://HOST:PORT/NAME")


@needs_etcd
def test_no_acknowledged_write_is_lost_when_etcd_or_the_gateway_is_killed(tmp_path: Path, etcd: LocalEtcd) -> None:
    from test_serve import _qemu_io

    s, port, _ = _gateway(tmp_path, etcd.cluster("writes"), "a", 0, "--limits", "1k")
    try:
        assert _qemu_io(port, "a", "write -P 0xc1 0 1M").returncode == 0
        etcd.stop()
        s.said("lost etcd", timeout_s=5)
        assert _qemu_io(port, "a", "write -P 0xc2 1M 1M").returncode == 0  # served without etcd
    finally:
        s.p.send_signal(signal.SIGKILL)
        s.p.wait(10)
    data = (tmp_path / "a.img").read_bytes()
    assert data[:MiB] == b"\xc1" * MiB and data[MiB:2 * MiB] == b"\xc2" * MiB
