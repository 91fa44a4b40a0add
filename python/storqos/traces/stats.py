"""Summary statistics of a trace (what ``storqos trace info`` prints).

Peak rates count the requests in fixed windows aligned to the first arrival
(``[0, w), [w, 2w), ...`` after rebasing) and report the fullest window times the
window rate: peak 100 ms IOPS = most requests in one 100 ms window × 10, the convention
of ``shared/traces/INDEX.md``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from storqos.traces.schema import require_trace

_WINDOWS_NS = {"100ms": 100_000_000, "1s": 1_000_000_000}


def peak_iops(df: pl.DataFrame, window_ns: int) -> float:
    """Most requests in one ``window_ns`` window (aligned to the first arrival) × windows/s."""
    if df.height == 0:
        return 0.0
    t = pl.col("arrival_ns") - pl.col("arrival_ns").min()
    most = df.select((t // window_ns).value_counts().struct.field("count").max()).item()
    return float(most) * 1e9 / window_ns


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
