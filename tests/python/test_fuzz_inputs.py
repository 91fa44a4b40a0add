"""Mutated inputs through the CLI, as a user runs it: whatever a trace, an experiment
file, a gateway configuration or a device profile holds, a run ends with exit status 0
or with one line on stderr and exit status 2 (never an internal error, a traceback or a
hang).

Each case starts from a valid file made here (the bundled WebSearch excerpt's first
requests in every trace format storqos reads, small configuration files) and mutates
it once or twice: a field replaced by an odd token (empty, negative, NaN, 1e400, a
number past 2^64, a NUL, a quote, …), a line dropped, doubled or swapped, the file cut
short, bytes flipped in a binary format. The cases are fixed (seeded), so a failure
names a case that fails again. ``STORQOS_FUZZ_CASES=N`` runs N cases per kind instead
of the default few (docs/fuzzing.md: a longer run by hand).
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from conftest import run_cli
from storqos.model.device_profile import DepthPoint, DeviceProfile, ServicePoint, dump_profile
from storqos.traces import (
    bundled,
    read_trace,
    write_csv,
    write_disksim,
    write_fio,
    write_mqsim,
    write_parquet,
    write_spc,
    write_srt,
    write_vscsi,
)

#: Cases per kind (a kind: one trace format, or one kind of configuration file).
CASES = int(os.environ.get("STORQOS_FUZZ_CASES", "4"))

#: What a mutated field becomes.
TOKENS = ("", "-1", "0", "nan", "inf", "-inf", "1e400", "abc", "9" * 30, "0x10", " ", "\x00", "é", "1.5", "-0",
          "+3", "1e-30", ",", '"', "4294967296", "18446744073709551616", "1,5", "--", "\t")
#: What a mutated TOML value becomes.
VALUES = ("-1", "0", '""', "nan", "inf", "-inf", "1e400", '"abc"', "[]", "[1, 2]", "{}", "true", '"-5ms"',
          "99999999999999999999", '"1e400"', "[-1]", '["nan"]', "0.0", '"0"', '"1k"', '"0s"', "-0.0", "[[]]",
          '"none"', '"18446744073709551616"', '"10 ms"', '"1e-30"', '[""]', '{ kind = "x" }')


def mutate_text(data: str, rng: random.Random) -> tuple[str, str]:
    """One mutation of a text file's lines; the file and what was done."""
    lines = data.split("\n")
    i = rng.randrange(len(lines))
    k = rng.randrange(8)
    if k == 0:
        del lines[i]
        return "\n".join(lines), f"line {i + 1} dropped"
    if k == 1:
        j = rng.randrange(len(lines))
        lines.insert(i, lines[j])
        return "\n".join(lines), f"line {j + 1} copied before line {i + 1}"
    if k == 2:
        cut = rng.randrange(len(data))
        return data[:cut], f"cut at character {cut}"
    if k == 3:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines), f"lines {i + 1} and {j + 1} swapped"
    if k == 4:
        tok = rng.choice(TOKENS)
        lines[i] += tok
        return "\n".join(lines), f"{tok!r} appended to line {i + 1}"
    sep = "," if "," in lines[i] else ("\t" if "\t" in lines[i] else " ")
    fields = lines[i].split(sep)
    f = rng.randrange(len(fields))
    fields[f] = tok = rng.choice(TOKENS)
    lines[i] = sep.join(fields)
    return "\n".join(lines), f"line {i + 1} field {f + 1} set to {tok!r}"


def mutate_toml(data: str, rng: random.Random) -> tuple[str, str]:
    """One or two mutations of a TOML file's ``key = value`` lines."""
    lines = data.split("\n")
    keyed = [i for i, ln in enumerate(lines) if re.match(r'^\s*[\w."+-]+\s*=', ln)]
    done = []
    for _ in range(rng.choice((1, 1, 2))):
        i = rng.choice(keyed)
        key = lines[i].split("=", 1)[0].strip()
        k = rng.randrange(6)
        if k == 0:
            lines[i] = ""
            done.append(f"{key} dropped")
        elif k == 1:
            lines.insert(i, lines[i])
            keyed = [j + (j >= i) for j in keyed]
            done.append(f"{key} given twice")
        else:
            lines[i] = f"{key} = {(v := rng.choice(VALUES))}"
            done.append(f"{key} = {v}")
    return "\n".join(lines), ", ".join(done)


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """The file cut short, or a few bytes set to random values."""
    if rng.randrange(3) == 0:
        cut = rng.randrange(len(data))
        return data[:cut], f"cut at byte {cut}"
    b = bytearray(data)
    at = sorted(rng.randrange(len(b)) for _ in range(rng.randrange(1, 8)))
    for i in at:
        b[i] = rng.randrange(256)
    return bytes(b), f"bytes {at} set at random"


@dataclass(frozen=True)
class Seed:
    """A valid input, the commands to run on it (``{}`` is its path), and how it mutates."""

    name: str
    data: str | bytes
    commands: tuple[tuple[str, ...], ...]
    files: tuple[tuple[str, bytes], ...] = ()  # beside it, unchanged (a gateway's images)


def _requests() -> pl.DataFrame:
    return read_trace(bundled("websearch")).head(120)


def _written(write: Callable[[pl.DataFrame, Path], None], tmp: Path, name: str) -> bytes:
    path = tmp / name
    write(_requests(), path)
    return path.read_bytes()


def _msr(df: pl.DataFrame) -> str:
    """The requests as MSR Cambridge lines (FILETIME ticks of 100 ns)."""
    t0 = 128166386783630075
    return "\n".join(f"{t0 + a // 100},web,{d},{'Read' if r else 'Write'},{o},{s},{120 + i % 7 * 40}"
                     for i, (a, r, o, s, d) in enumerate(df.select("arrival_ns", "is_read", "offset", "size",
                                                                  "device").iter_rows())) + "\n"


def _fiu(df: pl.DataFrame) -> str:
    """The requests as FIU blkparse-layout lines (ns, sectors)."""
    return "\n".join(f"{89966811921625 + a} {4257 + i % 3} {('nfsd', 'gzip', 'kjournald')[i % 3]} {o // 512} "
                     f"{s // 512} {'R' if r else 'W'} 6 0 2c4787c7aa0b1e5d{i:016x}"
                     for i, (a, r, o, s) in enumerate(df.select("arrival_ns", "is_read", "offset",
                                                                "size").iter_rows())) + "\n"


def _blkparse(df: pl.DataFrame) -> str:
    """The requests as blkparse's default text (Q events, seconds, sectors)."""
    return "\n".join(f"  8,0    {i % 2}    {i + 1}    {a / 1e9:.9f}   697  Q   {'R' if r else 'W'} {o // 512} + "
                     f"{s // 512} [kjournald]"
                     for i, (a, r, o, s) in enumerate(df.select("arrival_ns", "is_read", "offset",
                                                                "size").iter_rows())) + "\n"


def _profile() -> str:
    pcts = [(50.0, 900.0), (90.0, 1400.0), (99.0, 2500.0)]
    service = [ServicePoint(op=op, pattern="random", size=4096, iops=1000, mean_us=1000, min_us=500,
                            percentiles_us=pcts) for op in ("read", "write")]
    return dump_profile(DeviceProfile(
        version=1, storqos_version="test", target="test", engine="fio", direct=True, created="test",
        time_per_point_s=1, capacity_iops=2000, parallelism=2, op_time_us=1000, bandwidth_bytes_per_s=1e9,
        service=service, queue_depth=[DepthPoint(qd=1, iops=1000, mean_us=1000, p50_us=900, p99_us=2500),
                                      DepthPoint(qd=4, iops=2000, mean_us=2000, p50_us=1800, p99_us=5000)]))


EXPERIMENT = """\
name = "fuzz"
seed = 1
duration = "2s"
window = "500ms"
percentile = 95

[device]
kind = "constant"
capacity = "1k"

[[tenant]]
name = "web"
trace = "web.mqsim"
format = "mqsim"
weight = 3
reservation = "300"
slo = "10ms"

[[tenant]]
name = "bursty"
generator = { kind = "onoff", rate_on = "2k", rate_off = "50", mean_on = "100ms", mean_off = "500ms" }
weight = 1
reservation = "100"
limit = "800"
slo = "50ms"

[[tenant]]
name = "backup"
closed = { outstanding = 4, size = "64KiB" }
weight = 1

[[policy]]
kind = "mclock"

[[policy]]
kind = "wf2q"

[grid]
"device.capacity" = ["800", "1.2k"]
"""

GATEWAY = """\
listen = "127.0.0.1:10809"
iops = "2k"
depth = 1
window = "1s"

[policy]
kind = "wf2q"

[[tenant]]
name = "web"
weight = 3
slo = "10ms"

[[tenant]]
name = "batch"
weight = 1

[[export]]
name = "web"
path = "web.img"
tenant = "web"
allow = ["127.0.0.1", "::1"]

[[export]]
name = "batch"
path = "batch.img"
tenant = "batch"

[limits]
max_connections = 256
handshake_timeout = "10s"
idle_timeout = "30min"
max_inflight = "256MiB"
"""

#: Each kind of input: how to make its seed.
KINDS: dict[str, Callable[[Path], Seed]] = {
    "csv": lambda tmp: Seed("t.csv", _written(write_csv, tmp, "s.csv").decode(),
                            (("trace", "info", "{}"), ("simulate", "{}", "--capacity", "2k"))),
    "spc": lambda tmp: Seed("t.spc", _written(write_spc, tmp, "s.spc").decode(),
                            (("trace", "info", "{}", "--format", "spc"),
                             ("simulate", "{}", "--format", "spc", "--capacity", "2k"))),
    "disksim": lambda tmp: Seed("t.disksim", _written(write_disksim, tmp, "s.disksim").decode(),
                                (("trace", "info", "{}", "--format", "disksim"),
                                 ("plan", "{}", "--format", "disksim", "--deadline", "50ms", "--fraction", "99"))),
    "mqsim": lambda tmp: Seed("t.trace", _written(write_mqsim, tmp, "s.trace").decode(),
                              (("trace", "info", "{}"), ("simulate", "{}", "--policy", "wf2q", "--split-by",
                                                         "device", "--capacity", "2k"))),
    "fio": lambda tmp: Seed("t.iolog", _written(write_fio, tmp, "s.iolog").decode(),
                            (("trace", "info", "{}", "--format", "fio"),
                             ("simulate", "{}", "--format", "fio", "--capacity", "2k"))),
    "msr": lambda tmp: Seed("t.csv", _msr(_requests()), (("trace", "info", "{}", "--format", "msr"),
                                                         ("simulate", "{}", "--capacity", "2k"))),
    "fiu": lambda tmp: Seed("t.blkparse", _fiu(_requests()),
                            (("trace", "info", "{}", "--format", "fiu"),
                             ("simulate", "{}", "--format", "fiu", "--split-by", "process", "--capacity", "2k"))),
    "blkparse": lambda tmp: Seed("t.txt", _blkparse(_requests()),
                                 (("trace", "info", "{}", "--format", "blkparse"),
                                  ("simulate", "{}", "--format", "blkparse", "--capacity", "2k"))),
    "srt": lambda tmp: Seed("t.srt", _written(write_srt, tmp, "s.srt"),
                            (("trace", "info", "{}", "--format", "srt"),
                             ("simulate", "{}", "--format", "srt", "--capacity", "2k"))),
    "vscsi": lambda tmp: Seed("t.vscsi", _written(write_vscsi, tmp, "s.vscsi"),
                              (("trace", "info", "{}", "--format", "vscsi"),
                               ("simulate", "{}", "--format", "vscsi", "--capacity", "2k"))),
    "parquet": lambda tmp: Seed("t.parquet", _written(write_parquet, tmp, "s.parquet"),
                                (("trace", "info", "{}"), ("simulate", "{}", "--capacity", "2k"))),
    "experiment": lambda tmp: Seed("exp.toml", EXPERIMENT, (("run", "{}", "--check"),),
                                   files=(("web.mqsim", _written(write_mqsim, tmp, "s.trace")),)),
    "gateway config": lambda tmp: Seed("gw.toml", GATEWAY, (("serve", "--config", "{}", "--check"),),
                                       files=(("web.img", bytes(1 << 20)), ("batch.img", bytes(1 << 20)))),
    "device profile": lambda tmp: Seed("disk.toml", _profile(),
                                       (("simulate", str(bundled("websearch")), "--device-profile", "{}"),)),
}


def _one_line_or_success(code: int, err: str) -> bool:
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("warning:")]
    return "Traceback" not in err and (code == 0 or (code == 2 and len(lines) == 1 and lines[0].startswith("error:")))


@pytest.mark.untimed
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_mutated_input_is_run_or_refused_in_one_line(kind: str, tmp_path: Path) -> None:
    seed = KINDS[kind](tmp_path)
    for name, data in seed.files:
        (tmp_path / name).write_bytes(data)
    path = tmp_path / seed.name
    # the seed itself runs: a mutation that is refused is refused for what it changed
    for cmd in seed.commands:
        path.write_bytes(seed.data) if isinstance(seed.data, bytes) else path.write_text(seed.data)
        r = run_cli(*(a.replace("{}", str(path)) for a in cmd), cwd=tmp_path)
        assert r.code == 0, (kind, cmd, r.err)
    rng = random.Random(f"storqos fuzz {kind}")
    for case in range(CASES):
        cmd = rng.choice(seed.commands)
        if isinstance(seed.data, bytes):
            data, what = mutate_bytes(seed.data, rng)
            path.write_bytes(data)
        else:
            text, what = (mutate_toml if seed.name.endswith(".toml") else mutate_text)(seed.data, rng)
            path.write_text(text)
        argv = [a.replace("{}", str(path)) for a in cmd]
        r = run_cli(*argv, cwd=tmp_path)
        assert _one_line_or_success(r.code, r.err), (
            f"{kind} case {case} ({what}): `storqos {' '.join(argv)}` exited {r.code}: {r.err.strip()[:600]}")
