"""``storqos serve``, the live NBD gateway, as a user meets it: real NBD clients
(qemu-io, libnbd's nbdcopy and nbdinfo, fio's nbd engine) write and read through it, Ctrl-C / SIGTERM / --for end it with a
per-tenant table, and bad input ends in one line with exit status 2."""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, assert_one_line_error, run_cli

# `make test` installs qemu-utils (Makefile `system-deps`): the real NBD client.
QEMU_IO = shutil.which("qemu-io")
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


class Server:
    """``storqos serve ARGS`` in a subprocess, its stdout read line by line."""

    def __init__(self, *args: str, columns: int = 200, preexec_fn: Callable[[], None] | None = None) -> None:
        self.p = subprocess.Popen(
            [sys.executable, "-m", "storqos.cli", "serve", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
            env={**ENV, "COLUMNS": str(columns)}, preexec_fn=preexec_fn,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        # Standard error is read as it comes (so a test can wait for a line the gateway
        # says, and a full pipe never blocks the gateway), kept whole for `finish`.
        self.err_lines: list[str] = []
        self._err_said = threading.Condition()
        self._err_pump = threading.Thread(target=self._pump_stderr, daemon=True)
        self._err_pump.start()

    def _pump(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            with self._err_said:
                self.err_lines.append(line)
                self._err_said.notify_all()

    def said(self, needle: str, count: int = 1, timeout_s: float = 20.0) -> None:
        """Wait until ``count`` lines of standard error contain ``needle`` (at most
        ``timeout_s``; the gateway exiting first fails too)."""
        deadline = time.monotonic() + timeout_s
        with self._err_said:
            while sum(needle in line for line in self.err_lines) < count:
                left = deadline - time.monotonic()
                assert left > 0 and self.p.poll() is None, f"not said: {needle!r}; stderr: {''.join(self.err_lines)}"
                self._err_said.wait(min(left, 0.5))

    def _stderr(self) -> str:
        """Standard error once the gateway has exited."""
        self._err_pump.join(5)
        with self._err_said:
            return "".join(self.err_lines)

    def ready(self) -> tuple[str, int]:
        """The ready line and the port it names."""
        line = self.lines.get(timeout=30)
        if line is None:
            raise AssertionError(f"exited before ready: {self.p.wait()} {self._stderr()}")
        m = re.search(r"on nbds?://127\.0\.0\.1:(\d+) ", line)
        assert m, line
        return line, int(m.group(1))

    def finish(self, sig: int | None = None) -> tuple[int, str, str]:
        if sig is not None:
            self.p.send_signal(sig)
        code = self.p.wait(timeout=20)
        rest = []
        while (line := self.lines.get(timeout=5)) is not None:
            rest.append(line)
        return code, "".join(rest), self._stderr()


def _image(path: Path, size: int = 1 << 20) -> Path:
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def _qemu_io(port: int, name: str, *cmds: str) -> subprocess.CompletedProcess[str]:
    assert QEMU_IO, "qemu-io (Debian qemu-utils) is required: `make test` installs it"
    args = [QEMU_IO, "-f", "raw", f"nbd://127.0.0.1:{port}/{name}"]
    for c in cmds:
        args += ["-c", c]
    return subprocess.run(args, capture_output=True, text=True, timeout=30)


@pytest.mark.untimed
def test_qemu_io_writes_and_reads_through_the_gateway_then_ctrl_c(tmp_path: Path) -> None:
    a, b = _image(tmp_path / "a.img"), _image(tmp_path / "b.img")
    s = Server("--export", f"a={a}:0", "--export", f"b={b}:1", "--policy", "wf2q", "--weights", "2,1",
               "--listen", "127.0.0.1:0", "--iops", "5k", "--depth", "4", "--for", "60s")
    try:
        line, port = s.ready()
        assert line.startswith("serving 2 exports on nbd://127.0.0.1:") and "policy wf2q+" in line
        assert "emulated 5" in line and "depth 4" in line
        r = _qemu_io(port, "a", "write -P 0xab 0 64k", "read -P 0xab 0 64k", "flush")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "wrote 65536/65536 bytes at offset 0" in r.stdout
        assert "read 65536/65536 bytes at offset 0" in r.stdout
        assert "Pattern verification failed" not in r.stdout + r.stderr
        r = _qemu_io(port, "b", "read -P 0 0 4k")
        assert r.returncode == 0, r.stdout + r.stderr
        # An export that does not exist: qemu-io fails, the gateway goes on.
        r = _qemu_io(port, "nope", "read 0 4k")
        assert r.returncode != 0 and "nope" in r.stderr
    finally:
        code, out, err = s.finish(signal.SIGINT)
    assert code == 0, (out, err)
    assert "Traceback" not in out + err
    data = a.read_bytes()
    assert data[: 64 << 10] == b"\xab" * (64 << 10) and data[64 << 10 :] == bytes(len(data) - (64 << 10))
    assert b.read_bytes() == bytes(1 << 20)
    for header in ("tenant", "exports", "ops", "MiB", "IOPS", "mean µs", "p50 µs", "p99 µs", "max µs"):
        assert header in out, (header, out)
    traffic = out.split("response time per tenant")[0]  # the first of the two tables
    rows = {ln.split("│")[1].strip(): [c.strip() for c in ln.split("│")[1:-1]] for ln in traffic.splitlines()
            if ln.startswith("│") and ln.split("│")[1].strip().isdigit()}
    assert rows["0"][1] == "a" and rows["1"][1] == "b", out
    assert int(rows["0"][2]) >= 2 and int(rows["0"][4]) >= 1, out  # ops, writes of tenant 0
    assert float(rows["0"][6]) >= 0.125, out  # MiB: at least 128 KiB moved
    assert int(rows["1"][3]) >= 1, out  # tenant 1's read


@pytest.mark.untimed
def test_qemu_io_write_zeroes_discard_and_sparse_convert(tmp_path: Path) -> None:
    """NBD_CMD_WRITE_ZEROES (with and without a hole) and NBD_CMD_TRIM from qemu-io, and
    qemu-img convert of a mostly-zero image, which sends the zero ranges as
    write-zeroes: the export reads back exactly what was asked."""
    qemu_img = _tool("qemu-img", "qemu-utils")
    a = _image(tmp_path / "a.img", 4 << 20)
    s = Server("-e", f"a={a}", "--policy", "fcfs", "--listen", "127.0.0.1:0", "--for", "60s")
    try:
        _, port = s.ready()
        r = _qemu_io(port, "a", "write -P 0x11 0 1M", "write -z 4k 8k", "write -z -u 64k 4k",
                     "read -P 0x11 0 4k", "read -P 0 4k 8k", "read -P 0x11 12k 4k", "read -P 0 64k 4k",
                     "discard 128k 64k", "read -P 0x11 192k 4k")
        assert r.returncode == 0 and "Pattern verification failed" not in r.stdout + r.stderr, r.stdout + r.stderr
        assert "discard 65536/65536 bytes at offset 131072" in r.stdout, r.stdout
        src = tmp_path / "src.img"
        src.write_bytes(bytes(2 << 20) + b"storqos" + bytes((2 << 20) - 7))
        uri = f"nbd://127.0.0.1:{port}/a"
        r = subprocess.run([qemu_img, "convert", "-n", "-f", "raw", "-O", "raw", str(src), uri],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        r = subprocess.run([qemu_img, "compare", "-f", "raw", "-F", "raw", str(src), uri],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "Images are identical" in r.stdout, r.stdout + r.stderr
    finally:
        code, out, err = s.finish(signal.SIGINT)
    assert code == 0, (out, err)
    assert a.read_bytes() == src.read_bytes()


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} (Debian {package}) is required: `make test` installs it"
    return path


@pytest.mark.untimed
def test_nbdcopy_and_nbdinfo_through_the_gateway(tmp_path: Path) -> None:
    """libnbd's clients (SPEC names nbdcopy): nbdinfo sees the export as advertised,
    nbdcopy copies 4 MiB of random data in and back out unchanged."""
    nbdcopy, nbdinfo = _tool("nbdcopy", "libnbd-bin"), _tool("nbdinfo", "libnbd-bin")
    a = _image(tmp_path / "a.img", 8 << 20)
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(4 << 20))
    s = Server("-e", f"a={a}", "--policy", "wf2q", "--listen", "127.0.0.1:0", "--for", "60s")
    try:
        _, port = s.ready()
        uri = f"nbd://127.0.0.1:{port}/a"
        info = subprocess.run([nbdinfo, "--json", uri], capture_output=True, text=True, timeout=30)
        assert info.returncode == 0, info.stderr
        export = json.loads(info.stdout)["exports"][0]
        assert export["export-size"] == 8 << 20
        assert export["can_flush"] and export["can_fua"] and not export["is_read_only"]
        assert export["can_trim"] and export["can_zero"] and not export["can_multi_conn"]
        r = subprocess.run([nbdcopy, str(src), uri], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        back = tmp_path / "back.bin"
        r = subprocess.run([nbdcopy, uri, str(back)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    finally:
        code, out, err = s.finish(signal.SIGINT)
    assert code == 0, (out, err)
    assert back.read_bytes() == src.read_bytes() + bytes(4 << 20)
    assert a.read_bytes()[: 4 << 20] == src.read_bytes()


def _fio(tmp_path: Path, job: str) -> dict[str, dict[str, object]]:
    """Run a fio job file (fio's libnbd engine) and return its jobs by name."""
    fio = _tool("fio", "fio")
    path = tmp_path / "job.fio"
    path.write_text(job)
    # cwd: fio writes its verify-state file (local-*-verify.state) into the current folder.
    r = subprocess.run([fio, "--output-format=json", str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    return {j["jobname"]: j for j in json.loads(r.stdout[r.stdout.index("{"):])["jobs"]}


def test_fio_nbd_engine_gets_the_wf2q_shares_and_verifies(tmp_path: Path) -> None:
    """fio (SPEC's third client) through its nbd engine: two backlogged random-read jobs
    on two tenants weighted 2:1 in front of 1,000 emulated IOPS share it 2:1 (seed 003's
    proportional share, live), and a write-then-verify job reads back what it wrote."""
    a, b = _image(tmp_path / "a.img", 16 << 20), _image(tmp_path / "b.img", 16 << 20)
    s = Server("-e", f"a={a}:0", "-e", f"b={b}:1", "--policy", "wf2q", "--weights", "2,1", "--iops", "1k",
               "--listen", "127.0.0.1:0", "--for", "120s")
    try:
        _, port = s.ready()
        jobs = _fio(tmp_path, f"""
[global]
ioengine=nbd
rw=randread
bs=4k
iodepth=8
time_based=1
runtime=4
[a]
uri=nbd://127.0.0.1:{port}/a
[b]
uri=nbd://127.0.0.1:{port}/b
""")
        done = {n: int(j["read"]["total_ios"]) for n, j in jobs.items()}  # type: ignore[index]
        assert all(j["error"] == 0 for j in jobs.values()), jobs
        assert 3_000 <= done["a"] + done["b"] <= 4_400, done  # 1,000 IOPS for 4 s (+ fio's ramp)
        # 2:1 within 15 %: the two jobs start and stop a little apart, more so on a busy
        # machine (seen: 1.77 in a fresh make test; 1:1 would be 1.0)
        assert 1.7 <= done["a"] / done["b"] <= 2.3, done
        jobs = _fio(tmp_path, f"""
[v]
ioengine=nbd
uri=nbd://127.0.0.1:{port}/b
rw=randwrite
bs=16k
size=4m
iodepth=4
verify=crc32c
do_verify=1
""")
        assert jobs["v"]["error"] == 0, jobs
        assert int(jobs["v"]["read"]["total_ios"]) == int(jobs["v"]["write"]["total_ios"]) == 256, jobs  # type: ignore[index]
    finally:
        code, out, err = s.finish(signal.SIGINT)
    assert code == 0, (out, err)


def test_sarc_avatar_serves_qemu_io_live(tmp_path: Path) -> None:
    """Seed 001's two-level scheduler, driven by its own timers (SARC period, AVATAR
    window) on the wall clock, carries real client I/O: written data reads back."""
    a, b = _image(tmp_path / "a.img"), _image(tmp_path / "b.img")
    s = Server("-e", f"a={a}", "-e", f"b={b}", "--policy", "sarc+avatar", "--slo", "a:200iops@50ms,b:100iops@200ms",
               "--period", "20ms", "--control-window", "200ms", "--iops", "1k", "--listen", "127.0.0.1:0",
               "--for", "60s")
    try:
        line, port = s.ready()
        assert "policy sarc+avatar" in line
        r = _qemu_io(port, "a", "write -P 0x5c 0 256k", "read -P 0x5c 0 256k")
        assert r.returncode == 0 and "Pattern verification failed" not in r.stdout + r.stderr, r.stdout + r.stderr
        r = _qemu_io(port, "b", "write -P 0x3d 4k 64k", "read -P 0x3d 4k 64k")
        assert r.returncode == 0 and "Pattern verification failed" not in r.stdout + r.stderr, r.stdout + r.stderr
    finally:
        code, out, err = s.finish(signal.SIGTERM)
    assert code == 0, (out, err)
    assert a.read_bytes()[: 256 << 10] == b"\x5c" * (256 << 10)
    assert b.read_bytes()[4096 : 4096 + (64 << 10)] == b"\x3d" * (64 << 10)


def test_window_series_and_gauges_live(tmp_path: Path) -> None:
    """--window keeps the simulator's per-window series and the policy's gauges (here
    AVATAR's threshold `lo`), in --json and in Parquet with --out."""
    import polars as pl

    a = _image(tmp_path / "a.img")
    out = tmp_path / "live" / "series.parquet"
    s = Server("-e", f"a={a}", "--policy", "sarc+avatar", "--slo", "a:200iops@50ms", "--period", "20ms",
               "--control-window", "100ms", "--iops", "1k", "--listen", "127.0.0.1:0", "--window", "100ms",
               "--out", str(out), "--for", "1500ms")
    try:
        line, port = s.ready()
        assert "depth 1," in line, line  # --iops without --depth: one slot, as the simulator's device
        r = _qemu_io(port, "a", *[f"write -P 7 {i * 4}k 4k" for i in range(40)], "read -P 7 0 160k")
        assert r.returncode == 0 and "Pattern verification failed" not in r.stdout + r.stderr, r.stdout + r.stderr
    finally:
        code, text, err = s.finish()  # --for ends it: about 15 windows of 100 ms
    assert code == 0, (text, err)
    assert "per-window series:" in text and str(out) in text, text
    # While serving: one line per window with activity, before the final table.
    live = [ln for ln in text.splitlines() if re.match(r"\s*\d+\.\d{3} s  tenant 0: ", ln)]
    assert live and text.index(live[-1]) < text.index("storqos serve: sarc+avatar"), text
    assert all("IOPS, p50 " in ln and ", p99 " in ln for ln in live), live
    w = pl.read_parquet(out)
    g = pl.read_parquet(out.with_name("series.gauges.parquet"))
    assert w.columns == ["start_s", "length_s", "tenant", "ops", "bytes", "iops", "mean_us", "p50_us", "p95_us",
                         "p99_us", "max_us"]
    # Every operation lands in exactly one window; percentiles are ordered.
    assert w["ops"].sum() == 41 and w["bytes"].sum() == 40 * 4096 + 160 * 1024
    assert (w["p50_us"] <= w["p95_us"]).all() and (w["p95_us"] <= w["p99_us"]).all()
    assert (w["p99_us"] <= w["max_us"]).all() and (w["length_s"] <= 0.1 + 1e-9).all()
    assert w["start_s"].is_sorted()
    lo = g.filter(pl.col("name") == "lo")
    # Sampled at every window's end, idle ones included (a generous bound: 15 are due).
    assert lo.height >= 8 and (lo["value"] >= 1).all(), g


@pytest.mark.untimed
def test_the_closing_tables_read_at_80_columns(tmp_path: Path) -> None:
    """Thirteen columns in one table were cut to "…" in an 80-column terminal."""
    a, b = _image(tmp_path / "a.img"), _image(tmp_path / "b.img")
    s = Server("--export", f"alpha={a}", "--export", f"beta={b}", "--listen", "127.0.0.1:0", columns=80)
    _, port = s.ready()
    try:
        assert _qemu_io(port, "alpha", "write 0 64k", "flush").returncode == 0
    finally:
        code, out, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    assert "response time per tenant" in out and "p99 µs" in out and "alpha" in out, out
    table = [ln for ln in out.splitlines() if any(ch in ln for ch in "┃│┏└")]  # (the export list names long paths)
    assert "…" not in out and len(table) >= 8 and max(len(ln) for ln in table) <= 80, out


@pytest.mark.untimed
def test_sigterm_stops_with_the_table(tmp_path: Path) -> None:
    a = _image(tmp_path / "a.img")
    s = Server("--export", f"a={a}", "--listen", "127.0.0.1:0")
    line, _ = s.ready()
    assert "depth 8)" in line, line  # the default on a real device
    code, out, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    assert "storqos serve: fcfs for" in out and "p99 µs" in out


@pytest.mark.untimed
@pytest.mark.parametrize(
    ("args", "policy"),
    [
        (["--policy", "mclock", "--reservations", "100,0", "--limits", "none,500", "--weights", "1,2"], "mclock"),
        (["--policy", "edf", "--deadline", "10ms,50ms"], "edf"),
        (["--policy", "sfq", "--weights", "3,1"], "sfq(d=2)"),
        # The seed policies take the same options as in `storqos simulate`.
        (["--policy", "sarc+avatar", "--slo", "a:100iops@50ms,b:50iops@200ms", "--iops", "500"], "sarc+avatar"),
        (["--policy", "miser", "--cmin", "300", "--deadline", "10ms", "--iops", "500"], "miser(300 IOPS, δ 10 ms)"),
        (["--policy", "rtt-fq", "--cmin", "300", "--deadline", "10ms", "--iops", "500"],
         "rtt(300 IOPS, δ 10 ms) > wf2q+"),
    ],
)
def test_for_duration_and_json(tmp_path: Path, args: list[str], policy: str) -> None:
    a, b = _image(tmp_path / "a.img"), _image(tmp_path / "b.img", 4096)
    r = subprocess.run(
        [sys.executable, "-m", "storqos.cli", "serve", "-e", f"a={a}", "-e", f"b={b}", "--listen", "127.0.0.1:0",
         "--depth", "2", "--for", "300ms", "--json", *args],
        capture_output=True, text=True, cwd=REPO, env=ENV, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    assert stats["policy"] == policy
    assert stats["elapsed_s"] >= 0.3 - 0.01  # --for 300ms: not before its time (the 60 s timeout catches "never")
    assert [t["tenant"] for t in stats["tenants"]] == [0, 1]
    assert [t["exports"] for t in stats["tenants"]] == [["a"], ["b"]]
    assert all(t["ops"] == 0 for t in stats["tenants"])
    assert "serving 2 exports on nbd://127.0.0.1:" in r.stderr


@pytest.mark.untimed
def test_help_has_a_qemu_io_example() -> None:
    r = run_cli("serve", "--help")
    assert r.code == 0, r.err
    assert "Example" in r.out and "qemu-io" in r.out and "--json" in r.out and "--export" in r.out


BAD_INPUT = [
    (["-e", "a={missing}"], ["--export", "missing.img: no such file"]),
    (["-e", "nonsense"], ["--export", "expected NAME=PATH[:TENANT]"]),
    (["-e", "={a}"], ["--export", "expected NAME=PATH[:TENANT]"]),
    (["-e", "a={tmp}"], ["--export", "not a regular file"]),
    (["-e", "a={empty}"], ["exports[0].path", "the file is empty"]),
    (["-e", "a={a}", "-e", "a={a}"], ["exports[1].name", "already the name"]),
    (["-e", "a={a}", "--policy", "wfx"], ["--policy", "unknown policy 'wfx'"]),
    (["-e", "a={a}", "--policy", "wf2q", "--weights", "2,-1"], ["--weights"]),
    (["-e", "a={a}", "--policy", "edf"], ["--deadline"]),
    (["-e", "a={a}", "--policy", "sarc+avatar"], ["--slo", "needs per-class SLOs"]),
    (["-e", "a={a}", "--policy", "rtt-fq", "--cmin", "300", "--deadline", "10ms"], ["--iops", "Cmin + ΔC"]),
    (["-e", "a={a}", "--policy", "rtt-fq", "--cmin", "300", "--deadline", "10ms", "--iops", "200"],
     ["--iops", "must exceed --cmin"]),
    (["-e", "a={a}", "--iops", "fast"], ["--iops", "malformed rate"]),
    (["-e", "a={a}", "--for", "soon"], ["--for", "malformed duration"]),
    (["-e", "a={a}", "--depth", "0"], ["--depth", "must be >= 1"]),
    (["-e", "a={a}", "--window", "0s"], ["--window", "must be > 0"]),
    (["-e", "a={a}", "--out", "{tmp}/s.parquet"], ["--out", "give --window too"]),
    (["-e", "a={a}", "--listen", "localhost"], ["listen: expected HOST:PORT"]),
    # Fuzzing: a huge --for used to panic in Duration::from_secs_f64 (PanicException).
    (["-e", "a={a}", "--for", "1e30s"], ["--for", "too long", "292 years"]),
    (["-e", "a={a}", "--window", "1e12d"], ["--window", "too long"]),
    # A tenant id is an index: 4294967295 used to abort the gateway on the first request.
    (["-e", "a={a}:4294967295"], ["--export", "tenant must be below 65536, got 4294967295"]),
    # A tenant name after the path was read as part of the path ("no such file a.img:web").
    (["-e", "a={a}:web"], ["--export", "tenant must be an id, an integer >= 0, got 'web'"]),
    # An unwritable --out used to fail only after the session (its series lost).
    (["-e", "a={a}", "--window", "1s", "--out", "{a}/s.parquet"], ["--out", "is not a directory"]),
    ([], ["give at least one export, e.g. --export web=/srv/web.img, or a --config file"]),
]


@pytest.mark.untimed
@pytest.mark.parametrize(("args", "needles"), BAD_INPUT, ids=[" ".join(a) or "no-export" for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], needles: list[str]) -> None:
    a = _image(tmp_path / "a.img")
    empty = tmp_path / "empty.img"
    empty.touch()
    paths = {"a": str(a), "empty": str(empty), "missing": str(tmp_path / "missing.img"), "tmp": str(tmp_path)}
    argv = [x.format(**paths) for x in args]
    if "--listen" not in argv:
        argv += ["--listen", "127.0.0.1:0"]
    assert_one_line_error(run_cli("serve", *argv), *needles)


@pytest.mark.untimed
def test_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    a = _image(tmp_path / "a.img")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert_one_line_error(run_cli("serve", "-e", f"a={a}", "--listen", f"127.0.0.1:{port}"),
                        f"cannot listen on 127.0.0.1:{port}", "already in use")


CHILD = """
import sys, time
from storqos.live.gateway import gateway_config, serve
from storqos.model.specs import policy_spec

def on_ready(info):
    print("ready", flush=True)
    time.sleep(1.5)  # Ctrl-C arrives here
    print("on_ready finished", flush=True)

stats = serve(gateway_config([f"a={sys.argv[1]}:0"], policy_spec("fcfs"), listen="127.0.0.1:0", duration_s=30.0), on_ready)
print("served", len(stats.tenants), flush=True)
"""


def test_ctrl_c_during_a_callback_stops_the_gateway_once_the_callback_is_done(tmp_path: Path) -> None:
    # Ctrl-C used to raise KeyboardInterrupt wherever Python happened to be: inside a
    # callback (the per-window series being written), it broke the callback off and the
    # serve call failed (exit 130). It is now recorded, and the gateway stops at its next
    # poll after the callback returns.
    img = _image(tmp_path / "a.img")
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(img)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
    finally:
        p.kill()
    assert p.returncode == 0, err
    assert out.splitlines() == ["on_ready finished", "served 1"], (out, err)
