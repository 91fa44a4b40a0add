"""The shared last step of every reader: validate parsed columns, convert, sort, rebase.

Readers parse a file into a *raw* frame with the columns

``t``        numeric time in the file's own unit (Int64 or Float64)
``is_read``  Boolean
``offset``   Int64 (or UInt64, as parsed), bytes
``size``     Int64 (or UInt32, as parsed), bytes
``device``   String

plus any optional canonical columns (``response_ns``, ``process``, ``host``) already in
canonical units. :func:`finish` checks the raw frame as a whole (vectorised) and turns it
into a canonical trace. If anything is wrong it raises :class:`Fallback` instead of
guessing: the reader then runs its exact, line-by-line diagnostic pass, which either
reports the first bad line as an :class:`~storqos.base.errors.InputError` or (if the fast
parser merely choked on a harmless quirk) produces the trace itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from numbers import Integral
from pathlib import Path

import polars as pl

from storqos.base.errors import InputError
from storqos.traces.schema import MAX_INT64, MAX_SIZE, conform, conform_exprs

_RAW_REQUIRED = ("t", "is_read", "offset", "size", "device")


class Fallback(Exception):
    """The fast path cannot vouch for the input; run the exact diagnostic pass."""


#: Where :func:`finish` reports each trace's origin while :func:`recording_origin` asks.
_ORIGINS: ContextVar[list[int] | None] = ContextVar("trace_origins", default=None)


@contextmanager
def recording_origin() -> Iterator[list[int]]:
    """Collect the origin of each trace :func:`finish` builds meanwhile: its first
    request's time on the file's own clock, in ns (what rebasing to 0 subtracted: a
    FILETIME since 1601 for MSR, the seconds blktrace counts from its start...)."""
    sink: list[int] = []
    token = _ORIGINS.set(sink)
    try:
        yield sink
    finally:
        _ORIGINS.reset(token)


def _origin(t0: int | float, factor: int | float) -> None:
    sink = _ORIGINS.get()
    if sink is not None:
        exact = isinstance(t0, Integral) and isinstance(factor, Integral)
        sink.append(int(t0) * int(factor) if exact else round(float(t0) * float(factor)))


def source_file(path: str | Path) -> Path:
    """Return ``path`` as a :class:`Path` after checking it is a non-empty regular file."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such file", str(path))
    if not p.is_file():
        raise InputError("not a regular file", str(path))
    if p.stat().st_size == 0:
        raise InputError("empty file: no requests", str(path))
    return p


def check_limit(limit: int | None) -> None:
    """Reject a negative or non-integer ``limit``."""
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise InputError(f"limit must be a non-negative integer, got {limit!r}", "--limit")


def finish(
    raw: pl.DataFrame | pl.LazyFrame,
    *,
    factor: int | float,
    sort: bool,
    limit: int | None,
    strict: bool = True,
    t_range: tuple[int | float, int | float] | None = None,
    rows_checked: bool = False,
) -> pl.DataFrame:
    """Validate ``raw`` and return the canonical trace.

    ``factor`` is nanoseconds per unit of ``t``. ``limit`` keeps the first ``limit``
    requests in file order (before sorting). With ``sort=False`` a timestamp that goes
    backwards is an error; with ``sort=True`` the trace is sorted stably by time.
    Raises :class:`Fallback` if ``strict`` and any row is bad (null field, size outside
    1..2**32-1, offset outside 0..2**63-1, non-finite or decreasing time, times spanning
    more than Int64 nanoseconds). Without ``strict`` the caller has checked every row; a span that
    still does not fit is an :class:`InputError` rather than a wrapped-around time.
    ``t_range``: the least and greatest ``t`` of ``raw`` (after ``limit``) if the caller
    has them (not with ``strict``). ``rows_checked``: the caller has already checked
    every row's fields (no nulls; sizes and offsets in range, as :func:`~._lines.scaled_columns`
    does from the parsed columns' bounds), so only the times are checked here: the
    whole-trace pass then reads the time column alone instead of computing every
    converted column twice. ``raw`` may be a lazy query over the parsed columns
    (``cols.lazy().select(...)``): its rows are then computed in morsels, by the checks
    and by the conversion, and never held whole.
    """
    lazy = raw.lazy()
    if limit is not None:
        lazy = lazy.head(limit)
    schema = lazy.collect_schema()
    t = pl.col("t")
    t_float = schema["t"].is_float()
    # Aggregates only (the streaming engine, in parallel), no per-row masks.
    aggs = [pl.len().alias("n")]
    if t_range is None or strict:
        aggs += [t.min().alias("t0"), t.max().alias("t1")]
    if strict and not rows_checked:
        aggs += [
            pl.sum_horizontal([pl.col(c).null_count() for c in _RAW_REQUIRED]).alias("nulls"),
            pl.col("size").min().alias("size0"),
            pl.col("size").max().alias("size1"),
            pl.col("offset").min().alias("offset0"),
            pl.col("offset").max().alias("offset1"),  # a reader may parse offsets as UInt64
        ]
    if strict:
        aggs.append((t.is_finite().all() if t_float else pl.lit(True)).alias("finite"))
    n, *bounds = lazy.select(aggs).collect(engine="streaming").row(0)
    if n == 0:
        _origin(0, 1)
        return conform(lazy.collect().with_columns(pl.lit(0, pl.Int64).alias("arrival_ns")).drop("t"))
    if t_range is None or strict:
        t0, t1, *bounds = bounds
    else:
        t0, t1 = t_range
    if strict:
        *fields, finite = bounds
        nulls, size_min, size_max, offset_min, offset_max = fields or (0, 1, 1, 0, 0)
        if (
            nulls
            or size_min <= 0
            or size_max > MAX_SIZE
            or offset_min < 0
            or offset_max > MAX_INT64
            or not finite
            or (not sort and not lazy.select(t).collect().to_series().is_sorted())
        ):
            raise Fallback
    if float(t1 - t0) * float(factor) >= MAX_INT64:
        if strict:
            raise Fallback
        raise InputError("timestamps span more than 2^63 ns (292 years): not a trace storqos can hold")
    rel = pl.col("t") - pl.lit(t0)
    if t_float or isinstance(factor, float):
        arrival = (rel.cast(pl.Float64) * float(factor)).round(0).cast(pl.Int64)
    else:
        arrival = rel.cast(pl.Int64) * int(factor)
    # One lazy query: the arrival and the canonical casts in a single projection, run by
    # the streaming engine (in morsels: no whole-column intermediates to allocate).
    lf = lazy.with_columns(arrival.alias("arrival_ns"))
    if strict and schema["offset"] == pl.Int64:  # checked 0..2**63-1: the same bits
        lf = lf.with_columns(pl.col("offset").reinterpret(signed=False))
    if sort:
        lf = lf.sort("arrival_ns", maintain_order=True)
    columns = [c for c in schema.names() if c != "t"] + ["arrival_ns"]
    out = lf.select(conform_exprs(columns)).collect(engine="streaming")
    _origin(t0, factor)
    return out


def no_requests(path: str | Path, detail: str = "") -> InputError:
    """The error for a file that parsed but held no I/O requests."""
    return InputError("no requests in file" + (f" ({detail})" if detail else ""), str(path))
