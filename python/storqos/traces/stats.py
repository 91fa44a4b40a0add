"""Summary statistics of a trace (what ``storqos trace info`` prints).

Peak rates count the requests in fixed windows aligned to the first arrival
(``[0, w), [w, 2w), ...`` after rebasing) and report the fullest window times the
window rate: peak 100 ms IOPS = most requests in one 100 ms window × 10, the convention
of ``shared/traces/INDEX.md``. The busiest windows (:func:`busiest_windows`) say where:
the windows of a given length, anywhere in the trace, that hold the most requests.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from storqos.base.errors import InputError
from storqos.traces.schema import require_trace

_WINDOWS_NS = {"100ms": 100_000_000, "1s": 1_000_000_000}


def peak_iops(df: pl.DataFrame, window_ns: int) -> float:
    """Most requests in one ``window_ns`` window (aligned to the first arrival) × windows/s."""
    if df.height == 0:
        return 0.0
    t = pl.col("arrival_ns") - pl.col("arrival_ns").min()
    most = df.select((t // window_ns).value_counts().struct.field("count").max()).item()
    return float(most) * 1e9 / window_ns


#: Lengths :func:`busy_window_length` picks from, shortest first: round lengths a user
#: types (1 s, 10 s, 1 min, 10 min). 10 min is the longest default: one such window holds
#: the public excerpts other traces come in (23 s to 2.5 min) several times over.
BUSY_WINDOW_LADDER_NS = (1_000_000_000, 10_000_000_000, 60_000_000_000, 600_000_000_000)
#: The default window length is at most the trace's span over this, so that the busiest
#: windows are picked among at least this many.
BUSY_WINDOWS_PER_SPAN = 10
#: A busiest window starts on a grid of its length over this (a 10 min window at a whole
#: minute), so that its start and end are round times to type as --start/--end; the
#: grid costs at most that fraction of the window against the best start to the ns.
BUSY_WINDOW_GRID = 10


def busy_window_length(span_ns: int) -> int:
    """The default length of :func:`busiest_windows`: the longest of
    :data:`BUSY_WINDOW_LADDER_NS` at most ``span_ns / BUSY_WINDOWS_PER_SPAN`` (1 s for a
    trace shorter than 10 s)."""
    fits = [w for w in BUSY_WINDOW_LADDER_NS if w * BUSY_WINDOWS_PER_SPAN <= span_ns]
    return fits[-1] if fits else BUSY_WINDOW_LADDER_NS[0]


def busiest_windows(df: pl.DataFrame, window_ns: int, count: int = 3) -> list[dict[str, Any]]:
    """The ``count`` busiest windows of ``window_ns`` that do not overlap, busiest first
    (ties: the earliest): ``[{"start_ns", "end_ns", "requests", "iops"}, ...]``, times
    from the trace's first request, ``iops`` = requests / window length. A window
    starts on a grid of ``window_ns / BUSY_WINDOW_GRID`` and may run past the last
    request; fewer than ``count`` come back when the trace has room for fewer."""
    require_trace(df)
    if window_ns <= 0:
        raise InputError(f"the window must be longer than 0, got {window_ns} ns", "--busiest-window")
    if df.height == 0 or count <= 0:
        return []
    a = np.sort(df["arrival_ns"].to_numpy().astype(np.int64))  # canonical traces are sorted: a quick pass
    a -= a[0]
    grid = max(window_ns // BUSY_WINDOW_GRID, 1)
    starts = np.unique(a // grid * grid)
    counts = np.searchsorted(a, starts + window_ns, side="left") - np.searchsorted(a, starts, side="left")
    out: list[dict[str, Any]] = []
    for _ in range(count):
        i = int(np.argmax(counts))  # the first maximum: the earliest of equals
        if counts[i] <= 0:
            break
        s = int(starts[i])
        out.append({"start_ns": s, "end_ns": s + window_ns, "requests": int(counts[i]),
                    "iops": float(counts[i]) * 1e9 / window_ns})
        lo, hi = np.searchsorted(starts, [s - window_ns + 1, s + window_ns], side="left")
        counts[lo:hi] = -1  # windows overlapping this one
    return out


def size_histogram(df: pl.DataFrame) -> list[dict[str, int]]:
    """Request counts per power-of-two size bucket: ``[{"le_bytes": 4096, "count": n}, ...]``.

    A request of ``s`` bytes falls in the bucket of the smallest power of two ``>= s``.
    """
    if df.height == 0:
        return []
    size = df["size"].to_numpy().astype(np.int64)
    bucket = np.left_shift(np.int64(1), np.ceil(np.log2(np.maximum(size, 1))).astype(np.int64))
    le, counts = np.unique(bucket, return_counts=True)
    return [{"le_bytes": int(b), "count": int(c)} for b, c in zip(le, counts, strict=True)]


def stats(df: pl.DataFrame) -> dict[str, Any]:
    """Count, span, read fraction, mean and peak IOPS, sizes and devices of a trace.

    Keys: ``count``, ``span_s`` (last − first arrival), ``read_fraction``, ``read_count``,
    ``mean_iops`` (count / span; 0 when the span is 0), ``peak_iops_100ms``,
    ``peak_iops_1s``, ``mean_size`` (bytes), ``size_histogram`` (see
    :func:`size_histogram`), ``devices`` (distinct devices), ``tenants`` (distinct
    tenants), and ``mean_response_ns`` when the trace has measured response times.
    """
    require_trace(df)
    n = df.height
    if n == 0:
        return {
            "count": 0,
            "span_s": 0.0,
            "read_fraction": 0.0,
            "read_count": 0,
            "mean_iops": 0.0,
            "peak_iops_100ms": 0.0,
            "peak_iops_1s": 0.0,
            "mean_size": 0.0,
            "size_histogram": [],
            "devices": 0,
            "tenants": 0,
        }
    row = df.select(
        (pl.col("arrival_ns").max() - pl.col("arrival_ns").min()).alias("span"),
        pl.col("is_read").sum().alias("reads"),
        pl.col("size").cast(pl.Float64).mean().alias("mean_size"),
        pl.col("device").n_unique().alias("devices"),
    ).row(0, named=True)
    span_s = row["span"] / 1e9
    out: dict[str, Any] = {
        "count": n,
        "span_s": span_s,
        "read_fraction": row["reads"] / n,
        "read_count": int(row["reads"]),
        "mean_iops": n / span_s if span_s > 0 else 0.0,
        "peak_iops_100ms": peak_iops(df, _WINDOWS_NS["100ms"]),
        "peak_iops_1s": peak_iops(df, _WINDOWS_NS["1s"]),
        "mean_size": float(row["mean_size"]),
        "size_histogram": size_histogram(df),
        "devices": int(row["devices"]),
        "tenants": int(df["tenant"].n_unique()) if "tenant" in df.columns else 1,
    }
    if "response_ns" in df.columns and df["response_ns"].null_count() < n:
        out["mean_response_ns"] = float(df["response_ns"].mean())  # type: ignore[arg-type]
    return out
