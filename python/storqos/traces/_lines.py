"""Line-oriented text traces: the fast polars parse and the exact diagnostic pass.

Every text reader has two parsers for the same grammar:

* a *fast* one: :func:`read_fields` hands the file to polars' CSV reader with a fixed
  schema (retrying once with runs of blanks squeezed if the file is ragged), and the
  reader turns the columns into a raw frame for :func:`~._pipeline.finish`;
* an *exact* one: a per-line function ``parse(line) -> Record | None`` run by
  :func:`parse_lines` only when the fast path raised :class:`~._pipeline.Fallback`. It
  walks the file line by line, reports the first bad line as
  ``InputError("field 3 (lba) is not a number: 'x12'", "trace.txt:17")`` and, if no line
  is bad, builds the raw frame itself.

Helpers :func:`int_field`, :func:`size_field`, :func:`float_field` and
:func:`expect_fields` produce the standard messages.
"""

from __future__ import annotations

import io
import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from storqos.base.errors import InputError
from storqos.traces._pipeline import Fallback, no_requests
from storqos.traces.schema import MAX_INT64, MAX_SIZE


class FieldError(Exception):
    """A problem with one line; the message says which field and why."""


@dataclass(frozen=True, slots=True)
class Record:
    """One request parsed from one line (times still in the file's unit)."""

    t: int | float
    t_text: str
    is_read: bool
    offset: int
    size: int
    device: str
    extras: tuple[object, ...] = ()


LineParser = Callable[[str], "Record | None"]


def expect_fields(tokens: Sequence[str], n: int, names: str) -> None:
    """Raise unless the line has exactly ``n`` fields (``names`` lists them)."""
    if len(tokens) != n:
        raise FieldError(f"expected {n} fields ({names}), found {len(tokens)}")


def int_field(
    tokens: Sequence[str], i: int, name: str, *, negative_ok: bool = False, scale: int = 1
) -> int:
    """Field ``i`` (0-based) as an int times ``scale`` (bytes per sector, ns per tick);
    messages number fields from 1. The scaled value must fit in Int64."""
    tok = tokens[i]
    try:
        value = int(tok)
    except ValueError:
        try:
            float(tok)
        except ValueError:
            raise FieldError(f"field {i + 1} ({name}) is not a number: {tok!r}") from None
        raise FieldError(f"field {i + 1} ({name}) is not an integer: {tok!r}") from None
    if value < 0 and not negative_ok:
        raise FieldError(f"field {i + 1} ({name}) is negative: {tok!r}")
    if abs(value) > MAX_INT64 // scale:
        raise FieldError(f"field {i + 1} ({name}) is out of range: {tok!r} (at most {MAX_INT64 // scale:,})")
    return value * scale


def float_field(tokens: Sequence[str], i: int, name: str) -> float:
    """Field ``i`` as a finite float."""
    tok = tokens[i]
    try:
        value = float(tok)
    except ValueError:
        raise FieldError(f"field {i + 1} ({name}) is not a number: {tok!r}") from None
    if not math.isfinite(value):
        raise FieldError(f"field {i + 1} ({name}) is not a finite number: {tok!r}")
    return value


def size_field(tokens: Sequence[str], i: int, name: str, scale: int = 1) -> int:
    """Field ``i`` as a positive size, returned in bytes (``scale`` bytes per unit)."""
    value = int_field(tokens, i, name, negative_ok=True)
    if value <= 0:
        raise FieldError(f"field {i + 1} ({name}) must be a positive size, got {tokens[i]!r}")
    if value * scale > MAX_SIZE:
        raise FieldError(
            f"field {i + 1} ({name}) is too large: {value * scale} bytes (limit 4 GiB - 1)"
        )
    return value * scale


def scaled(column: str, scale: int) -> pl.Expr:
    """Fast-path ``column × scale`` (sectors → bytes, ticks → ns), null where the product
    would leave Int64 (the null makes :func:`~._pipeline.finish` fall back to the exact
    pass, which names the line) instead of wrapping around."""
    c = pl.col(column).cast(pl.Int64)
    limit = MAX_INT64 // scale
    return pl.when((c <= limit) & (c >= -limit)).then(c * scale)


def scaled_columns(
    cols: pl.DataFrame, scales: dict[str, int], *, nonnegative: bool = False, sizes: tuple[str, ...] = ()
) -> dict[str, pl.Expr]:
    """Fast-path ``column × scale`` for several columns, like :func:`scaled` but checked
    by one pass of aggregates (min and max per column) instead of a mask per row: raises
    :class:`~._pipeline.Fallback` if some product would leave Int64, with
    ``nonnegative`` if a value is negative, or if a product of a column named in
    ``sizes`` is not a request size (1 to 2**32 - 1 bytes); the exact pass then names
    the line."""
    if cols.height:
        aggs = [
            agg
            for c in scales
            for agg in (pl.col(c).min().alias(f"{c}:min"), pl.col(c).max().alias(f"{c}:max"))
        ]
        bounds = cols.lazy().select(aggs).collect(engine="streaming").row(0)
        for i, (c, scale) in enumerate(scales.items()):
            lo, hi = bounds[2 * i], bounds[2 * i + 1]
            if lo is None:
                continue
            if lo < (0 if nonnegative else -(MAX_INT64 // scale)) or hi > MAX_INT64 // scale:
                raise Fallback
            if c in sizes and (lo * scale < 1 or hi * scale > MAX_SIZE):
                raise Fallback
    return {c: (pl.col(c).cast(pl.Int64) * scale).alias(c) for c, scale in scales.items()}


def joined(cols: pl.DataFrame, columns: tuple[str, str], separator: str) -> pl.Expr:
    """Two text columns joined (``"rsrch" + "/" + "1"``): a constant when every line holds
    the same pair (one volume per file, as MSR's), sparing a string built per line."""
    a, b = columns
    if cols.height:
        first_a, first_b = cols[a][0], cols[b][0]

        def one_pair(df: pl.DataFrame) -> bool:
            same = (pl.col(a) == first_a) & (pl.col(b) == first_b)
            return bool(df.lazy().select(same.all()).collect(engine="streaming").item())

        # The first lines first: a file of several volumes mostly shows it there, and
        # skips the pass over every line.
        if first_a is not None and first_b is not None and one_pair(cols.head(4096)) and one_pair(cols):
            return pl.lit(f"{first_a}{separator}{first_b}", pl.String)
    return pl.concat_str([a, b], separator=separator)


#: A device number written as an unsigned decimal (``8``, ``08``, ``+8``): one device,
#: named by its value (``"8"``), whichever way a line writes it.
_NUMBER = re.compile(r"\+?[0-9]+")
#: The most combinations of values :func:`device_numbers` builds a table of names for.
_TABLE_MAX = 1 << 16


def device_number(token: str) -> str:
    """A device field as the exact pass names it: an unsigned decimal by its value
    (``"08"`` → ``"8"``), any other text as written."""
    return str(int(token)) if _NUMBER.fullmatch(token) else token


def device_numbers(cols: pl.DataFrame, columns: tuple[str, ...], separator: str = ",") -> pl.Expr:
    """The device name from the columns that number it (major and minor ``8``, ``0`` →
    ``"8,0"``; an ASU ``3`` → ``"3"``), as :func:`device_number` names each part.

    Columns the typed read parsed as unsigned integers are looked up in a table of names
    for every combination of their ranges, when there are at most 65,536 of them: one
    gather, no string built per line (the join of two text columns costs a sixth of
    reading an FIU file). Text columns (some line's value is not a number) are
    normalised and joined per line."""
    exprs = [pl.col(c) for c in columns]
    if all(cols.schema[c].is_unsigned_integer() for c in columns):
        aggs = [agg for i, e in enumerate(exprs) for agg in (e.min().alias(f"{i}:min"), e.max().alias(f"{i}:max"))]
        bounds = cols.select(aggs).row(0) if cols.height else ()
        if bounds and None not in bounds:
            lows, highs = bounds[0::2], bounds[1::2]
            spans = [hi - lo + 1 for lo, hi in zip(lows, highs, strict=True)]
            if math.prod(spans) <= _TABLE_MAX:
                names = pl.Series([separator.join(map(str, combo))
                                   for combo in itertools.product(*(range(lo, hi + 1)
                                                                    for lo, hi in zip(lows, highs, strict=True)))],
                                  dtype=pl.String)
                index: pl.Expr = pl.lit(0, pl.UInt32)
                for e, lo, span in zip(exprs, lows, spans, strict=True):
                    index = index * span + (e - lo).cast(pl.UInt32)
                return pl.lit(names).gather(index)
        return pl.concat_str([e.cast(pl.String) for e in exprs], separator=separator)
    number = r"^\+?[0-9]+$"
    texts = [pl.when(e.str.contains(number)).then(e.str.replace(r"^\+?0*([0-9])", "$1")).otherwise(e)
             for e in (e.cast(pl.String) for e in exprs)]
    return pl.concat_str(texts, separator=separator)


def _spelled_as(word: str, sample: str) -> str:
    """``word`` in ``sample``'s case: upper (``READ``, ``R``), capitalised (``Read``) or lower."""
    if sample.isupper():
        return word.upper()
    if sample[:1].isupper():
        return word.capitalize()
    return word


def read_typed(
    path: Path,
    schema: dict[str, pl.DataType],
    *,
    fast_types: dict[str, pl.DataType] | None,
    separator: str,
    skip_lines: int = 0,
    limit: int | None = None,
) -> pl.DataFrame:
    """:func:`read_fields` first with the ``fast_types`` overrides of the schema's columns
    (narrower or numeric types, cheaper to parse) and no squeezing of blanks; if that
    parse fails, with ``schema`` as it is."""
    try:
        typed = {name: (fast_types or {}).get(name, dtype) for name, dtype in schema.items()}
        return read_fields(path, typed, separator=separator, skip_lines=skip_lines, limit=limit, squeeze=False)
    except Fallback:
        return read_fields(path, schema, separator=separator, skip_lines=skip_lines, limit=limit)


def read_op_fields(
    path: Path,
    schema: dict[str, pl.DataType],
    *,
    op_words: tuple[str, str],
    fast_types: dict[str, pl.DataType] | None = None,
    separator: str,
    skip_lines: int = 0,
    limit: int | None = None,
) -> tuple[pl.DataFrame, pl.Expr]:
    """:func:`read_typed` for a file whose ``op`` column holds a read or a write word
    (``op_words``, lower case). The op is read as text and checked in one pass against
    the two words spelled as the first line spells its op (``Read``/``Write``,
    ``R``/``W``: one spelling per file is the rule); only a file that mixes spellings
    pays for comparing case-blind. (Reading the op as a :class:`polars.Enum` instead
    costs more than the comparisons: a dictionary lookup per line.) Returns the columns
    and the ``is_read`` expression over them (the ``op`` column may come back already as
    that Boolean); raises :class:`Fallback` for a word that is neither."""
    read, write = op_words
    cols = read_typed(path, schema, fast_types=fast_types, separator=separator, skip_lines=skip_lines, limit=limit)
    op = pl.col("op")
    if cols.height:
        first = cols["op"][0]
        r, w = _spelled_as(read, first), _spelled_as(write, first)
        # Each word compared once per line; the reads kept as a column for the reader.
        words = cols.lazy().select((op == r).alias("r"), (op == w).alias("w")).collect(engine="streaming")
        if words.select((pl.col("r") | pl.col("w")).all()).item():
            return cols.with_columns(words["r"].alias("op")), op
    lower = op.str.to_lowercase()
    if not cols.select(lower.is_in([read, write]).all()).item():
        raise Fallback from None
    return cols, lower == read


def op_error(i: int, name: str, token: str, expected: str) -> FieldError:
    """The message for an operation field that is neither read nor write."""
    return FieldError(f"unknown op {token!r} in field {i + 1} ({name}); expected {expected}")


def parse_lines(
    path: Path,
    parse: LineParser,
    *,
    skip_lines: int,
    unit_label: str,
    ns_per_unit: int | float,
    extras: dict[str, pl.DataType] | None = None,
    sort: bool,
    limit: int | None,
    t_dtype: pl.DataType | None = None,
) -> pl.DataFrame:
    """Exact line-by-line pass: raise at the first bad line or return the raw frame.

    ``unit_label`` follows a time value in messages (``" s"``, ``" ns"``,
    ``" (100-ns ticks)"``). Blank lines are skipped; ``parse`` returns ``None`` for
    lines that are valid but not requests (headers, file actions, summaries). Times
    spanning more than Int64 nanoseconds (``ns_per_unit`` converts) are an error at the
    line that widens the span past it, rather than an overflow.
    """
    extras = extras or {}
    t_dtype = t_dtype or pl.Float64()
    ts: list[int | float] = []
    reads: list[bool] = []
    offsets: list[int] = []
    sizes: list[int] = []
    devices: list[str] = []
    extra_cols: list[list[object]] = [[] for _ in extras]
    prev: Record | None = None
    lo: Record | None = None  # the earliest and latest request so far
    hi: Record | None = None
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if lineno <= skip_lines:
                continue
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                rec = parse(line)
            except FieldError as e:
                raise InputError(str(e), where) from None
            if rec is None:
                continue
            if not sort and prev is not None and rec.t < prev.t:
                raise InputError(
                    f"timestamp {rec.t_text}{unit_label} is before the previous one "
                    f"({prev.t_text}{unit_label}); pass --sort to sort the trace",
                    where,
                )
            if lo is None or hi is None:
                lo = hi = rec
            else:
                if rec.t < lo.t:
                    lo = rec
                elif rec.t > hi.t:
                    hi = rec
                if (hi.t - lo.t) * ns_per_unit >= MAX_INT64:
                    other = hi if rec is lo else lo
                    raise InputError(
                        f"timestamp {rec.t_text}{unit_label} is out of range: more than 292 years "
                        f"(2^63 ns) from another request's ({other.t_text}{unit_label})",
                        where,
                    )
            prev = rec
            ts.append(rec.t)
            reads.append(rec.is_read)
            offsets.append(rec.offset)
            sizes.append(rec.size)
            devices.append(rec.device)
            for col, value in zip(extra_cols, rec.extras, strict=True):
                col.append(value)
            if limit is not None and len(ts) >= limit:
                break
    if not ts and limit != 0:
        raise no_requests(path)
    data: dict[str, pl.Series] = {
        "t": pl.Series("t", ts, dtype=t_dtype),
        "is_read": pl.Series("is_read", reads, dtype=pl.Boolean),
        "offset": pl.Series("offset", offsets, dtype=pl.Int64),
        "size": pl.Series("size", sizes, dtype=pl.Int64),
        "device": pl.Series("device", devices, dtype=pl.String),
    }
    for (name, dtype), col in zip(extras.items(), extra_cols, strict=True):
        data[name] = pl.Series(name, col, dtype=dtype)
    return pl.DataFrame(data)


_BLANKS = re.compile(rb"[ \t]+")
_LEAD = re.compile(rb"(?m)^ ")
_TRAIL = re.compile(rb" (?=\r?\n|\r?\Z)")
_COMMA = re.compile(rb"[ \t]*,[ \t]*")


def _squeeze(data: bytes, separator: str) -> bytes:
    """Normalise separators: runs of blanks → one space; blanks around commas removed."""
    if separator == " ":
        data = _BLANKS.sub(b" ", data)
    elif separator == ",":
        data = _COMMA.sub(b",", data)
    else:
        return data
    data = _LEAD.sub(b"", data)
    return _TRAIL.sub(b"", data)


def _polars_read(
    source: str | Path | io.BytesIO,
    schema: dict[str, pl.DataType],
    separator: str,
    skip_lines: int,
    n_rows: int | None,
) -> pl.DataFrame:
    return pl.read_csv(
        source,
        has_header=False,
        separator=separator,
        schema=schema,
        quote_char=None,
        skip_lines=skip_lines,
        n_rows=n_rows,
        raise_if_empty=False,
        missing_columns="insert",
        glob=False,  # a path is the file it names: "a[1].trace" is not "a1.trace"
    )


def read_fields(
    path: Path,
    schema: dict[str, pl.DataType],
    *,
    separator: str,
    skip_lines: int = 0,
    limit: int | None = None,
    complete: bool = True,
    squeeze: bool = True,
) -> pl.DataFrame:
    """Fast parse of a delimited text file into typed columns (blank lines dropped).

    Raises :class:`Fallback` if polars cannot parse the file even after squeezing runs
    of blanks (no retry without ``squeeze``), or if ``complete`` and some line has fewer
    fields than the schema; the caller then runs the exact pass.

    ``squeeze=False``: a file polars cannot parse raises :class:`Fallback` at once (a
    caller that retries with another schema, as :func:`read_op_fields` does).
    """
    n_rows = None if limit is None else limit + 16
    try:
        df = _polars_read(path, schema, separator, skip_lines, n_rows)
    except pl.exceptions.PolarsError:
        if not squeeze:
            raise Fallback from None
        data = _squeeze(path.read_bytes(), separator)
        try:
            df = _polars_read(io.BytesIO(data), schema, separator, skip_lines, n_rows)
        except pl.exceptions.PolarsError:
            raise Fallback from None
    full_height = df.height
    df = df.filter(~pl.all_horizontal(pl.all().is_null()))
    if limit is not None and n_rows is not None and full_height >= n_rows and df.height < limit:
        return read_fields(
            path, schema, separator=separator, skip_lines=skip_lines, limit=None, complete=complete,
            squeeze=squeeze,
        )
    if complete and any(df.null_count().row(0)):
        raise Fallback
    return df


def read_lines(path: Path) -> pl.DataFrame:
    """Whole lines as one String column ``line`` with a 1-based ``lineno`` column."""
    df = pl.read_csv(
        path,
        has_header=False,
        separator="\x00",
        schema={"line": pl.String()},
        quote_char=None,
        raise_if_empty=False,
        truncate_ragged_lines=True,
        glob=False,
    )
    return df.with_row_index("lineno", offset=1)
