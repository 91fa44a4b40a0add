"""What a comparison of two request logs compares, per tenant: IOPS over the run and
response-time percentiles (:func:`per_tenant`), and how far apart two response-time
distributions are as a whole (:func:`demerit`).

Both ``storqos validate`` (the live gateway against the simulator) and
``storqos simulate --device-profile`` (what the client of the live path would see) read
a log through these, so a prediction and a measurement are always counted alike."""

from __future__ import annotations

import numpy as np
import polars as pl

#: Percentiles compared, besides IOPS.
PERCENTILES = (50, 95, 99)


def per_tenant(log: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """IOPS over the whole run (first arrival to last completion, as the simulator
    counts) and response-time percentiles per tenant, from a request log (``tenant``,
    ``arrival_ns``, ``finish_ns``, ``response_ns``); ``name`` is the tenant's entry in
    ``names`` (its number where ``names`` has none)."""
    ends = log.select(pl.col("finish_ns").cast(pl.Int64).max() - pl.col("arrival_ns").cast(pl.Int64).min())
    span = float(ends.item() or 0) / 1e9 if log.height else 0.0
    g = log.group_by("tenant").agg(
        pl.len().alias("requests"),
        *(pl.col("response_ns").quantile(q / 100, "linear").alias(f"p{q}_ns") for q in PERCENTILES),
    ).with_columns((pl.col("requests") / span if span > 0 else pl.lit(0.0)).alias("iops")).sort("tenant")
    return g.with_columns(pl.col("tenant").map_elements(lambda t: names[int(t)] if int(t) < len(names) else str(t),
                                                        return_dtype=pl.Utf8).alias("name"))


def demerit(predicted_ns: np.ndarray, measured_ns: np.ndarray, *, points: int = 1000) -> float:
    """Ruemmler and Wilkes' demerit figure ("An introduction to disk drive modeling",
    IEEE Computer 1994): the root mean square of the horizontal distance between two
    response-time distributions (their CDFs), in the times' unit, here nanoseconds.
    Both CDFs are read at ``points`` evenly spaced fractions strictly inside (0, 1);
    0 when either side is empty."""
    a = np.asarray(predicted_ns, dtype=np.float64)
    b = np.asarray(measured_ns, dtype=np.float64)
    if not a.size or not b.size:
        return 0.0
    qs = (np.arange(points, dtype=np.float64) + 0.5) / points
    gap = np.quantile(a, qs) - np.quantile(b, qs)
    return float(np.sqrt(np.mean(gap * gap)))


__all__ = ["PERCENTILES", "demerit", "per_tenant"]
