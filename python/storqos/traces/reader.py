"""``read_trace``: one entry point for every trace format.

>>> df = read_trace("wsrch-small.trace")                       # doctest: +SKIP
>>> df = read_trace("log.csv", format="csv", time_unit="ms")     # doctest: +SKIP

The format is detected from the file unless given; ``time_unit`` applies to formats whose
timestamps have no fixed unit (``disksim``, ``spc``, ``fio`` v3, ``csv``, ``parquet``)
and is an error for the others. Extra keyword ``options`` go to the format's reader
(``action="D"`` for ``blkparse``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from storqos.base.errors import InputError, warn_input
from storqos.traces._pipeline import recording_origin
from storqos.traces.blkparse import read_blkparse
from storqos.traces.detect import detect_format
from storqos.traces.disksim import read_disksim, read_mqsim
from storqos.traces.fio import read_fio
from storqos.traces.fiu import read_fiu
from storqos.traces.formats import FORMATS, TIME_UNIT_FORMATS
from storqos.traces.msr import read_msr
from storqos.traces.spc import read_spc
from storqos.traces.srt import read_srt
from storqos.traces.tabular import read_csv, read_parquet
from storqos.traces.vscsi import read_vscsi

#: The reader function of each format.
READERS: dict[str, Callable[..., pl.DataFrame]] = {
    "spc": read_spc,
    "msr": read_msr,
    "disksim": read_disksim,
    "mqsim": read_mqsim,
    "blkparse": read_blkparse,
    "fiu": read_fiu,
    "srt": read_srt,
    "vscsi": read_vscsi,
    "fio": read_fio,
    "parquet": read_parquet,
    "csv": read_csv,
}


def read_trace(
    path: str | Path,
    format: str | None = None,
    time_unit: str | None = None,
    sort: bool = False,
    limit: int | None = None,
    **options: Any,
) -> pl.DataFrame:
    """Read any supported trace into a canonical DataFrame.

    ``sort=True`` sorts stably by arrival time instead of rejecting a timestamp that goes
    backwards; ``limit`` keeps the first ``limit`` requests of the file.
    Bad input raises :class:`~storqos.base.errors.InputError` naming the file and line/byte.
    """
    if format is None:
        try:
            fmt = detect_format(path)
        except OSError as e:
            raise InputError(f"cannot read the file: {e.strerror or e}", str(path)) from None
    else:
        fmt = format.strip().lower()
    if fmt not in READERS:
        raise InputError(f"unknown trace format {format!r}; known formats: {', '.join(FORMATS)}", "--format")
    kwargs: dict[str, Any] = {"sort": sort, "limit": limit, **options}
    if time_unit is not None:
        if fmt not in TIME_UNIT_FORMATS:
            raise InputError(
                f"the {fmt} format has fixed time units; --time-unit applies only to "
                f"{', '.join(TIME_UNIT_FORMATS)}",
                "--time-unit",
            )
        kwargs["time_unit"] = time_unit
    try:
        df = READERS[fmt](path, **kwargs)
    except TypeError as e:
        if options and "unexpected keyword" in str(e):
            raise InputError(f"option not supported by the {fmt} reader: {e}") from None
        raise
    except OSError as e:
        raise InputError(f"cannot read the file: {e.strerror or e}", str(path)) from None
    except pl.exceptions.PolarsError as e:  # a safety net: readers report bad input themselves
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"cannot parse as {fmt}: {first}", str(path)) from None
    if fmt in TIME_UNIT_FORMATS:
        _check_rate(df, str(path), fmt, time_unit)
    return df


def read_trace_with_origin(
    path: str | Path,
    format: str | None = None,
    time_unit: str | None = None,
    sort: bool = False,
    limit: int | None = None,
    **options: Any,
) -> tuple[pl.DataFrame, int]:
    """:func:`read_trace`, and the trace's origin: its first request's time on the file's
    own clock in ns (the trace itself starts at 0). Traces of one capture (the MSR
    Cambridge volumes, with their FILETIMEs) share that clock; a format that counts
    from its own start (DiskSim, MQSim, blkparse) gives about 0."""
    with recording_origin() as origins:
        df = read_trace(path, format, time_unit, sort, limit, **options)
    return df, origins[-1] if origins else 0


#: A mean rate above this over a whole trace is taken as a wrong time unit (10 M IOPS:
#: beyond any single block device or volume; the fastest NVMe drives reach ~2-3 M IOPS).
IMPLAUSIBLE_IOPS = 10_000_000.0
#: Traces shorter than this are too small to judge their rate.
_RATE_MIN_REQUESTS = 100


def _check_rate(df: pl.DataFrame, where: str, fmt: str, time_unit: str | None) -> None:
    """Warn when the timestamps imply an implausible mean rate (a wrong time unit)."""
    n = df.height
    if n < _RATE_MIN_REQUESTS:
        return
    a = pl.col("arrival_ns")
    lo, hi = df.select(a.min().alias("lo"), a.max().alias("hi")).row(0)  # one pass, in parallel
    span_ns = int(hi) - int(lo)
    rate = float("inf") if span_ns <= 0 else (n - 1) * 1e9 / span_ns
    if rate > IMPLAUSIBLE_IOPS:
        unit = f"--time-unit {time_unit}" if time_unit else f"the {fmt} format's default time unit"
        warn_input(
            f"{n:,} requests in {span_ns:,} ns is a mean of {rate:,.0f} IOPS, implausible for one trace; "
            f"read with {unit}: pass --time-unit (ns, us, ms, s) if the timestamps are in another unit",
            where,
        )
