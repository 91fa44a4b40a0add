"""DiskSim ASCII traces (also MQSim's trace format).

One request per line, blank separated::

    time device lba sectors flags
    11413000 0 657728 16 1

* ``time``: arrival time; its unit is a parameter. DiskSim's own traces use
  milliseconds, MQSim's use nanoseconds (the default here, as for the two MQSim traces in
  ``shared/traces``). Parsed as a float: exact up to 2**53 units.
* ``device``: device number, kept as text in ``device``.
* ``lba``, ``sectors``: start and length in 512-byte sectors.
* ``flags``: bit 0 set = read (DiskSim's ``READ`` flag), clear = write.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from storqos.traces._lines import (
    Record,
    expect_fields,
    float_field,
    int_field,
    parse_lines,
    read_fields,
    scaled,
    size_field,
)
from storqos.traces._pipeline import Fallback, check_limit, finish, no_requests, source_file
from storqos.traces.schema import SECTOR_BYTES, normalize_unit, unit_ns

DEFAULT_TIME_UNIT = "ns"

_SCHEMA: dict[str, pl.DataType] = {
    "t": pl.Float64(),
    "device": pl.String(),
    "lba": pl.Int64(),
    "sectors": pl.Int64(),
    "flags": pl.Int64(),
}
_NAMES = "time device lba sectors flags"


def _parse_line(line: str) -> Record:
    tok = line.split()
    expect_fields(tok, 5, _NAMES)
    t = float_field(tok, 0, "time")
    offset = int_field(tok, 2, "lba", scale=SECTOR_BYTES)
    size = size_field(tok, 3, "sectors", SECTOR_BYTES)
    flags = int_field(tok, 4, "flags")
    return Record(t, tok[0], bool(flags & 1), offset, size, tok[1])


def read_disksim(
    path: str | Path,
    *,
    time_unit: str | None = None,
    sort: bool = False,
    limit: int | None = None,
) -> pl.DataFrame:
    """Read a DiskSim/MQSim ASCII trace (``time_unit`` default ``"ns"``)."""
    check_limit(limit)
    unit = normalize_unit(time_unit or DEFAULT_TIME_UNIT)
    factor = unit_ns(unit)
    p = source_file(path)
    try:
        cols = read_fields(p, _SCHEMA, separator=" ", limit=limit)
        raw = cols.select(
            "t",
            ((pl.col("flags") & 1) == 1).alias("is_read"),
            scaled("lba", SECTOR_BYTES).alias("offset"),
            scaled("sectors", SECTOR_BYTES).alias("size"),
            "device",
        )
        if raw.height == 0 and limit != 0:
            raise no_requests(p)
        return finish(raw, factor=factor, sort=sort, limit=limit)
    except Fallback:
        pass
    raw = parse_lines(p, _parse_line, skip_lines=0, unit_label=f" {unit}", ns_per_unit=factor, sort=sort, limit=limit)
    return finish(raw, factor=factor, sort=sort, limit=limit, strict=False)


def write_disksim(df: pl.DataFrame, path: str | Path, *, time_unit: str = DEFAULT_TIME_UNIT) -> None:
    """Write a canonical trace as DiskSim ASCII (offsets/sizes rounded down to sectors).

    Times are written as integers in ``time_unit`` (rounded down).
    """
    factor = unit_ns(time_unit)
    out = df.select(
        (pl.col("arrival_ns") // factor).alias("t"),
        pl.col("device"),
        (pl.col("offset") // SECTOR_BYTES).alias("lba"),
        ((pl.col("size") + SECTOR_BYTES - 1) // SECTOR_BYTES).alias("sectors"),
        pl.col("is_read").cast(pl.UInt8).alias("flags"),
    )
    out.write_csv(Path(path), separator=" ", include_header=False)
