"""``storqos trace``: inspect and convert block traces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from ..console import emit_json, out
from ..errors import InputError
from ..units import fmt_duration, fmt_rate, fmt_size
from .options import FormatOpt, JsonOpt, SortOpt, TimeUnitOpt, load_trace

if TYPE_CHECKING:
    import polars as pl

trace_app = typer.Typer(help="Inspect and convert block traces.", no_args_is_help=True)


def trace_info(
    file: Annotated[Path, typer.Argument(help="Trace file.", show_default=False)],
    format: FormatOpt = None,
    time_unit: TimeUnitOpt = None,
    sort: SortOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Format, request count, span, read/write mix, IOPS (mean, peak in 100 ms and 1 s windows) and size histogram.

    Example: [bold]storqos trace info ../shared/traces/msr-cambridge/hm_0_excerpt.csv[/bold]
    """
    from ..traces import detect_format, stats

    fmt = format or detect_format(file)
    df = load_trace(file, fmt, time_unit, sort)
    st = stats(df)
    st = {"file": str(file), "format": fmt, **st}
    if json_out:
        emit_json(st)
        return
    t = Table(title=f"{file.name} ({fmt})", show_header=False)
    t.add_row("requests", f"{st['count']:,}")
    t.add_row("span", fmt_duration(st["span_s"] * 1e9))
    t.add_row("reads", f"{100 * st['read_fraction']:.2f} %")
    t.add_row("writes", f"{100 * (1 - st['read_fraction']):.2f} %")
    t.add_row("mean rate", fmt_rate(st["mean_iops"]))
    t.add_row("peak rate (100 ms windows)", fmt_rate(st["peak_iops_100ms"]))
    t.add_row("peak rate (1 s windows)", fmt_rate(st["peak_iops_1s"]))
    t.add_row("mean size", fmt_size(st["mean_size"]))
    if "devices" in st:
        t.add_row("devices / tenants", str(st["devices"]))
    out.print(t)
    h = Table(title="request sizes")
    h.add_column("size ≤")
    h.add_column("requests", justify="right")
    h.add_column("share", justify="right")
    for row in st["size_histogram"]:
        h.add_row(fmt_size(row["le_bytes"]), f"{row['count']:,}", f"{100 * row['count'] / max(st['count'], 1):.1f} %")
    out.print(h)


#: Output suffix → format written by ``trace convert``.
CONVERT_SUFFIXES: dict[str, str] = {
    ".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".spc": "spc", ".disksim": "disksim",
    ".mqsim": "mqsim", ".srt": "srt", ".vscsi": "vscsi", ".iolog": "fio",
}


#: Formats whose device field is a number.
NUMERIC_DEVICES = ("disksim", "mqsim", "srt")


def _writer(fmt: str) -> Callable[[pl.DataFrame, Path], None]:
    from .. import traces as t

    writers: dict[str, Callable[[pl.DataFrame, Path], None]] = {
        "parquet": t.write_parquet, "csv": t.write_csv, "spc": t.write_spc, "disksim": t.write_disksim,
        "mqsim": t.write_mqsim, "srt": t.write_srt, "vscsi": t.write_vscsi, "fio": t.write_fio,
    }
    if fmt not in writers:
        raise InputError(f"cannot write {fmt!r}; formats written: {', '.join(writers)}", "--to")
    return writers[fmt]


def trace_convert(
    file: Annotated[Path, typer.Argument(help="Trace to read (any supported format).", show_default=False)],
    output: Annotated[Path, typer.Argument(help="File to write; its suffix names the format unless --to does.",
                                           show_default=False)],
    to: Annotated[str | None, typer.Option("--to", help="Format to write: parquet, csv (storqos' columns), spc, "
                                              "disksim (ms), mqsim (ns), srt, vscsi, fio.")] = None,
    format: FormatOpt = None,
    time_unit: TimeUnitOpt = None,
    sort: SortOpt = False,
) -> None:
    """Convert a trace to Parquet (fast to read again), storqos' CSV, or another text or
    binary format storqos reads; the file is written whole or not at all.

    Example: [bold]storqos trace convert ../shared/traces/msr-cambridge/hm_0_excerpt.csv hm_0.parquet[/bold]
    """
    import polars as pl

    from ..paths import check_output_file, replacing

    fmt = (to or CONVERT_SUFFIXES.get(output.suffix.lower(), "")).strip().lower()
    if not fmt:
        raise InputError(f"cannot tell the format from the suffix {output.suffix!r}: pass --to "
                         f"({', '.join(sorted(set(CONVERT_SUFFIXES.values())))})", str(output))
    write = _writer(fmt)
    check_output_file(output, "OUTPUT")
    df = load_trace(file, format, time_unit, sort)
    note = ""
    if fmt in NUMERIC_DEVICES and df.height and not df["device"].fill_null("").str.contains(r"^\d+$").all():
        keys = df["device"].unique(maintain_order=True)
        df = df.with_columns(pl.col("device").replace_strict(keys, [str(i) for i in range(len(keys))]))
        note = f"; device names numbered 0-{len(keys) - 1} in order of appearance ({fmt} has numeric devices)"
    with replacing(output) as part:
        write(df, part)
    out.print(f"wrote {df.height:,} requests to {output} ({fmt}){note}")


trace_app.command("info")(trace_info)
trace_app.command("convert")(trace_convert)


def register(app: typer.Typer) -> None:
    """Add ``storqos trace`` (its subcommands) to the app."""
    app.add_typer(trace_app, name="trace")
