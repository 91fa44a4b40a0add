"""``storqos trace``: inspect and convert block traces."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError
from storqos.base.units import fmt_offset, fmt_rate, fmt_size, fmt_span
from storqos.cli.commands.options import FormatOpt, JsonOpt, SortOpt, TimeUnitOpt, load_trace

if TYPE_CHECKING:
    import polars as pl

trace_app = typer.Typer(help="Inspect and convert block traces.", no_args_is_help=True)


def trace_info(
    file: Annotated[Path, typer.Argument(help="Trace file.", show_default=False)],
    format: FormatOpt = None,
    time_unit: TimeUnitOpt = None,
    sort: SortOpt = False,
    busiest: Annotated[int, typer.Option("--busiest", help="How many busiest windows to show (0 for none).")] = 3,
    busiest_window: Annotated[
        str | None, typer.Option("--busiest-window", help="Length of the busiest windows (1min, 10min); by default "
                                                          "the longest of 1 s, 10 s, 1 min and 10 min that fits 10 "
                                                          "times in the trace's span.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Format, request count, span, read/write mix, IOPS (mean, peak in 100 ms and 1 s
    windows), size histogram, and where the trace is busiest: the windows of a length
    that hold the most requests, with the --start/--end that replay one of them.

    Example: [bold]storqos trace info ../shared/traces/msr-cambridge/hm_0_excerpt.csv[/bold]

    Example: [bold]storqos trace info ../shared/traces/msr-cambridge/rsrch_1.csv --busiest-window 1min --busiest 5[/bold]
    """
    from storqos.base.units import parse_count, parse_positive_duration
    from storqos.traces import busiest_windows, busy_window_length, detect_format, stats

    count = parse_count(busiest, "--busiest", maximum=BUSIEST_MAX)
    length_ns = None if busiest_window is None else parse_positive_duration(busiest_window, "--busiest-window")
    fmt = format or detect_format(file)
    df = load_trace(file, fmt, time_unit, sort)
    st = stats(df)
    st = {"file": str(file), "format": fmt, **st}
    length_ns = length_ns or busy_window_length(round(st["span_s"] * 1e9))
    busy = busiest_windows(df, length_ns, count)
    st["busiest_windows"] = {"window_s": length_ns / 1e9, "windows": [
        {"start_s": w["start_ns"] / 1e9, "end_s": w["end_ns"] / 1e9, "requests": w["requests"], "iops": w["iops"]}
        for w in busy]}
    if json_out:
        emit_json(st)
        return
    t = Table(title=f"{file.name} ({fmt})", show_header=False)
    t.add_row("requests", f"{st['count']:,}")
    t.add_row("span", fmt_span(st["span_s"] * 1e9))
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
    if busy:
        out.print(_busiest_table(busy, length_ns))
        out.print(f"replay the busiest: --start {fmt_offset(busy[0]['start_ns'])} --end "
                  f"{fmt_offset(busy[0]['end_ns'])} (times from the first request; beside other traces, "
                  "one value per file)")


#: Most busiest windows ``trace info`` shows (a table, not a listing of the trace).
BUSIEST_MAX = 100


def _busiest_table(busy: list[dict[str, Any]], length_ns: int) -> Table:
    """The busiest windows, times from the first request as --start/--end take them."""
    t = Table(title=f"busiest {fmt_span(length_ns)} windows")
    for col in ("#", "--start", "--end", "requests", "IOPS"):
        t.add_column(col, justify="right" if col in ("#", "requests", "IOPS") else "left")
    for i, w in enumerate(busy, 1):
        t.add_row(str(i), fmt_offset(w["start_ns"]), fmt_offset(w["end_ns"]), f"{w['requests']:,}",
                  fmt_rate(w["iops"]).removesuffix(" IOPS"))
    return t


#: Output suffix → format written by ``trace convert``.
CONVERT_SUFFIXES: dict[str, str] = {
    ".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".spc": "spc", ".disksim": "disksim",
    ".mqsim": "mqsim", ".srt": "srt", ".vscsi": "vscsi", ".iolog": "fio",
}


#: Formats whose device field is a number.
NUMERIC_DEVICES = ("disksim", "mqsim", "srt")


def _writer(fmt: str) -> Callable[[pl.DataFrame, Path], None]:
    from storqos import traces as t

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

    from storqos.base.paths import check_output_file, replacing

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
