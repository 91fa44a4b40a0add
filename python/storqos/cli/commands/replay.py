"""``storqos replay``: send a trace's requests to live storage, over NBD or to a local
file or block device, and log what it did."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlunsplit

import typer
from rich.table import Table

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError
from storqos.base.units import fmt_ms, fmt_rate, parse_duration
from storqos.base.uri import split_nbd
from storqos.cli.commands.options import AwakeOpt, FormatOpt, JsonOpt, SortOpt, TimeUnitOpt, load_tenants

#: The defaults of the options that only a replay over NBD takes (a local one refuses
#: any other value).
DEFAULT_MAX_OUTSTANDING, DEFAULT_CONNECTIONS, DEFAULT_TIMEOUT, DEFAULT_AWAKE, DEFAULT_OFFSETS = 16384, 1, "60s", "no", "wrap"


def tenant_uris(uri: str, mapping: list[str], tenants: list[int], names: dict[int, str] | None) -> dict[int, str]:
    """Each tenant's NBD URI: ``uri`` unless ``--tenant-map TENANT=EXPORT`` names another
    export (an export name on ``uri``'s server, or a whole URI). TENANT is an id or a
    tenant's name."""
    parts = split_nbd(uri, "URI")
    by_name = {v: k for k, v in (names or {}).items()}
    uris = dict.fromkeys(tenants, uri)
    mapped: dict[int, str] = {}
    for item in mapping:
        key, sep, export = item.partition("=")
        if not sep or not key or not export:
            raise InputError(f"malformed {item!r} (expected TENANT=EXPORT, e.g. 0=web or 1=nbd://host/batch)",
                             "--tenant-map")
        if key.isdigit():
            t = int(key)
        elif key in by_name:
            t = by_name[key]
        else:
            raise InputError(f"{item!r}: no tenant {key!r} in the trace (tenants: "
                             f"{', '.join(str(t) for t in tenants)})", "--tenant-map")
        if t not in uris:
            raise InputError(f"{item!r}: the trace has no tenant {t} (tenants: {', '.join(map(str, tenants))})",
                             "--tenant-map")
        if t in mapped:  # which of the two was meant cannot be told
            raise InputError(f"{item!r}: tenant {t} is mapped already ({mapped[t]!r})", "--tenant-map")
        mapped[t] = item
        if "://" in export:
            split_nbd(export, "--tenant-map")
            uris[t] = export
        else:
            uris[t] = urlunsplit(parts._replace(path="/" + export))
    return uris


def replay(
    trace: Annotated[Path, typer.Argument(help="Trace file (any supported format).", show_default=False)],
    uri: Annotated[str, typer.Argument(help="The storage: an NBD URI, nbd://HOST:PORT/EXPORT (nbds:// with TLS, "
                                            "nbd+unix:///EXPORT?socket=PATH), or a local file or block device "
                                            "(/dev/loop0), read with direct I/O.",
                                       show_default=False)],
    tenant_map: Annotated[
        list[str] | None,
        typer.Option("--tenant-map", "-t", help="Send a tenant to its own export: TENANT=EXPORT (an export name on "
                                                "URI's server, or a whole URI); repeat per tenant. Every tenant "
                                                "has its own connection.")] = None,
    split_by: Annotated[
        str | None, typer.Option(help="Make tenants from a trace field: device, host, process or op.")] = None,
    speed: Annotated[float | None, typer.Option(help="Time scale: 2 replays the trace twice as fast (default 1).",
                                                show_default=False)] = None,
    max_outstanding: Annotated[
        int, typer.Option(help="Most requests in flight at once (all tenants); past it, issues wait.")] = DEFAULT_MAX_OUTSTANDING,
    closed: Annotated[
        int | None, typer.Option(help="Closed loop: keep this many requests in flight per tenant, ignoring "
                                      "the trace's times.")] = None,
    connections: Annotated[
        int, typer.Option(help="Connections per tenant, its requests round robin over them (a gateway bounds "
                               "what one connection has in flight: 64 MiB of requests).")] = DEFAULT_CONNECTIONS,
    offsets: Annotated[
        str, typer.Option(help="Offsets beyond the export: wrap (fold into it) or error.")] = DEFAULT_OFFSETS,
    max_requests: Annotated[int | None, typer.Option(help="Replay only the first N requests.")] = None,
    timeout: Annotated[
        str, typer.Option(help="Give up when the storage has not answered for this long: no NBD handshake, or "
                               "no reply while requests are in flight (e.g. 60s, 5min).")] = DEFAULT_TIMEOUT,
    awake_cpus: AwakeOpt = DEFAULT_AWAKE,
    format: FormatOpt = None,
    time_unit: TimeUnitOpt = None,
    sort: SortOpt = False,
    out_file: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write every request (the columns of `storqos simulate "
                                                      "--out`) to .parquet, .csv or .json.")] = None,
    spread: Annotated[
        list[str] | None,
        typer.Option("--spread", help="Spread every tenant's requests over this gateway too (nbd://HOST:PORT/EXPORT; "
                                      "repeat per gateway): each request goes to its object's gateway (a hash of "
                                      "the tenant and its 4 MiB object, as `storqos simulate --placement hash`), "
                                      "and each tenant's client tells every storqos gateway the service it got at "
                                      "the others (dmClock), so that its reservation and limit hold for its "
                                      "total.")] = None,
    no_dmclock: Annotated[bool, typer.Option("--no-dmclock",
                                             help="With --spread: send plain NBD, without dmClock's reports (which "
                                                  "storqos gateways take through an NBD extension, and other NBD "
                                                  "servers refuse).")] = False,
    writes: Annotated[bool, typer.Option("--writes", help="A local file or device: send the trace's writes too "
                                                          "(they overwrite its data; without it, a trace with "
                                                          "writes is refused).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Replay a trace against live storage, over NBD or to a local file or block device, at the trace's timing.

    Every request is issued at its time in the trace (scaled by --speed), whatever the
    storage does, and its response time is measured from issue to reply. The per-request
    log has the columns of `storqos simulate --out`, so a prediction and a measurement
    read the same way. Offsets wrap into the export; requests above 32 MiB are split.

    At the end it says how closely it kept to the trace's times (a replay that fell
    behind gets a warning) and, on a virtual machine, how much CPU time the host took
    from the machine meanwhile: requests due while the host held a CPU went out late.

    Example: [bold]storqos replay web.trace nbd://127.0.0.1:10809/web --out live.parquet[/bold]

    Example: [bold]storqos replay mix.csv nbd://gw:10809/a --split-by device --tenant-map 1=b --speed 2[/bold]

    A local file or block device is read (and, with --writes, written) with direct
    I/O through io_uring, or blocking threads where the kernel refuses io_uring, each
    tenant from a thread of its own; offsets wrap into it and go down, sizes up, to
    4 KiB.

    Example: [bold]sudo storqos replay reads.trace /dev/loop0 --out local.parquet[/bold]

    Spread over several gateways (--spread), each tenant's requests go to the gateways
    by their objects, as the cluster simulator places them, and its client reports to
    each the service it got at the others: dmClock, so that a tenant's limit holds for
    its total however its requests fall.

    Example: [bold]storqos replay web.trace nbd://gw1:10809/web --spread nbd://gw2:10809/web[/bold]
    """
    from storqos.base.paths import check_table_file, write_table
    from storqos.base.progress import progress_bar
    from storqos.live.cpu_latency import can_keep_awake
    from storqos.live.local_device import is_local_target
    from storqos.live.replay import replay as run
    from storqos.live.replay import warn_behind

    local = is_local_target(uri)
    if spread:
        not_spread = {"--closed": closed is not None, "--connections": connections != DEFAULT_CONNECTIONS,
                      "--awake-cpus": awake_cpus != DEFAULT_AWAKE, "--offsets": offsets != DEFAULT_OFFSETS,
                      "--max-outstanding": max_outstanding != DEFAULT_MAX_OUTSTANDING, "--writes": writes}
        given = [k for k, v in not_spread.items() if v]
        if local:
            raise InputError(f"{uri} is a local file or device: --spread spreads over NBD gateways", "--spread")
        if given:
            raise InputError(f"{', '.join(given)} do not apply to a replay spread over gateways", given[0])
    elif no_dmclock:
        raise InputError("--no-dmclock is for a replay spread over gateways (--spread)", "--no-dmclock")
    if local:
        nbd_only = {"--tenant-map": bool(tenant_map), "--closed": closed is not None,
                    "--connections": connections != DEFAULT_CONNECTIONS, "--awake-cpus": awake_cpus != DEFAULT_AWAKE,
                    "--offsets": offsets != DEFAULT_OFFSETS, "--timeout": timeout != DEFAULT_TIMEOUT,
                    "--max-outstanding": max_outstanding != DEFAULT_MAX_OUTSTANDING}
        given = [k for k, v in nbd_only.items() if v]
        if given:
            raise InputError(f"{uri} is a local file or device: {', '.join(given)} apply over NBD only", given[0])
    elif writes:
        raise InputError("--writes is for a local file or device (over NBD, writes are always sent)", "--writes")
    can_keep_awake(awake_cpus)  # a typo, or `yes` where it cannot, fails before anything starts
    if offsets not in ("wrap", "error"):
        raise InputError(f"unknown value {offsets!r} (wrap or error)", "--offsets")
    if max_requests is not None and max_requests < 1:
        raise InputError(f"must be >= 1, got {max_requests}", "--max-requests")
    if speed is not None and closed is not None:  # a closed loop does not keep to the trace's times
        raise InputError("a closed loop ignores the trace's times: give --speed or --closed, not both", "--speed")
    speed = 1.0 if speed is None else speed
    stall_s = parse_duration(timeout, "--timeout") / 1e9  # > 0 is replay's to check, as --speed
    if out_file is not None:
        check_table_file(out_file, "--out")
    df, names = load_tenants([trace], format, time_unit, sort, split_by)
    if max_requests is not None:
        df = df.head(max_requests)
    tenants = sorted(int(t) for t in df["tenant"].unique())
    spread_res = None
    if spread:
        from storqos.live.spread import replay_spread

        per_gateway = [tenant_uris(u, tenant_map or [], tenants, names) for u in [uri, *spread]]
        uris = per_gateway[0]
        with progress_bar(f"replaying {df.height:,} requests over {len(per_gateway)} gateways", None):
            spread_res = replay_spread(df, per_gateway, speed=speed, dmclock=not no_dmclock, stall_s=stall_s)
        res = spread_res.result
    elif local:
        from storqos.live.local_device import replay_device

        uris = dict.fromkeys(tenants, uri)
        with progress_bar(f"replaying {df.height:,} requests to {uri}", None):
            res = replay_device(df, uri, speed=speed, writes=writes)
    else:
        uris = tenant_uris(uri, tenant_map or [], tenants, names)
        with progress_bar(f"replaying {df.height:,} requests", df.height) as update:
            res = run(df, uris, speed=speed, max_outstanding=max_outstanding, closed=closed, connections=connections,
                      wrap=offsets == "wrap", awake=awake_cpus, stall_s=stall_s, progress=update)
    if out_file is not None:
        write_table(res.requests, out_file)
    warn_behind(res)
    rows = res.tenants().to_dicts()
    if names and all(names.get(t) == str(t) for t in tenants):
        names = None  # the names are just the ids
    summary: dict[str, Any] = {
        "mode": res.mode, "speed": speed, "span_s": res.span_s, "scheduled_span_s": res.scheduled_span_s,
        "schedule": res.schedule(), "wrapped": res.wrapped, "split": res.split,
        "errors": sum(res.errors.values()), "first_error": res.first_error, "cpus_awake": res.cpus_awake,
        "tenants": [{**r, "name": (names or {}).get(int(r["tenant"]), ""), "uri": uris[int(r["tenant"])]}
                    for r in rows],
    }
    if spread_res is not None:
        import numpy as np

        counts = np.bincount(spread_res.server, minlength=1 + len(spread or []))
        summary["gateways"] = [{"uri": u, "requests": int(c),
                                "dmclock": [t for t, v in spread_res.dmclock.items() if k < len(v) and v[k]]}
                               for k, (u, c) in enumerate(zip([uri, *(spread or [])], counts, strict=True))]
    if out_file is not None:
        summary["requests_file"] = str(out_file)
    if json_out:
        emit_json(summary)
        return
    out.print(f"replayed {df.height:,} requests ({res.mode} loop) in {res.span_s:.3f} s"
              + (f", trace time {res.scheduled_span_s:.3f} s at speed {speed:g}" if closed is None else "")
              + ("; CPUs kept awake" if res.cpus_awake else ""))
    t = Table(title="response time per tenant (issue to reply)")
    for col in ("tenant", "requests", "IOPS", "mean ms", "p50 ms", "p95 ms", "p99 ms", "errors"):
        t.add_column(col, justify="left" if col == "tenant" else "right", overflow="fold")
    for r in rows:
        label = str(r["tenant"]) + (f" {names[int(r['tenant'])]}" if names else "")
        t.add_row(label, f"{r['completed']:,}", fmt_rate(r["iops"]).removesuffix(" IOPS"),
                  *(fmt_ms(r[c]) for c in ("mean_ns", "p50_ns", "p95_ns", "p99_ns")), f"{r['errors']:,}")
    out.print(t)
    if spread_res is not None:
        for g in summary["gateways"]:
            took = "took dmClock's reports" if g["dmclock"] else "plain NBD"
            out.print(f"gateway {g['uri']}: {g['requests']:,} requests, {took}")
    sch = res.schedule()
    if sch:
        out.print(f"schedule kept: issue-time error p50 {sch['issue_error_p50_us']:.1f} µs, "
                  f"p99 {sch['issue_error_p99_us']:.1f} µs, max {sch['issue_error_max_us'] / 1e3:.2f} ms; "
                  f"{sch['late']:,} requests more than 1 ms late" + res.host_took())
    if res.wrapped:
        out.print(f"{res.wrapped:,} offsets wrapped into the export")
    if res.split:
        out.print(f"{res.split:,} extra requests from splitting requests above 32 MiB")
    if res.first_error:
        out.print(f"{summary['errors']:,} requests failed; first: {res.first_error}", style="yellow")
    if out_file is not None:
        out.print(f"per-request results: {out_file}")


def register(app: typer.Typer) -> None:
    """Add ``storqos replay`` to the app."""
    app.command("replay")(replay)
