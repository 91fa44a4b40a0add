"""Traces as tables with named columns: CSV (with a header line) and Parquet.

Columns are matched by name, case-insensitively, with aliases:

================ ==========================================================================
field            accepted column names
================ ==========================================================================
time (required)  ``arrival_ns|_us|_ms|_s``, ``time_*``, ``timestamp_*``, ``ts_*`` (the
                 suffix is the unit), or ``time``, ``timestamp``, ``ts``, ``arrival``,
                 ``arrival_time`` (unit from ``time_unit``, default seconds). An explicit
                 ``time_unit`` overrides a suffix. Parquet datetime columns are read exactly.
op (required)    ``is_read`` (true/false/1/0) or ``op``, ``type``, ``rw``, ``opcode``,
                 ``operation``, ``iotype``, ``direction`` (r/w/read/write, any case)
offset           ``offset``, ``offset_bytes``, ``byte_offset`` (bytes) or ``lba``,
(required)       ``sector``, ``lbn``, ``start_sector`` (512-byte sectors)
size (required)  ``size``, ``bytes``, ``length``, ``len``, ``size_bytes``, ``nbytes``
                 (bytes) or ``sectors``, ``nsectors``, ``size_sectors`` (sectors)
device           ``device``, ``dev``, ``disk``, ``volume``, ``asu``, ``lun``, ``devno``
                 (default ``"0"``)
tenant           ``tenant``, ``tenant_id``, ``client``, ``client_id``, ``workload``
                 (non-negative integers; default 0)
response_ns      ``response_ns|_us|_ms|_s``, ``latency_ns|_us|_ms|_s``
process, host    ``process``/``comm``, ``host``/``hostname``
================ ==========================================================================

Other columns are ignored. Bad values are reported as ``"trace.csv:17"`` (the line; the
header is line 1) or ``"trace.parquet: row 16"``. :func:`write_csv` and
:func:`write_parquet` write the canonical columns, so a written trace reads back equal.
"""

from __future__ import annotations

import csv as _csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from storqos.base.errors import InputError, warn_input
from storqos.traces._pipeline import check_limit, finish, no_requests, source_file
from storqos.traces.schema import MAX_INT64, MAX_SIZE, SECTOR_BYTES, TIME_UNITS, conform, normalize_unit

_UNIT_SUFFIXES = tuple(TIME_UNITS)
_TIME_BASES = ("arrival", "time", "timestamp", "ts")
_TIME_PLAIN = ("time", "timestamp", "ts", "arrival", "arrival_time")
_OP_BOOL = ("is_read",)
_OP_TEXT = ("op", "type", "rw", "opcode", "operation", "iotype", "direction")
_OFFSET_BYTES = ("offset", "offset_bytes", "byte_offset")
_OFFSET_SECTORS = ("lba", "sector", "lbn", "start_sector")
_SIZE_BYTES = ("size", "bytes", "length", "len", "size_bytes", "nbytes")
_SIZE_SECTORS = ("sectors", "nsectors", "size_sectors")
_DEVICE = ("device", "dev", "disk", "volume", "asu", "lun", "devno")
_TENANT = ("tenant", "tenant_id", "client", "client_id", "workload")
_PROCESS = ("process", "comm")
_HOST = ("host", "hostname")
_READ_WORDS = ("r", "read", "rd")
_WRITE_WORDS = ("w", "write", "wr")
_TRUE = ("true", "1", "t", "yes", "y")
_FALSE = ("false", "0", "f", "no", "n")


@dataclass(frozen=True)
class _Columns:
    """Which source column feeds which canonical field, and its scale."""

    time: str
    time_unit: str | None  # from the suffix; None = plain name
    op: str
    op_is_bool: bool
    offset: str
    offset_scale: int
    size: str
    size_scale: int
    device: str | None
    tenant: str | None
    response: str | None
    response_unit: str | None
    process: str | None
    host: str | None


def _pick(lower: dict[str, str], names: tuple[str, ...], what: str, where: str) -> str | None:
    found = [lower[n] for n in names if n in lower]
    if len(found) > 1:
        raise InputError(f"ambiguous {what} columns: {', '.join(found)}; keep one", where)
    return found[0] if found else None


#: polars' name for the second of two columns named alike (``size`` → ``size_duplicated_0``).
_DUPLICATED = re.compile(r"(.+)_duplicated_\d+")


def _unit(time_unit: str | None, cols: _Columns) -> str:
    """The time column's unit: ``time_unit`` if given (it overrides the column name's
    suffix, with a warning when the two differ), else the suffix's, else seconds."""
    if not time_unit:
        return cols.time_unit or "s"
    unit = normalize_unit(time_unit)
    if cols.time_unit and normalize_unit(cols.time_unit) != unit:
        warn_input(f"{time_unit} overrides the unit of the column {cols.time!r} ({cols.time_unit}): "
                   "its values are read as " + unit, "--time-unit")
    return unit


def resolve_columns(columns: list[str], where: str) -> _Columns:
    """Map the table's column names onto canonical fields (see the module docstring)."""
    lower: dict[str, str] = {}
    for c in columns:
        m = _DUPLICATED.fullmatch(c)
        key = (m.group(1) if m and m.group(1) in columns else c).strip().lower()
        if key in lower:  # which of the two holds the values cannot be told
            raise InputError(f"column {key!r} given twice: keep one", where)
        lower[key] = c
    suffixed = tuple(f"{b}_{u}" for b in _TIME_BASES for u in _UNIT_SUFFIXES)
    time = _pick(lower, suffixed + _TIME_PLAIN, "time", where)
    if time is None:
        raise InputError(
            "no time column; name one arrival_ns / arrival_us / arrival_ms / arrival_s, "
            "time, timestamp or ts",
            where,
        )
    t_low = time.strip().lower()
    time_unit = t_low.rsplit("_", 1)[1] if t_low in suffixed else None
    op_bool = _pick(lower, _OP_BOOL, "op", where)
    op_text = _pick(lower, _OP_TEXT, "op", where)
    if op_bool and op_text:
        raise InputError(f"ambiguous op columns: {op_bool}, {op_text}; keep one", where)
    op = op_bool or op_text
    if op is None:
        raise InputError("no op column; name one is_read, op, type or rw", where)
    off_b = _pick(lower, _OFFSET_BYTES, "offset", where)
    off_s = _pick(lower, _OFFSET_SECTORS, "offset", where)
    if off_b and off_s:
        raise InputError(f"ambiguous offset columns: {off_b}, {off_s}; keep one", where)
    if not (off_b or off_s):
        raise InputError("no offset column; name one offset (bytes) or lba (512-B sectors)", where)
    size_b = _pick(lower, _SIZE_BYTES, "size", where)
    size_s = _pick(lower, _SIZE_SECTORS, "size", where)
    if size_b and size_s:
        raise InputError(f"ambiguous size columns: {size_b}, {size_s}; keep one", where)
    if not (size_b or size_s):
        raise InputError("no size column; name one size (bytes) or sectors", where)
    resp_names = tuple(f"{b}_{u}" for b in ("response", "latency") for u in _UNIT_SUFFIXES)
    response = _pick(lower, resp_names, "response time", where)
    return _Columns(
        time=time,
        time_unit=time_unit,
        op=op,
        op_is_bool=op_bool is not None,
        offset=off_b or off_s,  # type: ignore[arg-type]
        offset_scale=1 if off_b else SECTOR_BYTES,
        size=size_b or size_s,  # type: ignore[arg-type]
        size_scale=1 if size_b else SECTOR_BYTES,
        device=_pick(lower, _DEVICE, "device", where),
        tenant=_pick(lower, _TENANT, "tenant", where),
        response=response,
        response_unit=response.strip().lower().rsplit("_", 1)[1] if response else None,
        process=_pick(lower, _PROCESS, "process", where),
        host=_pick(lower, _HOST, "host", where),
    )


def _is_float(value: object) -> bool:
    try:
        float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


class _BadRow(Exception):
    def __init__(self, row: int, message: str) -> None:
        super().__init__(message)
        self.row = row
        self.message = message


def _first_bad(df: pl.DataFrame, bad: pl.Expr | pl.Series) -> int | None:
    """Index of the first row where ``bad`` is true (null counts as fine), or None."""
    flag = (df.select(bad).to_series() if isinstance(bad, pl.Expr) else bad).fill_null(False)
    idx = flag.arg_max()
    return idx if idx is not None and flag[idx] else None


def _is_integral(value: object) -> bool:
    """True for an integer written out (``"18446744073709551616"``, ``2**64``)."""
    return isinstance(value, int) or (isinstance(value, str) and value.strip().lstrip("+-").isdigit())


def _as_int(s: pl.Series) -> pl.Series:
    """``s`` as Int64; null where a value is not an integer or does not fit."""
    if s.dtype.is_integer():
        return s.cast(pl.Int64, strict=False)
    if s.dtype == pl.String:
        return s.str.strip_chars().str.to_integer(strict=False)
    if s.dtype.is_float():
        return s.cast(pl.Int64, strict=False).set(s.round(0) != s, None)
    return s.cast(pl.Int64, strict=False)


def _as_number(s: pl.Series) -> pl.Series:
    """``s`` as Int64 if every value is an integer, else Float64; null where not a number."""
    if s.dtype.is_integer():
        return s.cast(pl.Int64, strict=False)
    if s.dtype == pl.String:
        text = s.str.strip_chars()
        ints = text.str.to_integer(strict=False)
        if ints.null_count() == text.null_count():
            return ints
        return text.cast(pl.Float64, strict=False)
    if s.dtype.is_temporal():
        return s.cast(pl.Datetime("ns")).cast(pl.Int64)
    return s.cast(pl.Float64, strict=False)


def _check(df: pl.DataFrame, bad: pl.Expr | pl.Series, message: Callable[[int], str]) -> None:
    i = _first_bad(df, bad)
    if i is not None:
        raise _BadRow(i, message(i))


def _convert(
    df: pl.DataFrame, cols: _Columns, time_unit: str | None, sort: bool, limit: int | None
) -> pl.DataFrame:
    """Named-column frame → canonical trace; raises :class:`_BadRow` at the first bad row.

    Each source column is converted once; the checks then run on the converted columns.
    """
    if limit is not None:
        df = df.head(limit)
    pos = {c: i + 1 for i, c in enumerate(df.columns)}

    def val(i: int, c: str) -> str:
        return repr(df[c][i]) if df.schema[c] != pl.String else repr(df[c][i] or "")

    def num_msg(c: str, what: str) -> Callable[[int], str]:
        def msg(i: int) -> str:
            if _is_integral(df[c][i]):
                return f"field {pos[c]} ({c}) is out of range: {val(i, c)} (at most {MAX_INT64:,})"
            if what == "an integer" and _is_float(df[c][i]):
                return f"field {pos[c]} ({c}) is not an integer: {val(i, c)}"
            return f"field {pos[c]} ({c}) is not a number: {val(i, c)}"

        return msg

    unit = _unit(time_unit, cols)
    if df.schema[cols.time].is_temporal():
        unit = "ns"
    t = _as_number(df[cols.time])
    if cols.op_is_bool and df.schema[cols.op] == pl.Boolean:
        is_read = df[cols.op]
        expected = "true/false"
    else:
        low = df[cols.op].cast(pl.String).str.strip_chars().str.to_lowercase()
        words = (_TRUE, _FALSE) if cols.op_is_bool else (_READ_WORDS, _WRITE_WORDS)
        expected = "true/false or 1/0" if cols.op_is_bool else "r, w, read or write"
        is_read = (
            pl.select(pl.when(low.is_in(words[0])).then(True).when(low.is_in(words[1])).then(False))
            .to_series()
        )
    conv = pl.DataFrame(
        {
            "t": t,
            "is_read": is_read,
            "offset": _as_int(df[cols.offset]),
            "size": _as_int(df[cols.size]),
        }
    )
    col = pl.col
    _check(conv, col("t").is_null() | ~col("t").cast(pl.Float64).is_finite(), num_msg(cols.time, "a number"))
    _check(
        conv,
        col("is_read").is_null(),
        lambda i: f"unknown op {val(i, cols.op)} in field {pos[cols.op]} ({cols.op}); expected {expected}",
    )
    _check(conv, col("offset").is_null(), num_msg(cols.offset, "an integer"))
    _check(
        conv,
        col("offset") < 0,
        lambda i: f"field {pos[cols.offset]} ({cols.offset}) is negative: {val(i, cols.offset)}",
    )
    _check(
        conv,
        col("offset") > MAX_INT64 // cols.offset_scale,
        lambda i: f"field {pos[cols.offset]} ({cols.offset}) is out of range: {val(i, cols.offset)} "
        f"(at most {MAX_INT64 // cols.offset_scale:,})",
    )
    factor = TIME_UNITS[unit]
    _check(
        conv,
        (col("t").cast(pl.Float64) - col("t").cast(pl.Float64).min()) * factor >= MAX_INT64,
        lambda i: f"field {pos[cols.time]} ({cols.time}) is out of range: {val(i, cols.time)} is more "
        f"than 292 years after the earliest time",
    )
    _check(conv, col("size").is_null(), num_msg(cols.size, "an integer"))
    _check(
        conv,
        col("size") <= 0,
        lambda i: f"field {pos[cols.size]} ({cols.size}) must be a positive size, got {val(i, cols.size)}",
    )
    _check(
        conv,
        col("size") * cols.size_scale > MAX_SIZE,
        lambda i: f"field {pos[cols.size]} ({cols.size}) is too large: {val(i, cols.size)} (limit 4 GiB - 1)",
    )
    extra: list[pl.Series] = []
    if cols.device:
        extra.append(df[cols.device].cast(pl.String).fill_null("").alias("device"))
    else:
        extra.append(pl.repeat("0", df.height, eager=True, dtype=pl.String).alias("device"))
    if cols.tenant:
        tcol = cols.tenant
        ten = _as_int(df[tcol]).alias("tenant")
        _check(
            conv,
            ten.is_null() | (ten < 0) | (ten > 2**32 - 1),
            lambda i: f"field {pos[tcol]} ({tcol}) is not a tenant id (0..2^32-1): {val(i, tcol)}",
        )
        extra.append(ten)
    if cols.response:
        rcol = cols.response
        resp = _as_number(df[rcol])
        bad_r = df[rcol].is_not_null() & resp.is_null()
        _check(conv, bad_r, num_msg(rcol, "a number"))
        r_factor = TIME_UNITS[cols.response_unit or "ns"]
        _check(
            conv,
            resp.cast(pl.Float64).abs() * r_factor >= MAX_INT64,
            lambda i: f"field {pos[rcol]} ({rcol}) is out of range: {val(i, rcol)}",
        )
        extra.append((resp.cast(pl.Float64) * r_factor).round(0).cast(pl.Int64).alias("response_ns"))
    if cols.process:
        extra.append(df[cols.process].cast(pl.String).alias("process"))
    if cols.host:
        extra.append(df[cols.host].cast(pl.String).alias("host"))
    raw = conv.with_columns(
        (col("offset") * cols.offset_scale).alias("offset"),
        (col("size") * cols.size_scale).alias("size"),
        *extra,
    )
    if not sort:
        i = _first_bad(raw, col("t").diff() < 0)
        if i is not None:
            t_now, t_prev = df[cols.time][i], df[cols.time][i - 1]
            raise _BadRow(
                i,
                f"timestamp {t_now} {unit} is before the previous one ({t_prev} {unit}); "
                "pass --sort to sort the trace",
            )
    return finish(raw, factor=factor, sort=sort, limit=None, strict=False)


def _csv_line_of_row(path: Path, row: int) -> tuple[int, int]:
    """1-based line number and field count of data row ``row`` (0-based; blank lines
    count as rows, as polars reads them)."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        reader = _csv.reader(f)
        next(reader, None)
        line_before = reader.line_num
        for i, fields in enumerate(reader):
            if i == row:
                return line_before + 1, len(fields)
            line_before = reader.line_num
    return row + 2, -1


def _csv_shape_error(path: Path, err: Exception) -> InputError:
    """Locate the line polars could not parse (usually a wrong number of fields)."""
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        reader = _csv.reader(f)
        header = next(reader, [])
        line_before = reader.line_num
        for row in reader:
            if row and len(row) != len(header):
                return InputError(
                    f"expected {len(header)} fields (as in the header), found {len(row)}",
                    f"{path}:{line_before + 1}",
                )
            line_before = reader.line_num
    first = str(err).splitlines()[0] if str(err) else type(err).__name__
    return InputError(f"cannot parse as CSV: {first}", str(path))


#: Data rows read as text first to choose the dtypes of the typed read, from at most
#: the file's first _SAMPLE_BYTES.
_SAMPLE_ROWS = 1000
_SAMPLE_BYTES = 1 << 18


def _not_blank(df: pl.DataFrame) -> pl.DataFrame:
    return df.filter(~pl.all_horizontal([pl.col(c).is_null() for c in df.columns]))


def _typed_csv(p: Path, time_unit: str | None, sort: bool, limit: int | None) -> pl.DataFrame | None:
    """The fast read of a named-column CSV: the trace, or None to run the exact pass.

    The first rows, read as text, choose a dtype per column: integers for offsets, sizes
    and tenants; Int64 for times (and response times) that are integers there, else
    Float64 (as the exact pass decides over the whole column); for the op column a
    :class:`polars.Enum` of the spellings seen there, each a known read/write word. polars
    then parses the numbers itself and rejects any other word. Whatever it would not
    vouch for (a value it cannot parse as its dtype, a missing field, a value out of
    range, a time going backwards) returns None: the exact pass reads every column as
    text and names the first bad line. Valid input gives the exact pass's result.
    """
    with open(p, "rb") as f:
        head = f.read(_SAMPLE_BYTES)
    if len(head) == _SAMPLE_BYTES:  # whole lines only (a quoted newline cut: a failed read)
        head = head[: head.rfind(b"\n") + 1]
    try:
        sample = pl.read_csv(io.BytesIO(head), infer_schema=False, n_rows=_SAMPLE_ROWS, raise_if_empty=False)
        cols = resolve_columns(sample.columns, f"{p}:1")
    except (pl.exceptions.PolarsError, InputError):
        return None
    sample = _not_blank(sample)
    if limit is not None:
        sample = sample.head(limit)
    if sample.height == 0:
        return None

    def number_dtype(c: str) -> pl.DataType:
        return pl.Int64() if _as_number(sample[c]).dtype == pl.Int64 else pl.Float64()

    words = (_TRUE, _FALSE) if cols.op_is_bool else (_READ_WORDS, _WRITE_WORDS)
    spellings = sample.select(pl.col(cols.op).drop_nulls().unique().sort()).to_series()
    low = spellings.str.strip_chars().str.to_lowercase()
    if spellings.len() == 0 or not low.is_in([*words[0], *words[1]]).all():
        return None
    reads = spellings.filter(low.is_in(words[0])).to_list()
    # true/false in any case: polars' Boolean parser (quicker than an Enum's lookup)
    # takes exactly those words
    op_bool = cols.op_is_bool and spellings.str.to_lowercase().is_in(["true", "false"]).all()
    overrides: dict[str, pl.DataType] = {
        cols.time: number_dtype(cols.time),
        cols.op: pl.Boolean() if op_bool else pl.Enum(spellings.to_list()),
        # Unsigned: polars rejects a negative value while parsing.
        cols.offset: pl.UInt64(),
        cols.size: pl.UInt32() if cols.size_scale == 1 else pl.UInt64(),
    }
    if cols.tenant:
        overrides[cols.tenant] = pl.UInt32()
    if cols.response:
        overrides[cols.response] = number_dtype(cols.response)
    try:
        df = pl.read_csv(p, infer_schema=False, schema_overrides=overrides, raise_if_empty=False, glob=False)
    except pl.exceptions.PolarsError:
        return None
    if df.columns != sample.columns:
        return None
    df = _not_blank(df)
    if limit is not None:
        df = df.head(limit)
    required = [cols.time, cols.op, cols.offset, cols.size] + ([cols.tenant] if cols.tenant else [])
    if df.height == 0 or any(df.select(required).null_count().row(0)):
        return None

    unit = _unit(time_unit, cols)
    factor = TIME_UNITS[unit]
    col = pl.col
    t = col(cols.time)
    r_factor = TIME_UNITS[cols.response_unit or "ns"]
    # Aggregates only (polars runs them in parallel): no per-row masks.
    aggs = [
        t.min().alias("t0"),
        t.max().alias("t1"),
        col(cols.offset).max().alias("offset1"),
        col(cols.size).min().alias("size0"),
        col(cols.size).max().alias("size1"),
        (t.is_finite().all() if overrides[cols.time] == pl.Float64 else pl.lit(True)).alias("finite"),
        (col(cols.response).cast(pl.Float64).abs().max() if cols.response else pl.lit(0.0)).alias("resp1"),
    ]
    t0, t1, offset1, size0, size1, finite, resp1 = df.lazy().select(aggs).collect(engine="streaming").row(0)
    if (
        not finite
        or (float(t1) - float(t0)) * factor >= MAX_INT64  # as the exact pass computes it
        or offset1 > MAX_INT64 // cols.offset_scale
        or size0 <= 0
        or size1 > MAX_SIZE // cols.size_scale
        or (resp1 is not None and resp1 * r_factor >= MAX_INT64)
        or (not sort and not df[cols.time].is_sorted())
    ):
        return None

    extra: list[pl.Expr] = [
        col(cols.device).cast(pl.String).fill_null("").alias("device")
        if cols.device
        else pl.repeat("0", df.height, dtype=pl.String).alias("device")
    ]
    if cols.tenant:
        extra.append(col(cols.tenant).alias("tenant"))
    if cols.response:
        extra.append(
            (col(cols.response).cast(pl.Float64) * r_factor).round(0).cast(pl.Int64).alias("response_ns")
        )
    if cols.process:
        extra.append(col(cols.process).cast(pl.String).alias("process"))
    if cols.host:
        extra.append(col(cols.host).cast(pl.String).alias("host"))
    raw = df.select(
        t.alias("t"),
        (col(cols.op) if op_bool else col(cols.op).is_in(reads)).alias("is_read"),
        (col(cols.offset) * cols.offset_scale).alias("offset"),
        (col(cols.size) * cols.size_scale).alias("size"),
        *extra,
    )  # offset UInt64, size UInt32 or UInt64 (both in range), tenant UInt32: as canonical
    return finish(raw, factor=factor, sort=sort, limit=None, strict=False, t_range=(t0, t1))


def read_csv(
    path: str | Path,
    *,
    time_unit: str | None = None,
    sort: bool = False,
    limit: int | None = None,
) -> pl.DataFrame:
    """Read a CSV trace with a header line naming its columns (see the module docstring).

    A typed read parses the numbers (:func:`_typed_csv`); if it cannot vouch for the
    file, :func:`_exact_csv` reads every column as text and names the first bad line.
    """
    check_limit(limit)
    p = source_file(path)
    fast = _typed_csv(p, time_unit, sort, limit)
    return fast if fast is not None else _exact_csv(p, time_unit, sort, limit)


def _exact_csv(p: Path, time_unit: str | None, sort: bool, limit: int | None) -> pl.DataFrame:
    """The exact pass: every column read as text, converted and checked row by row."""
    try:
        df = pl.read_csv(p, infer_schema=False, raise_if_empty=False, glob=False)
    except pl.exceptions.PolarsError as e:
        raise _csv_shape_error(p, e) from None
    cols = resolve_columns(df.columns, f"{p}:1")
    df = df.with_row_index("__row").filter(
        ~pl.all_horizontal([pl.col(c).is_null() for c in df.columns])
    )
    rows = df["__row"]
    df = df.drop("__row")
    if df.height == 0 and limit != 0:
        raise no_requests(p, "header only")
    try:
        return _convert(df, cols, time_unit, sort, limit)
    except _BadRow as e:
        line, n_fields = _csv_line_of_row(p, int(rows[e.row]))
        message = e.message
        if n_fields >= 0 and n_fields != len(df.columns):
            message = f"expected {len(df.columns)} fields (as in the header), found {n_fields}"
        raise InputError(message, f"{p}:{line}") from None


def read_parquet(
    path: str | Path,
    *,
    time_unit: str | None = None,
    sort: bool = False,
    limit: int | None = None,
) -> pl.DataFrame:
    """Read a Parquet trace with named columns (see the module docstring)."""
    import pyarrow as pa  # here, not at import: only Parquet reads pay for loading it

    check_limit(limit)
    p = source_file(path)
    try:
        df = _parquet_frame(p, limit)
    except (pa.ArrowException, pl.exceptions.PolarsError, OSError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise InputError(f"cannot read as Parquet: {first}", str(p)) from None
    cols = resolve_columns(df.columns, str(p))
    if df.height == 0 and limit != 0:
        raise no_requests(p)
    try:
        return _convert(df, cols, time_unit, sort, limit)
    except _BadRow as e:
        raise InputError(e.message, f"{p}: row {e.row + 1}") from None


def _parquet_frame(p: Path, limit: int | None) -> pl.DataFrame:
    """The first ``limit`` rows (all if None) of a Parquet file.

    Decoded by pyarrow, which reports a damaged file as an exception (polars' own reader
    can abort the process on some corrupt pages: a failed huge allocation).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if limit is None:
        table = pq.read_table(p)
    else:
        f = pq.ParquetFile(p)
        batches, n = [], 0
        for batch in f.iter_batches(batch_size=max(1, min(limit, 1 << 16))):
            if n >= limit:
                break
            batches.append(batch)
            n += batch.num_rows
        table = pa.Table.from_batches(batches, schema=f.schema_arrow).slice(0, limit)
    # Only what storqos reads goes on to polars, whose Arrow import panics on a damaged
    # schema (a name or metadata that is not UTF-8): flat columns under their names,
    # without metadata. Nested columns are ignored like every other unknown column.
    try:
        names = table.schema.names
    except UnicodeDecodeError:
        raise pa.ArrowInvalid("a column name is not UTF-8") from None
    flat = [i for i, f in enumerate(table.schema) if not pa.types.is_nested(f.type)]
    table = pa.Table.from_arrays([table.column(i) for i in flat], names=[names[i] for i in flat])
    try:
        df = pl.from_arrow(table)
    except pl.exceptions.PanicException as e:  # a last guard: still a damaged file
        raise pa.ArrowInvalid(str(e)) from None
    assert isinstance(df, pl.DataFrame)
    return df


def write_csv(df: pl.DataFrame, path: str | Path) -> None:
    """Write the canonical columns of a trace as CSV (reads back equal)."""
    conform(df).write_csv(Path(path))


def write_parquet(df: pl.DataFrame, path: str | Path) -> None:
    """Write the canonical columns of a trace as Parquet (reads back equal)."""
    conform(df).write_parquet(Path(path))
