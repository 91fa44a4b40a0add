"""``storqos plan``: capacity planning by workload shaping (seed 000).

Default: the Table 4.1-style capacity table Cmin(f, δ). With ``--consolidate`` /
``--shift``: consolidation estimates (Figs. 4.5–4.6). With ``--rtd``: an n-tier
response-time distribution. With ``--power``: ON pools and power (Fig. 4.1, Table 4.2).
With ``--recombine``: FCFS / Split / FQ / Miser at Cmin + ΔC (Fig. 4.4).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError
from storqos.base.paths import check_table_file, write_table
from storqos.base.units import fmt_duration, fmt_ms, fmt_rate
from storqos.cli.commands.options import given

if TYPE_CHECKING:
    import polars as pl


#: Output types of --out, by suffix.
def _pct(v: Any) -> str:
    return f"{100 * float(v):.3g} %"


def _num(v: Any) -> str:
    return f"{float(v):,.0f}" if abs(float(v)) >= 100 else f"{float(v):.3g}"


#: How the tables of --recombine, --rtd, --consolidate and --power show a column: a
#: short header with its unit, and the value's text (ns as ms, fractions as %).
COLUMNS: dict[str, tuple[str, Any]] = {
    "policy": ("policy", str), "class": ("class", str), "requests": ("requests", "{:,}".format),
    "within_deadline": ("≤ δ", _pct), "mean_ns": ("mean", fmt_ms), "p50_ns": ("p50", fmt_ms),
    "p90_ns": ("p90", fmt_ms), "p99_ns": ("p99", fmt_ms), "max_ns": ("max", fmt_ms), "over_1s": ("> 1 s", _pct),
    "tier": ("tier", str), "fraction": ("target", _pct), "deadline_ms": ("δ ms", _num),
    "capacity_iops": ("IOPS", _num), "admitted": ("requests", "{:,}".format), "tier_max_response_ms": ("max ms", _num),
    "achieved_fraction": ("achieved", _pct), "workload": ("workload", str),
    "sum_of_individual_iops": ("Σ Cmin IOPS", _num), "merged_iops": ("merged IOPS", _num),
    "merged_over_sum": ("merged / Σ", "{:.3f}".format), "error_pct": ("error %", "{:.2f}".format),
    "provisioning": ("provisioning", str), "cmin_iops": ("Cmin IOPS", _num), "on_pools": ("ON pools", str),
    "on_disks": ("ON disks", str), "served_iops": ("served IOPS", _num), "power_w": ("power W", _num),
    "energy_j": ("energy J", _num), "power_ratio": ("power ratio", "{:.2f}".format),
}


def _column(name: str) -> tuple[str, Any]:
    if name not in COLUMNS and name.startswith("within_"):  # --power's breakdown: within_10ms
        return f"≤ {name.removeprefix('within_').replace('ms', ' ms')}", _pct
    return COLUMNS.get(name, (name.replace("_", " "), lambda v: f"{v:,.4g}" if isinstance(v, float) else str(v)))


def _note(column: str, value: Any) -> str:
    """A column with one value for every row, said once: ``δ = 10 ms``."""
    head, fmt = _column(column)
    name, _, unit = head.rpartition(" ")
    if unit in ("ms", "IOPS", "W", "J", "%"):
        return f"{name} = {fmt(value)} {unit}"
    return f"{head} = {fmt(value)}"


def _print_df(title: str, df: pl.DataFrame, caption: str | None = None) -> None:
    """A result table that reads at 80 columns: short headers with units; a table of a
    few rows and many columns (--power) is turned so each column is a row."""
    import polars as pl

    heads = [_column(c) for c in df.columns]
    if df.width > 8 and df.height <= 4:
        t = Table(title=title, caption=caption, box=box.SIMPLE_HEAD)
        t.add_column("", justify="left")
        first = heads[0][1]
        for v in df[df.columns[0]]:
            t.add_column(first(v), justify="right")
        for (head, fmt), c in zip(heads[1:], df.columns[1:], strict=True):
            t.add_row(head, *[fmt(v) for v in df[c]])
    else:
        same = [c for c in df.columns if df.height > 1 and df[c].n_unique() == 1]  # said once, below the table
        notes = [_note(c, df[c][0]) for c in same]
        if any(c.endswith("_ns") for c in df.columns):
            notes.append("times in ms")
        df, heads = df.drop(same), [h for h, c in zip(heads, df.columns, strict=True) if c not in same]
        caption = "; ".join(([caption] if caption else []) + notes) or None
        t = Table(title=title, caption=caption, box=box.SIMPLE_HEAD if df.width > 7 else box.HEAVY_HEAD)
        for (head, _), c in zip(heads, df.columns, strict=True):
            t.add_column(head, justify="left" if df[c].dtype == pl.String else "right")
        for row in df.iter_rows():
            t.add_row(*[fmt(v) for (_, fmt), v in zip(heads, row, strict=True)])
    out.print(t)


#: What the capacity table's two figures are, in words (said under the table and in --json).
CAPACITY_MEANING: dict[str, str] = {
    "cmin_iops": "the least capacity any schedule needs for the fraction of requests to meet the bound (RTT's "
                 "optimum, within 0.1 %); RTT decomposition + Miser recombination guarantees the target on "
                 "Cmin + ΔC with ΔC ≥ 1/δ, and often meets it with less (storqos simulate --policy miser --cmin "
                 "CMIN --deadline δ --capacity C)",
    "fcfs_iops": "the least capacity at which plain FCFS (no shaping) meets the same target (Lindley's recursion, "
                 "within 0.1 %); equal to Cmin at 100 %",
}


def _fcfs_over_cmin(table: pl.DataFrame) -> dict[str, float]:
    """FCFS's capacity over Cmin, least and most over the table's cells."""
    import numpy as np

    cmin = table.select([c for c in table.columns if c.startswith("cmin_iops_")]).to_numpy()
    fcfs = table.select([c for c in table.columns if c.startswith("fcfs_iops_")]).to_numpy()
    ratio = fcfs / cmin
    return {"min": float(np.min(ratio)), "max": float(np.max(ratio))}


def _print_capacity_table(title: str, table: pl.DataFrame, deadlines: list[int]) -> None:
    """Cmin and FCFS's capacity, two rows per response-time bound, and what they mean."""
    fractions = [c.removeprefix("cmin_iops_") for c in table.columns if c.startswith("cmin_iops_")]
    t = Table(title=title, box=box.SIMPLE_HEAD, padding=(0, 1))
    t.add_column("δ", justify="left")
    t.add_column("IOPS", justify="left")
    for f in fractions:
        t.add_column(f.replace("%", " %"), justify="right")
    for i, row in enumerate(table.iter_rows(named=True)):
        t.add_row(fmt_duration(deadlines[i]), "Cmin", *[f"{row[f'cmin_iops_{f}']:,.0f}" for f in fractions])
        t.add_row("", "FCFS needs", *[f"{row[f'fcfs_iops_{f}']:,.0f}" for f in fractions], end_section=True)
    out.print(t)
    r = _fcfs_over_cmin(table)
    steps = ", ".join(f"{fmt_rate(1e9 / d)} at {fmt_duration(d)}" for d in sorted({deadlines[0], deadlines[-1]}))
    out.print(f"Cmin: no schedule meets the target with less (within 0.1 %). RTT decomposition + Miser "
              f"recombination guarantees it on Cmin + ΔC, ΔC ≥ 1/δ ({steps}); Miser often needs less: "
              f"storqos simulate --policy miser --cmin CMIN --deadline δ --capacity C.")
    out.print(f"FCFS needs: the least capacity at which plain FCFS meets the same target, "
              f"{r['min']:.2f}–{r['max']:.2f}× Cmin here. For tenants with SLOs: storqos advise.")


def plan_cmd(
    ctx: typer.Context,
    trace: Annotated[Path, typer.Argument(help="Trace file (any supported format).", show_default=False)],
    deadline: Annotated[str, typer.Option("--deadline", "-D", help="Response-time bounds δ (bare numbers are ms).")] = "5ms,10ms,20ms,50ms",
    fraction: Annotated[str, typer.Option("--fraction", "-F", help="Fractions of requests to meet δ, in percent.")] = "90,95,99,99.5,99.9,100",
    consolidate: Annotated[
        list[Path] | None, typer.Option("--consolidate", help="Merge with these traces: sum of individual Cmin vs Cmin of the merged workload (repeat).")
    ] = None,
    shift: Annotated[
        str | None, typer.Option("--shift", help="Consolidate each trace with a copy of itself shifted by these amounts, e.g. 1s,100s.")
    ] = None,
    rtd: Annotated[
        str | None, typer.Option("--rtd", help="n-tier response-time distribution, e.g. 90%@20ms,99%@50ms,100%@500ms.")
    ] = None,
    power: Annotated[bool, typer.Option("--power", help="Pools, power and response-time breakdown: 100 % vs the first --fraction at the first --deadline.")] = False,
    pool_iops: Annotated[str, typer.Option("--pool-iops", help="Capacity of one storage pool (IOPS) for --power.")] = "200",
    disks_per_pool: Annotated[int, typer.Option("--disks-per-pool", help="Disks per pool for --power.")] = 4,
    recombine: Annotated[
        bool, typer.Option("--recombine", help="Simulate FCFS, Split, FQ and Miser at Cmin + ΔC (first --fraction / --deadline).")
    ] = False,
    delta_c: Annotated[str | None, typer.Option("--delta-c", help="ΔC for --recombine in IOPS (default Cmin/5).")] = None,
    method: Annotated[str, typer.Option("--method", help="fast (planner search) or bisect (per-cell bisection, for comparison).")] = "fast",
    format: Annotated[str | None, typer.Option("--format", "-f", help="Trace format; detected when omitted.")] = None,
    time_unit: Annotated[str | None, typer.Option("--time-unit", help="Time unit of the trace's timestamps where the format leaves it open.")] = None,
    sort: Annotated[bool, typer.Option("--sort", help="Sort requests by time instead of rejecting a trace whose timestamps go backwards.")] = False,
    out_file: Annotated[Path | None, typer.Option("--out", "-o", help="Also write the table to this .csv, .json or .parquet file.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON (for scripts) instead of tables.")] = False,
) -> None:
    """Capacity planning by workload shaping: for each fraction of the requests and each response-time bound, Cmin (IOPS), the least capacity any schedule needs (RTT decomposition with Miser recombination guarantees the target on Cmin + ΔC, ΔC ≥ 1/δ), beside the capacity plain FCFS needs for the same target; consolidation, RTD tiers, power pools and recombiners on request.

    Example: [bold]storqos plan wsrch-small.trace --deadline 5ms,10ms,20ms,50ms --fraction 90,95,99,99.5,99.9,100 --out table.csv[/bold]
    """
    from storqos.planning import planner
    from storqos.traces import read_trace

    if method not in ("fast", "bisect"):
        raise InputError(f"unknown method {method!r} (fast or bisect)", "--method")
    # One result per run: the first mode given was computed and the others dropped, and a
    # mode's own options without it were ignored.
    modes = {"--consolidate": bool(consolidate), "--shift": bool(shift) and not consolidate, "--rtd": rtd is not None,
             "--power": power, "--recombine": recombine}
    chosen = [m for m, on in modes.items() if on]
    if len(chosen) > 1:
        raise InputError(f"give one of --consolidate (with --shift if wanted), --shift, --rtd, --power or "
                         f"--recombine, not {' and '.join(chosen)}", chosen[1])
    for opt, name, mode in (("--pool-iops", "pool_iops", "--power"), ("--disks-per-pool", "disks_per_pool", "--power"),
                            ("--delta-c", "delta_c", "--recombine"), ("--method", "method", None)):
        if given(ctx, name) and (chosen[:1] != [mode] if mode else bool(chosen)):
            raise InputError(f"used with {mode} only: give {mode} too" if mode else
                             f"used for the capacity table only, not with {chosen[0]}", opt)
    if out_file is not None:
        check_table_file(out_file, "--out")
    df = read_trace(trace, format=format, time_unit=time_unit, sort=sort)
    deadlines = planner.parse_deadlines(deadline)
    fractions = planner.parse_fractions(fraction)
    title: str
    result: pl.DataFrame
    extra: dict[str, Any] = {}
    if consolidate or shift:
        traces = [df] + [read_trace(p, format=None, sort=sort) for p in consolidate or []]
        names = [trace.name] + [p.name for p in consolidate or []]
        result = planner.consolidate(
            traces, names=names, shifts=planner._list(shift) if shift else (), deadline=f"{deadlines[0]}ns", fractions=[100 * f for f in fractions]
        )
        title = f"consolidation at {fmt_duration(deadlines[0])}: sum of individual Cmin vs Cmin of the merged workload (IOPS)"
    elif rtd:
        r = planner.rtd(df, rtd)
        result = r.tiers
        extra = {"total_iops": r.total_iops, "all_at_first_deadline_iops": r.all_at_first_deadline_iops}
        title = (f"RTD {rtd}: {fmt_rate(r.total_iops)} in total "
                 f"(100 % within {fmt_duration(planner.parse_rtd(rtd)[0][1])} would need {fmt_rate(r.all_at_first_deadline_iops)})")
    elif power:
        result = planner.power(df, 100 * fractions[0], f"{deadlines[-1] if len(deadlines) == 1 else deadlines[0]}ns",
                            pool_iops=pool_iops, disks_per_pool=disks_per_pool)
        title = f"power: 100 % vs {100 * fractions[0]:g} % within {fmt_duration(deadlines[0])} (pools of {pool_iops} IOPS, {disks_per_pool} disks)"
    elif recombine:
        rc = planner.recombine(df, 100 * fractions[0], f"{deadlines[0]}ns", delta_c=delta_c)
        result = rc.summary
        extra = {"cmin_iops": rc.cmin_iops, "delta_c_iops": rc.delta_c_iops}
        title = (f"recombiners at Cmin {fmt_rate(rc.cmin_iops)} + ΔC {fmt_rate(rc.delta_c_iops)}, "
                 f"δ = {fmt_duration(rc.deadline_ns)}")
    else:
        result = planner.capacity_table(df, [f"{d}ns" for d in deadlines], [100 * f for f in fractions], method=method)
        title = f"{trace.name}: {df.height:,} requests — capacity (IOPS) for a fraction of requests to meet a response time"
    if out_file is not None:
        write_table(result, out_file)
    if not (consolidate or shift or rtd or power or recombine):
        extra = {"meaning": CAPACITY_MEANING, "fcfs_over_cmin": _fcfs_over_cmin(result)}
    if json_out:
        emit_json({"trace": str(trace), "requests": df.height, **extra, "rows": result.to_dicts(),
                    **({"out": str(out_file)} if out_file else {})})
        return
    if not (consolidate or shift or rtd or power or recombine):
        _print_capacity_table(title, result, deadlines)
    else:
        _print_df(title, result)
    if out_file is not None:
        out.print(f"written: {out_file}")


def register(app: typer.Typer) -> None:
    """Add ``storqos plan`` to the app."""
    app.command("plan")(plan_cmd)
