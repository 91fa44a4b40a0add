"""Several trace files on one clock: where each starts (``align``), the part of each kept
(a window of times from its start), and a warning when their spans differ so much that
they barely overlap.

``align="start"`` (the default): every trace starts at its own first request, the
first requests of all of them at time 0; each trace has its own window, times from its
own first request (as an experiment file's ``start``/``end`` of a ``[[trace]]``), so a
part of a week-long trace can run beside a one-minute one. ``align="none"``: the files'
own clocks are kept (traces of one capture, such as the MSR Cambridge volumes with their
FILETIMEs, stay where they were relative to each other) and one window, of times from
the earliest first request of all the files, cuts them all. Either way the combined
trace starts at 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from storqos.base.errors import InputError, warn_input
from storqos.base.units import fmt_offset, fmt_span, parse_duration
from storqos.traces.schema import MAX_INT64, require_trace
from storqos.traces.transform import time_window

#: How traces of several files are placed in time (``--align``), with what each means.
ALIGNS: dict[str, str] = {
    "start": "each trace starts at its own first request",
    "none": "the files' own clocks (traces of one capture)",
}

#: Spans of several traces differing by more than this factor are said in a warning:
#: the shorter trace then overlaps less than half of the longer one, so most of the
#: longer runs with no neighbour to interfere with.
SPAN_RATIO_WARN = 2.0

#: A part of a trace: times from its start (ns), ``[start, end)``; ``end`` None = to its end.
Window = tuple[int, "int | None"]

_NONE = ("none", "-", "")


def _span(df: pl.DataFrame) -> int:
    """Last arrival − first arrival (ns), 0 for an empty trace."""
    if df.height == 0:
        return 0
    lo, hi = df.select(pl.col("arrival_ns").min().alias("lo"), pl.col("arrival_ns").max().alias("hi")).row(0)
    return int(hi) - int(lo)


def _between(w: Window) -> str:
    start, end = w
    return f"between {fmt_offset(start)} and {fmt_offset(end)}" if end is not None else f"after {fmt_offset(start)}"


def _about(ns: int) -> str:
    """A time for a message: whole seconds from a minute up, whole ms below."""
    unit = 10**9 if ns >= 60 * 10**9 else 10**6
    return fmt_offset(ns // unit * unit)


def _times(text: str | None, n: int, flag: str) -> list[int | None]:
    if text is None:
        return [None] * n
    items = [x.strip() for x in text.split(",")]
    if len(items) not in (1, n):
        raise InputError(f"{len(items)} values for {n} trace files: give one for all of them or one per file, "
                         "in the order given", flag)
    out = [None if x.lower() in _NONE else parse_duration(x, flag) for x in items]
    return out * n if len(out) == 1 else out


def parse_windows(start: str | None, end: str | None, n: int) -> list[Window] | None:
    """``--start``/``--end`` for ``n`` trace files as one window per file (None when
    neither is given): each flag one duration for every file or a comma list with one
    per file, ``none`` (or nothing) for a file's own start or end (``--start 0,2h --end
    none,2h1m``). A window that ends where or before it starts is an error."""
    if start is None and end is None:
        return None
    starts, ends = _times(start, n, "--start"), _times(end, n, "--end")
    windows: list[Window] = [(s or 0, e) for s, e in zip(starts, ends, strict=True)]
    for i, (s, e) in enumerate(windows):
        if e is not None and e <= s:
            which = f" (file {i + 1})" if n > 1 and "," in f"{start or ''}{end or ''}" else ""
            raise InputError(f"the window ends at {fmt_offset(e)}, not after it starts at {fmt_offset(s)}{which}",
                             "--end")
    return windows


def check_align(align: str) -> str:
    """``align`` if it is one of :data:`ALIGNS`, else an error naming ``--align``."""
    if align not in ALIGNS:
        raise InputError(f"unknown alignment {align!r} (known: {', '.join(ALIGNS)})", "--align")
    return align


def align_traces(
    frames: Sequence[pl.DataFrame],
    names: Sequence[str],
    origins_ns: Sequence[int] | None = None,
    align: str = "start",
    windows: Sequence[Window] | None = None,
) -> list[pl.DataFrame]:
    """The traces ``frames`` (read from the files ``names``, as given: messages name
    them) placed on one clock by ``align``, each cut to its window (``windows[i]``,
    times from its start; None keeps them whole), the earliest request kept at 0.
    ``origins_ns`` (for ``align="none"``): each trace's first request on its file's clock
    (:func:`~storqos.traces.reader.read_trace_with_origin`); ``"none"`` takes one window
    for all files, on that shared clock.

    A trace left with no requests is an error with ``"start"`` (its tenant would have
    nothing to run) and a warning with ``"none"`` (its volume was idle then). Spans
    differing by more than :data:`SPAN_RATIO_WARN` are a warning (:func:`span_warning`),
    as are, with ``"none"``, traces that do not overlap on their clock.
    """
    check_align(align)
    if len(names) != len(frames) or (windows is not None and len(windows) != len(frames)):
        raise InputError(f"{len(frames)} traces but {len(names)} names and "
                         f"{'no' if windows is None else len(windows)} windows")
    for df, name in zip(frames, names, strict=True):
        require_trace(df, name)
    if align == "start":
        out = list(frames)
        if windows is not None:
            out = [time_window(df, s, e) for df, (s, e) in zip(frames, windows, strict=True)]
            for df, full, name, w in zip(out, frames, names, windows, strict=True):
                if df.height == 0 and full.height:
                    raise InputError(f"no requests {_between(w)} (the trace spans {fmt_span(_span(full))})", name)
    else:
        if windows is not None and len(set(windows)) > 1:
            raise InputError("with --align none the files share one clock: give one --start/--end for all of them",
                             "--align")
        out = _on_shared_clock(frames, names, origins_ns, windows[0] if windows else None)
    warning = span_warning(dict(zip(names, (_span(df) for df in out), strict=True)), per_file=align == "start")
    if warning:
        warn_input(warning)
    return out


def _on_shared_clock(frames: Sequence[pl.DataFrame], names: Sequence[str], origins_ns: Sequence[int] | None,
                     window: Window | None) -> list[pl.DataFrame]:
    if origins_ns is None or len(origins_ns) != len(frames):
        raise InputError("--align none needs each trace's origin on its file's clock", "--align")
    first = min(range(len(frames)), key=lambda i: origins_ns[i])
    t0 = origins_ns[first]
    shifted = []
    for df, name, origin in zip(frames, names, origins_ns, strict=True):
        if origin - t0 + _span(df) > MAX_INT64:
            raise InputError(f"on the files' own clocks {name} starts {fmt_span(origin - t0)} after {names[first]}: "
                             "too far apart to be one capture (--align start starts each at its first request)",
                             "--align")
        shifted.append(df.with_columns(pl.col("arrival_ns") + (origin - t0)) if origin != t0 else df)
    kept = shifted
    if window is not None:
        keep = pl.col("arrival_ns") >= window[0]
        if window[1] is not None:
            keep &= pl.col("arrival_ns") < window[1]
        kept = [df.filter(keep) for df in shifted]
        if not any(df.height for df in kept):
            end = max(origin - t0 + _span(df) for df, origin in zip(frames, origins_ns, strict=True))
            raise InputError(f"no requests in any file {_between(window)} from the earliest first request "
                             f"(together they span {fmt_span(end)})", "--start")
        for df, full, name in zip(kept, frames, names, strict=True):
            if df.height == 0 and full.height:
                warn_input(f"no requests {_between(window)} on the files' shared clock: its tenant is idle", name)
    bounds = [(int(df["arrival_ns"].min()), int(df["arrival_ns"].max()), Path(name).name)  # type: ignore[arg-type]
              for df, name in zip(kept, names, strict=True) if df.height]
    if len(bounds) > 1 and min(hi for _, hi, _ in bounds) < max(lo for lo, _, _ in bounds):
        listing = ", ".join(f"{name} {_about(lo)} to {_about(hi)}" for lo, hi, name in bounds)
        warn_input(f"--align none: the traces do not all overlap on their files' clocks ({listing}); "
                   "--align start starts each at its own first request")
    base = min((lo for lo, _, _ in bounds), default=0)
    return [df.with_columns(pl.col("arrival_ns") - base) if base and df.height else df for df in kept]


def span_warning(spans_ns: dict[str, int], per_file: bool = True) -> str | None:
    """One sentence when the traces' spans (file → last − first arrival, ns) differ by
    more than :data:`SPAN_RATIO_WARN`: each file's span, how much of the longest the
    shortest overlaps, and how to pick a part of the longest (``per_file``: a window
    per file, as ``--align start`` takes them; else one on the files' shared clock);
    else None."""
    if len(spans_ns) < 2:
        return None
    longest = max(spans_ns, key=lambda n: spans_ns[n])
    shortest = min(spans_ns, key=lambda n: spans_ns[n])
    hi, lo = spans_ns[longest], spans_ns[shortest]
    if hi <= SPAN_RATIO_WARN * lo:
        return None
    listing = ", ".join(f"{Path(name).name} {fmt_span(span)}" for name, span in spans_ns.items())
    how = "one value per file, in order" if per_file else "one window of the files' shared clock"
    return (f"the traces' spans differ by more than {SPAN_RATIO_WARN:g}x ({listing}): {Path(shortest).name} "
            f"overlaps {100 * lo / hi:.2g} % of {Path(longest).name}, which runs without it the rest of the time; "
            f"pick a part of it with --start/--end ({how}; its busiest windows: storqos trace info {longest})")


__all__ = ["ALIGNS", "SPAN_RATIO_WARN", "Window", "align_traces", "check_align", "parse_windows", "span_warning"]
