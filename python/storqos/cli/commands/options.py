"""Options several commands share (the trace's format, time unit and order, --json,
the device and its capacity, keeping the CPUs awake while measuring), and reading the
trace they name with a progress line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from storqos.base.progress import run_with_progress

if TYPE_CHECKING:
    import polars as pl

FormatOpt = Annotated[
    str | None,
    typer.Option("--format", "-f", help="Trace format (spc, msr, disksim, mqsim, blkparse, fiu, srt, vscsi, fio, parquet, csv); detected when omitted."),
]
TimeUnitOpt = Annotated[
    str | None, typer.Option("--time-unit", help="Time unit of the trace's timestamps where the format leaves it open (ns, us, ms, s).")
]
SortOpt = Annotated[bool, typer.Option("--sort", help="Sort requests by time instead of rejecting a trace whose timestamps go backwards.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON (for scripts) instead of tables.")]
AwakeOpt = Annotated[
    str,
    typer.Option("--awake-cpus", help="Keep the CPUs out of their sleep states while measuring (Linux, as root): a "
                                      "sleeping CPU takes tens of µs or more to wake, which the measured times "
                                      "carry. Tighter issue times and quicker responses, at the cost of power. "
                                      "yes; auto: where this user may; no: the CPUs as the machine has them. "
                                      "A device profile and the replays it predicts should agree on it."),
]


DeviceOpt = Annotated[str, typer.Option("--device", "-d", help="constant | exponential | array | disk | tiered.")]
CapacityOpt = Annotated[
    str | None, typer.Option("--capacity", "-c", help="Device capacity in IOPS (500, 1.5k); tiered: FAST,SLOW.")
]


AlignOpt = Annotated[
    str,
    typer.Option("--align", help="Where several traces start: start = each at its own first request, all "
                                 "together at time 0; none = as their files' clocks say (volumes of one capture, "
                                 "such as MSR Cambridge's)."),
]
StartOpt = Annotated[
    str | None,
    typer.Option("--start", help="Replay each trace from this time after its first request (2h, 1d2h30m): one "
                                 "value for every file or one per file, in order (0 for a file's start)."),
]
EndOpt = Annotated[
    str | None,
    typer.Option("--end", help="Replay each trace up to this time after its first request: one value for every "
                               "file or one per file (none for a file's end). With --align none, --start and "
                               "--end count from the earliest first request of all the files."),
]


def load_trace(path: Path, fmt: str | None, time_unit: str | None, sort: bool) -> pl.DataFrame:
    """Read a trace for a command (a progress line when it takes a while)."""
    from storqos.traces import read_trace

    return run_with_progress(f"reading {path.name}", lambda: read_trace(path, format=fmt, time_unit=time_unit, sort=sort))


def load_tenants(
    paths: list[Path], fmt: str | None, time_unit: str | None, sort: bool, split_by: str | None,
    *, align: str = "start", start: str | None = None, end: str | None = None,
) -> tuple[pl.DataFrame, dict[int, str] | None]:
    """Read ``paths`` into one trace of tenants, with a name per tenant id: one file keeps
    its own tenants (or is split); several files are one tenant each (or are each split,
    numbered after each other), named after the file. ``align``, ``start`` and ``end``
    (``--align``, ``--start``, ``--end``) place the files in time and cut each to a
    window (:mod:`storqos.traces.align`); traces of spans more than 2x apart are a warning."""
    import polars as pl

    from storqos.traces import merge, split_tenants
    from storqos.traces.align import align_traces, check_align, parse_windows

    check_align(align)  # before reading: a typo costs no read of a week-long trace
    windows = parse_windows(start, end, len(paths))
    if len(paths) == 1:
        df = load_trace(paths[0], fmt, time_unit, sort)
        if windows is not None:
            df = align_traces([df], [str(paths[0])], windows=windows)[0]
        if not split_by:
            return df, None
        df, mapping = split_tenants(df, by=split_by)
        return df, {int(t): str(k) for t, k in zip(mapping["tenant"], mapping["key"], strict=True)}
    read = [_load_with_origin(path, fmt, time_unit, sort) for path in paths]
    frames = align_traces([df for df, _ in read], [str(p) for p in paths], [o for _, o in read], align, windows)
    if not split_by:  # file i is tenant i (traces.merge interleaves them by time)
        return merge(frames), {i: path.stem for i, path in enumerate(paths)}
    names: dict[int, str] = {}
    for i, (path, part) in enumerate(zip(paths, frames, strict=True)):
        part, mapping = split_tenants(part, by=split_by)
        first = len(names)
        for k in mapping["key"]:
            names[len(names)] = f"{path.stem}:{k}"
        frames[i] = part.with_columns(pl.col("tenant") + first)
    return pl.concat(frames, how="diagonal_relaxed").sort("arrival_ns", maintain_order=True), names


def _load_with_origin(path: Path, fmt: str | None, time_unit: str | None, sort: bool) -> tuple[pl.DataFrame, int]:
    """:func:`load_trace`, and the trace's origin on its file's clock (ns)."""
    from storqos.traces.reader import read_trace_with_origin

    return run_with_progress(f"reading {path.name}",
                             lambda: read_trace_with_origin(path, format=fmt, time_unit=time_unit, sort=sort))


def given(ctx: typer.Context, name: str) -> bool:
    """Whether the option ``name`` was given (on the command line or by its environment
    variable), not left at its default. Compared by name: typer may carry its own click,
    whose ParameterSource is not click's."""
    return getattr(ctx.get_parameter_source(name), "name", None) in ("COMMANDLINE", "ENVIRONMENT")
