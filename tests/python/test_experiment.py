"""Experiment files (storqos.experiments.experiment), sweeps (storqos.experiments.sweep), the HTML report
(storqos.experiments.report) and `storqos run`:

- schema errors are one line naming the file and the key, exit status 2 from the CLI;
- the grid expands to policies × the cartesian product of its lists, per-tenant
  parameters fill the policies' lists;
- the same small grid gives identical results serially, on a 2-process pool and on a
  2-worker Dask LocalCluster;
- `storqos run` writes the Parquet tables, summary.json and report.html, and the report
  renders every plot in headless Chromium with an empty console.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import polars as pl
import pytest
from conftest import REPO
from storqos.base.errors import InputError
from storqos.experiments.experiment import from_dict, load, run_experiment
from storqos.experiments.outputs import write_outputs

#: A small experiment: the bundled WebSearch excerpt (first 4 s), a Poisson tenant and a
#: closed-loop tenant on a constant-rate device; 2 policies × 2 capacities.
SMALL = """
name = "small"
description = "test grid"
seed = 3
duration = "4s"
window = "500ms"

[device]
kind = "constant"
capacity = "900"

[[trace]]
name = "web"
path = "bundled:websearch"
weight = 2
reservation = "300"
slo = "10ms"

[[tenant]]
name = "batch"
generator = { kind = "onoff", rate_on = "1k", rate_off = 0, mean_on = "100ms", mean_off = "900ms" }
weight = 1
slo = "50ms"

[[tenant]]
name = "backup"
closed = { outstanding = 4, think = "1ms", think_exponential = true, size = "64KiB" }
weight = 1
limit = "150"

[[policy]]
kind = "mclock"

[[policy]]
name = "fair"
kind = "wf2q"

[grid]
"device.capacity" = ["800", "1.2k"]
"""


def write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_a_value_the_grid_replaces_is_checked_too(tmp_path: Path) -> None:
    """A malformed value that the grid replaces at every point was never run, and so
    never refused: `capacity = "none"` under a grid of capacities passed `--check`. It
    is wrong input all the same; a value the file leaves to the grid is not missing."""
    bad = SMALL.replace('capacity = "900"', 'capacity = "none"')
    with pytest.raises(InputError, match=r"^exp.toml:10: \[device\] capacity: malformed rate 'none'"):
        load(write(tmp_path, bad))
    bad = SMALL.replace('reservation = "300"', 'reservation = "lots"').replace(
        "[grid]", '[grid]\n"trace.web.reservation" = ["100", "300"]')
    with pytest.raises(InputError, match=r"^exp.toml:16: \[\[trace\]\] 1 \(web\): reservation: malformed rate 'lots'"):
        load(write(tmp_path, bad))
    left = SMALL.replace('capacity = "900"\n', "")
    assert [r.device["iops"] for r in load(write(tmp_path, left)).runs] == [800.0, 800.0, 1200.0, 1200.0]


def test_grid_expands_and_tenants_fill_policy_parameters(tmp_path: Path) -> None:
    exp = load(write(tmp_path, SMALL))
    assert len(exp.runs) == 4
    assert [r.policy_name for r in exp.runs] == ["mclock", "fair", "mclock", "fair"]
    assert [r.point for r in exp.runs][::2] == [{"device.capacity": "800"}, {"device.capacity": "1.2k"}]
    assert [r.device["iops"] for r in exp.runs] == [800.0, 800.0, 1200.0, 1200.0]
    assert [t.name for t in exp.runs[0].tenants] == ["web", "batch", "backup"]
    assert exp.runs[0].policy == {"kind": "mclock", "reservations": [300.0, 0.0, 0.0], "weights": [2.0, 1.0, 1.0],
                                  "limits": [None, None, 150.0]}
    assert exp.runs[1].policy == {"kind": "wf2q", "weights": [2.0, 1.0, 1.0]}
    # One shared trace frame (the excerpt's first 4 s, tenant 0), generators and closed
    # clients as specs with their tenant ids.
    assert len(exp.traces) == 1
    df = next(iter(exp.traces.values()))
    assert df["tenant"].unique().to_list() == [0] and df["arrival_ns"].max() < 4_000_000_000
    assert exp.runs[0].generators[0]["tenant"] == 1 and exp.runs[0].closed[0]["tenant"] == 2
    # A split trace makes one tenant per key.
    split = SMALL.replace('path = "bundled:websearch"', 'path = "bundled:websearch"\nsplit = "device"')
    exp = load(write(tmp_path, split, "split.toml"))
    names = [t.name for t in exp.runs[0].tenants]
    assert sorted(names[:6]) == [f"web/{k}" for k in "012345"] and names[6:] == ["batch", "backup"]


def _at_line(message: str, text: str, changed: str) -> str:
    """``message`` without its line number, once that line is checked to be one of the
    changed lines (or the header of their table)."""
    m = re.match(r"exp\.toml:(\d+): ", message)
    if m is None:
        return message
    line = text.splitlines()[int(m.group(1)) - 1]
    assert any(c in line for c in changed.splitlines()) or line.startswith("["), (message, line)
    return message.replace(f"exp.toml:{m.group(1)}: ", "exp.toml: ", 1)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("seed = 3", "seed = 3\nsede = 4"), "exp.toml: unknown key 'sede'"),
        (('kind = "constant"', 'kind = "ssd"'), "unknown device 'ssd'"),
        (('["800", "1.2k"]', '["800", "fast"]'), "malformed rate 'fast'"),
        (('"device.capacity" = ["800", "1.2k"]', '"device.capacity" = []'), "[grid] 'device.capacity': expected a non-empty list, got []"),
        (('"device.capacity"', '"tenant.nobody.weight"'), "no [[tenant]] named 'nobody'"),
        (('"device.capacity"', '"colour"'), "[grid] key 'colour' names nothing"),
        # The same value twice ran every run of it twice, counted as one grid point.
        (('["800", "1.2k"]', '["800", "1.2k", "800"]'), "exp.toml: [grid] 'device.capacity': \"800\" given twice"),
        # 4 million points took minutes to expand before the first run.
        (('"device.capacity" = ["800", "1.2k"]', '"device.capacity" = [' + ", ".join(f'"{i + 1}"' for i in range(2000))
          + ']\nseed = [' + ", ".join(str(i) for i in range(2000)) + ']'),
         "exp.toml: [grid] has 4,000,000 points (2000 × 2000); at most 100,000"),
        (('kind = "onoff"', 'kind = "zipf"'), "[[tenant]] 1 (batch): generator: unknown kind 'zipf'"),
        (("rate_on = ", "rateon = "), "generator: unknown key 'rateon'"),
        (("outstanding = 4", "outstanding = 4, depth = 2"), "[[tenant]] 2 (backup): closed: unknown key 'depth'"),
        (('limit = "150"', 'limit = "150"\nreservation = "500"'), "reservations[2] (500 IOPS) exceeds limits[2] (150 IOPS)"),
        (('kind = "wf2q"', 'kind = "lottery"'), "[[policy]] 2 (fair): unknown policy 'lottery'"),
        (('kind = "wf2q"', 'kind = "wf2q"\nweights = [1, 2]'), "exp.toml: [[policy]] 2 (fair): weights: 2 value(s) for 3 tenant(s)"),
        (('name = "fair"', 'name = "mclock"'), "[[policy]] name(s) mclock given twice"),
        # The file's key, not the flag the parser speaks of ("--weights: ...").
        (('kind = "wf2q"', 'kind = "wf2q"\nweights = [1, -2, 1]'), "exp.toml: [[policy]] 2 (fair): weights: weights must"),
        (('kind = "wf2q"', 'kind = "wf2q"\nreservations = [1, 2, 3]'), "[[policy]] 2 (fair): reservations: wf2q does not take"),
        (('path = "bundled:websearch"', 'path = "missing.trace"'), "trace file 'missing.trace' not found"),
        (('weight = 2', 'weight = -2'), "[[trace]] 1 (web): weight: must be a number > 0, got -2"),
        (('slo = "10ms"', 'slo = "soon"'), "slo: malformed duration"),
        (("seed = 3", "seed = 3\n[broken"), "TOML syntax error"),
    ],
)
def test_schema_errors_name_file_and_key(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    old, new = change
    assert old in SMALL
    path = write(tmp_path, SMALL.replace(old, new, 1))
    with pytest.raises(InputError) as e:
        load(path)
    assert message in _at_line(str(e.value), SMALL.replace(old, new, 1), new), str(e.value)
    assert "\n" not in str(e.value)


#: Wrong-typed, truncated or extreme values of an experiment file (fuzzing): each used to
#: end in "internal error" (AttributeError, ValueError, TypeError, OverflowError), in an
#: aborted process, or in a run that never ended.
WRONG_TYPED = [
    (('size = "64KiB"', "size = []"), "exp.toml: [[tenant]] 2 (backup): closed: size: expected a number or a number with a unit (e.g. 10ms, 1.2k, 64KiB), got []"),
    (('size = "64KiB"', "size = 0.5"), "[[tenant]] 2 (backup): closed: closed client of tenant 2: size '0.5' must be > 0"),
    (("outstanding = 4", 'outstanding = ""'), "[[tenant]] 2 (backup): closed: closed client of tenant 2: outstanding: expected a whole number"),
    (("outstanding = 4", "outstanding = 2147483648"), "outstanding: must be between 1 and 1048576"),
    (('mean_off = "900ms"', "mean_off = {}"), "[[tenant]] 1 (batch): generator: mean_off: expected a number or a number with a unit"),
    (('reservation = "300"', "reservation = [1]"), "[[trace]] 1 (web): reservation: expected a rate in IOPS"),
    (('path = "bundled:websearch"', 'path = "bundled:websearch"\nmax_requests = 1e308'),
     "[[trace]] 1 (web): max_requests: must be between 1 and"),
    (('path = "bundled:websearch"', 'path = "bundled:websearch"\nmax_requests = "1e19"'), "max_requests: expected a whole number"),
    (('path = "bundled:websearch"', 'path = "bundled:websearch"\nstart = []'), "[[trace]] 1 (web): start: expected a duration"),
    (('duration = "4s"', 'duration = "1e30s"'), "duration: duration '1e30s' is too long"),
    (("seed = 3", "seed = 18446744073709551616"), "seed: must be an integer in [0, 2**64)"),
    (('path = "bundled:websearch"', 'path = "bundled:websearch"\nrate_scale = "10xs"'),
     "[[trace]] 1 (web): rate_scale: must be a number > 0, got '10xs'"),
    (('[device]\nkind = "constant"\ncapacity = "900"', 'device = "0"'), "exp.toml: needs a [device] table"),
    (('kind = "constant"', 'kind = "array"\nservers = "x"'), "exp.toml: [device] servers: expected a whole number, got 'x'"),
    (('path = "bundled:websearch"', 'path = "bundled:websearch"\nsplit = "host"'),
     "exp.toml: [[trace]] 1 (web): split: cannot split by 'host': the trace has no 'host' column"),
]


@pytest.mark.parametrize(("capacity", "message"), [
    ('"nan"', "exp.toml:10: [device] capacity: malformed rate 'nan'"),
    ("1e400", "exp.toml:10: [device] capacity: rate inf is above 10^9 IOPS"),
])
def test_a_device_key_is_named_as_the_file_writes_it(tmp_path: Path, capacity: str, message: str) -> None:
    """The device's parser speaks of flags (``--capacity``); an error about the file's
    [device] names its key and line instead."""
    text = SMALL.split("[grid]")[0].replace('capacity = "900"', f"capacity = {capacity}")
    assert text.splitlines()[9] == f"capacity = {capacity}"
    with pytest.raises(InputError) as e:
        load(write(tmp_path, text))
    assert str(e.value).startswith(message), str(e.value)


@pytest.mark.parametrize(("change", "message"), WRONG_TYPED, ids=[c[0][1][:30] for c in WRONG_TYPED])
def test_wrong_typed_values_are_input_errors(tmp_path: Path, change: tuple[str, str], message: str) -> None:
    old, new = change
    assert old in SMALL
    path = write(tmp_path, SMALL.replace(old, new, 1))
    with pytest.raises(InputError) as e:
        load(path)
    assert message in _at_line(str(e.value), SMALL.replace(old, new, 1), new), str(e.value)
    assert "\n" not in str(e.value)


def test_cli_error_keeps_the_brackets_of_table_names(tmp_path: Path, cli) -> None:
    """rich used to read ``[device]`` and ``[[tenant]]`` in a message as markup and drop them."""
    from conftest import assert_one_line_error

    path = write(tmp_path, SMALL.replace('[device]\nkind = "constant"\ncapacity = "900"', 'device = "0"', 1))
    assert_one_line_error(cli("run", str(path), "--out", str(tmp_path / "o")), "exp.toml:8: needs a [device] table")
    path = write(tmp_path, SMALL.replace("outstanding = 4", 'outstanding = ""', 1))
    assert_one_line_error(cli("run", str(path), "--out", str(tmp_path / "o")), "[[tenant]] 2 (backup): closed:")


def test_cli_run_binary_file_is_one_line(tmp_path: Path, cli) -> None:
    """A file that is not UTF-8 text (found by fuzzing: "internal error: UnicodeDecodeError")."""
    from conftest import assert_one_line_error

    path = tmp_path / "exp.toml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    assert_one_line_error(cli("run", str(path), "--out", str(tmp_path / "o")),
                          f"{path}: not a TOML text file: byte 0 is not UTF-8")


def test_experiment_duration_ends_generators_with_a_count(tmp_path: Path) -> None:
    """A generator's count of 2**31 at 1k IOPS would run for 25 days of simulated time
    (found by fuzzing as a run that did not end); the experiment's 4 s end it, as they
    end the trace and the closed clients."""
    text = SMALL.replace('{ kind = "onoff", rate_on = "1k", rate_off = 0, mean_on = "100ms", mean_off = "900ms" }',
                         '{ kind = "poisson", rate = "1k", count = 2147483648 }', 1)
    res = run_experiment(load(write(tmp_path, text)), backend="serial")
    batch = res.tenants.filter(pl.col("name") == "batch")
    assert batch.height == 4
    # ≈ 4,000 arrivals in 4 s (Poisson: ± a few %), whatever the policy completed of them.
    assert (batch["completed"] <= 4_400).all() and (batch["completed"] >= 2_000).all(), batch
    # The generator's own, shorter duration still ends it sooner.
    text = text.replace("count = 2147483648", 'count = 2147483648, duration = "1s"', 1)
    res = run_experiment(load(write(tmp_path, text)), backend="serial")
    assert (res.tenants.filter(pl.col("name") == "batch")["completed"] <= 1_150).all()


def test_cli_run_generator_faster_than_the_clock(tmp_path: Path, cli) -> None:
    """Above one request per ns the gaps round to 0 and time stops: that run never ended."""
    from conftest import assert_one_line_error

    path = write(tmp_path, SMALL.replace('rate_on = "1k"', "rate_on = 9223372036854775807", 1))
    assert_one_line_error(cli("run", str(path), "--workers", "1", "--out", str(tmp_path / "o")),
                          "[[tenant]] 1 (batch): generator: rate_on", "is above 10^9 IOPS (one request per ns")


def test_cli_run_slo_rate_faster_than_the_clock(tmp_path: Path, cli) -> None:
    """A reservation (sarc+avatar's R_i) of 1e308 IOPS made the credits infinite: the run never ended."""
    from conftest import assert_one_line_error

    text = SMALL.replace('kind = "mclock"', 'kind = "sarc+avatar"', 1).replace('reservation = "300"', "reservation = 1e308", 1)
    text = text.replace('weight = 1\nslo = "50ms"', 'weight = 1\nslo = "50ms"\nreservation = "100"', 1)
    text = text.replace('limit = "150"', 'limit = "150"\nreservation = "100"\nslo = "1s"', 1)
    path = write(tmp_path, text)
    assert_one_line_error(cli("run", str(path), "--workers", "1", "--out", str(tmp_path / "o")),
                          "[[trace]] 1 (web): reservation", "rate 1e+308 is above 10^9 IOPS (one request per ns")


def test_cli_run_checks_out_before_running(tmp_path: Path, cli) -> None:
    from conftest import assert_one_line_error

    blocker = tmp_path / "file"
    blocker.write_text("x")
    path = write(tmp_path, SMALL)
    assert_one_line_error(cli("run", str(path), "--out", str(blocker)), "--out", "exists and is not a directory")
    assert_one_line_error(cli("run", str(path), "--out", str(tmp_path / "o"), "--markdown", f"{blocker}/r.md"),
                          "--markdown", "is not a directory")
    # --workers sizes the local pool, which a Dask run does not use: it was ignored.
    assert_one_line_error(cli("run", str(path), "--out", str(tmp_path / "o"), "--dask", "local:2", "--workers", "2"),
                          "--workers: give --workers (a local process pool) or --dask (a Dask cluster), not both")
    assert not (tmp_path / "o").exists()


def test_structure_errors() -> None:
    base = {"device": {"kind": "constant", "capacity": 100}, "policy": [{"kind": "fcfs"}],
            "tenant": [{"name": "a", "generator": {"kind": "poisson", "rate": 10, "count": 5}}]}
    assert len(from_dict(base).runs) == 1
    for drop, msg in (("policy", "needs at least one [[policy]]"), ("device", "needs a [device] table"),
                      ("tenant", "needs at least one [[trace]] or [[tenant]]")):
        bad = {k: v for k, v in base.items() if k != drop}
        with pytest.raises(InputError, match=re.escape(msg)):
            from_dict(bad)
    two = {**base, "tenant": [{"name": "a", "generator": {"kind": "poisson", "rate": 10, "count": 5},
                               "closed": {"outstanding": 1}}]}
    with pytest.raises(InputError, match="needs exactly one of trace, generator or closed"):
        from_dict(two)
    nostop = {**base, "tenant": [{"name": "a", "closed": {"outstanding": 1}}]}
    with pytest.raises(InputError, match="closed-loop tenants need a stop time or an experiment duration"):
        from_dict(nostop)


def _comparable(res) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    return res.tenants, res.windows, res.cdf


def test_local_pool_and_dask_localcluster_give_identical_results(tmp_path: Path) -> None:
    exp = load(write(tmp_path, SMALL))
    serial = run_experiment(exp, backend="serial")
    pool = run_experiment(exp, backend="local", workers=2)
    dask = run_experiment(exp, backend="local:2")
    assert dask.backend == "local:2"
    for other in (pool, dask):
        for a, b in zip(_comparable(serial), _comparable(other), strict=True):
            assert a.equals(b)
    t = serial.tenants
    assert t.height == 4 * 3
    # The runs did something sensible: every tenant completed requests, mClock kept the
    # backup tenant at or under its 150 IOPS limit.
    assert t["completed"].min() > 0
    backup = t.filter((pl.col("policy") == "mclock") & (pl.col("name") == "backup"))
    assert (backup["completed"] / 4.0 <= 150 * 1.01).all(), backup
    # Different seeds give different closed-loop think times: results change.
    exp2 = load(write(tmp_path, SMALL.replace("seed = 3", "seed = 4"), "seed4.toml"))
    other = run_experiment(exp2, backend="serial")
    assert not other.tenants.equals(serial.tenants)


def test_cli_run_writes_tables_summary_and_report(tmp_path: Path, cli) -> None:
    path = write(tmp_path, SMALL)
    out = tmp_path / "out"
    r = cli("run", str(path), "--out", str(out), "--workers", "1", "--json")
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    assert summary["experiment"] == "small" and len(summary["runs"]) == 4
    assert summary["grid"] == {"device.capacity": ["800", "1.2k"]}
    assert summary["tenants"] == ["web", "batch", "backup"]
    assert json.loads((out / "summary.json").read_text())["runs"] == summary["runs"]
    tenants = pl.read_parquet(out / "tenants.parquet")
    assert tenants.height == 12 and {"run", "policy", "device.capacity", "name", "p99_ns", "within_slo"} <= set(tenants.columns)
    web = tenants.filter(pl.col("name") == "web")
    assert web["slo_ns"].unique().to_list() == [10_000_000]
    windows = pl.read_parquet(out / "windows.parquet")
    assert windows["run"].n_unique() == 4 and windows["start_ns"].max() >= 3_500_000_000
    html = (out / "report.html").read_text()
    # 1 capacity curve + (CDF + time series) per grid point; plotly inlined, no CDN.
    assert 'name="storqos-figures" content="5"' in html
    assert html.count('class="storqos-figure"') == 5
    assert re.search(r"<script[^>]*\ssrc=", html) is None and re.search(r"<link[^>]*\shref=", html) is None
    # Human output: a table and the file list.
    r = cli("run", str(path), "--out", str(out), "--workers", "1", "--no-report")
    assert r.code == 0 and "small: 4 runs" in r.out and "tenants:" in r.out
    # Bad input: one line, exit 2.
    bad = write(tmp_path, SMALL.replace("seed = 3", "seed = -1"), "bad.toml")
    r = cli("run", str(bad), "--out", str(out))
    assert r.code == 2 and r.err.strip().count("\n") == 0 and "bad.toml:4: seed: must be an integer in [0, 2**64), got -1" in r.err
    r = cli("run", str(path), "--dask", "nowhere")
    assert r.code == 2 and "--dask: expected tcp://HOST:PORT or local:N" in r.err


def chromium() -> str:
    """Debian's chromium (package `chromium`), installed by the Makefile."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    raise AssertionError("headless Chromium not found: install Debian's `chromium` package (apt-get install chromium)")


def headless(page: Path) -> tuple[str, list[str]]:
    """Load ``page`` in headless Chromium; return the rendered DOM and the console lines."""
    p = subprocess.run(
        [chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=10000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    # Every console message (log, warn, error, uncaught exception) is logged as
    # "[pid:tid:time:INFO:CONSOLE:line] "message", source: URL (line)".
    console = [line for line in p.stderr.splitlines() if ":CONSOLE" in line]
    return p.stdout, console


def test_report_renders_every_plot_in_headless_chromium(tmp_path: Path) -> None:
    # The harness sees console errors (so an empty console below means something).
    probe = tmp_path / "probe.html"
    probe.write_text("<html><body><script>console.error('probe error'); missingFunction();</script></body></html>")
    _, console = headless(probe)
    assert any("probe error" in c for c in console) and any("Uncaught ReferenceError" in c for c in console), console

    exp = load(write(tmp_path, SMALL))
    res = run_experiment(exp, backend="serial")
    write_outputs(res, tmp_path / "out")
    page = Path(res.files["report"])
    n = int(re.search(r'name="storqos-figures" content="(\d+)"', page.read_text()).group(1))
    assert n == 5
    dom, console = headless(page)
    assert console == [], console
    figures = re.split(r'(?=<div id="fig-\d+")', dom)[1:]
    assert len(figures) == n
    for i, fig in enumerate(figures):
        head = fig[: fig.index(">") + 1]
        assert f'id="fig-{i}"' in head and "js-plotly-plot" in head, head  # plotly took the div
        assert fig.count('class="main-svg"') >= 1, f"figure {i} has no SVG"
        assert re.search(r'class="trace scatter', fig), f"figure {i} drew no lines"


#: A device too slow for its tenants: response times of seconds, thousands of ms.
OVERLOADED = """
name = "over"
description = "an overloaded device"
seed = 3
duration = "6s"
[device]
kind = "constant"
capacity = "450"
[[trace]]
name = "web"
path = "bundled:websearch"
slo = "10ms"
[[tenant]]
name = "batch"
generator = { kind = "poisson", rate = "1.5k" }
slo = "50ms"
[[policy]]
kind = "fcfs"
"""


def test_report_tables_print_figures_as_the_terminal_does(tmp_path: Path, cli) -> None:
    # The HTML table printed 3.22e+03 where the terminal printed 3,215.
    r = cli("run", str(write(tmp_path, OVERLOADED)), "--out", str(tmp_path / "out"), "--workers", "1")
    assert r.code == 0, r.err
    terminal = {cells[1]: cells[2:6] for cells in (
        [c.strip() for c in ln.split("│")[1:-1]] for ln in r.out.splitlines() if ln.startswith("│"))}
    page = (tmp_path / "out" / "report.html").read_text()
    html_rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr><td>.*?</tr>", page)]
    assert len(html_rows) == 2 and "e+" not in page.split("<tbody>")[1].split("</tbody>")[0]
    tenants = pl.read_parquet(tmp_path / "out" / "tenants.parquet")
    for cells in html_rows:
        name = cells[1]
        # Terminal: IOPS, p95, p99, ≤ SLO; the page: requests, IOPS, p50, p95, p99, max, ≤ SLO, SLO met.
        assert [cells[3], cells[5], cells[6], cells[8]] == terminal[name], (cells, terminal)
        p99_ms = tenants.filter(pl.col("name") == name)["p99_ns"][0] / 1e6
        assert p99_ms > 1000 and cells[6] == f"{round(p99_ms):,}", (cells, p99_ms)


def test_compare_example_parses_with_four_policies() -> None:
    exp = load(REPO / "examples" / "experiments" / "compare.toml")
    assert exp.policies == ["mclock", "sarc+avatar", "wf2q", "fcfs"]
    assert [t.name for t in exp.runs[0].tenants] == ["websearch", "mail", "hm_0", "backup"]
    assert len(exp.runs) == 4 * 3
    kinds = {r.policy["kind"] for r in exp.runs}
    assert kinds == {"mclock", "sarc_avatar", "wf2q", "fcfs"}


def test_device_bandwidth_in_the_documented_form(tmp_path: Path) -> None:
    """docs/experiments.md gives bandwidth = "200MiB/s": it is read as bytes per second
    (it ended in a bare ValueError); a malformed one is a one-line error."""
    exp = load(write(tmp_path, SMALL.replace('kind = "constant"', 'kind = "constant"\nbandwidth = "200MiB/s"', 1)))
    assert exp.runs[0].device["bandwidth"] == 200 * 2**20
    with pytest.raises(InputError, match="malformed bandwidth '200MiB'"):
        load(write(tmp_path, SMALL.replace('kind = "constant"', 'kind = "constant"\nbandwidth = "200MiB"', 1)))


def test_a_policy_setting_its_kind_does_not_take_is_an_error(tmp_path: Path) -> None:
    """{kind = "wf2q", depth = 4} ran as plain WF2Q+ without a word."""
    text = SMALL.replace('kind = "wf2q"', 'kind = "wf2q"\ndepth = 4', 1)
    assert text != SMALL
    with pytest.raises(InputError, match=r"wf2q does not take depth \(it takes weights, by, cost\)"):
        load(write(tmp_path, text))


def _doc_examples() -> list[str]:
    text = (REPO / "docs" / "experiments.md").read_text()
    return re.findall(r"```toml\n(.*?)```", text, flags=re.S)


def test_every_key_of_the_schema_is_documented() -> None:
    """docs/experiments.md names every key the schema takes (a key added to the schema
    without a word in the docs fails here)."""
    from storqos.experiments import experiment_schema as s

    text = (REPO / "docs" / "experiments.md").read_text()
    tables = (s.ExperimentFile, s.Device, s.TraceFile, s.TenantEntry, s.Poisson, s.OnOff, s.Diurnal, s.Closed, s.Policy)
    named = ("`{}`", "[{}]", "`{} = ")  # a key, a table, an inline table
    missing = {f"{m.__name__}.{k}" for m in tables for k in m.model_fields if not any(n.format(k) in text for n in named)}
    assert not missing, sorted(missing)


def test_the_documented_examples_run_as_documented(tmp_path: Path) -> None:
    """The noisy-neighbour example has 2 tenants and 2 policies; with the sweep's grid
    (3 capacities × 3 burst rates) it makes 2 × 9 = 18 runs."""
    neighbour, sweep = _doc_examples()[:2]
    exp = load(write(tmp_path, neighbour))
    assert [t.name for t in exp.runs[0].tenants] == ["websearch", "batch"]
    assert exp.policies == ["fcfs", "wf2q"] and len(exp.runs) == 2
    grid = load(write(tmp_path, neighbour + sweep))
    assert len(grid.runs) == 18 and len(grid.points) == 9
    assert {r.device["iops"] for r in grid.runs} == {700.0, 1000.0, 1500.0}


def test_one_trace_table_reads_as_an_array_of_one(tmp_path: Path) -> None:
    one = load(write(tmp_path, SMALL.replace("[[trace]]", "[trace]", 1)))
    many = load(write(tmp_path, SMALL))
    assert one.runs[0].tenants == many.runs[0].tenants and one.runs[0].trace_key == many.runs[0].trace_key


def test_a_misspelt_key_is_named_not_what_it_leaves_missing(tmp_path: Path) -> None:
    """`rate_onn` leaves `rate_on` missing too: the error names the misspelling."""
    with pytest.raises(InputError, match=r"generator: unknown key 'rate_onn' \(known: kind, rate_on, rate_off"):
        load(write(tmp_path, SMALL.replace("rate_on = ", "rate_onn = ", 1)))


def test_cli_run_check_and_schema(tmp_path: Path, cli) -> None:
    from conftest import assert_one_line_error

    r = cli("run", str(write(tmp_path, SMALL)), "--check")
    assert r.code == 0 and "ok, 4 runs (2 policies × 2 grid points)" in r.out, (r.out, r.err)
    assert not (tmp_path / "out").exists()
    assert_one_line_error(cli("run", str(write(tmp_path, SMALL.replace("seed = 3", "seed = -1"))), "--check"),
                          "exp.toml:4: seed: must be an integer in [0, 2**64), got -1")
    r = cli("run", "--schema")
    schema = json.loads(r.out)
    assert r.code == 0 and schema["required"] == ["device", "policy"]
    assert set(schema["properties"]) == {"name", "description", "seed", "duration", "window", "percentile", "device",
                                         "cluster", "trace", "tenant", "policy", "grid"}
    assert schema["$defs"]["Closed"]["additionalProperties"] is False


def test_cli_run_shows_a_workers_warning_once_on_one_line(tmp_path: Path, cli) -> None:
    """Warnings raised in pool workers came out as Python's two-line warnings, once per
    worker; they are shown by the parent like its own: one `warning:` line, repeats once."""
    text = """
duration = "1s"
[device]
kind = "constant"
capacity = "550"
[[tenant]]
name = "a"
generator = { kind = "poisson", rate = "100" }
[[policy]]
kind = "miser"
cmin = 486
deadlines = "10ms"
[grid]
seed = [1, 2, 3]
"""
    r = cli("run", str(write(tmp_path, text)), "--workers", "2", "--no-report", "--out", str(tmp_path / "o"))
    assert r.code == 0, r.err
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("warning: [device] capacity: ") and "ΔC·δ = 0.64 < 1" in lines[0], r.err
    assert "give [device] capacity ≥ 586" in lines[0] and "--capacity" not in r.err
