"""FIU block traces (SRCMap / I/O-deduplication traces, SNIA IOTTA).

Two layouts are read:

* the original ``.blkparse`` files, blank separated, nine fields::

      ts pid process lba size op major minor md5
      89966811921625 4257 nfsd 488846200 8 W 6 0 2c4787c7...

* the pandas re-save found in ``shared/traces/fiu-mail-excerpt``: a header line
  ``\\t0\\t1...\\t8``, then tab separated lines with a leading row index
  (``row ts pid process lba size op major minor md5``).

``ts`` is in nanoseconds (fixed); ``lba`` and ``size`` are in 512-byte sectors; ``op`` is
``R`` or ``W``. ``device`` = ``"major,minor"`` (``"6,0"``; numbers by their value, so
``06`` is ``6``); ``process`` is kept. ``pid`` and ``md5`` are read (a line must have all
nine fields) but not kept.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from storqos.traces._lines import (
    LineParser,
    Record,
    device_number,
    device_numbers,
    expect_fields,
    int_field,
    op_error,
    parse_lines,
    read_op_fields,
    scaled_columns,
    size_field,
)
from storqos.traces._pipeline import Fallback, check_limit, finish, no_requests, source_file
from storqos.traces.schema import SECTOR_BYTES

_FIELDS = ("ts", "pid", "process", "lba", "size", "op", "major", "minor", "md5")
_TYPES: dict[str, pl.DataType] = {
    "row": pl.String(),
    "ts": pl.Int64(),
    "pid": pl.String(),
    "process": pl.String(),
    "lba": pl.Int64(),
    "size": pl.Int64(),
    "op": pl.String(),
    "major": pl.String(),
    "minor": pl.String(),
    "md5": pl.String(),
}
#: Tried first: numbers parse faster than text, and major and minor then name the
#: device from a table (:func:`device_numbers`). A file where one is not a number is
#: read again with the text types.
_FAST_TYPES: dict[str, pl.DataType] = {
    "row": pl.Int64(),
    "pid": pl.Int64(),
    "major": pl.UInt32(),
    "minor": pl.UInt32(),
}
_EXTRAS: dict[str, pl.DataType] = {"process": pl.String()}


def is_pandas_header(first_line: bytes) -> bool:
    """True for the pandas header line ``\\t0\\t1\\t2...``."""
    return first_line.rstrip(b"\r\n").startswith(b"\t0\t1")


def _line_parser(pandas: bool) -> LineParser:
    base = 1 if pandas else 0
    n = len(_FIELDS) + base
    names = ("row " if pandas else "") + " ".join(_FIELDS)

    def parse(line: str) -> Record:
        tok = line.split("\t") if pandas else line.split()
        expect_fields(tok, n, names)
        t = int_field(tok, base + 0, "ts")
        offset = int_field(tok, base + 3, "lba", scale=SECTOR_BYTES)
        size = size_field(tok, base + 4, "size", SECTOR_BYTES)
        op = tok[base + 5].strip().upper()
        if op not in ("R", "W"):
            raise op_error(base + 5, "op", tok[base + 5], "R or W")
        device = f"{device_number(tok[base + 6].strip())},{device_number(tok[base + 7].strip())}"
        return Record(t, tok[base], op == "R", offset, size, device, (tok[base + 2],))

    return parse


def read_fiu(path: str | Path, *, sort: bool = False, limit: int | None = None) -> pl.DataFrame:
    """Read an FIU trace (original blank-separated or pandas TSV layout)."""
    check_limit(limit)
    p = source_file(path)
    with open(p, "rb") as f:
        pandas = is_pandas_header(f.readline())
    schema = dict(_TYPES) if pandas else {k: v for k, v in _TYPES.items() if k != "row"}
    separator, skip = ("\t", 1) if pandas else (" ", 0)
    try:
        cols, is_read = read_op_fields(p, schema, op_words=("r", "w"), fast_types=_FAST_TYPES,
                                       separator=separator, skip_lines=skip, limit=limit)
        # offsets 0..2**63-1 and sizes 1..2**32-1 checked here: finish checks only time
        bytes_ = scaled_columns(cols, {"lba": SECTOR_BYTES, "size": SECTOR_BYTES}, nonnegative=True,
                                sizes=("size",))
        fast = cols.lazy().select(  # computed in morsels by finish
            pl.col("ts").alias("t"),
            is_read.alias("is_read"),
            bytes_["lba"].alias("offset"),
            bytes_["size"].alias("size"),
            device_numbers(cols, ("major", "minor"), ",").alias("device"),
            "process",
        )
        if cols.height == 0 and limit != 0:
            raise no_requests(p)
        return finish(fast, factor=1, sort=sort, limit=limit, rows_checked=True)
    except Fallback:
        pass
    raw = parse_lines(
        p,
        _line_parser(pandas),
        skip_lines=1 if pandas else 0,
        unit_label=" ns",
        ns_per_unit=1,
        extras=_EXTRAS,
        sort=sort,
        limit=limit,
        t_dtype=pl.Int64(),
    )
    return finish(raw, factor=1, sort=sort, limit=limit, strict=False)
