"""Intensity series given as counts per interval: BlockTraceFeatures' CloudPhysics CSV read
as published, a plain time,count series, their per-minute intensity, `storqos warm` on
them, and bad series refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error, run_cli
from storqos.base.errors import InputError
from storqos.base.shared import shared_dir
from storqos.planning.warming.counts import detect_counts, from_counts, read_counts

HIGH, LOW = 30_000, 300  # requests per 30 minutes: 1,000 and 10 a minute


def _days(n: int) -> np.ndarray:
    """Counts per 30 minutes: High 08:00-18:00 on weekdays, Low otherwise."""
    counts = []
    for d in range(n):
        for i in range(48):
            counts.append(HIGH if d % 7 < 5 and 16 <= i < 36 else LOW)
    return np.asarray(counts)


def _btf(tmp_path: Path, counts: np.ndarray) -> Path:
    """A BlockTraceFeatures snapshot: ts = the interval's last request (µs), extra columns."""
    rng = np.random.default_rng(0)
    lines = ["index,ts,block_req_count,read_block_req_count,write_block_req_count"]
    for i, c in enumerate(counts):
        last = (i * 1800 + rng.uniform(1700, 1799.9)) * 1e6
        lines.append(f"{i},{last:.0f},{c},{c // 4},{c - c // 4}")
    p = tmp_path / "snap.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_a_snapshot_becomes_a_per_minute_intensity(tmp_path: Path) -> None:
    counts = _days(3)
    path = _btf(tmp_path, counts)
    assert detect_counts(path) == "blocktracefeatures"
    series = read_counts(path, "blocktracefeatures")
    assert series.interval_min == 30 and series.counts.tolist() == counts.tolist()
    inten = from_counts(series, start_minute_of_day=60, first_weekday=2)
    assert inten.days == 4 and inten.first_weekday == 2  # 3 days from 01:00: a fourth, padded
    assert inten.per_min[:60].sum() == 0 and inten.per_min[60:90].tolist() == [LOW / 30] * 30
    assert inten.per_min.sum() == pytest.approx(counts.sum())


def test_warm_learns_the_day_from_a_count_series(tmp_path: Path) -> None:
    path = _btf(tmp_path, _days(14))
    r = run_cli("warm", str(path), "--train-days", "10", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    # The threshold lies between the two levels (10 and 1,000 requests a minute), and
    # the weekday High (08:00-18:00) is predicted on the held-out days within the
    # 31-minute smoothing.
    assert 10 < doc["model"]["threshold_per_min"] < 1_000
    assert doc["prediction_error_min"]["changes"] >= 3  # Thu and Fri: up at 08:00, down at 18:00
    assert doc["prediction_error_min"]["all_median_abs_min"] <= 31
    policies = {row["policy"]: row for row in doc["comparison"]}
    assert policies["prediction"]["system_work_h"] > 0


def test_a_time_count_series_with_and_without_its_interval(tmp_path: Path) -> None:
    p = tmp_path / "c.csv"
    p.write_text("time,count\n0,600\n600,1200\n1200,0\n")
    s = read_counts(p, "counts")
    assert s.interval_min == 10 and s.counts.tolist() == [600, 1200, 0]
    assert from_counts(s).per_min[:20].tolist() == [60.0] * 10 + [120.0] * 10
    q = tmp_path / "gaps.csv"
    q.write_text("0 5\n60 5\n180 5\n")  # minutes, one interval missing
    s = read_counts(q, "counts", time_unit="min", interval_ns=60 * 60 * 10**9)
    assert s.counts.tolist() == [5, 5, 0, 5]


@pytest.mark.parametrize(("text", "args", "needles"), [
    ("0,1\n60,1\n200,1\n", ["--format", "counts"], ["not evenly spaced", "--interval"]),
    ("0,1\n60,-3\n", ["--format", "counts"], ["row 2", "≥ 0"]),
    ("0,1\n60,x\n", ["--format", "counts"], ["line 2", "must be numbers"]),
    ("0,1\n30,1\n", ["--format", "counts"], ["whole number of minutes"]),
    ("0,1\n60,1\n", ["--format", "counts", "--sort"], ["--sort"]),
])
def test_bad_count_series_are_one_line(tmp_path: Path, text: str, args: list[str], needles: list[str]) -> None:
    p = tmp_path / "bad.csv"
    p.write_text(text)
    assert_one_line_error(run_cli("warm", str(p), *args), *needles)


def test_interval_is_for_count_series_only(tmp_path: Path) -> None:
    p = tmp_path / "t.csv"
    p.write_text("0 0 0 8 1\n")
    assert_one_line_error(run_cli("warm", str(p), "--format", "mqsim", "--interval", "30min"), "--interval",
                          "count series")
    with pytest.raises(InputError, match="BlockTraceFeatures"):
        read_counts(_btf(p.parent, _days(1)), "blocktracefeatures", time_unit="s")


CP = (shared_dir() or Path("../shared")) / "traces" / "cloudphysics-intensity"


@pytest.mark.skipif(not (CP / "block_snap_w46.csv").exists(), reason="needs ../shared/traces/cloudphysics-intensity")
def test_the_cloudphysics_snapshots_read_as_published() -> None:
    # SOURCE.md: w46 has 1,604 intervals over 33.4 days and 512,860,447 requests.
    s = read_counts(CP / "block_snap_w46.csv", "blocktracefeatures")
    assert s.interval_min == 30 and len(s.counts) == 1604 and s.counts.sum() == 512_860_447
    r = run_cli("warm", str(CP / "block_snap_w96.csv"), "--train-days", "5", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["test_days"] == [5, 7]


@pytest.mark.skipif(not (CP / "block_snap_w46.csv").exists(), reason="needs ../shared/traces/cloudphysics-intensity")
def test_the_33_day_volume_learned_on_three_weeks_and_tested_on_the_rest() -> None:
    # After its first five days w46 holds 228 requests (day 33), far below any High: on
    # days 21-33 every minute is Low, so feedback and the oracle both run system work
    # throughout, with nothing to stop for, and there is no change time to predict.
    s = read_counts(CP / "block_snap_w46.csv", "blocktracefeatures")
    assert s.counts[21 * 48:].sum() == 228
    r = run_cli("warm", str(CP / "block_snap_w46.csv"), "--train-days", "21", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["test_days"] == [21, 33]
    rows = {p["policy"]: p for p in out["comparison"]}
    assert rows["feedback"]["system_work_h"] == pytest.approx(rows["oracle"]["system_work_h"])
    # System work up to 70 % of the device in every Low minute of 13 days.
    assert rows["oracle"]["system_work_h"] == pytest.approx(0.7 * 13 * 24, rel=0.05)
    assert rows["prediction"]["system_work_h"] < rows["feedback"]["system_work_h"]
