"""``storqos demo``: the bundled WebSearch excerpt beside a bursty neighbour, under FCFS
and WF2Q+ at three capacities."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError
from storqos.base.progress import run_with_progress
from storqos.base.units import fmt_duration, fmt_rate, parse_rate
from storqos.cli.commands.options import JsonOpt


def demo(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Directory for the plot and the table.")] = Path("out/demo"),
    trace: Annotated[Path | None, typer.Option(help="Use this trace instead of the bundled WebSearch excerpt; "
                                               "capacities are then sized from its burstiness.")] = None,
    capacity: Annotated[str | None, typer.Option("--capacity", "-c", help="Capacities to compare, IOPS, "
                                                    "comma-separated (e.g. 600,800,1.2k).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Run a trace (the bundled WebSearch excerpt by default) beside a bursty batch tenant through FCFS and WF2Q+ at three capacities; print a table and plot the response-time CDFs.

    With --trace, the neighbour bursts at 1.2× what the trace alone needs for all its requests to finish within 10 ms, and the capacities are what the trace alone needs for 95 %, 99 % and 100 % of its requests within 10 ms, plus the neighbour's mean rate.

    Example: [bold]storqos demo --out out/demo[/bold]

    Example: [bold]storqos demo --trace ../shared/traces/msr-cambridge/hm_0_excerpt.csv --capacity 300,600,1.2k[/bold]
    """
    from storqos.base.paths import check_output_dir
    from storqos.planning.noisy_neighbour import run_demo

    check_output_dir(out_dir, "--out")
    caps = [parse_rate(c, "--capacity") for c in capacity.split(",") if c.strip()] if capacity is not None else None
    if capacity is not None and not caps:
        raise InputError(f"give at least one capacity, e.g. 600,800,1.2k, got {capacity!r}", "--capacity")
    if caps is not None and len(set(caps)) < len(caps):  # the same rows twice over
        twice = sorted({c for c in caps if caps.count(c) > 1})
        raise InputError(f"capacity {', '.join(f'{c:g}' for c in twice)} IOPS given twice", "--capacity")
    result = run_with_progress("running the demo", lambda: run_demo(out_dir, trace, caps))
    if json_out:
        emit_json(result)
        return
    t = Table(
        title=f"{result['tenant']} (p95, p99, ≤ 10 ms: {result['web_requests']:,} requests) + a bursty batch tenant "
        f"({result['burst_requests']:,}); mean {fmt_rate(result['mean_iops'])} together"
    )
    # The tenant's name is in the title; the headers stay short so long names never cut them.
    heads = ("policy", "capacity\nIOPS", "p95", "p99", "≤ 10 ms", "burst\np99", "mean\n(all)")
    for col in heads:
        t.add_column(col, justify="left" if col == "policy" else "right")
    for r in result["rows"]:
        t.add_row(
            r["policy"],
            f"{r['capacity_iops']:,.0f}",
            fmt_duration(r["web_p95_ns"]),
            fmt_duration(r["web_p99_ns"]),
            f"{100 * r['web_within_10ms']:.1f} %",
            fmt_duration(r["burst_p99_ns"]),
            fmt_duration(r["all_mean_ns"]),
        )
    chosen = dict.fromkeys(f"{fmt_rate(r['capacity_iops'])}: {r['capacity_from']}" for r in result["rows"])
    t.caption = "capacities: " + "; ".join(chosen)
    out.print(t)
    out.print(f"CDF plot: {result['plot']}")
    out.print(f"table: {result['table']}")


def register(app: typer.Typer) -> None:
    """Add ``storqos demo`` to the app."""
    app.command("demo")(demo)
