"""DiskSim ASCII traces, and MQSim's look-alike.

One request per line, blank separated::

    time device lba sectors flags
    11413000 0 657728 16 1

* ``time``: arrival time. DiskSim's ASCII format defines it in milliseconds (a float:
  ``0.521000``); MQSim reuses the layout with integer nanoseconds. They are two format
  names: ``disksim`` (default unit ms) and ``mqsim`` (default unit ns, as for the
  WebSearch and TPC-C excerpts in ``shared/traces``); ``time_unit`` overrides either.
  Parsed as a float: exact up to 2**53 units.
* ``device``: device number, kept as text in ``device`` (a number by its value: ``04``
  is ``4``).
* ``lba``, ``sectors``: start and length in 512-byte sectors.
* ``flags``: bit 0 set = read (DiskSim's ``READ`` flag), clear = write.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from storqos.traces._lines import (
    Record,
    device_number,
    device_numbers,
    expect_fields,
    float_field,
    int_field,
    parse_lines,
    read_typed,
    scaled_columns,
    size_field,
)
from storqos.traces._pipeline import Fallback, check_limit, finish, no_requests, source_file
from storqos.traces.schema import SECTOR_BYTES, normalize_unit, unit_ns

#: DiskSim's ASCII traces: milliseconds, by the format's definition.
DISKSIM_TIME_UNIT = "ms"
#: MQSim's look-alike traces: nanoseconds.
MQSIM_TIME_UNIT = "ns"

# Sizes and flags parse as UInt32 (what they are in DiskSim's own structures): half the
# memory of Int64 for 10 M lines, fewer pages to fault in. A value that does not fit (a
# negative or huge count) fails the fast parse, and the exact pass names its line.
_SCHEMA: dict[str, pl.DataType] = {
    "t": pl.Float64(),
    "device": pl.String(),
    "lba": pl.Int64(),
    "sectors": pl.UInt32(),
    "flags": pl.UInt32(),
}
#: Tried first: the device as a number parses faster than text, and is named from a
#: table (:func:`device_numbers`). A file with a device that is not a number is read
#: again with the text type.
_FAST_TYPES: dict[str, pl.DataType] = {"device": pl.UInt32()}
_NAMES = "time device lba sectors flags"


def _parse_line(line: str) -> Record:
    tok = line.split()
    expect_fields(tok, 5, _NAMES)
    t = float_field(tok, 0, "time")
    offset = int_field(tok, 2, "lba", scale=SECTOR_BYTES)
    size = size_field(tok, 3, "sectors", SECTOR_BYTES)
    flags = int_field(tok, 4, "flags")
    return Record(t, tok[0], bool(flags & 1), offset, size, device_number(tok[1]))


def read_disksim(
    path: str | Path,
    *,
    time_unit: str | None = None,
    sort: bool = False,
    limit: int | None = None,
) -> pl.DataFrame:
    """Read a DiskSim ASCII trace (``time_unit`` default ``"ms"``, DiskSim's own)."""
    return _read(path, time_unit or DISKSIM_TIME_UNIT, sort=sort, limit=limit)


def read_mqsim(
    path: str | Path,
    *,
    time_unit: str | None = None,
    sort: bool = False,
    limit: int | None = None,
) -> pl.DataFrame:
    """Read an MQSim trace, DiskSim's layout with times in ns (``time_unit`` default ``"ns"``)."""
    return _read(path, time_unit or MQSIM_TIME_UNIT, sort=sort, limit=limit)


def _read(path: str | Path, time_unit: str, *, sort: bool, limit: int | None) -> pl.DataFrame:
    check_limit(limit)
    unit = normalize_unit(time_unit)
    factor = unit_ns(unit)
    p = source_file(path)
    try:
        cols = read_typed(p, _SCHEMA, fast_types=_FAST_TYPES, separator=" ", limit=limit)
        # offsets 0..2**63-1 and sizes 1..2**32-1 checked here: finish checks only time
        bytes_ = scaled_columns(cols, {"lba": SECTOR_BYTES, "sectors": SECTOR_BYTES}, nonnegative=True,
                                sizes=("sectors",))
        fast = cols.lazy().select(  # computed in morsels by finish
            "t",
            ((pl.col("flags") & 1) == 1).alias("is_read"),
            bytes_["lba"].alias("offset"),
            bytes_["sectors"].alias("size"),
            device_numbers(cols, ("device",)).alias("device"),
        )
        if cols.height == 0 and limit != 0:
            raise no_requests(p)
        return finish(fast, factor=factor, sort=sort, limit=limit, rows_checked=True)
    except Fallback:
        pass
    raw = parse_lines(p, _parse_line, skip_lines=0, unit_label=f" {unit}", ns_per_unit=factor, sort=sort, limit=limit)
    return finish(raw, factor=factor, sort=sort, limit=limit, strict=False)


def write_disksim(df: pl.DataFrame, path: str | Path, *, time_unit: str = DISKSIM_TIME_UNIT) -> None:
    """Write a canonical trace as DiskSim ASCII (offsets/sizes rounded down to sectors).

    Times are written in ``time_unit`` (DiskSim's ms by default) with the decimals that
    keep every nanosecond (``0.521000``, ``12.000001``).
    """
    _write(df, path, time_unit)


def write_mqsim(df: pl.DataFrame, path: str | Path, *, time_unit: str = MQSIM_TIME_UNIT) -> None:
    """Write a canonical trace as an MQSim trace: DiskSim's layout, integer ns by default."""
    _write(df, path, time_unit)


def _write(df: pl.DataFrame, path: str | Path, time_unit: str) -> None:
    factor = unit_ns(time_unit)
    digits = len(str(factor)) - 1  # decimals that keep whole nanoseconds (factor is 10**k)
    whole = (pl.col("arrival_ns") // factor).cast(pl.String)
    if digits:
        frac = (pl.col("arrival_ns") % factor).cast(pl.String).str.zfill(digits)
        t = pl.concat_str([whole, pl.lit("."), frac])
    else:
        t = whole
    out = df.select(
        t.alias("t"),
        pl.col("device"),
        (pl.col("offset") // SECTOR_BYTES).alias("lba"),
        ((pl.col("size") + SECTOR_BYTES - 1) // SECTOR_BYTES).alias("sectors"),
        pl.col("is_read").cast(pl.UInt8).alias("flags"),
    )
    out.write_csv(Path(path), separator=" ", include_header=False, quote_style="never")
