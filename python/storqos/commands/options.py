"""Options several commands share (the trace's format, time unit and order, --json,
the device and its capacity), and reading the trace they name with a progress line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import polars as pl
import typer

from ..progress import run_with_progress

FormatOpt = Annotated[
    str | None,
    typer.Option("--format", "-f", help="Trace format (spc, msr, disksim, mqsim, blkparse, fiu, srt, vscsi, fio, parquet, csv); detected when omitted."),
]
TimeUnitOpt = Annotated[
    str | None, typer.Option("--time-unit", help="Time unit of the trace's timestamps where the format leaves it open (ns, us, ms, s).")
]
SortOpt = Annotated[bool, typer.Option("--sort", help="Sort requests by time instead of rejecting a trace whose timestamps go backwards.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON (for scripts) instead of tables.")]


DeviceOpt = Annotated[str, typer.Option("--device", "-d", help="constant | exponential | array | disk | tiered.")]
CapacityOpt = Annotated[
    str | None, typer.Option("--capacity", "-c", help="Device capacity in IOPS (500, 1.5k); tiered: FAST,SLOW.")
]


def load_trace(path: Path, fmt: str | None, time_unit: str | None, sort: bool) -> pl.DataFrame:
    """Read a trace for a command (a progress line when it takes a while)."""
    from ..traces import read_trace

    return run_with_progress(f"reading {path.name}", lambda: read_trace(path, format=fmt, time_unit=time_unit, sort=sort))
