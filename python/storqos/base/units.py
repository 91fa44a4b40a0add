"""Units on the command line and in config files.

Durations: ``10ms``, ``250us``, ``1.5s``, ``2min``, ``1h``, ``500ns``, or several units
summed (``2h10m``, ``1d2h30m``); a bare number is read in the default unit the caller
names. Rates: ``1.5k`` IOPS, ``200``, ``2M``. Sizes: ``4KiB``, ``64GiB``, ``512B``,
``4k`` (binary multiples for ``Ki``/``k``). Bandwidth: ``200MiB/s``. Percent: ``99.9`` or ``99.9%``.

Every parser raises :class:`storqos.base.errors.InputError` naming the flag or field
(``where``) and saying what a valid value looks like.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

from storqos.base.errors import InputError

_NUM = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

DURATION_NS: dict[str, float] = {
    "ns": 1.0,
    "us": 1e3,
    "µs": 1e3,
    "ms": 1e6,
    "s": 1e9,
    "sec": 1e9,
    "min": 60e9,
    "m": 60e9,
    "h": 3600e9,
    "d": 86400e9,
}
#: Longest duration accepted: 2**63 − 1 ns (about 292 years), the most the core's and
#: polars' signed 64-bit nanosecond clocks hold.
MAX_DURATION_NS = 2**63 - 1
#: Largest size accepted: 2**63 − 1 bytes (8 EiB), the most a 64-bit offset holds.
MAX_SIZE_BYTES = 2**63 - 1
RATE_MULT: dict[str, float] = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}
SIZE_MULT: dict[str, int] = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1000**4,
    "tib": 1024**4,
}


def _split(text: str) -> tuple[float, str] | None:
    m = re.fullmatch(_NUM + r"\s*([A-Za-zµ/%]*)", text.strip())
    if not m:
        return None
    return float(m.group(1)), m.group(2)


def _check_type(value: object, what: str, example: str, where: str) -> None:
    """Config files hand the parsers any TOML value: only strings and numbers are units."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(f"expected a {what} (e.g. {example}), got {value!r}", where)


def parse_count(value: object, where: str, *, minimum: int = 0, maximum: int = 2**64 - 1) -> int:
    """An integer count in [minimum, maximum] (``4``, ``4.0``, ``"4"``), else an InputError."""
    v: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        v = value
    elif isinstance(value, float) and value.is_integer():
        v = int(value)
    elif isinstance(value, str) and value.strip().isdigit():
        v = int(value.strip())
    if v is None:
        raise InputError(f"expected a whole number, got {value!r}", where)
    if not minimum <= v <= maximum:
        raise InputError(f"must be between {minimum} and {maximum}, got {value!r}", where)
    return v


_PART = r"([0-9]*\.?[0-9]+)\s*([A-Za-zµ]+)"


def _compound(text: str) -> list[tuple[float, str]] | None:
    """``2h10m`` / ``1d 2h 30s``: whole parts, each with a duration unit, summed (None
    when the text is not such a sum)."""
    t = text.strip()
    if not re.fullmatch(rf"(?:{_PART}\s*)+", t):
        return None
    parts = [(float(n), u) for n, u in re.findall(_PART, t)]
    return parts if len(parts) > 1 and all(u in DURATION_NS for _, u in parts) else None


def parse_duration(value: str | float | int, where: str = "duration", default_unit: str = "s") -> int:
    """Parse a duration into integer nanoseconds (``"10ms"`` → 10_000_000)."""
    _check_type(value, "duration", "10ms, 1.5s", where)
    if isinstance(value, (int, float)):
        v, unit = float(value), default_unit
    else:
        parsed = _split(value)
        if parsed is None:
            parts = _compound(value)
            if parts is None:
                raise InputError(f"malformed duration {value!r} (expected e.g. 10ms, 250us, 1.5s, 2h10m)", where)
            v, unit = sum(n * DURATION_NS[u] for n, u in parts), "ns"
        else:
            v, unit = parsed
            unit = unit or default_unit
    if unit not in DURATION_NS:
        raise InputError(
            f"malformed duration {value!r}: unknown unit {unit!r} (use one of ns, us, ms, s, min, h, d)", where
        )
    ns = v * DURATION_NS[unit]
    if not math.isfinite(ns) or ns < 0:
        raise InputError(f"duration {value!r} must be finite and >= 0", where)
    if round(ns) > MAX_DURATION_NS:
        raise InputError(f"duration {value!r} is too long (at most {MAX_DURATION_NS} ns, about 292 years)", where)
    return int(round(ns))


def parse_positive_duration(value: str | float | int, where: str = "duration", default_unit: str = "s") -> int:
    """:func:`parse_duration` for a length that must be > 0 (a period, a window, a run)."""
    ns = parse_duration(value, where, default_unit)
    if ns <= 0:
        raise InputError(f"must be > 0, got {value!r}", where)
    return ns


def check_seed(value: object, where: str = "--seed") -> int:
    """A random seed: an integer in [0, 2**64) (the core's seeds are unsigned 64-bit)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**64:
        raise InputError(f"must be an integer in [0, 2**64), got {value!r}", where)
    return value


#: The highest rate storqos accepts: one request per nanosecond, its time resolution.
MAX_RATE_IOPS = 1e9


def parse_rate(value: str | float | int, where: str = "rate") -> float:
    """Parse an IOPS rate: ``"1.5k"`` → 1500.0, ``"2M"``, ``"200iops"``; at most 10^9.

    A multiplier and the ``iops`` suffix together (``"5kiops"``) are refused: write
    ``5k`` or ``5000iops``."""
    _check_type(value, "rate in IOPS", "500, 1.5k", where)
    if isinstance(value, (int, float)):
        v = float(value)
    else:
        text = value.strip()
        m = re.fullmatch(_NUM + r"\s*(?:([kKMG])|(iops|IOPS))?", text)
        if not m:
            if re.search(r"[kKMG]\s*iops$", text, re.I):
                raise InputError(f"malformed rate {value!r}: a multiplier or 'iops', not both (5k or 5000iops)", where)
            raise InputError(f"malformed rate {value!r} (expected IOPS, e.g. 500, 1.5k, 2M, 200iops)", where)
        v = float(m.group(1)) * RATE_MULT[m.group(2) or ""]
    if math.isfinite(v) and v <= 0:
        raise InputError(f"rate {value!r} must be > 0 IOPS", where)
    if not math.isfinite(v) or v > MAX_RATE_IOPS:
        raise InputError(f"rate {value!r} is above 10^9 IOPS (one request per ns, storqos' time resolution)", where)
    return v


def parse_size(value: str | int, where: str = "size") -> int:
    """Parse a size into bytes (``"4KiB"`` → 4096, ``"64GiB"``, ``"512"``)."""
    _check_type(value, "size", "4KiB, 512B", where)
    if isinstance(value, float):
        value = str(value)
    if isinstance(value, int):
        v = value
    else:
        parsed = _split(value)
        if parsed is None or parsed[1].lower() not in SIZE_MULT:
            raise InputError(f"malformed size {value!r} (expected e.g. 4KiB, 512B, 64GiB)", where)
        x = parsed[0] * SIZE_MULT[parsed[1].lower()]
        if not math.isfinite(x):
            raise InputError(f"size {value!r} must be a finite number of bytes", where)
        v = int(round(x))
    if v <= 0:
        raise InputError(f"size {value!r} must be > 0 bytes", where)
    if v > MAX_SIZE_BYTES:
        raise InputError(f"size {value!r} is too large (at most {MAX_SIZE_BYTES} bytes, 8 EiB)", where)
    return v


def parse_bandwidth(value: str | float, where: str = "bandwidth") -> float:
    """Parse a bandwidth into bytes per second (``"200MiB/s"``)."""
    _check_type(value, "bandwidth", "200MiB/s", where)
    if isinstance(value, (int, float)):
        v = float(value)
    else:
        text = value.strip()
        if not text.endswith("/s"):
            raise InputError(f"malformed bandwidth {value!r} (expected e.g. 200MiB/s)", where)
        v = float(parse_size(text[:-2], where))
    if not (math.isfinite(v) and v > 0):
        raise InputError(f"bandwidth {value!r} must be finite and > 0", where)
    return v


def parse_percent(value: str | float, where: str = "fraction") -> float:
    """Parse a percentage into a fraction in (0, 1] (``"99.9"`` or ``"99.9%"`` → 0.999)."""
    _check_type(value, "percentage", "95, 99.9%", where)
    text = str(value).strip().rstrip("%")
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"malformed percentage {value!r} (expected e.g. 95 or 99.9%)", where) from None
    if not 0 < v <= 100:
        raise InputError(f"percentage {value!r} must be in (0, 100]", where)
    return v / 100.0


def fmt_duration(ns: float) -> str:
    """Human-readable duration with its unit (``12.3 ms``)."""
    ns = float(ns)
    if abs(ns) >= 1e12:  # a thousand seconds and more: whole seconds, never 1.8e+03 s
        return f"{ns / 1e9:,.0f} s"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.0f} ns"


#: Units of :func:`fmt_span`, longest first, each used from two of it up (``90 s``,
#: not ``1.5 min``; ``36 h``, not ``1.5 d``).
_SPAN_UNITS = (("years", 365.25 * 86400e9), ("d", 86400e9), ("h", 3600e9), ("min", 60e9))


def fmt_span(ns: float) -> str:
    """A length of time as a person says it, 3 significant digits in the largest unit
    that holds at least two (``6.67 d``, ``2.5 h``, ``12 min``, ``60.1 s``)."""
    for unit, scale in _SPAN_UNITS:
        if abs(ns) >= 2 * scale:
            return f"{ns / scale:.3g} {unit}"
    return fmt_duration(ns)


def fmt_offset(ns: int) -> str:
    """A time from a trace's start, exactly, as :func:`parse_duration` reads it back: whole
    days, hours and minutes, then seconds (``1d2h13m5s``, ``2h10m``, ``1m0.25s``, ``0s``)."""
    ns = int(ns)
    out = ""
    for unit, scale in (("d", 86_400 * 10**9), ("h", 3_600 * 10**9), ("m", 60 * 10**9)):
        if ns >= scale:
            out += f"{ns // scale}{unit}"
            ns %= scale
    if ns or not out:
        whole, frac = divmod(ns, 10**9)
        out += f"{whole}.{frac:09d}".rstrip("0").rstrip(".") + "s"
    return out


def fmt_number(value: float | None) -> str:
    """A figure for a column whose header gives the unit (``IOPS``, ``p99 ms``), as
    every table prints it, in the terminal and in the HTML reports: 3 significant
    digits below 100, whole with thousands separators from 100 up, never in exponent
    form (``0.0412``, ``9.81``, ``413``, ``3,215``); ``–`` for none, ``∞`` for an
    infinite one."""
    if value is None or math.isnan(value):
        return "–"
    v = float(value)
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    text = f"{v:.3g}"
    return format(Decimal(text), "f") if "e" in text else text


def fmt_ms(ns: float | None) -> str:
    """A time in ns as a number of ms for a column headed "ms" (:func:`fmt_number`:
    ``9.81``, ``1,070``), ``–`` for none."""
    return fmt_number(None if ns is None else float(ns) / 1e6)


def fmt_rate(iops: float) -> str:
    """Human-readable IOPS (``1.5k IOPS``)."""
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if abs(iops) >= scale:
            return f"{iops / scale:.3g}{unit} IOPS"
    return f"{iops:.3g} IOPS"


def fmt_size(nbytes: float) -> str:
    """Human-readable size with binary multiples (``4 KiB``)."""
    v = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.4g} {unit}"
        v /= 1024
    return f"{v:.4g} TiB"


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 run``, ``4 runs``, ``2 policies`` (``many`` when adding an s is wrong)."""
    return f"{n} {one if n == 1 else (many or one + 's')}"
