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

from storqos.errors import InputError
from storqos.traces.blkparse import read_blkparse
from storqos.traces.detect import detect_format
from storqos.traces.disksim import read_disksim
from storqos.traces.fio import read_fio
from storqos.traces.fiu import read_fiu
from storqos.traces.msr import read_msr
from storqos.traces.spc import read_spc
from storqos.traces.srt import read_srt
from storqos.traces.tabular import read_csv, read_parquet
from storqos.traces.vscsi import read_vscsi

#: Every format name accepted by ``format=`` / ``--format``.
FORMATS: tuple[str, ...] = ("spc", "msr", "disksim", "blkparse", "fiu", "srt", "vscsi", "fio", "parquet", "csv")

#: The reader function of each format.
READERS: dict[str, Callable[..., pl.DataFrame]] = {
    "spc": read_spc,
    "msr": read_msr,
    "disksim": read_disksim,
    "blkparse": read_blkparse,
    "fiu": read_fiu,
    "srt": read_srt,
    "vscsi": read_vscsi,
    "fio": read_fio,
    "parquet": read_parquet,
    "csv": read_csv,
}

#: Formats whose timestamps have no fixed unit (``time_unit`` applies).
TIME_UNIT_FORMATS: tuple[str, ...] = ("disksim", "spc", "fio", "csv", "parquet")


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
    Bad input raises :class:`~storqos.errors.InputError` naming the file and line/byte.
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
        return READERS[fmt](path, **kwargs)
    except TypeError as e:
        if options and "unexpected keyword" in str(e):
            raise InputError(f"option not supported by the {fmt} reader: {e}") from None
        raise
    except OSError as e:
        raise InputError(f"cannot read the file: {e.strerror or e}", str(path)) from None
    except pl.exceptions.PolarsError as e:  # a safety net: readers report bad input themselves
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"cannot parse as {fmt}: {first}", str(path)) from None
