"""Every table the CLI prints reads in an 80-column terminal: no cell is cut to "…"
(``device.ca…`` on every row was the complaint), no line is wider than the terminal:
long tenant and export names and grid values fold onto further lines, and every figure
stays whole (``serve``'s summary had ``1,801…``, ``run``'s ``capacity=8.…``).
``ctl stats`` names the policy in words (``policy: wf2q weights 2:1``).

The commands run on the bundled WebSearch excerpt; `storqos warm` on 16 synthetic days
(a weekday class and a weekend class)."""

from __future__ import annotations

import io
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
import storqos
from conftest import run_cli
from storqos.planning.warming.workload import bimodal_days
from storqos.traces import write_parquet

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


def _column(out: str, index: int) -> str:
    """The text of a table's column ``index`` (0 = the first), every line's cell joined:
    a name folded over several lines reads whole again."""
    return "".join(ln.split("│")[index + 1].strip() for ln in out.splitlines()
                   if ln.startswith("│") and ln.count("│") > index + 1)


#: A tenant named as a trace volume often is, and grid values that need their width.
LONG_NAMES = """
duration = "3s"
[device]
kind = "constant"
capacity = "800"
[[trace]]
name = "cloudphysics-w26-volume"
path = "bundled:websearch"
slo = "10ms"
weight = 2
[[tenant]]
name = "batch-neighbour-with-a-long-name"
generator = { kind = "onoff", rate_on = "1k", rate_off = 0, mean_on = "100ms", mean_off = "900ms" }
[[policy]]
kind = "mclock"
[[policy]]
name = "fair-share-by-weight"
kind = "wf2q"
[grid]
"device.capacity" = ["8.25k", "12.5k"]
"window" = ["500ms", "1s"]
"""


def test_run_folds_long_names_and_grid_values(tmp_path: Path) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text(LONG_NAMES)
    r = run_cli("run", str(exp), "--workers", "1", "--no-report", "--out", str(tmp_path / "run"), columns=80)
    assert r.code == 0, r.err
    _assert_fits(r.out)
    runs, tenants = _column(r.out, 0), _column(r.out, 1)
    assert tenants.count("cloudphysics-w26-volume") == 8 and tenants.count("batch-neighbour-with-a-long-name") == 8
    assert runs.count("fair-share-by-weight") == 4 and runs.count("mclock") == 4
    assert runs.count("capacity=8.25k") == 4 and runs.count("capacity=12.5k") == 4 and runs.count("window=500ms") == 4


def test_serve_summary_keeps_every_figure_whole_at_80_columns() -> None:
    # The figures of a long session (1.8 M requests) and exports with long names, in
    # the gateway's statistics as `serve` gets them at the end.
    from rich.console import Console
    from storqos.cli.commands.serve import _tables

    stats = {"policy": "wf2q+", "elapsed_s": 3600.0, "connections": 12, "tenants": [
        {"tenant": 0, "exports": ["websearch-volume", "websearch-replica"], "ops": 1_801_234, "reads": 901_000,
         "writes": 900_234, "bytes": 7_377_780_000, "iops": 500.34, "flushes": 123_456, "errors": 12,
         "mean_us": 1143.94, "p50_us": 636.9, "p99_us": 123_747.1, "max_us": 1_234_567.8},
        {"tenant": 1, "exports": ["batch"], "ops": 1, "reads": 0, "writes": 1, "bytes": 2**20, "iops": 0.000278,
         "flushes": 2, "errors": 0, "mean_us": 5728.8, "p50_us": 5728.8, "p99_us": 5728.8, "max_us": 5728.8}]}
    # The gateway hands serve a typed GatewayStats; the same fields as attributes here.
    typed = SimpleNamespace(**{**stats, "tenants": [SimpleNamespace(rejected=0, **t) for t in stats["tenants"]]})
    console = Console(width=80, file=io.StringIO())
    for t in _tables(typed):  # type: ignore[arg-type]
        console.print(t)
    out = console.file.getvalue()
    _assert_fits(out)
    traffic, latency = out.split("response time per tenant")
    assert _column(traffic, 1).replace(" ", "") == "websearch-volume,websearch-replicabatch"
    # Counts whole with thousands separators; MiB, IOPS and µs in the tables' one format.
    for figure in ("1,801,234", "901,000", "900,234", "123,456", "7,036", "500", "0.000278"):
        assert figure in traffic, (figure, traffic)
    for figure in ("1,144", "637", "123,747", "1,234,568", "5,729", "12"):
        assert figure in latency, (figure, latency)


@pytest.mark.untimed
def test_ctl_stats_names_the_policy_in_words_at_80_columns(tmp_path: Path) -> None:
    from test_serve import Server, _image

    sock = tmp_path / "gw.sock"
    a, b = _image(tmp_path / "a.img"), _image(tmp_path / "b.img")
    for args, words in ((["--policy", "fcfs"], "policy: fcfs"),
                        (["--policy", "wf2q", "--weights", "2,1"], "policy: wf2q weights 2:1")):
        s = Server("--export", f"a={a}", "--export", f"b={b}", "--listen", "127.0.0.1:0", "--control", str(sock), *args)
        s.ready()
        try:
            r = run_cli("ctl", "stats", "--socket", str(sock), columns=80)
        finally:
            code, _, err = s.finish(signal.SIGTERM)
        assert r.code == 0 and code == 0, (r.err, err)
        _assert_fits(r.out)
        assert r.out.splitlines()[-1] == words, r.out


@pytest.mark.parametrize(("policy", "params", "words"), [
    ("mclock", {"reservations": "100,0", "limits": "none,500", "weights": "1,2", "at_limit": "wait"},
     "mclock reservations 100:0 weights 1:2 limits none:500 at-limit wait"),
    ("edf", {"deadlines": "10ms,50ms"}, "edf deadlines 10ms:50ms default-deadline 50ms"),
    ("sarc+avatar", {"slo": "web:160iops@400ms,oltp:190iops@900ms"}, "sarc+avatar slo 160iops@400ms:190iops@900ms"),
])
def test_ctl_names_every_parameter_of_a_policy(policy: str, params: dict[str, str], words: str) -> None:
    # The gateway's stats carry the policy as the simulator's spec; ctl says it as
    # --policy and its options do: per-tenant lists with ":", times and rates with units.
    from storqos.cli.commands.ctl import policy_words
    from storqos.model.specs import policy_spec

    assert policy_words(policy_spec(policy, **params)) == words
