"""UMass / SPC (Storage Performance Council) CSV traces.

One request per line, comma separated, no header::

    ASU,LBA,size,opcode,timestamp
    0,20941264,8192,W,0.551706

* ``ASU``: application storage unit (kept as text in ``device``; a number by its value:
  ``03`` is ``3``);
* ``LBA``: start in 512-byte sectors; ``size``: bytes;
* ``opcode``: ``r``/``R`` = read, ``w``/``W`` = write;
* ``timestamp``: seconds (a float) since the start of the trace; ``time_unit`` overrides.

Exactly five fields per line (the optional trailing SPC fields are not accepted).
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
    op_error,
    parse_lines,
    read_op_fields,
    scaled_columns,
    size_field,
)
from storqos.traces._pipeline import Fallback, check_limit, finish, no_requests, source_file
from storqos.traces.schema import SECTOR_BYTES, normalize_unit, unit_ns

DEFAULT_TIME_UNIT = "s"

_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.String(),
    "lba": pl.Int64(),
    "size": pl.Int64(),
    "op": pl.String(),
    "t": pl.Float64(),
}
_NAMES = "ASU,LBA,size,opcode,timestamp"
#: For the first, typed read: the canonical dtype of the size (a negative size fails to
#: parse), and the ASU as a number, which parses faster than text and is named from a
#: table (:func:`device_numbers`).
_FAST_TYPES: dict[str, pl.DataType] = {"size": pl.UInt32(), "device": pl.UInt32()}


def _parse_line(line: str) -> Record:
    tok = [x.strip() for x in line.split(",")]
    expect_fields(tok, 5, _NAMES)
    offset = int_field(tok, 1, "LBA", scale=SECTOR_BYTES)
    size = size_field(tok, 2, "size")
    op = tok[3].lower()
    if op not in ("r", "w"):
        raise op_error(3, "opcode", tok[3], "r or w")
    t = float_field(tok, 4, "timestamp")
    return Record(t, tok[4], op == "r", offset, size, device_number(tok[0]))


def read_spc(
    path: str | Path,
    *,
    time_unit: str | None = None,
    sort: bool = False,
    limit: int | None = None,
) -> pl.DataFrame:
    """Read a UMass/SPC CSV trace (timestamps in seconds unless ``time_unit`` says)."""
    check_limit(limit)
    unit = normalize_unit(time_unit or DEFAULT_TIME_UNIT)
    factor = unit_ns(unit)
    p = source_file(path)
    try:
        cols, is_read = read_op_fields(p, _SCHEMA, op_words=("r", "w"), fast_types=_FAST_TYPES, separator=",",
                                       limit=limit)
        # offsets 0..2**63-1 and sizes 1..2**32-1 checked here: finish checks only time
        bytes_ = scaled_columns(cols, {"lba": SECTOR_BYTES, "size": 1}, nonnegative=True, sizes=("size",))
        fast = cols.lazy().select(  # computed in morsels by finish
            "t",
            is_read.alias("is_read"),
            bytes_["lba"].alias("offset"),
            "size",
            device_numbers(cols, ("device",)).alias("device"),
        )
        if cols.height == 0 and limit != 0:
            raise no_requests(p)
        return finish(fast, factor=factor, sort=sort, limit=limit, rows_checked=True)
    except Fallback:
        pass
    raw = parse_lines(p, _parse_line, skip_lines=0, unit_label=f" {unit}", ns_per_unit=factor, sort=sort, limit=limit)
    return finish(raw, factor=factor, sort=sort, limit=limit, strict=False)


def write_spc(df: pl.DataFrame, path: str | Path) -> None:
    """Write a canonical trace as SPC CSV (offsets rounded down to sectors, time in s)."""
    out = df.select(
        pl.col("device"),
        (pl.col("offset") // SECTOR_BYTES).alias("lba"),
        pl.col("size"),
        pl.when(pl.col("is_read")).then(pl.lit("r")).otherwise(pl.lit("w")).alias("op"),
        (pl.col("arrival_ns") / 1e9).alias("t"),
    )
    out.write_csv(Path(path), include_header=False, float_precision=9)
