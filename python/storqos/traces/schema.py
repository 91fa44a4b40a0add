"""The canonical trace: column names, dtypes and time units shared by every reader.

A canonical trace is a plain :class:`polars.DataFrame`, sorted by arrival time and rebased
so that the first arrival is 0, with the columns

========== ======= =====================================================================
column     dtype   meaning
========== ======= =====================================================================
arrival_ns Int64   arrival (issue/enqueue) time, ns since the first request
is_read    Boolean True for reads, False for writes
offset     UInt64  start of the request on its device, bytes
size       UInt32  transfer length, bytes (> 0)
device     String  volume / ASU / disk / file id as text (``"0"``, ``"rsrch/1"``, ``"8,0"``)
tenant     UInt32  tenant (client / workload) id, 0 unless assigned
========== ======= =====================================================================

plus, when the source format records them, the optional columns ``response_ns`` (Int64,
measured latency: MSR, HP SRT, VSCSI v2), ``process`` (String: FIU, blkparse) and ``host``
(String: MSR).
"""

from __future__ import annotations

import polars as pl

from storqos.base.errors import InputError

#: Bytes per sector for every format that counts in sectors / blocks / LBAs.
SECTOR_BYTES = 512

#: Largest request size the ``size`` column (UInt32) can hold.
MAX_SIZE = 2**32 - 1

#: Largest byte offset, time (ns since the first request) or response time (ns) a
#: trace may hold: readers work in Int64, so values beyond are errors, never wrapped.
MAX_INT64 = 2**63 - 1

REQUIRED_COLUMNS: dict[str, pl.DataType] = {
    "arrival_ns": pl.Int64(),
    "is_read": pl.Boolean(),
    "offset": pl.UInt64(),
    "size": pl.UInt32(),
    "device": pl.String(),
    "tenant": pl.UInt32(),
}

OPTIONAL_COLUMNS: dict[str, pl.DataType] = {
    "response_ns": pl.Int64(),
    "process": pl.String(),
    "host": pl.String(),
}

#: Every canonical column with its dtype, in canonical order.
SCHEMA: dict[str, pl.DataType] = {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}

#: Nanoseconds per time unit accepted by ``time_unit`` / ``--time-unit``.
TIME_UNITS: dict[str, int] = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}

_UNIT_ALIASES: dict[str, str] = {
    "ns": "ns",
    "nsec": "ns",
    "us": "us",
    "µs": "us",
    "usec": "us",
    "ms": "ms",
    "msec": "ms",
    "s": "s",
    "sec": "s",
}


def normalize_unit(unit: str, where: str = "--time-unit") -> str:
    """Return the canonical name (``ns``, ``us``, ``ms``, ``s``) of a time unit."""
    key = unit.strip().lower()
    if key not in _UNIT_ALIASES:
        raise InputError(
            f"unknown time unit {unit!r}; expected one of {', '.join(TIME_UNITS)}", where
        )
    return _UNIT_ALIASES[key]


def unit_ns(unit: str, where: str = "--time-unit") -> int:
    """Nanoseconds in one ``unit`` (``"ms"`` → 1,000,000)."""
    return TIME_UNITS[normalize_unit(unit, where)]


def empty_trace(optional: tuple[str, ...] = ()) -> pl.DataFrame:
    """A canonical trace with no rows (and the named optional columns)."""
    cols = {**REQUIRED_COLUMNS, **{c: OPTIONAL_COLUMNS[c] for c in optional}}
    return pl.DataFrame(schema=cols)


def conform(df: pl.DataFrame) -> pl.DataFrame:
    """Select the canonical columns present in ``df``, cast, in canonical order.

    Missing required columns raise :class:`InputError`; ``tenant`` defaults to 0 and
    ``device`` to ``"0"``. Extra, non-canonical columns are dropped.
    """
    return df.select(conform_exprs(df.columns))


def conform_exprs(columns: list[str]) -> list[pl.Expr]:
    """:func:`conform`'s selection for a frame with these columns (for a lazy query)."""
    exprs: list[pl.Expr] = []
    for name, dtype in REQUIRED_COLUMNS.items():
        if name in columns:
            exprs.append(pl.col(name).cast(dtype))
        elif name == "tenant":
            exprs.append(pl.lit(0, dtype=dtype).alias(name))
        elif name == "device":
            exprs.append(pl.lit("0", dtype=dtype).alias(name))
        else:
            raise InputError(
                f"not a canonical trace: column {name!r} is missing "
                f"(has {', '.join(columns) or 'no columns'})"
            )
    for name, dtype in OPTIONAL_COLUMNS.items():
        if name in columns:
            exprs.append(pl.col(name).cast(dtype))
    return exprs


def require_trace(df: object, what: str = "trace") -> pl.DataFrame:
    """Check that ``df`` is a DataFrame with the required canonical columns."""
    if not isinstance(df, pl.DataFrame):
        raise InputError(f"{what} must be a polars DataFrame, got {type(df).__name__}")
    missing = [c for c in ("arrival_ns", "is_read", "offset", "size", "device") if c not in df.columns]
    if missing:
        raise InputError(f"{what} is not a canonical trace: missing column(s) {', '.join(missing)}")
    return df
