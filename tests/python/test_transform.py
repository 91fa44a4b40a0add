"""Trace transforms (window, rate scaling, merge, split) and statistics."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storqos.base.errors import InputError
from storqos.traces import merge, scale_rate, split_tenants, stats, time_window
from storqos.traces.schema import conform


def _trace(arrivals: list[int], devices: list[str] | None = None, reads: list[bool] | None = None) -> pl.DataFrame:
    n = len(arrivals)
    return conform(
        pl.DataFrame(
            {
                "arrival_ns": arrivals,
                "is_read": reads if reads is not None else [i % 3 != 0 for i in range(n)],
                "offset": [512 * i for i in range(n)],
                "size": [512 * (1 + i % 16) for i in range(n)],
                "device": devices if devices is not None else [str(i % 2) for i in range(n)],
            },
            schema_overrides={"arrival_ns": pl.Int64, "offset": pl.UInt64, "size": pl.UInt32},
        )
    )


T = _trace([0, 10, 10, 25, 40, 100])


# ---------------------------------------------------------------------------- window


def test_time_window_keeps_half_open_range_and_rebases() -> None:
    w = time_window(T, 10, 40)
    assert w["arrival_ns"].to_list() == [0, 0, 15]
    assert w["offset"].to_list() == [512, 1024, 1536]
    assert time_window(T, 200, 300).height == 0
    with pytest.raises(InputError, match="before it starts"):
        time_window(T, 5, 1)


# ------------------------------------------------------------------------ scale_rate


def test_scale_rate_multiplies_inter_arrivals() -> None:
    assert scale_rate(T, 2)["arrival_ns"].to_list() == [0, 20, 20, 50, 80, 200]
    assert scale_rate(T, 0.5)["arrival_ns"].to_list() == [0, 5, 5, 12, 20, 50]  # 12.5 → 12 (half to even)
    assert scale_rate(T, 1)["arrival_ns"].equals(T["arrival_ns"])
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(InputError, match="positive"):
            scale_rate(T, bad)


# ----------------------------------------------------------------------------- merge


def test_merge_assigns_tenants_shifts_and_keeps_ties_in_input_order() -> None:
    a = _trace([0, 5, 10])
    b = _trace([0, 5])
    m = merge([a, b], shifts_ns=[0, 5])
    assert m["arrival_ns"].to_list() == [0, 5, 5, 10, 10]
    assert m["tenant"].to_list() == [0, 0, 1, 0, 1]
    assert m.schema["tenant"] == pl.UInt32
    m2 = merge([a, b])
    assert m2["tenant"].to_list() == [0, 1, 0, 1, 0]


def test_merge_rebases_negative_shifts_and_unions_optional_columns() -> None:
    a = _trace([0, 5]).with_columns(pl.lit("h").alias("host"))
    b = _trace([0, 5])
    m = merge([a, b], shifts_ns=[100, 0])
    assert m["arrival_ns"].to_list() == [0, 5, 100, 105]
    assert m["tenant"].to_list() == [1, 1, 0, 0]
    assert m["host"].to_list() == [None, None, "h", "h"]


def test_merge_errors() -> None:
    with pytest.raises(InputError, match="at least one"):
        merge([])
    with pytest.raises(InputError, match="2 traces but 1 shifts"):
        merge([T, T], shifts_ns=[0])
    with pytest.raises(InputError, match="trace 1 is not a canonical trace"):
        merge([T, pl.DataFrame({"x": [1]})])


# ---------------------------------------------------------------------- split_tenants


def test_split_by_device_first_appearance_order() -> None:
    df = _trace([0, 1, 2, 3, 4], devices=["7", "3", "7", "9", "3"])
    out, mapping = split_tenants(df, by="device")
    assert out["tenant"].to_list() == [0, 1, 0, 2, 1]
    assert mapping.to_dicts() == [
        {"tenant": 0, "key": "7", "requests": 2},
        {"tenant": 1, "key": "3", "requests": 2},
        {"tenant": 2, "key": "9", "requests": 1},
    ]
    assert out.drop("tenant").equals(df.drop("tenant"))


def test_split_by_op_and_by_rule() -> None:
    df = _trace([0, 1, 2, 3], reads=[False, True, True, False])
    out, mapping = split_tenants(df, by="op")
    assert out["tenant"].to_list() == [0, 1, 1, 0]
    assert mapping["key"].to_list() == ["write", "read"]
    out, mapping = split_tenants(df, by=lambda d: (d["offset"] >= 1024).cast(pl.String))
    assert out["tenant"].to_list() == [0, 0, 1, 1]
    out, _ = split_tenants(df, by=lambda d: pl.col("size") > 1024)
    assert out["tenant"].to_list() == [0, 0, 1, 1]
    out, _ = split_tenants(df, by=lambda d: ["a", "b", "a", "c"])
    assert out["tenant"].to_list() == [0, 1, 0, 2]


def test_split_null_keys_form_one_tenant() -> None:
    df = T.head(4).with_columns(pl.Series("process", ["x", None, "x", None], dtype=pl.String))
    out, mapping = split_tenants(df, by="process")
    assert out["tenant"].to_list() == [0, 1, 0, 1]
    assert mapping["key"].to_list() == ["x", None]
    assert mapping["requests"].to_list() == [2, 2]


def test_split_by_missing_column() -> None:
    with pytest.raises(InputError, match="no 'host' column"):
        split_tenants(T, by="host")
    with pytest.raises(InputError, match="returned 1 keys for 6 requests"):
        split_tenants(T, by=lambda d: ["x"])


# ----------------------------------------------------------------------------- stats


def test_stats_windows_are_aligned_to_the_first_arrival() -> None:
    ms = 1_000_000
    # 3 requests in [0, 100 ms), 4 in [100, 200 ms): the 4 would straddle a window
    # boundary if windows were aligned to absolute multiples of 100 ms before rebasing
    df = _trace([0, 10 * ms, 99 * ms, 100 * ms, 150 * ms, 160 * ms, 199 * ms, 1500 * ms])
    s = stats(df)
    assert s["count"] == 8
    assert s["span_s"] == pytest.approx(1.5)
    assert s["mean_iops"] == pytest.approx(8 / 1.5)
    assert s["peak_iops_100ms"] == 40.0
    assert s["peak_iops_1s"] == 7.0
    assert s["read_fraction"] == pytest.approx(5 / 8)
    assert s["devices"] == 2


def test_stats_size_histogram_and_empty() -> None:
    df = _trace([0, 1, 2, 3]).with_columns(pl.Series("size", [512, 513, 4096, 4097], dtype=pl.UInt32))
    s = stats(df)
    assert s["size_histogram"] == [
        {"le_bytes": 512, "count": 1},
        {"le_bytes": 1024, "count": 1},
        {"le_bytes": 4096, "count": 1},
        {"le_bytes": 8192, "count": 1},
    ]
    assert s["mean_size"] == pytest.approx((512 + 513 + 4096 + 4097) / 4)
    empty = stats(T.head(0))
    assert empty["count"] == 0 and empty["peak_iops_100ms"] == 0.0


# ----------------------------------------------------------------- properties


@st.composite
def traces(draw: st.DrawFn, max_n: int = 60) -> pl.DataFrame:
    gaps = draw(st.lists(st.integers(0, 5_000_000), min_size=1, max_size=max_n))
    arrivals = [0]
    for g in gaps[1:]:
        arrivals.append(arrivals[-1] + g)
    devices = draw(st.lists(st.sampled_from(["0", "1", "2", "a/b"]), min_size=len(arrivals), max_size=len(arrivals)))
    reads = draw(st.lists(st.booleans(), min_size=len(arrivals), max_size=len(arrivals)))
    return _trace(arrivals, devices, reads)


def _canonical(df: pl.DataFrame) -> None:
    assert df["arrival_ns"].is_sorted()
    if df.height:
        assert df["arrival_ns"][0] == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(traces(), min_size=1, max_size=4), st.data())
def test_merge_then_split_preserves_requests(dfs: list[pl.DataFrame], data: st.DataObject) -> None:
    shifts = data.draw(st.lists(st.integers(-10_000_000, 10_000_000), min_size=len(dfs), max_size=len(dfs)))
    m = merge(dfs, shifts_ns=shifts)
    _canonical(m)
    assert m.height == sum(d.height for d in dfs)
    lo = min(shifts)  # every input starts at 0
    for i, (d, s) in enumerate(zip(dfs, shifts, strict=True)):
        part = m.filter(pl.col("tenant") == i)
        # each input's requests keep their order and spacing
        assert part["offset"].to_list() == d["offset"].to_list()
        assert (part["arrival_ns"] - (s - lo)).to_list() == d["arrival_ns"].to_list()
    out, mapping = split_tenants(m, by="device")
    assert out.height == m.height
    assert out.drop("tenant").equals(m.drop("tenant"))
    assert mapping["requests"].sum() == m.height
    assert mapping["tenant"].to_list() == list(range(mapping.height))
    # dense ids in first-appearance order
    firsts = out.with_row_index().group_by("tenant").agg(pl.col("index").min()).sort("tenant")
    assert firsts["index"].is_sorted()


@settings(max_examples=80, deadline=None)
@given(traces(), st.integers(0, 100_000_000), st.integers(0, 100_000_000))
def test_window_preserves_order_and_count(df: pl.DataFrame, a: int, b: int) -> None:
    start, end = min(a, b), max(a, b)
    w = time_window(df, start, end)
    _canonical(w)
    expected = df.filter((pl.col("arrival_ns") >= start) & (pl.col("arrival_ns") < end))
    assert w.height == expected.height
    assert w["offset"].to_list() == expected["offset"].to_list()


@settings(max_examples=80, deadline=None)
@given(traces(), st.floats(0.01, 100.0))
def test_scale_preserves_order_and_count(df: pl.DataFrame, k: float) -> None:
    s = scale_rate(df, k)
    _canonical(s)
    assert s.height == df.height
    assert s["offset"].to_list() == df["offset"].to_list()
    span = df["arrival_ns"].max()
    assert abs(s["arrival_ns"].max() - span * k) <= 1
