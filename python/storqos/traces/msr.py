"""MSR Cambridge block traces (SNIA IOTTA set 388), original CSV format.

One request per line, comma separated, usually no header::

    Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime
    128166386783630075,hm,0,Write,3164164096,40960,2896

* ``Timestamp``: Windows FILETIME, 100-ns ticks since 1601-01-01 UTC;
* ``Hostname``, ``DiskNumber``: the volume; ``device`` = ``"host/disk"`` (``"rsrch/1"``),
  ``host`` = the host name;
* ``Type``: ``Read`` or ``Write`` (any case);
* ``Offset``, ``Size``: bytes;
* ``ResponseTime``: measured latency in 100-ns ticks → ``response_ns``.

A first line starting with a non-numeric field (such as the header above) is skipped.
Time units are fixed by the format.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from storqos.traces._lines import (
    Record,
    expect_fields,
    int_field,
    joined,
    op_error,
    parse_lines,
    read_op_fields,
    scaled_columns,
    size_field,
)
from storqos.traces._pipeline import Fallback, check_limit, finish, no_requests, source_file

#: Nanoseconds per FILETIME tick.
TICK_NS = 100

_SCHEMA: dict[str, pl.DataType] = {
    "t": pl.Int64(),
    "host": pl.String(),
    "disk": pl.String(),
    "op": pl.String(),
    "offset": pl.Int64(),
    "size": pl.Int64(),
    "resp": pl.Int64(),
}
_NAMES = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime"
#: Canonical dtypes for the first, typed read (a negative value fails to parse).
_FAST_TYPES: dict[str, pl.DataType] = {"offset": pl.UInt64(), "size": pl.UInt32()}
_EXTRAS: dict[str, pl.DataType] = {"response_ns": pl.Int64(), "host": pl.String()}


def _parse_line(line: str) -> Record:
    tok = [x.strip() for x in line.split(",")]
    expect_fields(tok, 7, _NAMES)
    t = int_field(tok, 0, "timestamp")
    op = tok[3].lower()
    if op not in ("read", "write"):
        raise op_error(3, "type", tok[3], "Read or Write")
    offset = int_field(tok, 4, "offset")
    size = size_field(tok, 5, "size")
    resp_ns = int_field(tok, 6, "response time", scale=TICK_NS)
    return Record(
        t, tok[0], op == "read", offset, size, f"{tok[1]}/{tok[2]}", (resp_ns, tok[1])
    )


def _header_lines(path: Path) -> int:
    with open(path, "rb") as f:
        first = f.readline().split(b",", 1)[0].strip()
    return 0 if first.isdigit() else 1


def read_msr(path: str | Path, *, sort: bool = False, limit: int | None = None) -> pl.DataFrame:
    """Read an MSR Cambridge CSV trace (adds ``response_ns`` and ``host``)."""
    check_limit(limit)
    p = source_file(path)
    skip = _header_lines(p)
    try:
        cols, is_read = read_op_fields(p, _SCHEMA, op_words=("read", "write"), fast_types=_FAST_TYPES,
                                       separator=",", skip_lines=skip, limit=limit)
        # Fallback if a response time is negative or out of range once in ns, an offset
        # past 2**63-1 or a size of 0: finish then checks only time
        scales = {"resp": TICK_NS, "offset": 1, "size": 1}
        response = scaled_columns(cols, scales, nonnegative=True, sizes=("size",))["resp"]
        fast = cols.lazy().select(  # computed in morsels by finish
            "t",
            is_read.alias("is_read"),
            "offset",
            "size",
            joined(cols, ("host", "disk"), "/").alias("device"),
            response.alias("response_ns"),
            "host",
        )
        if cols.height == 0 and limit != 0:
            raise no_requests(p)
        return finish(fast, factor=TICK_NS, sort=sort, limit=limit, rows_checked=True)
    except Fallback:
        pass
    raw = parse_lines(
        p,
        _parse_line,
        skip_lines=skip,
        unit_label=" (100-ns ticks)",
        ns_per_unit=TICK_NS,
        extras=_EXTRAS,
        sort=sort,
        limit=limit,
        t_dtype=pl.Int64(),
    )
    return finish(raw, factor=TICK_NS, sort=sort, limit=limit, strict=False)
