"""Every real trace in ``shared/traces`` reads with the statistics its SOURCE.md states.

The folder is a sibling of the repository root (``../shared/traces``) or given by the
environment variable ``STORQOS_SHARED`` (the ``shared`` folder or its ``traces``
folder). Without it these tests are skipped.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from storqos.base.shared import shared_dir, where
from storqos.traces import FORMATS, detect_format, read_trace, stats

_SHARED = shared_dir()
TRACES = _SHARED / "traces" if _SHARED else Path("/nonexistent")
pytestmark = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"shared traces not found at {where()} (set STORQOS_SHARED)"
)

# file, format, requests, span (s), read % as stated (its decimals matter), peak IOPS over
# 100 ms (INDEX.md), peak IOPS over 1 s (SOURCE.md), mean IOPS (INDEX.md)
EXPECTED = [
    ("hp-hplajw-1week/ajw.1week.srt", "srt", 44_519, 603_064.6, "29.3", 1_050, 106, "0.074"),
    ("umass-websearch-excerpt/wsrch-small.trace", "mqsim", 24_783, 60.06, "99.98", 670, 522, "413"),
    ("tpcc-excerpt/tpcc-small.trace", "mqsim", 6_999, 0.136, "62.6", 50_060, None, "51279"),
    ("msr-cambridge/rsrch_1.csv", "msr", 13_780, 576_558, "0.3", 2_080, 331, "0.024"),
    ("msr-cambridge/wdev_1.csv", "msr", 1_055, 595_003, "0", 50, 6, "0.0018"),
    ("msr-cambridge/hm_0_excerpt.csv", "msr", 7_016, 148.4, "83.0", 4_660, 2_204, "47.3"),
    ("fiu-mail-excerpt/smalltrace.csv", "fiu", 10_000, 23.30, "89.1", 4_400, 2_091, "429"),
]
IDS = [e[0].split("/")[-1] for e in EXPECTED]


def _read(rel: str) -> pl.DataFrame:
    return read_trace(TRACES / rel)


def _within_stated(value: float, stated: str) -> bool:
    """``value`` equals ``stated`` to the last decimal written (half a unit of it)."""
    decimals = len(stated.split(".")[1]) if "." in stated else 0
    return abs(value - float(stated)) <= 0.5 * 10**-decimals + 1e-12


@pytest.mark.parametrize(
    ("rel", "fmt", "count", "span", "read_pct", "peak100", "peak1s", "mean_iops"), EXPECTED, ids=IDS
)
def test_real_trace_matches_source(
    rel: str, fmt: str, count: int, span: float, read_pct: str, peak100: int, peak1s: int | None, mean_iops: str
) -> None:
    path = TRACES / rel
    assert detect_format(path) == fmt
    df = read_trace(path)
    st = stats(df)
    assert st["count"] == count
    assert abs(st["span_s"] - span) <= 0.005 * span
    assert _within_stated(100 * st["read_fraction"], read_pct)
    assert st["peak_iops_100ms"] == peak100
    if peak1s is not None:
        assert st["peak_iops_1s"] == peak1s
    assert _within_stated(st["mean_iops"], mean_iops)
    # canonical invariants
    assert df["arrival_ns"][0] == 0
    assert df["arrival_ns"].is_sorted()
    assert df.schema["arrival_ns"] == pl.Int64 and df.schema["size"] == pl.UInt32
    assert df.schema["offset"] == pl.UInt64 and df.schema["device"] == pl.String
    assert (df["size"] > 0).all()


def test_every_format_name_is_known() -> None:
    assert {e[1] for e in EXPECTED} <= set(FORMATS)


def test_srt_details_match_source() -> None:
    df = _read("hp-hplajw-1week/ajw.1week.srt")
    assert df.filter(pl.col("is_read")).height == 13_040
    counts = dict(df["device"].value_counts().iter_rows())
    assert counts == {"0": 42_252, "1": 2_267}
    assert round(df["size"].mean()) == 5_914
    assert df["size"].min() == 1024 and df["size"].max() == 256 * 1024
    assert abs(df["response_ns"].mean() / 1e6 - 116.7) < 0.05


def test_msr_details_match_source() -> None:
    for rel, mean_size, mean_resp_ms in (
        ("msr-cambridge/rsrch_1.csv", 12_466, 0.39),
        ("msr-cambridge/wdev_1.csv", 5_249, 0.14),
        ("msr-cambridge/hm_0_excerpt.csv", 12_088, 1.60),
    ):
        df = _read(rel)
        assert round(df["size"].mean()) == mean_size
        assert abs(df["response_ns"].mean() / 1e6 - mean_resp_ms) < 0.005
        host = rel.split("/")[1].split("_")[0]
        assert df["host"].unique().to_list() == [host]
    assert _read("msr-cambridge/hm_0_excerpt.csv").filter(pl.col("is_read")).height == 5_820
    assert _read("msr-cambridge/rsrch_1.csv")["device"].unique().to_list() == ["rsrch/1"]


def test_websearch_details_match_source() -> None:
    df = _read("umass-websearch-excerpt/wsrch-small.trace")
    counts = dict(df["device"].value_counts().iter_rows())
    assert counts == {"0": 8_340, "1": 8_231, "2": 8_187, "5": 10, "3": 8, "4": 7}
    assert df.filter(~pl.col("is_read")).height == 4
    assert abs(df["size"].mean() - 15_418) < 1


def test_tpcc_details_match_source() -> None:
    df = _read("tpcc-excerpt/tpcc-small.trace")
    assert df["device"].n_unique() == 16
    assert df.filter(pl.col("device") == "8").height == 150
    assert (df["size"] == 8192).mean() > 0.95


def test_fiu_details_match_source() -> None:
    df = _read("fiu-mail-excerpt/smalltrace.csv")
    assert (df["size"] == 4096).all()
    procs = dict(df["process"].value_counts().iter_rows())
    assert procs["swapper"] == 7_499 and procs["gzip"] == 1_165 and procs["kjournald"] == 789
    assert procs["nfsd"] == 233 and procs["pdflush"] == 155 and procs["showq"] == 58
    assert df["device"].unique().to_list() == ["6,0"]


@pytest.mark.parametrize("rel", [e[0] for e in EXPECTED], ids=IDS)
def test_limit_and_sort_on_real_traces(rel: str) -> None:
    full = _read(rel)
    head = read_trace(TRACES / rel, limit=100)
    assert head.height == 100
    assert head.equals(full.head(100))
    assert read_trace(TRACES / rel, sort=True).equals(full)
