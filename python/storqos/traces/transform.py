"""Reshaping canonical traces: windows, rate scaling, multi-tenant merge and split.

All functions take and return canonical traces (plain polars DataFrames) and keep the
canonical invariants: sorted by ``arrival_ns`` (ties in input order) and rebased so the
first arrival is 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from storqos.base.errors import InputError
from storqos.traces.schema import MAX_INT64, conform, require_trace

#: What :func:`split_tenants` can split by: a column name, ``"op"``, or a rule computing
#: a key per request from the whole frame (returning a Series, an expression or a list).
SplitRule = str | Callable[[pl.DataFrame], "pl.Series | pl.Expr | Sequence[object]"]


def _rebase(df: pl.DataFrame) -> pl.DataFrame:
    if df.height == 0:
        return df
    t0 = df["arrival_ns"].min()
    return df.with_columns(pl.col("arrival_ns") - t0) if t0 else df


def time_window(df: pl.DataFrame, start_ns: int = 0, end_ns: int | None = None) -> pl.DataFrame:
    """Requests with ``start_ns <= arrival_ns < end_ns`` (``end_ns=None``: to the end),
    rebased to the first kept one. Both are times from the trace's start: an experiment
    file's ``start``/``end`` and ``storqos simulate --start/--end``."""
    require_trace(df)
    if end_ns is not None and end_ns < start_ns:
        raise InputError(f"time window ends ({end_ns} ns) before it starts ({start_ns} ns)")
    keep = pl.col("arrival_ns") >= start_ns
    if end_ns is not None:
        keep &= pl.col("arrival_ns") < end_ns
    return _rebase(df.filter(keep) if start_ns > 0 or end_ns is not None else df)


def scale_rate(df: pl.DataFrame, k: float) -> pl.DataFrame:
    """Multiply every inter-arrival time by ``k`` (``k = 0.5`` doubles the request rate).

    Arrivals are rounded to whole ns; order and ties are preserved.
    """
    require_trace(df)
    if not k > 0 or k != k or k == float("inf"):
        raise InputError(f"rate scale factor must be a positive finite number, got {k!r}")
    base = _rebase(df)
    if base.height and float(base["arrival_ns"].max()) * k >= MAX_INT64:  # type: ignore[arg-type]
        raise InputError(
            f"rate scale factor {k!r} makes the trace span more than 2^63 ns (292 years)"
        )
    if float(k).is_integer():
        scaled = pl.col("arrival_ns") * int(k)
    else:
        scaled = (pl.col("arrival_ns").cast(pl.Float64) * float(k)).round(0).cast(pl.Int64)
    return base.with_columns(scaled.alias("arrival_ns"))


def merge(dfs: Sequence[pl.DataFrame], shifts_ns: Sequence[int] | None = None) -> pl.DataFrame:
    """Interleave traces as tenants ``0..n-1`` (input ``i`` becomes tenant ``i``).

    ``shifts_ns[i]`` is added to the arrivals of input ``i`` (default 0). The result is
    sorted stably by time (ties: lower input index first) and rebased. Optional columns
    present in some inputs only are null for the others.
    """
    if len(dfs) == 0:
        raise InputError("merge needs at least one trace")
    if shifts_ns is None:
        shifts_ns = [0] * len(dfs)
    if len(shifts_ns) != len(dfs):
        raise InputError(f"merge got {len(dfs)} traces but {len(shifts_ns)} shifts")
    parts = []
    lo, hi = MAX_INT64, -MAX_INT64
    for i, (df, shift) in enumerate(zip(dfs, shifts_ns, strict=True)):
        require_trace(df, f"trace {i}")
        if df.height:
            lo = min(lo, int(df["arrival_ns"].min()) + int(shift))  # type: ignore[arg-type]
            hi = max(hi, int(df["arrival_ns"].max()) + int(shift))  # type: ignore[arg-type]
            if hi - lo > MAX_INT64 or hi > MAX_INT64 or lo < -MAX_INT64:
                raise InputError(
                    f"shift {int(shift)} ns of trace {i} puts the merged trace beyond 2^63 ns (292 years)"
                )
        part = conform(df).with_columns(
            (pl.col("arrival_ns") + int(shift)).alias("arrival_ns"),
            pl.lit(i, dtype=pl.UInt32).alias("tenant"),
        )
        parts.append(part)
    out = pl.concat(parts, how="diagonal_relaxed")
    out = out.sort("arrival_ns", maintain_order=True)
    return conform(_rebase(out))


def _keys(df: pl.DataFrame, by: SplitRule) -> pl.Series:
    if callable(by):
        key = by(df)
        if isinstance(key, pl.Expr):
            key = df.select(key.alias("key")).to_series()
        elif not isinstance(key, pl.Series):
            key = pl.Series("key", list(key))
        if len(key) != df.height:
            raise InputError(f"split rule returned {len(key)} keys for {df.height} requests")
        return key.cast(pl.String).alias("key")
    if by == "op":
        return df.select(
            pl.when(pl.col("is_read")).then(pl.lit("read")).otherwise(pl.lit("write")).alias("key")
        ).to_series()
    if by not in df.columns:
        choices = [c for c in ("device", "host", "process") if c in df.columns] + ["op"]
        raise InputError(
            f"cannot split by {by!r}: the trace has no {by!r} column (try {', '.join(choices)})",
            "--split-by",
        )
    return df[by].cast(pl.String).alias("key")


def split_tenants(df: pl.DataFrame, by: SplitRule = "device") -> tuple[pl.DataFrame, pl.DataFrame]:
    """Assign ``tenant`` from a key: ``"device"``, ``"host"``, ``"process"``, ``"op"``,
    any column name, or a callable rule ``rule(df) -> Series | Expr | list``.

    Tenant ids are dense, in order of first appearance of each key. Returns the trace
    with the new ``tenant`` column and a mapping frame ``(tenant, key, requests)``.
    """
    require_trace(df)
    key = _keys(df, by)
    uniq = key.unique(maintain_order=True)
    ids = pl.Series("tenant", range(len(uniq)), dtype=pl.UInt32)
    tenant = key.replace_strict(uniq, ids, return_dtype=pl.UInt32) if len(uniq) else ids
    out = df.with_columns(tenant.alias("tenant"))
    counts = key.value_counts(sort=False, name="requests")
    mapping = (
        pl.DataFrame({"tenant": ids, "key": uniq})
        .join(counts, on="key", how="left", nulls_equal=True)
        .with_columns(pl.col("requests").cast(pl.UInt32))
        .sort("tenant")
    )
    return out, mapping


__all__ = ["SplitRule", "merge", "scale_rate", "split_tenants", "time_window"]
