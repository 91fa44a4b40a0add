"""Guess a trace file's format from its first bytes (``--format`` overrides).

Checks, in order: Parquet magic ``PAR1`` (or a ``.parquet`` name); an SRT header (starts
``$$TR_IOREC`` or has ``system =`` before a form feed); a vscsi v1/v2 binary (version
field of the first records); a fio iolog header; the FIU pandas header (``\\t0\\t1``);
blkparse event lines (``8,0  3  1  0.000000000  697  Q  W ...``); then by the first data
line: MSR (7 comma fields, FILETIME ≈ 1.2e17, Read/Write), SPC (5 comma fields, r/w),
FIU original (9 blank-separated fields, R/W, md5), DiskSim / MQSim (5 numeric
blank-separated fields), CSV with a header line naming the columns.

DiskSim and MQSim share a layout but not a time unit (ms and ns). A ``.disksim`` or
``.mqsim`` suffix decides; otherwise fractional times are DiskSim's, and integer times
are taken as MQSim's with a warning naming ``--format``, since a DiskSim trace may have
whole milliseconds too.
"""

from __future__ import annotations

import re
from pathlib import Path

from storqos.base.errors import InputError, warn_input
from storqos.traces._pipeline import source_file
from storqos.traces.fio import iolog_version
from storqos.traces.fiu import is_pandas_header
from storqos.traces.formats import FORMATS
from storqos.traces.srt import header_end
from storqos.traces.tabular import resolve_columns
from storqos.traces.vscsi import vscsi_version

_SNIFF_BYTES = 1 << 16
_BLK_EVENT = re.compile(r"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s+\d+\s+[A-Za-z]{1,2}\s")
_INT = re.compile(r"^[+-]?\d+$")
_NUM = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
#: FILETIME ticks for years ~1990..2100: a plausible MSR timestamp.
_FILETIME_RANGE = (1.2e17, 1.6e17)


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head[:512]


def detect_format(path: str | Path) -> str:
    """Return the format name of ``path`` (one of :data:`~storqos.traces.FORMATS`)."""
    p = source_file(path)
    with open(p, "rb") as f:
        head = f.read(_SNIFF_BYTES)
    if head.startswith(b"PAR1") or p.suffix.lower() in (".parquet", ".pq"):
        return "parquet"
    ff = header_end(head)
    if head.startswith(b"$$TR_IOREC") or (ff > 0 and b"system" in head[:ff] and b"=" in head[:ff]):
        return "srt"
    if _is_binary(head):
        if vscsi_version(head) is not None:
            return "vscsi"
        raise _unknown(p, "binary data that is neither SRT, vscsi nor Parquet")
    text = head.decode("utf-8", errors="replace")
    lines = text.splitlines()
    if len(head) == _SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last one may be cut
    if lines and iolog_version(lines[0]) is not None:
        return "fio"
    if lines and is_pandas_header(lines[0].encode()):
        return "fiu"
    data = [ln for ln in lines if ln.strip()]
    if not data:
        raise _unknown(p, "no text lines")
    if any(_BLK_EVENT.match(ln) for ln in data[:50]):
        return "blkparse"
    first = data[0]
    fmt = _by_fields(first)
    if fmt == "disksim":
        return _disksim_or_mqsim(p, data)
    if fmt:
        return fmt
    if "," in first and len(data) > 1:
        names = [c.strip().lower() for c in first.split(",")]
        try:
            resolve_columns(first.split(","), str(p))
            return "csv"
        except InputError:
            if len(set(names)) < len(names):  # a header with a column twice: the CSV reader says which
                return "csv"
    raise _unknown(p, f"first line not recognised: {first[:80]!r}")


def _by_fields(line: str) -> str | None:
    if "," in line:
        tok = [t.strip() for t in line.split(",")]
        if (
            len(tok) == 7
            and _INT.match(tok[0])
            and _FILETIME_RANGE[0] <= int(tok[0]) <= _FILETIME_RANGE[1]
            and tok[3].lower() in ("read", "write")
        ):
            return "msr"
        if tok and tok[0].lower() == "timestamp" and len(tok) == 7 and tok[3].lower() == "type":
            return "msr"
        if len(tok) == 5 and tok[3].lower() in ("r", "w") and _INT.match(tok[1]) and _NUM.match(tok[4]):
            return "spc"
        return None
    tok = line.split()
    if len(tok) == 9 and tok[5].upper() in ("R", "W") and _INT.match(tok[0]) and _INT.match(tok[3]):
        return "fiu"
    if len(tok) == 5 and _NUM.match(tok[0]) and all(_INT.match(t) for t in tok[1:]):
        return "disksim"
    return None


def _disksim_or_mqsim(p: Path, data: list[str]) -> str:
    """By the file's suffix (``.disksim``, ``.mqsim``); else DiskSim (ms) when a sampled
    time has a fraction or exponent, else MQSim (ns), said."""
    if p.suffix.lower() in (".disksim", ".mqsim"):
        return p.suffix.lower()[1:]
    if any(not _INT.match(ln.split()[0]) for ln in data[:1000] if ln.split()):
        return "disksim"
    warn_input(
        "5-column DiskSim/MQSim layout with integer times: read as mqsim (times in ns); "
        "pass --format disksim if the times are DiskSim's milliseconds, or --format mqsim to silence this",
        str(p),
    )
    return "mqsim"


def _unknown(p: Path, why: str) -> InputError:
    return InputError(
        f"cannot detect the trace format ({why}); pass --format, one of {', '.join(FORMATS)}", str(p)
    )
