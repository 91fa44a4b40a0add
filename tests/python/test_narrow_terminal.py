"""Every table the CLI prints reads in an 80-column terminal: no cell is cut to "…"
(``device.ca…`` on every row was the complaint), no line is wider than the terminal.

The commands run on the bundled WebSearch excerpt; `storqos warm` on 16 synthetic days
(a weekday class and a weekend class)."""

from __future__ import annotations

from pathlib import Path

import pytest
import storqos
from conftest import run_cli
from storqos.traces import write_parquet
from storqos.warming.workload import bimodal_days

WEB = str(storqos.bundled_trace())

EXPERIMENT = """
duration = "3s"
[device]
kind = "constant"
capacity = "800"
[[trace]]
name = "websearch"
path = "bundled:websearch"
slo = "10ms"
weight = 2
[[tenant]]
name = "batch"
generator = { kind = "onoff", rate_on = "1k", rate_off = 0, mean_on = "100ms", mean_off = "900ms" }
[[policy]]
kind = "fcfs"
[[policy]]
kind = "wf2q"
[grid]
"device.capacity" = ["600", "800"]
"""

CASES = {
    "trace info": ["trace", "info", WEB],
    "simulate": ["simulate", WEB, "--policy", "wf2q", "--capacity", "1k"],
    "simulate two traces": ["simulate", WEB, WEB, "--policy", "mclock", "--reservations", "100,100", "--capacity", "1k"],
    "plan": ["plan", WEB],
    "plan --recombine": ["plan", WEB, "--recombine", "--fraction", "95", "--deadline", "10ms"],
    "plan --rtd": ["plan", WEB, "--rtd", "90%@20ms,100%@500ms"],
    "plan --consolidate": ["plan", WEB, "--consolidate", WEB, "--deadline", "10ms"],
    "plan --power": ["plan", WEB, "--power", "--fraction", "95", "--deadline", "10ms"],
    "allocate": ["allocate", "--device", "hdd=200", "--device", "ssd=1000", "--client", "p:hit=0.75",
                 "--client", "q:hit=0.5", "--client", "r:hit=0.9", "--client", "s:hit=0.95"],
    "admit": ["admit", "--workload", "w1:40:35ms", "--workload", "w2:20:38ms", "--device", "disk"],
}


def _assert_fits(out: str) -> None:
    assert "…" not in out, out
    wide = [ln for ln in out.splitlines() if len(ln) > 80]
    assert not wide, wide


@pytest.mark.parametrize("args", list(CASES.values()), ids=list(CASES))
def test_tables_read_at_80_columns(args: list[str]) -> None:
    r = run_cli(*args, columns=80)
    assert r.code == 0, r.err
    assert "┃" in r.out or "──" in r.out, r.out  # a table was printed
    _assert_fits(r.out)


def test_run_and_demo_read_at_80_columns(tmp_path: Path) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT)
    for args in (["run", str(exp), "--workers", "1", "--no-report", "--out", str(tmp_path / "run")],
                 ["demo", "--out", str(tmp_path / "demo")]):
        r = run_cli(*args, columns=80)
        assert r.code == 0, r.err
        _assert_fits(r.out)


def test_warm_reads_at_80_columns(tmp_path: Path) -> None:
    df, _ = bimodal_days(16, seed=3)  # a weekday class and a weekend class
    write_parquet(df, tmp_path / "days.parquet")
    r = run_cli("warm", str(tmp_path / "days.parquet"), "--fast-tier", "64GiB", "--warm-rate", "18MiB/s", columns=80)
    assert r.code == 0, r.err
    _assert_fits(r.out)
