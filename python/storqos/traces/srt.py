"""HP Labs SRT binary traces (``TR_IOREC`` v1.3, as shipped with DiskSim), big-endian.

Layout (see ``shared/traces/hp-hplajw-1week/SOURCE.md``):

1. an ASCII header of ``key = value;`` lines ending in a form feed byte ``0x0C``;
2. records of unsigned 32-bit big-endian words, word 0 being the record size in bytes
   (56 for version-4 SHORTIO records; a SUSPECTIO record adds a word; the reader steps
   by each record's own size word):

   ====  =========  ==========================================================
   word  field      use here
   ====  =========  ==========================================================
   0     size       record length in bytes (≥ 52, multiple of 4)
   1     id         ``(version << 16) | type``; type 1 SHORTIO, 4 SUSPECTIO
   2     sec        enqueue time, s  ┐ arrival = sec + usec
   3     usec       enqueue time, µs ┘
   5     stop       µs from enqueue to completion → ``response_ns``
   6     size       transfer size in bytes → ``size``
   7     sectno     start in 512-byte blocks → ``offset``
   8     devno      ``device`` = ``(devno >> 8) & 0xFF`` (DiskSim's disk number)
   11    ioflags    bit 0x1 set = read
   ====  =========  ==========================================================

Records of any other type are rejected (the reader does not know their layout).
Errors name the byte offset of the bad record: ``"ajw.srt: byte 2260"``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from storqos.base.errors import InputError
from storqos.traces._pipeline import check_limit, finish, no_requests, source_file
from storqos.traces.schema import SECTOR_BYTES

#: Record types that describe one I/O.
IO_TYPES = {1: "SHORTIO", 4: "SUSPECTIO"}
#: Smallest record holding words 0..12.
MIN_RECORD = 52
#: Size of a version-4 SHORTIO record (what :func:`write_srt` writes).
RECORD_BYTES = 56
_FF = b"\x0c"


def _record_offsets(data: bytes, start: int, path: Path) -> np.ndarray:
    """Byte offsets of every record; checks sizes and truncation."""
    n = len(data)
    if start >= n:
        return np.empty(0, dtype=np.int64)
    if n - start >= 4:
        first = int.from_bytes(data[start : start + 4], "big")
        if first >= MIN_RECORD and first % 4 == 0 and (n - start) % first == 0:
            offs = np.arange(start, n, first, dtype=np.int64)
            words = np.frombuffer(data, dtype=">u4", count=(n - start) // 4, offset=start)
            if np.all(words[:: first // 4] == first):
                return offs
    offs_list: list[int] = []
    pos = start
    expected = RECORD_BYTES
    while pos < n:
        if n - pos < 4:
            raise InputError(f"truncated record: {n - pos} of {expected} bytes", f"{path}: byte {pos}")
        size = int.from_bytes(data[pos : pos + 4], "big")
        if size < MIN_RECORD or size % 4:
            raise InputError(
                f"bad record size {size} (expected a multiple of 4, at least {MIN_RECORD})",
                f"{path}: byte {pos}",
            )
        if n - pos < size:
            raise InputError(f"truncated record: {n - pos} of {size} bytes", f"{path}: byte {pos}")
        offs_list.append(pos)
        expected = size
        pos += size
    return np.asarray(offs_list, dtype=np.int64)


def _words(data: bytes, offs: np.ndarray) -> np.ndarray:
    """Words 0..12 of each record at ``offs`` as an (n, 13) int64 array."""
    n = len(offs)
    stride = int(offs[1] - offs[0]) if n > 1 else 0
    if n > 1 and np.all(np.diff(offs) == stride) and stride % 4 == 0:
        words = np.frombuffer(data, dtype=">u4", count=n * stride // 4, offset=int(offs[0]))
        return words.reshape(n, stride // 4)[:, :13].astype(np.int64)
    buf = np.frombuffer(data, dtype=np.uint8)
    out = np.empty((n, 13), dtype=np.int64)
    for k in range(13):
        at = offs + 4 * k
        out[:, k] = (
            (buf[at].astype(np.int64) << 24)
            | (buf[at + 1].astype(np.int64) << 16)
            | (buf[at + 2].astype(np.int64) << 8)
            | buf[at + 3].astype(np.int64)
        )
    return out


def header_end(data: bytes) -> int:
    """Index of the form feed ending the ASCII header, or -1."""
    return data.find(_FF, 0, 1 << 20)


def read_srt(path: str | Path, *, sort: bool = False, limit: int | None = None) -> pl.DataFrame:
    """Read an HP SRT binary trace (adds ``response_ns``)."""
    check_limit(limit)
    p = source_file(path)
    data = p.read_bytes()
    ff = header_end(data)
    if ff < 0:
        raise InputError("not an SRT trace: no header end (form feed 0x0C) in the first MiB", str(p))
    offs = _record_offsets(data, ff + 1, p)
    if limit is not None:
        offs = offs[:limit]
    if len(offs) == 0:
        if limit == 0:
            return finish(_raw(np.empty((0, 14), dtype=np.int64)), factor=1000, sort=sort, limit=0)
        raise no_requests(p, "header only")
    w = _words(data, offs)
    rtype = w[:, 1] & 0xFFFF
    bad = ~np.isin(rtype, list(IO_TYPES))
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(
            f"unknown SRT record type {int(rtype[i])} (id 0x{int(w[i, 1]):08x}); "
            f"expected {', '.join(f'{k} ({v})' for k, v in IO_TYPES.items())}",
            f"{p}: byte {int(offs[i])}",
        )
    if (w[:, 3] >= 1_000_000).any():
        i = int(np.argmax(w[:, 3] >= 1_000_000))
        raise InputError(f"usec field is {int(w[i, 3])}, not below 1,000,000", f"{p}: byte {int(offs[i])}")
    zero = w[:, 6] == 0
    if zero.any():
        i = int(np.argmax(zero))
        raise InputError("size 0 bytes: a request must transfer at least one byte", f"{p}: byte {int(offs[i])}")
    t_us = w[:, 2] * 1_000_000 + w[:, 3]
    if not sort:
        back = np.diff(t_us) < 0
        if back.any():
            i = int(np.argmax(back)) + 1
            raise InputError(
                f"timestamp {_fmt_us(int(t_us[i]))} s is before the previous one "
                f"({_fmt_us(int(t_us[i - 1]))} s); pass --sort to sort the trace",
                f"{p}: byte {int(offs[i])}",
            )
    return finish(_raw(w), factor=1000, sort=sort, limit=None, strict=False)


def _fmt_us(us: int) -> str:
    return f"{us // 1_000_000}.{us % 1_000_000:06d}"


def _raw(w: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "t": w[:, 2] * 1_000_000 + w[:, 3],
            "is_read": (w[:, 11] & 1).astype(bool),
            "offset": w[:, 7] * SECTOR_BYTES,
            "size": w[:, 6],
            "device": pl.Series(((w[:, 8] >> 8) & 0xFF).astype(np.int64)).cast(pl.String),
            "response_ns": w[:, 5] * 1000,
        },
        schema={
            "t": pl.Int64,
            "is_read": pl.Boolean,
            "offset": pl.Int64,
            "size": pl.Int64,
            "device": pl.String,
            "response_ns": pl.Int64,
        },
    )


def write_srt(df: pl.DataFrame, path: str | Path, *, system: str = "storqos") -> None:
    """Write a canonical trace as an SRT file of 56-byte version-4 SHORTIO records.

    ``device`` must be numeric (it becomes ``devno = device << 8``); offsets are
    rounded down to 512-byte blocks; times to µs; ``response_ns`` (if present) is the
    ``stop`` word. Meant for tests and for feeding DiskSim.
    """
    n = df.height
    t_us = df["arrival_ns"].to_numpy() // 1000
    resp = (
        df["response_ns"].fill_null(0).to_numpy() // 1000
        if "response_ns" in df.columns
        else np.zeros(n, dtype=np.int64)
    )
    try:
        dev = df["device"].cast(pl.Int64).to_numpy()
    except pl.exceptions.PolarsError:
        raise InputError("write_srt needs numeric device ids") from None
    w = np.zeros((n, 14), dtype=">u4")
    w[:, 0] = RECORD_BYTES
    w[:, 1] = (4 << 16) | 1
    w[:, 2] = t_us // 1_000_000
    w[:, 3] = t_us % 1_000_000
    w[:, 5] = resp
    w[:, 6] = df["size"].to_numpy()
    w[:, 7] = df["offset"].to_numpy() // SECTOR_BYTES
    w[:, 8] = dev << 8
    w[:, 11] = df["is_read"].to_numpy().astype(np.uint32)
    header = (
        "$$TR_IOREC-1.3 (storqos)\n"
        "version      = 1.3;\n"
        f'system       = "{system}";\n'
        'description = "written by storqos.traces.srt.write_srt";\n'
    ).encode("ascii")
    Path(path).write_bytes(header + _FF + w.tobytes())


def trace_origin(path: str | Path) -> datetime | None:
    """Wall-clock time (trace-local) of the trace's time 0: the header's ``tracedate``
    (``"Sat May 30 00:03:06 1992"``), or None when the header has none. Used to place
    days in the week (``storqos warm``); :func:`read_srt` rebases times to start at 0."""
    import re

    p = source_file(path)
    with open(p, "rb") as f:
        head = f.read(1 << 16)
    ff = head.find(_FF)
    m = re.search(rb'tracedate\s*=\s*"([^"]+)"', head[: ff if ff >= 0 else len(head)])
    if not m:
        return None
    try:
        return datetime.strptime(" ".join(m.group(1).decode("ascii", "replace").split()), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None
