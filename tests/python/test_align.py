"""Traces of different lengths side by side: each starts at its own first request
(``--align start``) or where its file's clock puts it (``--align none``), a window of
each (``--start/--end``), one warning when their spans differ more than 2x, the
busiest windows ``trace info`` shows, and each tenant's rate over its own span."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import assert_one_line_error, run_cli, shared_traces
from storqos.base.errors import InputError
from storqos.base.units import fmt_offset, fmt_span, parse_duration
from storqos.traces import busiest_windows, busy_window_length, read_trace, time_window
from storqos.traces.align import align_traces, parse_windows, span_warning
from storqos.traces.reader import read_trace_with_origin

S = 10**9


def _mqsim(path: Path, times_ns: list[int] | np.ndarray) -> Path:
    """An MQSim trace (times in ns) of 4 KiB reads at ``times_ns``."""
    path.write_text("".join(f"{int(t)} 0 {8 * i} 8 1\n" for i, t in enumerate(times_ns)))
    return path


def _msr(path: Path, filetimes: list[int]) -> Path:
    """An MSR Cambridge trace: one 4 KiB write per FILETIME (100 ns ticks since 1601)."""
    path.write_text("".join(f"{t},vol,0,Write,{4096 * i},4096,100\n" for i, t in enumerate(filetimes)))
    return path


def _log(tmp_path: Path, *args: str) -> pl.DataFrame:
    """``storqos simulate ARGS --out`` → the per-request log."""
    out = tmp_path / "log.parquet"
    r = run_cli("simulate", *args, "--out", str(out), "--json")
    assert r.code == 0, r.err
    return pl.read_parquet(out)


# ---- units: windows are typed as durations and shown back the same way ----

@pytest.mark.parametrize(("text", "ns"), [("2h10m", 7_800 * S), ("1d2h30m", 95_400 * S), ("1m0.25s", 60_250_000_000),
                                          ("1h 30min", 5_400 * S), ("3d6h59m", (3 * 86_400 + 6 * 3_600 + 59 * 60) * S)])
def test_durations_of_several_units_add_up(text: str, ns: int) -> None:
    assert parse_duration(text, "--start") == ns


@pytest.mark.parametrize("bad", ["2h10", "2h-10m", "1..2h", "2x10m", "h10m"])
def test_malformed_compound_durations_are_refused(bad: str) -> None:
    with pytest.raises(InputError, match="^--start: malformed duration"):
        parse_duration(bad, "--start")


@pytest.mark.parametrize("ns", [0, 1, 999_999_999, S, 61 * S, 3_600 * S + 1, 220_014 * S, 7 * 86_400 * S + 123_456_789])
def test_offsets_read_back_exactly(ns: int) -> None:
    assert parse_duration(fmt_offset(ns)) == ns


def test_offsets_in_the_units_a_person_types() -> None:
    assert [fmt_offset(n) for n in (0, 15_600_000_000, 7_800 * S, 220_014 * S)] == ["0s", "15.6s", "2h10m", "2d13h6m54s"]


@pytest.mark.parametrize(("ns", "shown"), [(60.056 * S, "60.1 s"), (148.4 * S, "2.47 min"), (576_557.6 * S, "6.67 d"),
                                           (30 * 3_600 * S, "30 h"), (406 * 365.25 * 86_400 * S, "406 years")])
def test_spans_in_human_units(ns: float, shown: str) -> None:
    assert fmt_span(ns) == shown


# ---- time windows, shared with the experiment file's start/end ----

def test_a_window_may_be_open_at_its_end() -> None:
    df = pl.DataFrame({"arrival_ns": [0, 10, 20, 30], "is_read": [True] * 4, "offset": [0] * 4,
                       "size": [4096] * 4, "device": ["d"] * 4, "tenant": [0] * 4},
                      schema_overrides={"offset": pl.UInt64, "size": pl.UInt32, "tenant": pl.UInt32})
    assert time_window(df, 15)["arrival_ns"].to_list() == [0, 10]  # 20, 30 rebased to the first kept
    assert time_window(df, 0, 25)["arrival_ns"].to_list() == [0, 10, 20]


def test_experiment_start_without_end_keeps_the_rest(tmp_path: Path) -> None:
    from storqos.experiments.experiment import load

    _mqsim(tmp_path / "t.trace", [k * S for k in range(10)])
    (tmp_path / "e.toml").write_text('[device]\nkind = "constant"\ncapacity = "1k"\n'
                                     '[[trace]]\npath = "t.trace"\nformat = "mqsim"\nstart = "4s"\n'
                                     '[[policy]]\nkind = "fcfs"\n')
    exp = load(tmp_path / "e.toml")
    key = exp.runs[0].trace_key
    assert key is not None
    assert exp.traces[key]["arrival_ns"].to_list() == [k * S for k in range(6)]


# ---- where each file's trace starts ----

def test_the_origin_is_the_first_request_on_the_files_clock(tmp_path: Path) -> None:
    first = 128166386783630075  # FILETIME ticks: x 100 ns is past 2^63, kept exactly
    df, origin = read_trace_with_origin(_msr(tmp_path / "a.csv", [first + 50, first, first + 10]), sort=True)
    assert origin == first * 100
    assert df["arrival_ns"].to_list() == [0, 1_000, 5_000]


def test_by_default_each_trace_starts_at_its_own_first_request(tmp_path: Path) -> None:
    a = _mqsim(tmp_path / "a.trace", [5 * S + k * 100_000_000 for k in range(20)])  # from 5 s
    b = _mqsim(tmp_path / "b.trace", [40 * S + k * 100_000_000 for k in range(20)])  # from 40 s
    log = _log(tmp_path, str(a), str(b), "--format", "mqsim", "--capacity", "10k")
    first = log.group_by("tenant").agg(pl.col("arrival_ns").min()).sort("tenant")
    assert first["arrival_ns"].to_list() == [0, 0]


def test_align_none_keeps_the_files_clocks(tmp_path: Path) -> None:
    t0 = 128166386783630075
    a = _msr(tmp_path / "a.csv", [t0 + k * 1_000_000 for k in range(30)])  # every 100 ms from t0
    b = _msr(tmp_path / "b.csv", [t0 + 25_000_000 + k * 1_000_000 for k in range(30)])  # 2.5 s later
    log = _log(tmp_path, str(a), str(b), "--align", "none", "--capacity", "10k")
    first = log.group_by("tenant").agg(pl.col("arrival_ns").min()).sort("tenant")
    assert first["arrival_ns"].to_list() == [0, 2_500_000_000]
    log = _log(tmp_path, str(a), str(b), "--capacity", "10k")  # the default: both from 0
    assert log.group_by("tenant").agg(pl.col("arrival_ns").min())["arrival_ns"].to_list() == [0, 0]


def test_align_none_on_files_of_unrelated_clocks_is_an_error(tmp_path: Path) -> None:
    a = _msr(tmp_path / "a.csv", [128166386783630075 + k for k in range(3)])  # 2007
    b = _msr(tmp_path / "b.csv", [k for k in range(3)])  # 1601
    assert_one_line_error(run_cli("simulate", str(a), str(b), "--format", "msr", "--align", "none", "--capacity", "1k"),
                          "--align",
                          "406 years",
                          "--align start")


def test_align_none_says_when_the_traces_do_not_overlap(tmp_path: Path) -> None:
    t0 = 128166386783630075
    a = _msr(tmp_path / "a.csv", [t0 + k * 1_000_000 for k in range(10)])  # 0 to 0.9 s
    b = _msr(tmp_path / "b.csv", [t0 + 20_000_000 + k * 1_000_000 for k in range(10)])  # 2 s to 2.9 s
    r = run_cli("simulate", str(a), str(b), "--align", "none", "--capacity", "1k", "--json")
    assert r.code == 0, r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: --align none: the traces do not all overlap"), r.err
    assert "a.csv 0s to 0.9s" in lines[0] and "b.csv 2s to 2.9s" in lines[0], lines[0]


# ---- a window of each trace ----

def test_start_and_end_take_one_window_per_file(tmp_path: Path) -> None:
    short = _mqsim(tmp_path / "short.trace", [k * 100_000_000 for k in range(600)])  # 60 s at 10 IOPS
    rng = np.random.default_rng(7)
    long_times = np.sort(rng.integers(0, 3 * 3_600 * S, 5_000))  # 3 h
    long_ = _mqsim(tmp_path / "long.trace", long_times)
    rel = long_times - long_times[0]
    inside = (rel >= 2 * 3_600 * S) & (rel < (2 * 3_600 + 60) * S)
    log = _log(tmp_path, str(short), str(long_), "--format", "mqsim", "--capacity", "10k",
               "--start", "0,2h", "--end", "none,2h1m")
    per = log.group_by("tenant").agg(pl.len().alias("n"), pl.col("arrival_ns").max().alias("last")).sort("tenant")
    assert per["n"].to_list() == [600, int(inside.sum())]
    kept = rel[inside]
    assert per["last"][1] == int(kept[-1] - kept[0])  # the window's first request at 0
    both = _log(tmp_path, str(short), str(long_), "--format", "mqsim", "--capacity", "10k", "--end", "30s")
    counts = both.group_by("tenant").agg(pl.len()).sort("tenant")["len"].to_list()
    assert counts == [300, int((rel < 30 * S).sum())]  # one value: every file's window


@pytest.mark.parametrize(("args", "needles"), [
    (("--start", "2h", "--end", "1h"), ("--end", "ends at 1h, not after it starts at 2h")),
    (("--start", "1,2,3"), ("--start", "3 values for 2 trace files")),
    (("--end", "soon"), ("--end", "malformed duration 'soon'")),
    (("--start", "0,1h"), ("long.trace", "no requests after 1h", "the trace spans 59.9 s")),
    (("--align", "side"), ("--align", "unknown alignment 'side'", "start, none")),
    (("--align", "none", "--start", "0,10s"), ("--align", "one --start/--end for all of them")),
])
def test_bad_windows_are_one_line_errors(tmp_path: Path, args: tuple[str, ...], needles: tuple[str, ...]) -> None:
    a = _mqsim(tmp_path / "short.trace", [k * 100_000_000 for k in range(300)])
    b = _mqsim(tmp_path / "long.trace", [k * 100_000_000 for k in range(600)])
    assert_one_line_error(run_cli("simulate", str(a), str(b), "--format", "mqsim", *args), *needles)


def test_a_window_of_one_file(tmp_path: Path) -> None:
    a = _mqsim(tmp_path / "a.trace", [k * S for k in range(100)])
    log = _log(tmp_path, str(a), "--format", "mqsim", "--capacity", "1k", "--start", "1m", "--end", "1m10s")
    assert log["arrival_ns"].to_list() == [k * S for k in range(10)]


# ---- the warning ----

def test_spans_more_than_2x_apart_are_one_warning(tmp_path: Path) -> None:
    a = _mqsim(tmp_path / "web.trace", [k * 100_000_000 for k in range(601)])  # 60 s
    b = _mqsim(tmp_path / "week.trace", [k * 10 * S for k in range(60_481)])  # 7 d
    r = run_cli("simulate", str(a), str(b), "--format", "mqsim", "--capacity", "1k", "--json")
    assert r.code == 0, r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: the traces' spans differ by more than 2x"), r.err
    for needle in ("web.trace 60 s", "week.trace 7 d", "web.trace overlaps 0.0099 % of week.trace", "--start/--end",
                   f"storqos trace info {b}"):
        assert needle in lines[0], (needle, lines[0])
    # cut to a minute of the week: the spans agree and nothing is said
    r = run_cli("simulate", str(a), str(b), "--format", "mqsim", "--capacity", "1k", "--json", "--start", "0,1d",
                "--end", "none,1d1m")
    assert r.code == 0 and r.err == "", r.err


def test_spans_within_2x_say_nothing() -> None:
    assert span_warning({"a": 60 * S, "b": 120 * S}) is None
    assert span_warning({"a": 60 * S}) is None
    said = span_warning({"x/a.trace": 60 * S, "b.trace": 121 * S})
    assert said is not None and "a.trace 60 s, b.trace 2.02 min" in said and "storqos trace info b.trace" in said
    shared = span_warning({"a": 60 * S, "b": 600 * S}, per_file=False)
    assert shared is not None and "one window of the files' shared clock" in shared


def test_windows_from_the_flags() -> None:
    assert parse_windows(None, None, 2) is None
    assert parse_windows("0,2h", "none,2h1m", 2) == [(0, None), (7_200 * S, 7_260 * S)]
    assert parse_windows("5s", None, 3) == [(5 * S, None)] * 3
    with pytest.raises(InputError, match="file 2"):
        parse_windows("0,2h", "1h,1h", 2)


def test_align_traces_from_python() -> None:
    def trace(times: list[int]) -> pl.DataFrame:
        n = len(times)
        return pl.DataFrame({"arrival_ns": times, "is_read": [True] * n, "offset": [0] * n, "size": [512] * n,
                             "device": ["d"] * n, "tenant": [0] * n},
                            schema_overrides={"offset": pl.UInt64, "size": pl.UInt32, "tenant": pl.UInt32})

    a, b = trace([0, 1 * S, 2 * S]), trace([0, 2 * S, 3 * S])
    placed = align_traces([a, b], ["a", "b"], [10 * S, 11 * S], "none")
    assert [df["arrival_ns"].to_list() for df in placed] == [[0, S, 2 * S], [S, 3 * S, 4 * S]]
    placed = align_traces([a, b], ["a", "b"], [10 * S, 11 * S], "none", windows=[(2 * S, 4 * S)] * 2)
    assert [df["arrival_ns"].to_list() for df in placed] == [[0], [S]]  # 2 s of a, 3 s of b; 2 s is 0


# ---- trace info: where a trace is busy ----

def _busy_trace(path: Path) -> Path:
    """1 request a second for 1,000 s, and 500 more spread over [600 s, 610 s)."""
    background = [k * S for k in range(1_000)]
    burst = [600 * S + k * 20_000_000 + 1 for k in range(500)]
    return _mqsim(path, sorted(background + burst))


def test_busiest_windows_find_the_burst(tmp_path: Path) -> None:
    df = read_trace(_busy_trace(tmp_path / "b.trace"), format="mqsim")
    top = busiest_windows(df, 10 * S, 3)
    assert top[0] == {"start_ns": 600 * S, "end_ns": 610 * S, "requests": 510, "iops": 51.0}
    for w in top[1:]:  # apart from the burst and from each other, 10 requests each
        assert w["requests"] == 10 and (w["end_ns"] <= 600 * S or w["start_ns"] >= 610 * S), w
    starts = [w["start_ns"] for w in top]
    assert all(abs(x - y) >= 10 * S for i, x in enumerate(starts) for y in starts[i + 1:])
    assert busiest_windows(df, 10_000 * S, 3) == [{"start_ns": 0, "end_ns": 10_000 * S, "requests": 1_500,
                                                   "iops": 0.15}]  # the whole trace, once


def test_busiest_windows_match_a_brute_force_count() -> None:
    rng = np.random.default_rng(3)
    times = np.sort(rng.integers(0, 3_600 * S, 4_000))
    times -= times[0]
    n = len(times)
    df = pl.DataFrame({"arrival_ns": times, "is_read": [True] * n, "offset": [0] * n, "size": [512] * n,
                       "device": ["d"] * n, "tenant": [0] * n},
                      schema_overrides={"offset": pl.UInt64, "size": pl.UInt32, "tenant": pl.UInt32})
    best = busiest_windows(df, 60 * S, 1)[0]
    grid = [s * 6 * S for s in range(3_600 // 6 + 1)]  # every start on the 6 s grid, counted directly
    most = max(int(((times >= s) & (times < s + 60 * S)).sum()) for s in grid)
    assert best["requests"] == most and best["start_ns"] % (6 * S) == 0


@pytest.mark.parametrize(("span_s", "length_s"), [(5, 1), (60, 1), (148, 10), (1_000, 60), (7 * 86_400, 600)])
def test_the_default_window_length_fits_ten_times_in_the_span(span_s: int, length_s: int) -> None:
    assert busy_window_length(span_s * S) == length_s * S


def test_trace_info_shows_the_busiest_windows(tmp_path: Path) -> None:
    f = _busy_trace(tmp_path / "b.trace")
    r = run_cli("trace", "info", str(f), "--format", "mqsim", "--busiest-window", "10s", columns=80)
    assert r.code == 0, r.err
    assert all(len(line) <= 80 for line in r.out.splitlines()), r.out
    assert "busiest 10 s windows" in r.out
    row = next(line for line in r.out.splitlines() if line.startswith("│ 1 "))
    assert re.sub(r"\s+", " ", row).split("│")[1:6] == [" 1 ", " 10m ", " 10m10s ", " 510 ", " 51 "], row
    assert "replay the busiest: --start 10m --end 10m10s" in r.out
    j = json.loads(run_cli("trace", "info", str(f), "--format", "mqsim", "--json").out)
    assert j["busiest_windows"]["window_s"] == 60  # the default for 1,000 s: 1 min
    # every 1 min window holding the burst holds 560; the earliest on the 6 s grid ends past 610 s
    assert j["busiest_windows"]["windows"][0] == {"start_s": 552.0, "end_s": 612.0, "requests": 560, "iops": 560 / 60}
    assert len(j["busiest_windows"]["windows"]) == 3
    none = json.loads(run_cli("trace", "info", str(f), "--format", "mqsim", "--json", "--busiest", "0").out)
    assert none["busiest_windows"]["windows"] == []


@pytest.mark.parametrize(("args", "needle"), [(("--busiest", "-1"), "--busiest"), (("--busiest", "101"), "--busiest"),
                                              (("--busiest-window", "0s"), "--busiest-window"),
                                              (("--busiest-window", "soon"), "--busiest-window")])
def test_bad_busiest_flags_are_one_line_errors(tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    f = _mqsim(tmp_path / "t.trace", [0, S, 2 * S])
    assert_one_line_error(run_cli("trace", "info", str(f), "--format", "mqsim", *args), needle)


# ---- each tenant's rate over its own span ----

def test_a_short_tenant_beside_a_100x_longer_one_shows_its_own_rate(tmp_path: Path) -> None:
    # 600 requests 100 ms apart (59.9 s) beside 60 requests 100 s apart (5,900 s); a
    # 10k-IOPS device serves each in 0.1 ms and never queues them.
    a = _mqsim(tmp_path / "a.trace", [k * 100_000_000 for k in range(600)])
    b = _mqsim(tmp_path / "b.trace", [k * 100 * S for k in range(60)])
    r = run_cli("simulate", str(a), str(b), "--format", "mqsim", "--capacity", "10k", "--json")
    assert r.code == 0, r.err
    t = {row["tenant"]: row for row in json.loads(r.out)["tenants"]}
    service = 1e-4
    assert t[0]["iops_active"] == pytest.approx(600 / (59.9 + service), rel=1e-9)
    assert t[1]["iops_active"] == pytest.approx(60 / (5_900 + service), rel=1e-9)
    assert t[0]["iops"] == pytest.approx(600 / (5_900 + service), rel=1e-9)  # its share of the whole run
    table = run_cli("simulate", str(a), str(b), "--format", "mqsim", "--capacity", "10k", columns=80)
    row = next(line for line in table.out.splitlines() if line.startswith("│ 0 "))
    assert "│     10 │" in row, table.out
    assert "own IOPS: requests over the tenant's own span, first arrival to last completion" in table.out


def test_the_python_api_has_both_rates(tmp_path: Path) -> None:
    import storqos

    df = read_trace(_mqsim(tmp_path / "a.trace", [k * 10_000_000 for k in range(101)]), format="mqsim")  # 1 s
    res = storqos.simulate(df, "fcfs", "constant", capacity="1k")
    row = res.tenants.row(0, named=True)
    assert row["span_s"] == pytest.approx(1.001)
    assert row["iops_active"] == pytest.approx(101 / 1.001)


@pytest.mark.skipif(shared_traces() is None, reason="../shared/traces not present")
def test_websearch_beside_a_week_of_msr_shows_its_own_rate() -> None:
    traces = shared_traces()
    assert traces is not None
    web = traces / "umass-websearch-excerpt" / "wsrch-small.trace"
    week = traces / "msr-cambridge" / "rsrch_1.csv"
    r = run_cli("simulate", str(web), str(week), "--policy", "wf2q", "--weights", "3,1", "--capacity", "1k", "--json")
    assert r.code == 0, r.err
    trace = read_trace(web, format="mqsim")
    span = int(trace["arrival_ns"].max()) / 1e9  # type: ignore[arg-type]
    web_row = json.loads(r.out)["tenants"][0]
    assert web_row["iops_active"] == pytest.approx(trace.height / span, rel=0.001)  # 413, not 0.043
    warning = [ln for ln in r.err.splitlines() if "spans differ" in ln]
    assert len(warning) == 1 and "wsrch-small.trace 60.1 s, rsrch_1.csv 6.67 d" in warning[0], r.err


def test_experiment_tables_show_each_tenants_own_rate(tmp_path: Path) -> None:
    # 100 requests 100 ms apart (9.9 s) beside 100 requests 1 s apart (99 s), served in 1 ms:
    # own IOPS 100 / 9.901 s = 10.1 and 100 / 99.001 s = 1.01 (over the run's 99 s, 1.01 both)
    _mqsim(tmp_path / "short.trace", [k * 100_000_000 for k in range(100)])
    _mqsim(tmp_path / "long.trace", [k * S for k in range(100)])
    (tmp_path / "e.toml").write_text('[device]\nkind = "constant"\ncapacity = "1k"\n'
                                     '[[trace]]\npath = "short.trace"\nformat = "mqsim"\n'
                                     '[[trace]]\npath = "long.trace"\nformat = "mqsim"\n'
                                     '[[policy]]\nkind = "fcfs"\n')
    md = tmp_path / "r.md"
    r = run_cli("run", str(tmp_path / "e.toml"), "--out", str(tmp_path / "out"), "--markdown", str(md), columns=80)
    assert r.code == 0, r.err
    rows = {line.split("|")[2].strip(): line.split("|")[4].strip() for line in md.read_text().splitlines()
            if line.startswith("| fcfs |")}
    assert rows == {"short": "10.1", "long": "1.01"}, md.read_text()
    assert "| own IOPS |" in md.read_text()
    short = next(line for line in r.out.splitlines() if " short " in line)
    assert "10.1" in short.split("│")[3], r.out
