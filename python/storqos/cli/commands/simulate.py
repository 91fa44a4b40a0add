"""``storqos simulate``: replay traces through a QoS policy in front of a device model."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError
from storqos.base.progress import run_with_progress
from storqos.base.units import fmt_ms, fmt_number, fmt_rate
from storqos.cli.commands.options import (
    AlignOpt,
    CapacityOpt,
    DeviceOpt,
    EndOpt,
    FormatOpt,
    JsonOpt,
    SortOpt,
    StartOpt,
    TimeUnitOpt,
    load_tenants,
)
from storqos.model import policy_options as po

#: What the "own IOPS" column is, under the first table that has it.
OWN_IOPS = "own IOPS: requests over the tenant's own span, first arrival to last completion"


def _summary_table(title: str, res_rows: list[dict[str, Any]], key: str, names: dict[int, str] | None = None,
                   caption: str | None = None) -> Table:
    """Per-group response times, units in the headers."""
    cols = ("mean_ns", "p50_ns", "p95_ns", "p99_ns", "max_ns")
    unit = "ms"
    t = Table(title=title, caption=caption)
    if names and all(names.get(int(r.get(key, -1)), "") == str(r.get(key)) for r in res_rows):
        names = None  # the names are just the ids
    # With names, one column "id name": long names fold onto a second line rather than
    # end in "…" on every row, and the table keeps to 80 columns.
    t.add_column(key, overflow="fold", min_width=10 if names else None)
    # The rate over each group's own span (first arrival to last completion), not over
    # the run's: a one-minute tenant beside a week-long one shows its own rate.
    for col in ("requests", "own\nIOPS", f"mean {unit}", f"p50 {unit}", f"p95 {unit}", f"p99 {unit}",
                f"max {unit}"):
        t.add_column(col, justify="right")
    for r in res_rows:
        label = str(r.get(key, "all"))
        if names:
            label = f"{label} {names.get(int(r.get(key, -1)), '')}"
        iops = r.get("iops_active", 0.0)
        t.add_row(
            label,
            f"{r['completed']:,}",
            fmt_number(iops),
            *(fmt_ms(r[c]) for c in cols),
        )
    return t


@po.with_policy_options("simulate", after="device_profile")
def simulate(
    traces: Annotated[
        list[Path],
        typer.Argument(help="Trace files (any supported format): one tenant each, ids in the order given; "
                       "with --split-by, each file's tenants numbered after the previous file's.", show_default=False),
    ],
    policy: po.PolicyOpt = po.DEFAULT_POLICY,
    device: DeviceOpt = "constant",
    capacity: CapacityOpt = None,
    device_profile: Annotated[
        Path | None, typer.Option("--device-profile", help="Model the device measured by `storqos calibrate` "
                                                           "(instead of --device and --capacity).")] = None,
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
    align: AlignOpt = "start",
    start: StartOpt = None,
    end: EndOpt = None,
    seed: Annotated[int, typer.Option(help="Random seed (devices with random service).")] = 1,
    window: Annotated[str, typer.Option(help="Length of the time-series windows.")] = "1s",
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write per-request results to this file: .parquet, .csv or .json.")
    ] = None,
    json_out: JsonOpt = False,
    cluster: Annotated[
        int | None, typer.Option("--cluster", help="Simulate a cluster of this many servers, each a copy of the device "
                                                   "behind its own copy of the policy.", rich_help_panel="Cluster")
    ] = None,
    placement: Annotated[
        str, typer.Option(help="Which server serves a request: hash (of its object; reads to the primary, writes to "
                               "every replica) or device (the trace's own device column).", rich_help_panel="Cluster")
    ] = "hash",
    replicas: Annotated[int, typer.Option(help="Copies of each object (hash placement).", rich_help_panel="Cluster")] = 1,
    object_size: Annotated[
        str, typer.Option(help="Size of the objects hash placement places.", rich_help_panel="Cluster")
    ] = "4MiB",
    coordination: Annotated[
        str, typer.Option(help="How the servers keep each tenant's total reservation and limit (--policy mclock): "
                               "none (each server alone), dmclock (each request says what its tenant got elsewhere) "
                               "or split (shares by demand, every --split-period).", rich_help_panel="Cluster")
    ] = "none",
    split_period: Annotated[
        str, typer.Option(help="How often split coordination re-divides the reservations, weights and limits.",
                          rich_help_panel="Cluster")
    ] = "500ms",
    **policy_params: Any,
) -> None:
    """Replay traces through a QoS policy in front of a device model, in simulated time.

    Several traces are several tenants replayed together, each from its own first request
    (--align start): the noisy-neighbour question ("what does the batch trace do to the
    web trace under FCFS, under WF2Q+?") needs no experiment file. Traces whose spans
    differ more than 2x barely overlap (a warning says so): cut the longer one to a part
    as long as the other with --start/--end, one value per file; `storqos trace info`
    shows where a trace is busiest.

    Example: [bold]storqos simulate web.trace batch.trace --policy wf2q --weights 2,1 --capacity 500[/bold]

    Example: [bold]storqos simulate web.trace mail.trace batch.trace --policy mclock --reservations 200,100,0 --limits none,none,50 --capacity 500[/bold]

    Example: [bold]storqos simulate web.trace week.csv --start 0,1d2h --end none,1d2h1m --policy wf2q --weights 3,1 --capacity 1k[/bold]

    Example: [bold]storqos simulate vols.csv --split-by device --cluster 8 --replicas 3 --policy mclock --reservations 200,100 --limits 400,none --coordination dmclock --capacity 1k[/bold]

    Example: [bold]storqos simulate mix.trace --split-by device --policy sarc+avatar --slo web:160iops@400ms,oltp:190iops@900ms --device array --servers 8 --profile enterprise-10k --queue sptf[/bold]
    """
    import polars as pl

    from storqos.base.paths import check_table_file
    from storqos.model.sim import simulate_cli as run

    if out_file is not None:
        check_table_file(out_file, "--out")
    prof = None
    if device_profile is not None:
        from storqos.model.device_profile import load_profile

        if device != "constant" or capacity is not None:
            raise InputError("give --device-profile or --device/--capacity, not both", "--device-profile")
        prof = load_profile(device_profile)
        device, capacity = prof.sim_device(), f"{prof.capacity_iops:.6g}"  # type: ignore[assignment]
    df, names = load_tenants(traces, format, time_unit, sort, split_by, align=align, start=start, end=end)
    if cluster is not None:
        if prof is not None or out_file is not None:
            raise InputError("a cluster run gives per-tenant and per-server tables: --device-profile and --out are "
                             "for one server", "--cluster")
        _simulate_cluster(df, names, policy, device, capacity, policy_params, servers=servers, hit_ratio=hit_ratio,
                          profile=profile, queue=queue, seed=seed, window=window, json_out=json_out,
                          shape=(cluster, placement, replicas, object_size, coordination, split_period))
        return
    res = run_with_progress(
        f"simulating {df.height:,} requests",
        lambda: run(
            df,
            policy,
            device,
            capacity=capacity,
            **policy_params,
            servers=servers,
            hit_ratio=hit_ratio,
            profile=profile,
            queue=queue,
            seed=seed,
            window=window,
            keep_requests=out_file is not None or prof is not None,
        ),
    )
    log, seen = res.requests, []
    if prof is not None and log is not None:  # each request as validate predicts the live client sees it
        from storqos.model.live_path import with_path
        from storqos.model.tenant_figures import per_tenant

        log = with_path(log, prof, df["offset"].to_numpy())
        top = int(log["tenant"].cast(pl.Int64).max() or 0)  # type: ignore[arg-type]
        seen = per_tenant(log, [(names or {}).get(t, str(t)) for t in range(top + 1)]).to_dicts()
    if out_file is not None and log is not None:
        from storqos.base.paths import write_table

        write_table(log, out_file)
    summary = res.summary()
    if prof is not None:
        summary["live_path"] = seen
    verdicts = None
    slo, percentile = policy_params.get("slo"), policy_params.get("percentile")
    if slo:
        from storqos.base.units import parse_duration
        from storqos.model.slo import compliance, judge

        kw: dict[str, Any] = {"interval_ns": parse_duration(window, "--window")}
        if percentile is not None:
            kw["percentile"] = percentile
        verdicts = compliance(judge(res.windows, slo, **kw))
        summary["slo_compliance"] = verdicts.to_dicts()
    misses = None
    if res.gauges.filter(pl.col("name").str.starts_with("low_done.")).height:
        from storqos.model.twolevel.analysis import miss_ratio

        misses = miss_ratio(res)  # seed 001's headline: low-level deadline misses per class
        summary["miss_ratio"] = misses.to_dicts()
    if names:
        for row in summary["tenants"]:
            row["name"] = names.get(int(row["tenant"]), "")
    if out_file is not None:
        summary["requests_file"] = str(out_file)
    if json_out:
        emit_json(summary)
        return
    out.print(Text.assemble((res.policy, "bold"), " on ", (res.device, "bold"), f": {res.arrived:,} requests, "
              f"{res.end_ns / 1e9:.3f} s simulated in {res.wall_s:.3f} s wall ({fmt_rate(res.sim_rate)} simulated)"))
    out.print(_summary_table("response time per tenant", res.tenants.to_dicts(), "tenant", names, OWN_IOPS))
    if not res.classes.equals(res.tenants.drop("rejected", strict=False).rename({"tenant": "class"})):
        out.print(_summary_table("response time per class (assigned by the policy)", res.classes.to_dicts(), "class"))
    out.print(_summary_table("all requests", res.total.to_dicts(), "all"))
    if prof is not None:
        out.print(_live_path_table(seen))
    if verdicts is not None:
        t = Table(title=f"SLO compliance per {window} interval (--window)")
        for col in ("tenant", "name", "intervals", "latency met %", "throughput met %", "violated %"):
            t.add_column(col, justify="left" if col in ("tenant", "name") else "right")
        for r in verdicts.to_dicts():
            t.add_row(str(r["tenant"]), str(r["name"]), f"{r['intervals']:,}", f"{100 * r['latency_met']:.1f}",
                      f"{100 * r['throughput_met']:.1f}", f"{100 * r['violated']:.1f}")
        out.print(t)
    if misses is not None:
        t = Table(title="low-level deadline misses per class (SARC+AVATAR's miss ratio)")
        for col in ("class", "completed", "missed", "miss ratio %"):
            t.add_column(col, justify="right")
        for r in misses.to_dicts():
            t.add_row(str(r["class"]), f"{r['completed']:,}", f"{r['missed']:,}", f"{100 * r['miss_ratio']:.2f}")
        out.print(t)
    if res.rejected:
        per = ", ".join(f"tenant {t}: {n:,}" for t, n in sorted(res.rejected.items()))
        out.print(f"{sum(res.rejected.values()):,} requests rejected at their tenant's limit, to retry ({per})")
    if res.unfinished:
        out.print(f"{res.unfinished:,} requests had not completed when the run ended", style="yellow")
    if out_file is not None:
        out.print(f"per-request results: {out_file}")


def _simulate_cluster(df: Any, names: dict[int, str] | None, policy: str, device: str, capacity: str | None,
                      policy_params: dict[str, Any], *, servers: int | None, hit_ratio: float | None,
                      profile: str | None, queue: str | None, seed: int, window: str, json_out: bool,
                      shape: tuple[int, str, int, str, str, str]) -> None:
    """``storqos simulate --cluster S``: the run, a table per tenant (its total, as its
    client sees it) and the servers' spread."""
    from storqos.model.cluster import Cluster, simulate_cluster_cli

    n, placement, replicas, object_size, coordination, period = shape
    spec = Cluster(servers=n, placement=placement, replicas=replicas,  # type: ignore[arg-type]
                   object_size=object_size, coordination=coordination, period=period)  # type: ignore[arg-type]
    res = run_with_progress(
        f"simulating {df.height:,} requests on {n:,} servers",
        lambda: simulate_cluster_cli(df, policy, device, cluster=spec, capacity=capacity, **policy_params,
                                     servers=servers, hit_ratio=hit_ratio, profile=profile, queue=queue, seed=seed,
                                     window=window),
    )
    summary = res.summary()
    if names:
        for row in summary["tenants"]:
            row["name"] = names.get(int(row["tenant"]), "")
    if json_out:
        emit_json(summary)
        return
    out.print(Text.assemble((res.policy, "bold"), f" on {n:,} servers of ", (res.device, "bold"),
                            f" ({coordination} coordination, {placement} placement): {res.arrived:,} requests, "
                            f"{res.end_ns / 1e9:.3f} s simulated in {res.wall_s:.3f} s wall"))
    out.print(_summary_table("response time per tenant (all its servers)", res.tenants.to_dicts(), "tenant", names,
                             OWN_IOPS))
    out.print(_summary_table("all requests", res.total.to_dicts(), "all"))
    out.print(_servers_table(res.servers))
    if res.unfinished:
        out.print(f"{res.unfinished:,} requests had not completed when the run ended", style="yellow")


def _servers_table(servers: Any) -> Table:
    """The servers' spread: each server when they are few, else the least, median and
    busiest server by requests served."""
    rows = servers.sort("completed").to_dicts()
    if len(rows) > 12:
        picks = {"least served": rows[0], "median": rows[len(rows) // 2], "most served": rows[-1]}
        title = f"servers ({len(rows):,}): least, median and most served"
    else:
        picks = {str(r["server"]): r for r in sorted(rows, key=lambda r: r["server"])}
        title = "per server (a write counts once per replica)"
    t = Table(title=title)
    for col in ("server", "requests", "by reservation", "mean ms", "p50 ms", "p99 ms", "max ms"):
        t.add_column(col, justify="left" if col == "server" else "right")
    for label, r in picks.items():
        t.add_row(label, f"{r['completed']:,}", f"{r['by_reservation']:,}",
                  *(fmt_ms(r[c]) for c in ("mean_ns", "p50_ns", "p99_ns", "max_ns")))
    return t


def _live_path_table(seen: list[dict[str, Any]]) -> Table:
    """Per tenant, as the device profile's live path puts the requests before a client
    (what ``storqos validate`` compares with a replay): requests, IOPS over the run,
    percentiles."""
    t = Table(title="as a client sees them through the profile's live path (what validate compares)")
    for col in ("tenant", "requests", "IOPS", "p50 ms", "p95 ms", "p99 ms"):
        t.add_column(col, justify="left" if col == "tenant" else "right")
    for r in seen:
        t.add_row(f"{r['tenant']} {r['name']}", f"{r['requests']:,}", fmt_number(r["iops"]),
                  *(fmt_ms(r[f"p{q}_ns"]) for q in (50, 95, 99)))
    return t


def register(app: typer.Typer) -> None:
    """Add ``storqos simulate`` to the app."""
    app.command("simulate")(simulate)
