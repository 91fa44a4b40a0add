"""Seed 001 (SARC + AVATAR), §4: runs of the two-level policies on the paper's array, and
their gauges as time series: L^O, credits, low-level percentiles and deadline misses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from storqos.model.sim import SimResult
from storqos.model.sim import simulate as _simulate
from storqos.model.slo import ClassSlo, parse_slo
from storqos.model.twolevel.spec import ARRAY_8_DISKS, twolevel_spec


def simulate(
    trace: pl.DataFrame | None,
    policy: str = "sarc+avatar",
    slo: str | Sequence[ClassSlo] | None = None,
    *,
    device: str | dict[str, Any] = ARRAY_8_DISKS,
    percentile: str | float | None = None,
    period: str | float | None = None,
    control_window: str | float | None = None,
    p_rt: float | None = None,
    p_inc: float | None = None,
    p_dec: float | None = None,
    facade_overload: str | None = None,
    **kwargs: Any,
) -> SimResult:
    """Simulate ``trace`` (tenant i = class i) through a two-level policy on ``device``
    (default: seed 001's 8-disk array). Other keywords go to :func:`storqos.simulate`
    (``seed``, ``window`` — keep the 1 s default to judge SLOs —, ``until``...)."""
    spec = twolevel_spec(
        policy, slo, percentile=percentile, period=period, window=control_window, p_rt=p_rt, p_inc=p_inc, p_dec=p_dec,
        facade_overload=facade_overload,
    )
    res = _simulate(trace, spec, device, **kwargs)
    res.params["slo"] = [s.__dict__ for s in parse_slo(slo)] if slo is not None else None
    return res


def _wide_gauges(res: SimResult) -> pl.DataFrame:
    g = res.gauges
    if g.height == 0:
        return pl.DataFrame({"start_s": []}, schema={"start_s": pl.Float64})
    return (
        g.pivot(on="name", index="start_ns", values="value", aggregate_function="last")
        .sort("start_ns")
        .with_columns((pl.col("start_ns") / 1e9).alias("start_s"))
        .drop("start_ns")
    )


def timeseries(res: SimResult) -> pl.DataFrame:
    """One row per window: ``start_s``; ``lo`` (L^O; ``inf`` in AVATAR's overload),
    ``lo_max``, ``overload``, ``spare``, ``edf_queued``; per class ``i``: ``credits.i``,
    ``full_credits.i``, ``backlog.i``, ``low_p_ms.i`` (SLO percentile of the low-level
    response time, ms), ``low_miss_ratio.i`` (share of the window's low-level
    completions that missed their deadline); and ``p95_ms.i``, the client-side 95th
    percentile from ``res.windows``.
    """
    wide = _wide_gauges(res)
    if wide.height == 0:
        return wide
    classes = sorted({int(c.split(".")[1]) for c in wide.columns if c.startswith("low_done.")})
    cols = []
    for i in classes:
        done = pl.col(f"low_done.{i}").diff().fill_null(pl.col(f"low_done.{i}"))
        missed = pl.col(f"low_missed.{i}").diff().fill_null(pl.col(f"low_missed.{i}"))
        cols.append(pl.when(done > 0).then(missed / done).otherwise(None).alias(f"low_miss_ratio.{i}"))
    wide = wide.with_columns(cols)
    w = res.windows
    if w.height:
        client = (
            w.with_columns((pl.col("start_ns") / 1e9).alias("start_s"), (pl.col("p95_ns") / 1e6).alias("p95_ms"))
            .pivot(on="tenant", index="start_s", values="p95_ms", aggregate_function="last")
        )
        client = client.rename({c: f"p95_ms.{c}" for c in client.columns if c != "start_s"})
        wide = wide.join(client, on="start_s", how="left")
    first = ["start_s"]
    return wide.select(first + [c for c in wide.columns if c not in first])


def miss_ratio(res: SimResult) -> pl.DataFrame:
    """Per class: low-level completions, deadline misses and their ratio over the run
    (the paper's "miss ratio", §4.1), from the cumulative gauges' last sample."""
    wide = _wide_gauges(res)
    rows = []
    for c in wide.columns:
        if c.startswith("low_done."):
            i = int(c.split(".")[1])
            done = int(wide[c].drop_nulls()[-1])
            missed = int(wide[f"low_missed.{i}"].drop_nulls()[-1])
            rows.append({"class": i, "completed": done, "missed": missed, "miss_ratio": missed / done if done else 0.0})
    return pl.DataFrame(rows, schema={"class": pl.Int64, "completed": pl.Int64, "missed": pl.Int64, "miss_ratio": pl.Float64})
