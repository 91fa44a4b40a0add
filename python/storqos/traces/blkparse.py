"""Linux ``blkparse`` default text output.

Event lines look like::

    8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]
    dev    cpu      seq   time (s)      pid  act rwbs sector + sectors [process]

Only lines whose action is the chosen one are requests: ``Q`` (queued: the arrival as
the application saw it, the default), ``D`` (issued to the driver) or ``C`` (completed).
All other lines (other actions, ``m`` messages, plug/unplug, the per-CPU and total
summary footer) are skipped, as are chosen-action lines without ``sector + n`` (a pure
flush). ``rwbs`` containing ``R`` is a read, ``W`` a write; discards (``D``), secure
erases (``E``) and ``N`` (no data) are skipped; any letter outside ``FRWDENASM`` is an
error. ``device`` = ``"maj,min"``, ``process`` = the bracketed name (for ``C`` lines the
bracket holds an error code, so ``process`` is null). Times are seconds (fixed).
Events are in time order when blkparse merged the CPUs; otherwise pass ``sort=True``.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from storqos.base.errors import InputError
from storqos.traces._lines import (
    FieldError,
    LineParser,
    Record,
    float_field,
    int_field,
    parse_lines,
    read_lines,
    scaled,
    size_field,
)
from storqos.traces._pipeline import Fallback, check_limit, finish, no_requests, source_file
from storqos.traces.schema import SECTOR_BYTES, TIME_UNITS

#: Actions that can serve as the request stream.
ACTIONS = ("Q", "D", "C")

_DEV = re.compile(r"^\d+,\d+$")
_RWBS = re.compile(r"^[FRWDENASM]+$")
_DEV_RX = r"^\s*\d+,\d+\s"
_ACTION_RX = r"^\s*\S+\s+\S+\s+\S+\s+\S+\s+\S+\s+(\S+)"
_EVENT_RX = (
    r"^\s*(?P<dev>\d+,\d+)\s+\d+\s+\d+\s+(?P<t>\d+\.\d+)\s+\d+\s+(?P<act>\S+)\s+"
    r"(?P<rwbs>\S+)\s+(?P<sector>\d+)\s+\+\s+(?P<n>\d+)(?:\s+\[(?P<proc>.*)\])?\s*$"
)
_NAMES = "dev cpu seq time pid action rwbs sector + sectors [process]"


def _line_parser(action: str) -> LineParser:
    def parse(line: str) -> Record | None:
        tok = line.split()
        if len(tok) < 6 or not _DEV.match(tok[0]) or tok[5] != action:
            return None
        if "+" not in tok[6:]:
            return None  # flush / barrier without data
        if len(tok) < 10:
            raise FieldError(f"expected at least 10 fields ({_NAMES}), found {len(tok)}")
        int_field(tok, 1, "cpu")
        int_field(tok, 2, "sequence")
        t = float_field(tok, 3, "time")
        int_field(tok, 4, "pid")
        rwbs = tok[6]
        if not _RWBS.match(rwbs):
            raise FieldError(
                f"unknown op {rwbs!r} in field 7 (rwbs); expected letters from FRWDENASM"
            )
        offset = int_field(tok, 7, "sector", scale=SECTOR_BYTES)
        if tok[8] != "+":
            raise FieldError(f"field 9 should be '+' (sector + sectors), found {tok[8]!r}")
        size = size_field(tok, 9, "sectors", SECTOR_BYTES)
        rest = " ".join(tok[10:])
        if rest and not (rest.startswith("[") and rest.endswith("]")):
            raise FieldError(f"expected '[process]' after the size, found {rest!r}")
        if "R" not in rwbs and "W" not in rwbs:
            return None
        process = rest[1:-1] if rest and action != "C" else None
        return Record(t, tok[3], "R" in rwbs, offset, size, tok[0], (process,))

    return parse


def read_blkparse(
    path: str | Path,
    *,
    action: str = "Q",
    sort: bool = False,
    limit: int | None = None,
) -> pl.DataFrame:
    """Read blkparse text output, taking the ``action`` events (Q, D or C) as requests."""
    check_limit(limit)
    if action not in ACTIONS:
        raise InputError(f"unknown blkparse action {action!r}; expected one of {', '.join(ACTIONS)}")
    p = source_file(path)
    factor = TIME_UNITS["s"]
    try:
        lines = read_lines(p).drop_nulls("line")
        cand = lines.filter(
            pl.col("line").str.contains(_DEV_RX)
            & (pl.col("line").str.extract(_ACTION_RX, 1) == action)
            & pl.col("line").str.contains(r"\s\+\s")
        )
        ev = cand.select(pl.col("line").str.extract_groups(_EVENT_RX).alias("e")).unnest("e")
        if ev["dev"].null_count():
            raise Fallback
        if not ev.select(pl.col("rwbs").str.contains(r"^[FRWDENASM]+$").all()).item():
            raise Fallback
        ev = ev.filter(pl.col("rwbs").str.contains("[RW]"))
        raw = ev.select(
            pl.col("t").cast(pl.Float64),
            pl.col("rwbs").str.contains("R").alias("is_read"),
            scaled("sector", SECTOR_BYTES).alias("offset"),
            scaled("n", SECTOR_BYTES).alias("size"),
            pl.col("dev").alias("device"),
            (pl.lit(None, pl.String) if action == "C" else pl.col("proc")).alias("process"),
        )
        if raw.height == 0 and limit != 0:
            raise no_requests(p, f"no {action} events with data")
        return finish(raw, factor=factor, sort=sort, limit=limit)
    except (Fallback, pl.exceptions.PolarsError):
        pass
    raw = parse_lines(
        p,
        _line_parser(action),
        skip_lines=0,
        unit_label=" s",
        ns_per_unit=factor,
        extras={"process": pl.String()},
        sort=sort,
        limit=limit,
    )
    return finish(raw, factor=factor, sort=sort, limit=limit, strict=False)
