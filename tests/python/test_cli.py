"""The storqos CLI as a user meets it: help with examples, JSON output, and one-line
errors with exit status 2 for every kind of bad input (issue: "Bad input")."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from conftest import assert_one_line_error, run_cli, shared_traces

MQSIM_OK = "0 0 100 8 1\n1000000 1 200 8 0\n2000000 0 300 16 1\n"


@pytest.mark.parametrize("cmd", [[], ["trace"], ["trace", "info"], ["simulate"], ["demo"]])
def test_help_everywhere_with_an_example(cmd: list[str]) -> None:
    r = run_cli(*cmd, "--help")
    assert r.code == 0, r.err
    assert "Usage" in r.out
    if cmd in (["trace", "info"], ["simulate"], ["demo"]):
        assert "Example" in r.out
        assert "--json" in r.out


def test_trace_info_table_and_json(tmp_path: Path) -> None:
    f = tmp_path / "t.trace"
    f.write_text(MQSIM_OK)
    r = run_cli("trace", "info", str(f))
    assert r.code == 0, r.err
    assert "mqsim" in r.out and "IOPS" in r.out and "requests" in r.out
    # integer times fit DiskSim (ms) and MQSim (ns): the guess is said on one line
    assert r.err.count("\n") == 1 and r.err.startswith("warning:") and "--format disksim" in r.err
    j = json.loads(run_cli("trace", "info", str(f), "--json").out)
    assert j["count"] == 3 and j["format"] == "mqsim"
    assert j["read_fraction"] == pytest.approx(2 / 3)


def test_simulate_json_and_parquet(tmp_path: Path) -> None:
    f = tmp_path / "t.mqsim"
    f.write_text(MQSIM_OK)
    pq = tmp_path / "out.parquet"
    r = run_cli("simulate", str(f), "--policy", "wf2q+", "--weights", "2,1", "--split-by", "device",
                "--capacity", "1k", "--out", str(pq), "--json")
    assert r.code == 0, r.err
    j = json.loads(r.out)
    assert j["policy"] == "wf2q+" and j["arrived"] == 3 and j["unfinished"] == 0
    import polars as pl

    df = pl.read_parquet(pq)
    assert df.height == 3 and "response_ns" in df.columns


def test_simulate_table_has_units(tmp_path: Path) -> None:
    f = tmp_path / "t.mqsim"
    f.write_text(MQSIM_OK)
    r = run_cli("simulate", str(f), "--capacity", "500")
    assert r.code == 0, r.err
    j = json.loads(run_cli("simulate", str(f), "--capacity", "500", "--json").out)
    # The per-tenant table's header names the unit and its cells are the JSON's ns in ms.
    lines = r.out.splitlines()
    head = next(ln for ln in lines if "p99 ms" in ln)
    cells = [c.strip() for c in head.split("┃")]
    row = next(ln for ln in lines[lines.index(head):] if ln.startswith("│ 0"))
    values = [c.strip() for c in row.split("│")]
    for col in ("mean", "p50", "p99", "max"):
        shown = float(values[cells.index(f"{col} ms")].replace(",", ""))
        assert shown == pytest.approx(j["tenants"][0][f"{col}_ns"] / 1e6, rel=5e-3), col


def test_demo_writes_plot_and_table(tmp_path: Path) -> None:
    r = run_cli("demo", "--out", str(tmp_path), "--json")
    assert r.code == 0, r.err
    j = json.loads(r.out)
    assert Path(j["plot"]).stat().st_size > 10_000
    rows = {(row["policy"], row["capacity_iops"]): row for row in j["rows"]}
    caps = sorted({c for _, c in rows})
    assert len(caps) == 3
    # The point of the demo: fair queuing protects the search tenant from the bursts.
    hi = caps[-1]
    assert rows[("wf2q+", hi)]["web_p99_ns"] < rows[("fcfs", hi)]["web_p99_ns"] / 2
    # More capacity never hurts FCFS.
    assert rows[("fcfs", caps[0])]["web_p99_ns"] >= rows[("fcfs", caps[-1])]["web_p99_ns"]
    # One capacity given twice (500 and 0.5k) made every row twice.
    assert_one_line_error(run_cli("demo", "--out", str(tmp_path), "--capacity", "500,0.5k"),
                          "--capacity: capacity 500 IOPS given twice")


def test_demo_on_a_users_trace_sizes_capacity_from_its_burstiness(tmp_path: Path) -> None:
    """With --trace the capacities are Cmin(95/99/100 %, 10 ms) of that trace plus the
    neighbour's mean rate, and the tenant is named after the file. Checked independently:
    alone at (capacity - neighbour's rate) under FCFS, every request finishes within
    10 ms at the 100 % capacity (at Cmin(f < 100 %) RTT admits f, FCFS serves fewer in
    time), and not at 2 % less."""
    import storqos

    rng = np.random.default_rng(3)
    t = np.cumsum(np.where(rng.random(3000) < 0.1, rng.exponential(20e6, 3000), rng.exponential(0.5e6, 3000)))
    src = tmp_path / "bursty.mqsim"
    src.write_text("".join(f"{int(x)} 0 {8 * i} 8 1\n" for i, x in enumerate(t)))
    j = json.loads(run_cli("demo", "--trace", str(src), "--out", str(tmp_path / "o"), "--json").out)
    assert j["tenant"] == "bursty"
    caps = sorted({r["capacity_iops"] for r in j["rows"]})
    assert len(caps) == 3
    alone = storqos.read_trace(src)

    def within_10ms(cap: float) -> float:
        res = storqos.simulate(alone, "fcfs", "constant", capacity=cap, keep_requests=True)
        assert res.requests is not None
        return float((res.requests["response_ns"] <= 10_000_000).mean())

    full = caps[-1] - j["burst_iops"]
    assert within_10ms(full + 1) == 1.0 and within_10ms(0.98 * full) < 1.0
    r = run_cli("demo", "--trace", str(src), "--capacity", "900,1.2k", "--out", str(tmp_path / "p"), "--json")
    assert sorted({row["capacity_iops"] for row in json.loads(r.out)["rows"]}) == [900.0, 1200.0]
    assert_one_line_error(run_cli("demo", "--capacity", "fast", "--out", str(tmp_path / "q")), "--capacity", "fast")


# ---- bad input: one line, what and where, exit 2 -------------------------------------


def test_empty_file(tmp_path: Path) -> None:
    f = tmp_path / "empty.trace"
    f.write_text("")
    assert_one_line_error(run_cli("trace", "info", str(f), "--format", "mqsim"), "empty.trace", "empty")


def test_truncated_binary_record(tmp_path: Path) -> None:
    f = tmp_path / "cut.srt"
    header = b'system = "x"\n\x0c'
    rec = struct.pack(">14I", 56, (4 << 16) | 1, 0, 0, 10, 20, 4096, 100, 0, 0, 0, 1, 0, 0)
    f.write_bytes(header + rec + rec[:20])
    assert_one_line_error(run_cli("trace", "info", str(f), "--format", "srt"), "cut.srt", "byte", "truncated")


def test_non_numeric_field(tmp_path: Path) -> None:
    f = tmp_path / "bad.trace"
    f.write_text("0 0 100 8 1\n1000 0 x12 8 1\n")
    assert_one_line_error(run_cli("trace", "info", str(f), "--format", "mqsim"), "bad.trace:2", "x12")


@pytest.mark.parametrize("size", ["0", "-8"])
def test_zero_or_negative_size(tmp_path: Path, size: str) -> None:
    f = tmp_path / "size.trace"
    f.write_text(f"0 0 100 8 1\n1000 0 100 {size} 1\n")
    assert_one_line_error(run_cli("trace", "info", str(f), "--format", "mqsim"), "size.trace:2", "size")


def test_timestamps_backwards_offers_sort(tmp_path: Path) -> None:
    f = tmp_path / "back.trace"
    f.write_text("5000 0 100 8 1\n1000 0 100 8 1\n")
    assert_one_line_error(run_cli("trace", "info", str(f), "--format", "mqsim"), "back.trace:2", "--sort")
    r = run_cli("trace", "info", str(f), "--format", "mqsim", "--sort", "--json")
    assert r.code == 0 and json.loads(r.out)["count"] == 2


def test_unknown_format(tmp_path: Path) -> None:
    f = tmp_path / "t.mqsim"
    f.write_text(MQSIM_OK)
    assert_one_line_error(run_cli("trace", "info", str(f), "--format", "xyz"), "xyz", "disksim")


def test_undetectable_format(tmp_path: Path) -> None:
    f = tmp_path / "junk.bin"
    f.write_text("hello world\nthis is not a trace\n")
    assert_one_line_error(run_cli("trace", "info", str(f)), "junk.bin", "--format")


def test_the_users_text_is_printed_as_it_is(tmp_path: Path) -> None:
    """Messages and tables quote the user's own text (a first line, a file's name) as it
    is: rich once turned ``:x:`` into an emoji (``root:x:0:0`` became ``root❌0:0``) and
    read ``[red]`` as a style."""
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0:root:/root:/bin/bash\n")
    assert_one_line_error(run_cli("trace", "info", str(f)), "'root:x:0:0:root:/root:/bin/bash'")
    web = tmp_path / "[red]:x:web.mqsim"
    web.write_text("".join(f"{i * 1_000_000} 0 {8 * i} 8 1\n" for i in range(40)))
    other = tmp_path / "b.mqsim"  # two files: two tenants, named after the files
    other.write_text(web.read_text())
    r = run_cli("simulate", str(web), str(other), "--capacity", "5k")
    assert r.code == 0, r.err
    assert "[red]:x:web" in r.out, r.out


@pytest.mark.parametrize(("args", "option"), [
    (["serve", "-e", "a=a.img", "--check", "--policy="], "--policy"),
    (["serve", "-e", "a=a.img", "--check", "--listen", ""], "--listen"),
    (["serve", "-e", "a=a.img", "--check", "--metrics", " "], "--metrics"),
    (["serve", "-e", "a=a.img", "-e", "", "--check"], "--export"),
    (["simulate", "t.mqsim", "-c", "5k", "-o", ""], "--out"),
    (["calibrate", "a.img", "--idle-spacings", ""], "--idle-spacings"),
])
def test_an_empty_value_is_not_the_option_left_out(tmp_path: Path, args: list[str], option: str) -> None:
    """``--policy=`` (a shell variable that was not set) once served FCFS on the default
    address, as if the option had not been given."""
    (tmp_path / "a.img").write_bytes(bytes(4096))
    (tmp_path / "t.mqsim").write_text(MQSIM_OK)
    assert_one_line_error(run_cli(*args, cwd=tmp_path), f"{option}: empty value")


@pytest.mark.parametrize("cap", ["0", "-5"])
def test_capacity_not_positive(tmp_path: Path, cap: str) -> None:
    f = tmp_path / "t.mqsim"
    f.write_text(MQSIM_OK)
    assert_one_line_error(run_cli("simulate", str(f), f"--capacity={cap}"), "--capacity", "> 0")


def test_unknown_policy(tmp_path: Path) -> None:
    f = tmp_path / "t.mqsim"
    f.write_text(MQSIM_OK)
    assert_one_line_error(run_cli("simulate", str(f), "--policy", "lottery", "--capacity", "10"), "lottery", "fcfs")


def test_malformed_unit(tmp_path: Path) -> None:
    f = tmp_path / "t.mqsim"
    f.write_text(MQSIM_OK)
    assert_one_line_error(
        run_cli("simulate", str(f), "--policy", "edf", "--deadline", "10xs", "--capacity", "10"), "--deadline", "10xs"
    )
    assert_one_line_error(run_cli("simulate", str(f), "--capacity", "1.5q"), "--capacity", "1.5q")


def test_missing_file() -> None:
    assert_one_line_error(run_cli("trace", "info", "/nonexistent/trace.csv"), "/nonexistent/trace.csv")


def test_unknown_option_is_a_usage_error() -> None:
    assert_one_line_error(run_cli("simulate", "--bogus"), "--bogus", "--help")
    assert_one_line_error(run_cli("simulate", "x.trace", "--capacity"), "--capacity")


@pytest.mark.skipif(shared_traces() is None, reason="../shared/traces not present")
def test_trace_info_on_a_real_trace() -> None:
    traces = shared_traces()
    assert traces is not None
    r = run_cli("trace", "info", str(traces / "msr-cambridge" / "hm_0_excerpt.csv"), "--json")
    assert r.code == 0, r.err
    j = json.loads(r.out)
    assert j["format"] == "msr" and j["count"] == 7016
    assert j["peak_iops_100ms"] == pytest.approx(4660)


def test_simulate_miser_keeps_the_primary_class_within_the_deadline(tmp_path: Path) -> None:
    # RTT at Cmin for δ = 10 ms admits requests that meet δ at rate Cmin; Miser at
    # Cmin + ΔC serves the overflow from their slack and keeps them (all but a few, the
    # thesis says) within δ (thesis §4, Algorithm 2).
    tr = tmp_path / "b.trace"
    import storqos
    from storqos.planning import planner

    df = storqos.model.synth.onoff(3000, 100, "50ms", "450ms", count=6000, seed=5)
    storqos.traces.write_disksim(df, tr)
    cmin = planner.cmin(df, 90, "10ms")
    r = run_cli("simulate", str(tr), "--policy", "miser", "--cmin", f"{cmin}", "--deadline", "10ms",
                "--capacity", f"{1.2 * cmin}", "--json")
    assert r.code == 0, r.err
    classes = {c["class"]: c for c in json.loads(r.out)["classes"]}
    assert classes[0]["p99_ns"] <= 10_000_000
    assert classes[1]["completed"] > 0
    assert classes[1]["mean_ns"] > classes[0]["mean_ns"]
    assert_one_line_error(run_cli("simulate", str(tr), "--policy", "miser", "--capacity", "600"), "--cmin")


def test_simulate_sarc_avatar_reports_slo_compliance_and_misses(tmp_path: Path) -> None:
    import storqos

    tr = tmp_path / "two.trace"
    df = storqos.model.synth.to_frame([
        storqos.model.synth.poisson(150, duration="20s", tenant=0, seed=1, span="8GiB", materialize=False),
        storqos.model.synth.poisson(100, duration="20s", tenant=1, seed=2, span="8GiB", materialize=False),
    ])
    storqos.traces.write_disksim(df, tr)
    args = ["simulate", str(tr), "--split-by", "device", "--policy", "sarc+avatar",
            "--slo", "a:160iops@400ms,b:190iops@900ms", "--device", "array", "--servers", "4",
            "--profile", "enterprise-10k", "--queue", "sptf"]
    r = run_cli(*args, "--json")
    assert r.code == 0, r.err
    j = json.loads(r.out)
    # Light load on 4 disks (~650 IOPS capacity): every class meets its SLO nearly always.
    assert {c["name"] for c in j["slo_compliance"]} == {"a", "b"}
    assert all(c["met"] > 0.9 for c in j["slo_compliance"])
    assert all(m["miss_ratio"] < 0.05 for m in j["miss_ratio"])
    r = run_cli(*args)
    assert "SLO compliance" in r.out and "miss ratio" in r.out
    assert_one_line_error(run_cli(*args[:-10], "--slo", "a:160iops", "--capacity", "500"), "--slo")


# --- Extreme and malformed flag values (CLI fuzzing): each is one line and exit 2, never
# "internal error", an OverflowError from the Rust bindings, or an aborted process.


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        # Durations beyond 2**63 ns used to overflow the core's u64 arguments (OverflowError).
        (["--window", "1e30s"], ["--window", "too long", "292 years"]),
        (["--policy", "edf", "--deadline", "1e12d"], ["--deadline", "too long"]),
        # Seeds outside u64 used to reach the bindings (OverflowError).
        (["--seed", "-1"], ["--seed", "[0, 2**64)", "-1"]),
        (["--seed", "18446744073709551616"], ["--seed", "18446744073709551616"]),
        # A blank deadline list used to be an IndexError (a blank value is now refused as any is).
        (["--policy", "edf", "--deadline", " "], ["--deadline", "empty value"]),
        # 2**32 servers used to abort the process (allocation failure in the array model).
        (["--device", "array", "--servers", "4294967296"], ["--servers", "65536", "4294967296"]),
        # Settings the device does not read were dropped without a word.
        (["--device", "exponential", "--servers", "2"], ["--servers: device 'exponential' takes no servers (array does)"]),
        (["--device", "disk"], ["--capacity: device 'disk' takes no capacity"]),
        (["--device", "constant", "--queue", "sptf"], ["--queue: device 'constant' takes no queue (array, disk do)"]),
        (["--device", "array", "--profile", "enterprise-10k"], ["--capacity: an array of disk models", "takes no capacity"]),
        # An infinite weight reached the core as JSON's Infinity ("expected value at line 1").
        (["--policy", "wf2q", "--weights", "1e400"], ["--weights: weights must all be finite and > 0"]),
        (["--policy", "mclock", "--limits", "nan"], ["--limits: malformed rate 'nan'"]),
        # The SLOs' percentile was dropped without SLOs, whatever its value.
        (["--percentile", "50"], ["--percentile: give --slo too"]),
        (["--percentile", "0"], ["--percentile: percentage '0' must be in (0, 100]"]),
    ],
)
def test_simulate_extreme_flag_values(tmp_path: Path, args: list[str], needles: list[str]) -> None:
    f = tmp_path / "t.mqsim"
    f.write_text(MQSIM_OK)
    assert_one_line_error(run_cli("simulate", str(f), "--capacity", "500", *args), *needles)


def test_unwritable_out_is_reported_before_the_work(tmp_path: Path) -> None:
    f = tmp_path / "t.mqsim"
    f.write_text(MQSIM_OK)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    # A file where a directory must be used to end in "internal error: FileExistsError".
    assert_one_line_error(run_cli("simulate", str(f), "--capacity", "10", "--out", f"{blocker}/r.parquet"),
                          "--out", f"{blocker}/r.parquet", "is not a directory")
    assert_one_line_error(run_cli("simulate", str(f), "--capacity", "10", "--out", str(tmp_path)),
                          "--out", "is a directory, expected a file")
    assert_one_line_error(run_cli("demo", "--out", str(blocker)), "--out", str(blocker), "not a directory")
    assert blocker.read_text() == "not a directory"


def test_os_errors_on_user_paths_are_one_line(tmp_path: Path) -> None:
    """The safety net in main(): any OSError about a path (here ENOTDIR) is input."""
    import subprocess
    import sys

    blocker = tmp_path / "file"
    blocker.write_text("x")
    code = ("import sys; from storqos.cli import app as cli; from storqos.cli.app import app\n"
            "@app.command('boom')\n"
            "def boom() -> None:\n"
            f"    open({str(blocker / 'x')!r}, 'w')\n"
            "sys.argv = ['storqos', 'boom']; cli.main()\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"NO_COLOR": "1", "PATH": ""})
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert f"{blocker / 'x'}: not a directory" in lines[0] and "internal error" not in lines[0]


def test_outputs_are_replaced_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Results go to a temporary file beside the target and are moved over it only once
    written: a write that fails (or a kill) leaves the previous results as they were."""
    import polars as pl
    from storqos.base.paths import replacing, write_table

    out = tmp_path / "table.csv"
    out.write_text("previous results\n")
    real = pl.DataFrame.write_csv

    def disk_full(self: pl.DataFrame, file: Path) -> None:
        Path(file).write_text("half a tab")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_csv", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_table(pl.DataFrame({"a": [1, 2]}), out)
    assert out.read_text() == "previous results\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]  # no .part left behind
    monkeypatch.setattr(pl.DataFrame, "write_csv", real)
    write_table(pl.DataFrame({"a": [1, 2]}), out)
    assert out.read_text() == "a\n1\n2\n"
    with pytest.raises(RuntimeError), replacing(tmp_path / "sub" / "x.json") as part:
        part.write_text("half")
        raise RuntimeError("killed mid-write")
    assert list((tmp_path / "sub").iterdir()) == []


def test_outputs_write_into_pipes_and_through_links(tmp_path: Path) -> None:
    """An output that is not a regular file is written into, not replaced: `trace convert
    t /dev/null --to csv`, run as root, once put a regular file in place of /dev/null
    (the temporary file beside it renamed over it). Here a named pipe stands for it: it
    stays a pipe and its reader gets the CSV. A symbolic link is written through: the
    link stays, its target gets the file."""
    import os
    import select
    import stat
    import time

    trace = tmp_path / "t.mqsim"
    trace.write_text(MQSIM_OK)
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, there before the writer
    try:
        r = run_cli("trace", "convert", str(trace), str(fifo))
        got, deadline = b"", time.monotonic() + 10
        while time.monotonic() < deadline and select.select([fd], [], [], 0.1)[0]:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            got += chunk
    finally:
        os.close(fd)
    assert r.code == 0, r.err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the pipe was replaced by a regular file"
    assert got.decode().startswith("arrival_ns,") and got.decode().count("\n") == 4, got
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.csv", "t.mqsim"]  # nothing left beside it
    target, link = tmp_path / "real.csv", tmp_path / "link.csv"
    link.symlink_to(target.name)
    for _ in range(2):  # the target made, then replaced
        r = run_cli("trace", "convert", str(trace), str(link))
        assert r.code == 0, r.err
        assert link.is_symlink() and target.read_text() == got.decode()


def test_simulate_several_traces_one_tenant_each(tmp_path: Path) -> None:
    """Two files are two tenants (ids in the order given, named after the files), replayed
    together from time 0; with --split-by each file's tenants follow the previous file's."""
    web = tmp_path / "web.mqsim"
    web.write_text("".join(f"{i * 1_000_000} 0 {8 * i} 8 1\n" for i in range(40)))
    batch = tmp_path / "batch.mqsim"
    batch.write_text("".join(f"{i * 1_000_000} {i % 2} {8 * i} 8 0\n" for i in range(30)))  # spans within 2x: no warning
    j = json.loads(run_cli("simulate", str(web), str(batch), "--policy", "wf2q", "--weights", "2,1",
                           "--capacity", "5k", "--json").out)
    got = {(r["tenant"], r["name"]): r["completed"] for r in j["tenants"]}
    assert got == {(0, "web"): 40, (1, "batch"): 30}
    j = json.loads(run_cli("simulate", str(web), str(batch), "--split-by", "device", "--capacity", "5k", "--json").out)
    got = {(r["tenant"], r["name"]): r["completed"] for r in j["tenants"]}
    assert got == {(0, "web:0"): 40, (1, "batch:0"): 15, (2, "batch:1"): 15}
    # one weight per tenant: two files are two tenants
    assert_one_line_error(run_cli("simulate", str(web), str(batch), "--policy", "wf2q", "--weights", "2,1,1", "-c", "5k"),
                          "--weights: 3 value(s) for 2 tenant(s)")


def test_version() -> None:
    import storqos

    r = run_cli("--version")
    assert r.code == 0 and r.out.strip() == f"storqos {storqos.__version__}"


@pytest.mark.parametrize("suffix, fmt", [(".parquet", "parquet"), (".csv", "csv"), (".spc", "spc"), (".disksim", "disksim"),
                                         (".mqsim", "mqsim"), (".vscsi", "vscsi"), (".srt", "srt")])
def test_trace_convert_round_trips(tmp_path: Path, suffix: str, fmt: str) -> None:
    """What convert writes reads back as the same requests (times, offsets, sizes, ops)."""
    from storqos.traces import read_trace

    src = tmp_path / "in.mqsim"
    src.write_text("".join(f"{i * 1_500_000 + i} {i % 3} {16 * i} {8 * (1 + i % 4)} {i % 2}\n" for i in range(50)))
    dst = tmp_path / f"out{suffix}"
    r = run_cli("trace", "convert", str(src), str(dst))
    assert r.code == 0, r.err
    assert f"wrote 50 requests to {dst} ({fmt})" in r.out
    a, b = read_trace(src), read_trace(dst, format=fmt)
    cols = ["arrival_ns", "offset", "size", "is_read"]
    if fmt in ("srt", "vscsi"):  # µs / no timestamps below µs in these formats
        a = a.with_columns(pl.col("arrival_ns") // 1000 * 1000)
        b = b.with_columns(pl.col("arrival_ns") // 1000 * 1000)
    if fmt == "vscsi":
        cols.remove("arrival_ns")
    assert a.select(cols).equals(b.select(cols))


def test_trace_convert_bad_output_is_one_line(tmp_path: Path) -> None:
    src = tmp_path / "in.mqsim"
    src.write_text(MQSIM_OK)
    assert_one_line_error(run_cli("trace", "convert", str(src), str(tmp_path / "out.xyz")), "out.xyz", "pass --to")
    assert_one_line_error(run_cli("trace", "convert", str(src), str(tmp_path / "o"), "--to", "blkparse"),
                          "--to", "cannot write 'blkparse'")
    assert not (tmp_path / "o").exists()


COMMANDS = [["simulate"], ["plan"], ["run"], ["serve"], ["replay"], ["calibrate"], ["validate"], ["allocate"],
            ["admit"], ["warm"], ["demo"], ["advise"],
            ["trace", "info"], ["trace", "convert"], ["ctl"], ["ctl", "set"], ["ctl", "stats"], ["ctl", "policy"], ["ctl", "drain"], []]


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c) or "storqos")
def test_help_speaks_the_users_words(cmd: list[str]) -> None:
    """Flags show bare (no `<bool>` as if they took a value), no `%%`, and no paper
    section numbers or internal references."""
    r = run_cli(*cmd, "--help")
    assert r.code == 0, r.err
    for bad in ("<bool>", "%%", "§", "seed 00", "SPEC", "Table 4", "Fig. ", "Eq. "):
        assert bad not in r.out, (bad, cmd)


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c) or "storqos")
def test_help_reads_at_80_columns(cmd: list[str]) -> None:
    """The description flows as paragraphs at 80 columns: no line breaks kept from the
    source, which left a one- or two-word line after each wrapped one."""
    r = run_cli(*cmd, "--help", columns=80)
    assert r.code == 0, r.err
    head = r.out.split("╭")[0].splitlines()
    text = [line.strip() for line in head if "Usage:" not in line]
    for i, line in enumerate(text[:-1]):
        # a short line ends its paragraph (a blank line follows), or is a list item
        if line and len(line) < 30 and text[i + 1] and not text[i + 1].startswith("- "):
            raise AssertionError(f"{line!r} is a stub line in {' '.join(cmd)} --help:\n{r.out}")


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_simulate_out_writes_the_type_its_name_says(tmp_path: Path, suffix: str) -> None:
    f = tmp_path / "t.mqsim"
    f.write_text(MQSIM_OK)
    out = tmp_path / f"requests{suffix}"
    r = run_cli("simulate", str(f), "--capacity", "500", "--out", str(out))
    assert r.code == 0, r.err
    if suffix == ".csv":
        df = pl.read_csv(out)
    elif suffix == ".json":
        df = pl.DataFrame(json.loads(out.read_text()))
    else:
        df = pl.read_parquet(out)
    assert df.height == 3 and sorted(df["arrival_ns"].to_list()) == [0, 1_000_000, 2_000_000]
    assert_one_line_error(run_cli("simulate", str(f), "--capacity", "500", "--out", str(tmp_path / "r.xlsx")),
                          "--out", "unknown output type '.xlsx'")
    assert not (tmp_path / "r.xlsx").exists()


def test_demo_neighbour_overruns_a_users_trace_and_memory_stays_bounded(tmp_path: Path) -> None:
    """Next to a user's trace the neighbour bursts at 1.2× the trace's own Cmin(100 %,
    10 ms) (at a fixed 1.2k IOPS it never reached a large trace's capacities, and FCFS
    and WF2Q+ looked the same), so at each capacity fair queuing protects the trace. The
    trace is sparse and spans two days: the neighbour makes millions of requests, which
    are streamed, not kept (the demo used to hold every request: 13 GiB on MSR wdev_1)."""
    rng = np.random.default_rng(5)
    t = np.sort(rng.uniform(0, 2 * 86_400e9, 2_000))
    src = tmp_path / "sparse.mqsim"
    src.write_text("".join(f"{int(x)} 0 {8 * i} 8 1\n" for i, x in enumerate(t)))
    # The demo's own peak RSS, printed by the process at exit.
    code = ("import atexit, resource, sys; from storqos.cli import main; "
            "atexit.register(lambda: print('maxrss', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)); "
            f"sys.argv = ['storqos', 'demo', '--trace', {str(src)!r}, '--out', {str(tmp_path / 'o')!r}, '--json']; main()")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    j = json.loads(p.stdout)
    assert j["burst_requests"] > 1_000_000
    rows = {(row["policy"], row["capacity_iops"]): row for row in j["rows"]}
    for cap in {c for _, c in rows}:
        assert rows[("wf2q+", cap)]["web_p99_ns"] < rows[("fcfs", cap)]["web_p99_ns"], cap
    maxrss_kib = int(p.stderr.split("maxrss ")[-1])
    assert maxrss_kib < 1024 * 1024, maxrss_kib  # under 1 GiB


def test_help_keeps_every_bracket_it_is_given() -> None:
    """Rich reads ``[word...]`` in a help text as markup and drops it when it names no
    style (``[default: 3]`` once vanished from validate's --help, leaving a stray " ."):
    every bracketed fragment of every command's and option's help that is not a style
    tag (``[bold]``, ``[/bold]``) reaches the rendered --help."""
    import typer
    from rich.errors import StyleSyntaxError
    from rich.style import Style
    from storqos.cli.app import app
    from typer.testing import CliRunner

    def walk(cmd: Any, path: list[str]) -> list[tuple[list[str], str]]:  # typer's own click
        texts = [(path, cmd.help or "")] + [(path, getattr(p, "help", None) or "") for p in cmd.params]
        for name, sub in getattr(cmd, "commands", {}).items():
            texts += walk(sub, [*path, name])
        return texts

    def is_style(tag: str) -> bool:
        if tag.startswith("/"):
            return True
        try:
            Style.parse(tag)
        except StyleSyntaxError:
            return False
        return True

    def plain(text: str) -> str:
        """The text as it should read: style tags gone, escaped brackets kept, a
        literal fragment marked with \\0 before it."""
        return re.sub(r"(\\*)\[([^\[\]]*)\]", lambda m: "" if len(m.group(1)) % 2 == 0 and is_style(m.group(2))
                      else f"\0[{m.group(2)}]", text).replace("\\[", "[")

    fragments = []  # (command, a bracketed fragment with the 24 characters before it)
    for path, text in walk(typer.main.get_command(app), []):
        flat = " ".join(plain(text).split())
        fragments += [(path, flat[max(0, i - 24):i].replace("\0", "") + flat[i + 1:flat.index("]", i) + 1])
                      for i in range(len(flat)) if flat[i] == "\0"]
    assert len(fragments) >= 3, "too few help texts with brackets: the test would check nothing"
    runner = CliRunner()
    rendered: dict[tuple[str, ...], str] = {}
    for path, frag in fragments:
        if tuple(path) not in rendered:
            r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "400"}, prog_name="storqos")
            assert r.exit_code == 0, r.output
            rendered[tuple(path)] = " ".join(r.output.replace("│", " ").split())
        assert " ".join(frag.split()) in rendered[tuple(path)], (path, frag)
