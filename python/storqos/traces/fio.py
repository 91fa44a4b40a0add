"""fio I/O logs (``write_iolog`` / ``read_iolog``), versions 2 and 3.

The first line names the version: ``fio version 2 iolog`` or ``fio version 3 iolog``.

* Version 2 lines are ``filename action [offset length]``; version 3 lines put a
  timestamp first: ``timestamp filename action [offset length]``.
* I/O actions carry ``offset length`` in bytes: ``read`` and ``write`` become requests;
  ``trim``, ``sync``, ``datasync``, ``sync_file_range`` are valid but skipped (the
  canonical trace has reads and writes only). File actions ``add``, ``open``, ``close``
  have no offset and are skipped. Any other action is an error.
* Version 3 timestamps are milliseconds since the start of the run (fio's unit;
  ``time_unit`` overrides).
* Version 2 has no timestamps. fio replays a v2 log as fast as it can, pausing only at
  ``wait`` lines (``filename wait <µs> 0``, relative to the previous wait, values below
  100 µs ignored, as in fio). The arrival of each request here is the sum of the waits
  before it, so a log without ``wait`` lines gives every request arrival 0.

``device`` = the file name.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from storqos.base.errors import InputError
from storqos.traces._lines import (
    FieldError,
    Record,
    float_field,
    int_field,
    parse_lines,
    read_fields,
    size_field,
)
from storqos.traces._pipeline import Fallback, check_limit, finish, no_requests, source_file
from storqos.traces.schema import normalize_unit, unit_ns

#: The header lines, by version.
HEADERS = {2: "fio version 2 iolog", 3: "fio version 3 iolog"}
DEFAULT_TIME_UNIT = "ms"

_IO_ACTIONS = ("read", "write")
_SKIPPED_IO = ("trim", "sync", "datasync", "sync_file_range")
_FILE_ACTIONS = ("add", "open", "close")
#: fio ignores v2 waits shorter than this (µs).
MIN_WAIT_US = 100


def iolog_version(first_line: bytes | str) -> int | None:
    """2 or 3 if ``first_line`` is a fio iolog header, else None."""
    text = first_line.decode("utf-8", "replace") if isinstance(first_line, bytes) else first_line
    text = text.strip()
    for version, header in HEADERS.items():
        if text == header:
            return version
    return None


class _V2Parser:
    """Stateful v2 line parser: arrival = sum of the preceding waits (µs)."""

    def __init__(self) -> None:
        self.now_us = 0

    def __call__(self, line: str) -> Record | None:
        tok = line.split()
        if len(tok) < 2:
            raise FieldError(f"expected 2 or 4 fields (filename action [offset length]), found {len(tok)}")
        return _action(tok, 0, self)


class _V3Parser:
    def __call__(self, line: str) -> Record | None:
        tok = line.split()
        if len(tok) < 3:
            raise FieldError(
                f"expected 3 or 5 fields (timestamp filename action [offset length]), found {len(tok)}"
            )
        float_field(tok, 0, "timestamp")
        return _action(tok, 1, None)


def _action(tok: list[str], base: int, v2: _V2Parser | None) -> Record | None:
    act = tok[base + 1]
    names = ("timestamp " if v2 is None else "") + "filename action"
    if act in _FILE_ACTIONS:
        if len(tok) != base + 2:
            raise FieldError(f"expected {base + 2} fields ({names}) for '{act}', found {len(tok)}")
        return None
    if act not in _IO_ACTIONS + _SKIPPED_IO + ("wait",):
        raise FieldError(
            f"unknown op {act!r} in field {base + 2} (action); expected one of "
            f"{', '.join(_IO_ACTIONS + _SKIPPED_IO + _FILE_ACTIONS)}"
        )
    if len(tok) != base + 4:
        raise FieldError(
            f"expected {base + 4} fields ({names} offset length) for '{act}', found {len(tok)}"
        )
    if act == "wait":
        if v2 is None:
            raise FieldError("'wait' is not allowed in a version 3 iolog (use timestamps)")
        delay = int_field(tok, base + 2, "wait µs")
        if delay >= MIN_WAIT_US:
            v2.now_us += delay
        return None
    offset = int_field(tok, base + 2, "offset")
    if act in _SKIPPED_IO:
        int_field(tok, base + 3, "length")
        return None
    size = size_field(tok, base + 3, "length")
    if v2 is not None:
        t: int | float = v2.now_us
        t_text = f"{v2.now_us}"
    else:
        t, t_text = float_field(tok, 0, "timestamp"), tok[0]
    return Record(t, t_text, act == "read", offset, size, tok[base])


def read_fio(
    path: str | Path,
    *,
    time_unit: str | None = None,
    sort: bool = False,
    limit: int | None = None,
) -> pl.DataFrame:
    """Read a fio iolog (v2 or v3)."""
    check_limit(limit)
    p = source_file(path)
    with open(p, "rb") as f:
        version = iolog_version(f.readline())
    if version is None:
        raise InputError(
            f"not a fio iolog: the first line must be {HEADERS[2]!r} or {HEADERS[3]!r}", f"{p}:1"
        )
    if version == 2:
        if time_unit is not None:
            raise InputError("fio version 2 iologs have no timestamps; drop --time-unit", "--time-unit")
        unit, factor = "us", 1_000
    else:
        unit = normalize_unit(time_unit or DEFAULT_TIME_UNIT)
        factor = unit_ns(unit)
    try:
        raw = _fast(p, version)
        if raw.height == 0 and limit != 0:
            raise no_requests(p, "no read or write lines")
        return finish(raw, factor=factor, sort=sort, limit=limit)
    except Fallback:
        pass
    parser = _V2Parser() if version == 2 else _V3Parser()
    raw = parse_lines(
        p,
        parser,
        skip_lines=1,
        unit_label=f" {unit}",
        ns_per_unit=factor,
        sort=sort,
        limit=limit,
        t_dtype=pl.Int64() if version == 2 else pl.Float64(),
    )
    return finish(raw, factor=factor, sort=sort, limit=limit, strict=False)


def _fast(p: Path, version: int) -> pl.DataFrame:
    names = (["t"] if version == 3 else []) + ["file", "act", "offset", "length"]
    cols = read_fields(p, {n: pl.String() for n in names}, separator=" ", skip_lines=1, complete=False)
    act = pl.col("act")
    known = _IO_ACTIONS + _SKIPPED_IO + _FILE_ACTIONS + (("wait",) if version == 2 else ())
    is_file_act = act.is_in(list(_FILE_ACTIONS))
    ok = cols.select(
        act.is_in(list(known)).all().alias("known"),
        (is_file_act == pl.col("offset").is_null()).all().alias("shape"),
        (pl.col("offset").is_null() == pl.col("length").is_null()).all().alias("pairs"),
    ).row(0)
    if not all(ok):
        raise Fallback
    num = cols.with_columns(
        pl.col("offset").str.to_integer(strict=False).alias("off_i"),
        pl.col("length").str.to_integer(strict=False).alias("len_i"),
    )
    has_nums = ~is_file_act
    if num.select((has_nums & (pl.col("off_i").is_null() | pl.col("len_i").is_null())).any()).item():
        raise Fallback
    if version == 2:
        wait = pl.when((act == "wait") & (pl.col("off_i") >= MIN_WAIT_US)).then(pl.col("off_i")).otherwise(0)
        num = num.with_columns(wait.cum_sum().alias("t"))
    else:
        num = num.with_columns(pl.col("t").cast(pl.Float64, strict=False))
        if num["t"].null_count():
            raise Fallback
    io = num.filter(act.is_in(list(_IO_ACTIONS)))
    return io.select(
        pl.col("t"),
        (act == "read").alias("is_read"),
        pl.col("off_i").alias("offset"),
        pl.col("len_i").alias("size"),
        pl.col("file").alias("device"),
    )


def write_fio(df: pl.DataFrame, path: str | Path, *, version: int = 3) -> None:
    """Write a canonical trace as a fio iolog that fio itself can replay.

    Version 3 writes integer millisecond timestamps (arrivals rounded down to ms);
    version 2 writes ``wait`` lines (µs) for gaps of at least 100 µs. Files are named after
    ``device``; each gets ``add`` and ``open`` lines first.
    """
    if version not in HEADERS:
        raise InputError(f"fio iolog version must be 2 or 3, got {version}")
    lines = [HEADERS[version]]
    devices = df["device"].unique(maintain_order=True).to_list()
    for d in devices:
        lines += [f"{'0 ' if version == 3 else ''}{d} add", f"{'0 ' if version == 3 else ''}{d} open"]
    prev_us = 0
    for t, r, off, size, dev in df.select("arrival_ns", "is_read", "offset", "size", "device").iter_rows():
        act = "read" if r else "write"
        if version == 3:
            lines.append(f"{t // 1_000_000} {dev} {act} {off} {size}")
        else:
            us = t // 1000
            if us - prev_us >= MIN_WAIT_US:
                lines.append(f"{dev} wait {us - prev_us} 0")
                prev_us = us
            lines.append(f"{dev} {act} {off} {size}")
    Path(path).write_text("\n".join(lines) + "\n")
