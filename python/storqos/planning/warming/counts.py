"""Intensity series read as counts per interval (seed 002 works on the arrival intensity,
§2 and §3.1: "the intensity at a granularity of a minute").

Some public data gives no requests, only how many arrived in each interval:
BlockTraceFeatures' CloudPhysics snapshots count the block requests of each 30 minutes
(``ts``: the interval's end in µs since the first request, ``block_req_count``). Such a
series becomes a per-minute :class:`~storqos.planning.warming.intensity.Intensity` by
spreading each interval's count evenly over its minutes: the day model smooths over 31
minutes anyway, and a High or Low period is then known to within an interval.

Two formats:

- ``blocktracefeatures``: the CSV as published (detected from its header: ``index``,
  ``ts``, ``block_req_count``). Interval ``i`` covers ``[i·L, (i+1)·L)`` and its ``ts`` is
  the time of its last request; ``L`` is the whole number of minutes every ``ts`` fits
  (30 for the CloudPhysics snapshots).
- ``counts``: two columns, ``time,count`` (a header line is allowed), each row an
  interval's start (``time_unit``, seconds by default) and its count; the rows are evenly
  spaced, or ``interval`` says how long each is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from storqos.base.errors import InputError
from storqos.planning.warming.intensity import DAY_MIN, Intensity
from storqos.traces._pipeline import source_file

#: The count-series formats ``storqos warm`` reads (beside request traces).
COUNT_FORMATS: tuple[str, ...] = ("blocktracefeatures", "counts")
#: Nanoseconds per minute.
NS_PER_MIN = 60_000_000_000
#: Time units of the ``counts`` format's first column.
TIME_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "min": NS_PER_MIN}
#: The columns that mark a BlockTraceFeatures snapshot.
BTF_COLUMNS = ("index", "ts", "block_req_count")


@dataclass(frozen=True)
class CountSeries:
    """Requests counted per interval: ``counts[i]`` arrived in the ``i``-th interval of
    ``interval_ns``, the first starting at 0."""

    counts: np.ndarray
    interval_ns: int

    @property
    def interval_min(self) -> int:
        """The interval in whole minutes."""
        return self.interval_ns // NS_PER_MIN


def detect_counts(path: Path) -> str | None:
    """``blocktracefeatures`` when the file's header is a BlockTraceFeatures snapshot's."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            header = f.readline(1 << 16)
    except OSError:
        return None
    cols = {c.strip() for c in header.split(",")}
    return "blocktracefeatures" if all(c in cols for c in BTF_COLUMNS) else None


def _minutes(interval_ns: int, where: str) -> int:
    if interval_ns <= 0 or interval_ns % NS_PER_MIN:
        raise InputError(f"the interval must be a whole number of minutes (≥ 1), got {interval_ns / 1e9:g} s", where)
    return interval_ns // NS_PER_MIN


def _check_counts(counts: np.ndarray, where: str) -> None:
    bad = np.flatnonzero(~np.isfinite(counts) | (counts < 0))
    if bad.size:
        raise InputError(f"row {int(bad[0]) + 1}: a count must be a finite number ≥ 0, got {counts[bad[0]]}", where)


def read_blocktracefeatures(path: Path) -> CountSeries:
    """A BlockTraceFeatures snapshot (``ts`` in µs, ``block_req_count``)."""
    try:
        df = pl.read_csv(path, columns=list(BTF_COLUMNS), infer_schema_length=10_000)
    except (pl.exceptions.PolarsError, OSError) as e:
        raise InputError(f"not a BlockTraceFeatures CSV ({str(e).splitlines()[0]})", str(path)) from None
    if df.height < 2:
        raise InputError("needs at least two intervals", str(path))
    try:
        index = df["index"].cast(pl.Int64).to_numpy()
        ts_us = df["ts"].cast(pl.Float64).to_numpy()
        counts = df["block_req_count"].cast(pl.Float64).to_numpy()
    except pl.exceptions.PolarsError:
        raise InputError("index, ts and block_req_count must be numbers", str(path)) from None
    _check_counts(counts, str(path))
    if not (np.diff(index) == 1).all() or index[0] != 0:
        row = int(np.flatnonzero(np.diff(index) != 1)[0]) + 2 if index[0] == 0 else 1
        raise InputError(f"row {row}: the interval index must count 0, 1, 2, …", str(path))
    # Interval i holds its last request at ts_i: i·L ≤ ts_i < (i+1)·L for every interval
    # with requests. The least whole number of minutes above every ts_i / (i+1):
    busy = counts > 0
    i = index[busy].astype(np.float64)
    t_min = ts_us[busy] / 60e6
    length = max(1, int(np.floor(float(np.max(t_min / (i + 1)))) + 1))
    late = np.flatnonzero(t_min < i * length - 1e-6)
    if late.size:
        row = int(np.flatnonzero(busy)[late[0]]) + 2
        raise InputError(f"row {row}: its ts ({ts_us[row - 2]:.0f} µs) lies before its interval of {length} min",
                         str(path))
    return CountSeries(counts, length * NS_PER_MIN)


def read_count_rows(path: Path, *, time_unit: str | None = None, interval_ns: int | None = None) -> CountSeries:
    """The ``counts`` format: rows of ``time,count`` (interval starts and counts)."""
    unit = time_unit or "s"
    if unit not in TIME_UNITS:
        raise InputError(f"unknown time unit {unit!r} (one of {', '.join(TIME_UNITS)})", "--time-unit")
    times: list[float] = []
    counts: list[float] = []
    with path.open("r", encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, start=1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            parts = [p.strip() for p in s.replace("\t", ",").replace(" ", ",").split(",") if p.strip()]
            if len(parts) != 2:
                raise InputError(f"line {n}: expected two columns time,count, got {len(parts)}", str(path))
            try:
                t, c = float(parts[0]), float(parts[1])
            except ValueError:
                if n == 1 and not times:
                    continue  # a header line
                raise InputError(f"line {n}: time and count must be numbers, got {s!r}", str(path)) from None
            if times and t <= times[-1]:
                raise InputError(f"line {n}: times must increase ({t:g} after {times[-1]:g})", str(path))
            times.append(t)
            counts.append(c)
    if len(counts) < 2:
        raise InputError("needs at least two intervals", str(path))
    arr = np.asarray(counts)
    _check_counts(arr, str(path))
    t_ns = np.asarray(times) * TIME_UNITS[unit]
    steps = np.diff(t_ns)
    if interval_ns is None:
        if not np.allclose(steps, steps[0], rtol=1e-6):
            row = int(np.flatnonzero(~np.isclose(steps, steps[0], rtol=1e-6))[0]) + 2
            raise InputError(f"interval {row}: the rows are not evenly spaced; give their length with --interval",
                             str(path))
        interval_ns = int(round(steps[0]))
    # Rows placed by their start times; intervals the file skips count 0.
    m = _minutes(interval_ns, "--interval")
    slots = np.round((t_ns - t_ns[0]) / (m * NS_PER_MIN)).astype(np.int64)
    out = np.zeros(int(slots[-1]) + 1)
    np.add.at(out, slots, arr)
    return CountSeries(out, m * NS_PER_MIN)


def read_counts(path: Path, fmt: str, *, time_unit: str | None = None, interval_ns: int | None = None) -> CountSeries:
    """A count series in format ``fmt`` (one of :data:`COUNT_FORMATS`) from ``path``, a
    non-empty regular file."""
    source_file(path)
    if fmt == "blocktracefeatures":
        if time_unit is not None or interval_ns is not None:
            raise InputError("a BlockTraceFeatures snapshot says its own time unit and interval",
                             "--interval" if interval_ns is not None else "--time-unit")
        return read_blocktracefeatures(path)
    if fmt == "counts":
        return read_count_rows(path, time_unit=time_unit, interval_ns=interval_ns)
    raise InputError(f"unknown count format {fmt!r} (one of {', '.join(COUNT_FORMATS)})", "--format")


def from_counts(series: CountSeries, *, start_minute_of_day: int = 0, first_weekday: int = 0) -> Intensity:
    """The per-minute intensity of ``series``: each interval's count spread evenly over
    its minutes, the series padded so that minute 0 is midnight of day 0 and the last
    day whole."""
    if not 0 <= start_minute_of_day < DAY_MIN:
        raise InputError(f"start minute of day must be in [0, {DAY_MIN}), got {start_minute_of_day}")
    m = series.interval_min
    per_min = np.repeat(series.counts / m, m)
    total = start_minute_of_day + per_min.size
    days = -(-total // DAY_MIN)
    out = np.zeros(days * DAY_MIN)
    out[start_minute_of_day:total] = per_min
    return Intensity(out, int(first_weekday) % 7)


__all__ = ["COUNT_FORMATS", "CountSeries", "detect_counts", "from_counts", "read_counts"]
