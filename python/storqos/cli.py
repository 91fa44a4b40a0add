"""The ``storqos`` command line (typer + rich).

Every command has ``--help`` with an example and ``--json`` for scripts. Bad input of
any kind ends with one line on stderr naming what and where, and exit status 2.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any, NoReturn

import polars as pl
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import policy_options as po
from .errors import InputError, InputWarning
from .progress import run_with_progress
from .units import fmt_duration, fmt_rate, fmt_size

app = typer.Typer(
    name="storqos",
    help="QoS toolkit for shared block storage: simulate traces through QoS policies, plan, serve.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
trace_app = typer.Typer(help="Inspect and convert block traces.", no_args_is_help=True)
app.add_typer(trace_app, name="trace")

out = Console()
if not out.is_terminal:  # piped or captured: no terminal width to honour, keep tables unwrapped
    out = Console(width=max(out.width, 120))
err = Console(stderr=True)

FormatOpt = Annotated[
    str | None,
    typer.Option("--format", "-f", help="Trace format (spc, msr, disksim, mqsim, blkparse, fiu, srt, vscsi, fio, parquet, csv); detected when omitted."),
]
TimeUnitOpt = Annotated[
    str | None, typer.Option("--time-unit", help="Time unit of the trace's timestamps where the format leaves it open (ns, us, ms, s).")
]
SortOpt = Annotated[bool, typer.Option("--sort", help="Sort requests by time instead of rejecting a trace whose timestamps go backwards.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON (for scripts) instead of tables.")]


def _emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=float) + "\n")


def _load(path: Path, fmt: str | None, time_unit: str | None, sort: bool) -> pl.DataFrame:
    from .traces import read_trace

    return run_with_progress(f"reading {path.name}", lambda: read_trace(path, format=fmt, time_unit=time_unit, sort=sort))


@trace_app.command("info")
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
    from .traces import detect_format, stats

    fmt = format or detect_format(file)
    df = _load(file, fmt, time_unit, sort)
    st = stats(df)
    st = {"file": str(file), "format": fmt, **st}
    if json_out:
        _emit_json(st)
        return
    t = Table(title=f"{file.name} ({fmt})", show_header=False)
    t.add_row("requests", f"{st['count']:,}")
    t.add_row("span", f"{st['span_s']:.6g} s")
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


DeviceOpt = Annotated[str, typer.Option("--device", "-d", help="constant | exponential | array | disk | tiered.")]
CapacityOpt = Annotated[
    str | None, typer.Option("--capacity", "-c", help="Device capacity in IOPS (500, 1.5k); tiered: FAST,SLOW.")
]


def _fmt_in(ns: float, scale: float) -> str:
    """A time in the table's unit, 3 significant digits below 100 (the header has the unit)."""
    v = ns / scale
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def _summary_table(title: str, res_rows: list[dict[str, Any]], key: str, names: dict[int, str] | None = None) -> Table:
    """Per-group response times, units in the headers."""
    cols = ("mean_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns")
    unit, scale = "ms", 1e6
    t = Table(title=title)
    t.add_column(key)
    if names and all(names.get(int(r.get(key, -1)), "") == str(r.get(key)) for r in res_rows):
        names = None  # the names are just the ids
    if names:
        t.add_column("name")
    for col in ("requests", "IOPS", f"mean {unit}", f"p50 {unit}", f"p95 {unit}", f"p99 {unit}", f"max {unit}"):
        t.add_column(col, justify="right")
    for r in res_rows:
        label = [str(r.get(key, "all"))]
        if names:
            label.append(names.get(int(r.get(key, -1)), ""))
        t.add_row(
            *label,
            f"{r['completed']:,}",
            f"{r.get('iops', 0.0):.4g}",
            *(_fmt_in(r[c], scale) for c in cols),
        )
    return t


def _tenants_from(
    paths: list[Path], fmt: str | None, time_unit: str | None, sort: bool, split_by: str | None
) -> tuple[pl.DataFrame, dict[int, str] | None]:
    """Read ``paths`` into one trace of tenants, with a name per tenant id: one file keeps
    its own tenants (or is split); several files are one tenant each (or are each split,
    numbered after each other), named after the file."""
    from .traces import split_tenants

    if len(paths) == 1:
        df = _load(paths[0], fmt, time_unit, sort)
        if not split_by:
            return df, None
        df, mapping = split_tenants(df, by=split_by)
        return df, {int(t): str(k) for t, k in zip(mapping["tenant"], mapping["key"], strict=True)}
    frames: list[pl.DataFrame] = []
    names: dict[int, str] = {}
    for path in paths:
        part = _load(path, fmt, time_unit, sort)
        if split_by:
            part, mapping = split_tenants(part, by=split_by)
            for k in mapping["key"]:
                names[len(names)] = f"{path.stem}:{k}"
            part = part.with_columns(pl.col("tenant") + (len(names) - mapping.height))
        else:
            names[len(names)] = path.stem
            part = part.with_columns(pl.lit(len(names) - 1, pl.UInt32).alias("tenant"))
        frames.append(part)
    df = pl.concat(frames, how="diagonal_relaxed").sort("arrival_ns", maintain_order=True)
    return df, names


@app.command()
def simulate(
    traces: Annotated[
        list[Path],
        typer.Argument(help="Trace files (any supported format): one tenant each, ids in the order given; "
                       "with --split-by, each file's tenants numbered after the previous file's.", show_default=False),
    ],
    policy: po.PolicyOpt = "fcfs",
    device: DeviceOpt = "constant",
    capacity: CapacityOpt = None,
    weights: po.WeightsOpt = None,
    depth: Annotated[int | None, typer.Option(help="SFQ(D) dispatch depth D.")] = None,
    deadline: po.DeadlineOpt = None,
    cmin: po.CminOpt = None,
    slo: po.SloOpt = None,
    percentile: po.PercentileOpt = None,
    period: po.PeriodOpt = None,
    control_window: po.ControlWindowOpt = None,
    facade_overload: po.FacadeOverloadOpt = None,
    reservations: po.ReservationsOpt = None,
    limits: po.LimitsOpt = None,
    servers: Annotated[int | None, typer.Option(help="Array device: number of servers.")] = None,
    hit_ratio: Annotated[float | None, typer.Option(help="Tiered device: probability a request hits the fast tier.")] = None,
    profile: Annotated[
        str | None, typer.Option(help="Disk model profile (enterprise-10k, desktop-7200) for --device disk or array.")
    ] = None,
    queue: Annotated[str | None, typer.Option(help="Disk queue order: fifo, scan or sptf.")] = None,
    split_by: Annotated[
        str | None, typer.Option(help="Make tenants from a trace field: device, host, process or op.")
    ] = None,
    format: FormatOpt = None,
    time_unit: TimeUnitOpt = None,
    sort: SortOpt = False,
    seed: Annotated[int, typer.Option(help="Random seed (devices with random service).")] = 1,
    window: Annotated[str, typer.Option(help="Length of the time-series windows.")] = "1s",
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write per-request results to this Parquet file.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Replay traces through a QoS policy in front of a device model, in simulated time.

    Several traces are several tenants replayed together from time 0: the noisy-neighbour
    question ("what does the batch trace do to the web trace under FCFS, under WF2Q+?")
    needs no experiment file.

    Example: [bold]storqos simulate web.trace batch.trace --policy wf2q --weights 2,1 --capacity 500[/bold]

    Example: [bold]storqos simulate web.trace mail.trace batch.trace --policy mclock --reservations 200,100,0 --limits none,none,50 --capacity 500[/bold]

    Example: [bold]storqos simulate mix.trace --split-by device --policy sarc+avatar --slo web:160iops@400ms,oltp:190iops@900ms --device array --servers 8 --profile enterprise-10k --queue sptf[/bold]
    """
    from .paths import check_output_file
    from .sim import simulate as run

    if out_file is not None:
        check_output_file(out_file, "--out")
    df, names = _tenants_from(traces, format, time_unit, sort, split_by)
    res = run_with_progress(
        f"simulating {df.height:,} requests",
        lambda: run(
            df,
            policy,
            device,
            capacity=capacity,
            weights=weights,
            depth=depth,
            deadlines=deadline,
            cmin=cmin,
            slo=slo,
            percentile=percentile,
            period=period,
            control_window=control_window,
            facade_overload=facade_overload,
            reservations=reservations,
            limits=limits,
            servers=servers,
            hit_ratio=hit_ratio,
            profile=profile,
            queue=queue,
            seed=seed,
            window=window,
            keep_requests=out_file is not None,
        ),
    )
    if out_file is not None and res.requests is not None:
        from .paths import replacing

        with replacing(out_file) as part:
            res.requests.write_parquet(part)
    summary = res.summary()
    verdicts = None
    if slo:
        from .slo import compliance, judge
        from .units import parse_duration

        kw: dict[str, Any] = {"interval_ns": parse_duration(window, "--window")}
        if percentile is not None:
            kw["percentile"] = percentile
        verdicts = compliance(judge(res.windows, slo, **kw))
        summary["slo_compliance"] = verdicts.to_dicts()
    misses = None
    if res.gauges.filter(pl.col("name").str.starts_with("low_done.")).height:
        from .twolevel.analysis import miss_ratio

        misses = miss_ratio(res)  # seed 001's headline: low-level deadline misses per class
        summary["miss_ratio"] = misses.to_dicts()
    if names:
        for row in summary["tenants"]:
            row["name"] = names.get(int(row["tenant"]), "")
    if out_file is not None:
        summary["requests_parquet"] = str(out_file)
    if json_out:
        _emit_json(summary)
        return
    out.print(f"[bold]{res.policy}[/bold] on [bold]{res.device}[/bold]: {res.arrived:,} requests, "
              f"{res.end_ns / 1e9:.3f} s simulated in {res.wall_s:.3f} s wall ({fmt_rate(res.sim_rate)} simulated)")
    out.print(_summary_table("response time per tenant", res.tenants.to_dicts(), "tenant", names))
    if not res.classes.equals(res.tenants.rename({"tenant": "class"})):
        out.print(_summary_table("response time per class (assigned by the policy)", res.classes.to_dicts(), "class"))
    out.print(_summary_table("all requests", res.total.to_dicts(), "all"))
    if verdicts is not None:
        t = Table(title=f"SLO compliance per {window} interval (--window)")
        for col in ("tenant", "name", "intervals", "latency met %", "throughput met %", "violated %"):
            t.add_column(col, justify="left" if col in ("tenant", "name") else "right")
        for r in verdicts.to_dicts():
            t.add_row(str(r["tenant"]), str(r["name"]), f"{r['intervals']:,}", f"{100 * r['latency_met']:.1f}",
                      f"{100 * r['throughput_met']:.1f}", f"{100 * r['violated']:.1f}")
        out.print(t)
    if misses is not None:
        t = Table(title="low-level deadline misses (seed 001's miss ratio)")
        for col in ("class", "completed", "missed", "miss ratio %"):
            t.add_column(col, justify="right")
        for r in misses.to_dicts():
            t.add_row(str(r["class"]), f"{r['completed']:,}", f"{r['missed']:,}", f"{100 * r['miss_ratio']:.2f}")
        out.print(t)
    if res.unfinished:
        out.print(f"[yellow]{res.unfinished:,} requests had not completed when the run ended[/yellow]")
    if out_file is not None:
        out.print(f"per-request results: {out_file}")


@app.command()
def demo(
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Directory for the plot and the table.")] = Path("out/demo"),
    trace: Annotated[Path | None, typer.Option(help="Use this trace instead of the bundled WebSearch excerpt.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Run the bundled WebSearch excerpt beside a bursty batch tenant through FCFS and WF2Q+ at three capacities; print a table and plot the response-time CDFs.

    Example: [bold]storqos demo --out out/demo[/bold]
    """
    from .demo import run_demo
    from .paths import check_output_dir

    check_output_dir(out_dir, "--out")
    result = run_with_progress("running the demo", lambda: run_demo(out_dir, trace))
    if json_out:
        _emit_json(result)
        return
    t = Table(
        title=f"{result['trace']} ({result['web_requests']:,} requests) + a bursty batch tenant "
        f"({result['burst_requests']:,}); mean {fmt_rate(result['mean_iops'])} together"
    )
    for col in ("policy", "capacity", "web p95", "web p99", "web ≤ 10 ms", "burst p99", "mean (all)"):
        t.add_column(col, justify="left" if col == "policy" else "right")
    for r in result["rows"]:
        t.add_row(
            r["policy"],
            fmt_rate(r["capacity_iops"]),
            fmt_duration(r["web_p95_ns"]),
            fmt_duration(r["web_p99_ns"]),
            f"{100 * r['web_within_10ms']:.1f} %",
            fmt_duration(r["burst_p99_ns"]),
            fmt_duration(r["all_mean_ns"]),
        )
    out.print(t)
    out.print(f"CDF plot: {result['plot']}")
    out.print(f"table: {result['table']}")


from .commands import register_all  # noqa: E402  (commands register on the app above)

register_all(app)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """Doubtful input (an :class:`InputWarning`) as one ``warning:`` line on stderr."""
    err.print(f"[yellow]warning:[/yellow] {escape(str(message))}", highlight=False, soft_wrap=True)


def main() -> None:
    """Entry point: run the app, turning input errors into one line and exit status 2."""
    warnings.simplefilter("default", InputWarning)
    warnings.showwarning = _show_warning
    try:
        rv = app(standalone_mode=False)
        if isinstance(rv, int) and rv != 0:
            sys.exit(rv)
    except InputError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except FileNotFoundError as e:
        err.print(f"[red]error:[/red] {escape(str(e.filename))}: no such file", highlight=False, soft_wrap=True)
        sys.exit(2)
    except IsADirectoryError as e:
        err.print(f"[red]error:[/red] {escape(str(e.filename))}: is a directory, expected a file", highlight=False, soft_wrap=True)
        sys.exit(2)
    except PermissionError as e:
        err.print(f"[red]error:[/red] {escape(str(e.filename))}: permission denied", highlight=False, soft_wrap=True)
        sys.exit(2)
    except OSError as e:
        # A path the user gave that cannot be used (a file where a directory must be, a
        # full disk, ...): name it and say why. Errors without a path are not about input.
        if e.filename is None:
            raise_internal(e)
        where = f"{e.filename} -> {e.filename2}" if e.filename2 else str(e.filename)
        err.print(f"[red]error:[/red] {escape(where)}: {escape((e.strerror or type(e).__name__).lower())}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as e:  # usage errors of typer's click, and anything unexpected
        # typer may vendor click (typer._click): recognise its exceptions by shape.
        show, code = getattr(e, "show", None), getattr(e, "exit_code", None)
        if callable(show) and isinstance(code, int):
            ctx = getattr(e, "ctx", None)
            fmt = getattr(e, "format_message", None)
            if type(e).__name__ == "NoArgsIsHelpError" or ctx is None or not callable(fmt):
                show()  # the help text itself
            else:  # a usage error: one line, with where to get help
                err.print(f"[red]error:[/red] {escape(f'{ctx.command_path}: {fmt()}')} (see '{escape(ctx.command_path)} --help')",
                          highlight=False, soft_wrap=True)
            sys.exit(code)
        raise_internal(e)


def raise_internal(e: BaseException) -> NoReturn:
    """An unexpected error (a bug, not bad input): one line and exit status 1, or the
    traceback with STORQOS_DEBUG=1."""
    if os.environ.get("STORQOS_DEBUG"):
        raise e
    err.print(f"[red]internal error:[/red] {escape(f'{type(e).__name__}: {e}')} (set STORQOS_DEBUG=1 for a traceback)",
              highlight=False, soft_wrap=True)
    sys.exit(1)


if __name__ == "__main__":
    main()
