"""``storqos warm``: learned model, schedule and comparison table;
one-line errors with exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli, shared_traces
from storqos.planning.warming.workload import bimodal_days
from storqos.traces import write_parquet

#: The module-scoped fixtures cost seconds each: all of this module's tests go to one
#: pytest-xdist worker (make test runs `--dist loadgroup`), which computes them once.
pytestmark = pytest.mark.xdist_group("test_warming_cli")


@pytest.fixture(scope="module")
def trace16(tmp_path_factory) -> Path:
    df, _ = bimodal_days(16, seed=3)
    p = tmp_path_factory.mktemp("warm") / "bimodal16.parquet"
    write_parquet(df, p)
    return p


def test_warm_help_has_an_example() -> None:
    r = run_cli("warm", "--help")
    assert r.code == 0 and "Example" in r.out and "--json" in r.out and "--fast-tier" in r.out


def test_warm_prints_model_schedule_and_comparison(trace16: Path) -> None:
    r = run_cli("warm", str(trace16), "--fast-tier", "64GiB", "--warm-rate", "18MiB/s", "--origin", "2024-01-01 00:00")
    assert r.code == 0, r.err
    assert "T_fast = C/F = 60.7 min" in r.out  # 64 GiB / 18 MiB/s
    # The two day classes of the bimodal workload: the weekdays and the weekend.
    for needle in ("learned model", "│ Mon–Fri ", "│ Sat,Sun ", "prediction error", "system start",
                   "warm-up done", "user-only", "feedback", "prediction", "oracle", "work h"):
        assert needle in r.out, needle


def test_warm_json_has_the_comparison(trace16: Path) -> None:
    j = run_cli("warm", str(trace16), "--fast-tier", "64GiB", "--warm-rate", "18MiB/s", "--json")
    s = json.loads(j.out)
    assert s["model"]["classes"] == 2 and s["train_days"] == [0, 13] and s["test_days"] == [14, 15]
    rows = {row["policy"]: row for row in s["comparison"]}
    assert rows["user-only"]["system_work_h"] == 0 and rows["prediction"]["system_work_h"] > 0
    assert rows["prediction"]["p90_ms"] <= rows["feedback"]["p90_ms"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--warm-rate", "fast"], "--warm-rate"),
        (["--fast-tier", "0"], "--fast-tier"),
        (["--train-days", "40"], "--train-days"),
        (["--h-high", "0.9"], "--h-high"),
        (["--origin", "yesterday"], "--origin"),
        # A lower above the upper once named no option, and an infinite threshold passed.
        (["--h-low", "0.9,0.1"], "--h-low: expected 0 <= LOWER <= UPPER <= 1"),
        (["--threshold", "inf"], "--threshold: must be a finite number > 0"),
        (["--threshold", "-1"], "--threshold: must be a finite number > 0"),
    ],
)
def test_warm_bad_input_is_one_line(trace16: Path, args: list[str], needle: str) -> None:
    r = run_cli("warm", str(trace16), *args)
    assert r.code == 2 and "Traceback" not in r.err
    lines = [ln for ln in r.err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], r.err


@pytest.mark.skipif(shared_traces() is None, reason="../shared/traces not present")
def test_warm_on_the_hp_week_places_days_in_the_week() -> None:
    srt = shared_traces() / "hp-hplajw-1week" / "ajw.1week.srt"
    r = run_cli("warm", str(srt), "--json")
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert s["origin"] == "1992-05-30 00:03:06" and s["train_days"] == [0, 4]
    assert s["schedule"]["prediction"][0]["weekday"] == "Thu"
