"""A sweep on an existing Dask cluster (`storqos run EXP.toml --dask tcp://HOST:PORT`).

The test starts a real cluster the way a user would: `dask scheduler` and two `dask
worker` processes (one thread each), separate subprocesses listening on 127.0.0.1 only,
their files under tmp_path. Every wait is bounded, and the processes (with the worker
processes their nannies spawn: each is started in its own process group) are stopped
when the test ends, passed or failed. The sweep's tables must equal a serial run's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import polars as pl
import pytest
from dask import config as dask_config
from storqos.experiments.sweep import LOCAL_CLUSTER_CONFIG, map_runs
from test_experiment import SMALL

#: test_experiment's small grid (the bundled WebSearch excerpt, an on/off generator and
#: a closed-loop client whose think times use the seed) with two seeds: 2 policies × 2
#: capacities × 2 seeds = 8 runs of ~0.1 s.
EXPERIMENT = SMALL.replace('name = "small"', 'name = "dask-sweep"').replace("seed = 3", "seed = 5") + "seed = [5, 6]\n"

#: Upper bounds on every wait (seconds).
START_TIMEOUT = 60.0
RUN_TIMEOUT = 180.0
STOP_TIMEOUT = 15.0


def _start(args: list[str], tmp_path: Path, name: str) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    log = (tmp_path / f"{name}.log").open("wb")
    p = subprocess.Popen([sys.executable, "-m", *args], cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    return p, log


def _stop(p: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's own group (the process and what it spawned), SIGKILL
    after STOP_TIMEOUT."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if p.poll() is not None:
            break
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        try:
            p.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            continue
    # The group may outlive its leader (a nanny's worker): make sure nothing is left.
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if p.poll() is None:
        p.wait(STOP_TIMEOUT)


#: Without it, `--no-dashboard` still leaves each process an HTTP server (health and
#: metrics) on every interface: the scheduler's on 0.0.0.0:8787, each worker's on
#: 0.0.0.0 at a random port.
LOOPBACK_HTTP = ["--dashboard-address", "127.0.0.1:0"]


def _listening(procs: list[subprocess.Popen[bytes]]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket listening in these processes and their
    children (the workers the nannies spawned)."""
    import psutil

    found = []
    for p in procs:
        root = psutil.Process(p.pid)
        for proc in [root, *root.children(recursive=True)]:
            found += [(c.laddr.ip, c.laddr.port) for c in proc.net_connections(kind="tcp")
                      if c.status == psutil.CONN_LISTEN]
    return found


def _logs(tmp_path: Path) -> str:
    return "\n".join(f"--- {f.name}\n{f.read_text(errors='replace')[-3000:]}" for f in sorted(tmp_path.glob("*.log")))


@pytest.fixture
def dask_scheduler(tmp_path: Path) -> Iterator[str]:
    """The address (tcp://127.0.0.1:PORT) of a scheduler with two single-threaded workers."""
    procs: list[tuple[subprocess.Popen[bytes], IO[bytes]]] = []
    try:
        info = tmp_path / "scheduler.json"
        procs.append(_start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                             *LOOPBACK_HTTP, "--scheduler-file", str(info), "--idle-timeout", "600"], tmp_path, "scheduler"))
        deadline = time.monotonic() + START_TIMEOUT
        address = None
        while address is None:
            assert procs[0][0].poll() is None, f"dask scheduler exited\n{_logs(tmp_path)}"
            assert time.monotonic() < deadline, f"dask scheduler not up after {START_TIMEOUT:.0f} s\n{_logs(tmp_path)}"
            if info.exists():
                try:
                    address = json.loads(info.read_text())["address"]
                except (ValueError, KeyError):
                    pass  # being written
            time.sleep(0.1)
        assert address.startswith("tcp://127.0.0.1:"), address
        for i in range(2):
            procs.append(_start(["distributed.cli.dask_worker", address, "--host", "127.0.0.1", "--nthreads", "1",
                                 "--nworkers", "1", "--no-dashboard", *LOOPBACK_HTTP, "--name", f"w{i}", "--death-timeout", "60",
                                 "--local-directory", str(tmp_path / f"worker{i}")], tmp_path, f"worker{i}"))
        from dask.distributed import Client

        with Client(address, timeout=f"{START_TIMEOUT:.0f}s") as client:
            try:
                client.wait_for_workers(2, timeout=max(1.0, deadline - time.monotonic()))
            except TimeoutError:
                pytest.fail(f"2 dask workers not up after {START_TIMEOUT:.0f} s\n{_logs(tmp_path)}")
            assert len(client.scheduler_info()["workers"]) == 2
        listening = _listening([p for p, _log in procs])
        assert listening and all(ip in ("127.0.0.1", "::1") for ip, _port in listening), listening
        yield address
    finally:
        for p, log in reversed(procs):
            _stop(p)
            log.close()


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "storqos.cli", "run", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "NO_COLOR": "1"}, timeout=RUN_TIMEOUT)


def test_sweep_on_an_existing_dask_scheduler_equals_a_serial_run(tmp_path: Path, dask_scheduler: str) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT)
    serial = _run(str(exp), "--workers", "1", "--out", str(tmp_path / "serial"), "--no-report", "--json", cwd=tmp_path)
    assert serial.returncode == 0, serial.stderr
    dask = _run(str(exp), "--dask", dask_scheduler, "--out", str(tmp_path / "dask"), "--no-report", "--json", cwd=tmp_path)
    assert dask.returncode == 0, f"{dask.stderr}\n{_logs(tmp_path)}"
    s, d = json.loads(serial.stdout), json.loads(dask.stdout)
    assert d["backend"] == dask_scheduler and s["backend"] == "local"
    assert len(d["runs"]) == 8

    def same(summary: dict) -> list[dict]:  # everything but the wall times
        return [{k: v for k, v in run.items() if k != "wall_s"} for run in summary["runs"]]

    assert same(d) == same(s)
    for table in ("tenants", "windows", "cdf"):
        a = pl.read_parquet(tmp_path / "serial" / f"{table}.parquet")
        b = pl.read_parquet(tmp_path / "dask" / f"{table}.parquet")
        assert a.height > 0 and a.equals(b), table
    # The workers of a cluster given by address keep their own settings (Dask's defaults).
    assert map_runs(dask_config.get, SETTINGS, backend=dask_scheduler) == DASK_DEFAULTS


#: Settings storqos changes on the local clusters it starts (storqos.experiments.sweep.LOCAL_CLUSTER_CONFIG).
SETTINGS = list(LOCAL_CLUSTER_CONFIG)
#: Dask's own values of them (what this process and a cluster given by address keep).
DASK_DEFAULTS = [True, "20ms", "100ms", "500ms", True, True, "spawn"]


def _scheduler_housekeeping(_item: object, _shared: object) -> dict[str, bool]:
    """Run in a worker: whether its scheduler steals work and runs the active memory
    manager."""
    from distributed import get_client

    def on_scheduler(dask_scheduler: Any) -> dict[str, bool]:
        amm = dask_scheduler.extensions.get("amm")
        return {"stealing": "stealing" in dask_scheduler.extensions, "amm": bool(amm and amm.running)}

    return get_client().run_on_scheduler(on_scheduler)


def _parent_pid(_item: object, _shared: object) -> int:
    """Run in a worker: the process that started it."""
    return os.getppid()


def test_a_local_cluster_keeps_dasks_housekeeping_off_the_cpus() -> None:
    """Each run, in a worker of a ``local:N`` cluster, sees the settings that keep Dask's
    housekeeping off the CPUs (measured: runs 4-14 % faster two side by side; an idle
    cluster 1.9-2.0 % of a core against 4.7-4.9 %), its scheduler neither steals work
    nor drops the replicas of the inputs broadcast to every worker, its workers are
    forked from a fork server (not spawned by this process, whose nannies would be
    their parent), and this process keeps its own settings."""
    assert map_runs(dask_config.get, SETTINGS, backend="local:1") == [False, "500ms", "1s", "5s", False, False,
                                                                      "forkserver"]
    assert map_runs(_scheduler_housekeeping, [0], backend="local:1") == [{"stealing": False, "amm": False}]
    (parent,) = map_runs(_parent_pid, [0], backend="local:1")
    assert parent != os.getpid() and "forkserver" in Path(f"/proc/{parent}/cmdline").read_text()
    assert [dask_config.get(k) for k in SETTINGS] == DASK_DEFAULTS


def test_unreachable_dask_scheduler_is_one_line_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT)
    r = _run(str(exp), "--dask", f"tcp://127.0.0.1:{port}", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0] and "refused" in lines[0], r.stderr
    for bad, why in ((f"tcp://127.0.0.1:{port}0000", "Port out of range"), ("tcp://[::1:8786", "Invalid IPv6")):
        r = _run(str(exp), "--dask", bad, "--out", str(tmp_path / "o"), cwd=tmp_path)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1, (r.returncode, r.stderr)
        assert lines[0].startswith("error: --dask: malformed URI") and why in lines[0], r.stderr


def test_a_scheduler_address_where_nothing_answers_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """distributed's Client waited for ever (timeout or not) on an address that takes
    connections and says nothing; a Dask scheduler greets a connection at once."""
    import socket

    from storqos.base.errors import InputError
    from storqos.experiments import sweep

    monkeypatch.setattr(sweep, "SCHEDULER_GREETING_S", 0.5)
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)
        address = f"tcp://127.0.0.1:{mute.getsockname()[1]}"
        t0 = time.monotonic()
        with pytest.raises(InputError, match=rf"^--dask: {address} took the connection but said nothing within "
                                             r"0.5 s: not a Dask scheduler"):
            sweep._probe_scheduler(address)
        assert time.monotonic() - t0 < 5


def test_a_local_cluster_says_nothing_when_the_dashboard_port_is_taken() -> None:
    """With 127.0.0.1:8787 taken (here by a listening socket; by another Dask cluster on
    a user's machine), a ``local:N`` sweep's scheduler puts its HTTP server on another
    port without printing Dask's four-line warning about it; other warnings still pass."""
    import socket
    import warnings

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", 8787))
            s.listen()
        except OSError:
            pass  # taken already: the same case
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert map_runs(_warn_and_add, [1, 2], backend="local:1") == [2, 3]
    messages = [str(w.message) for w in caught]
    assert not any("already in use" in m for m in messages), messages
    assert messages.count("a run's own warning") == 2, messages


def _warn_and_add(item: int, _shared: object) -> int:
    import warnings

    warnings.warn("a run's own warning", UserWarning, stacklevel=1)
    return item + 1
