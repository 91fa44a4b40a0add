"""``storqos serve``: the live NBD QoS gateway in front of real files."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError, warn_input
from storqos.base.paths import check_table_file
from storqos.base.units import fmt_duration, fmt_number, fmt_rate, fmt_size, parse_positive_duration, parse_rate
from storqos.live.gateway import DEFAULT_LISTEN, DIRECT_READS, serve, uri
from storqos.live.gateway import check as check_gateway
from storqos.model import policy_options as po

if TYPE_CHECKING:
    from storqos import _core
    from storqos.base.table_stream import TableStream
    from storqos.live.cluster_member import ClusterMember
    from storqos.live.gateway_config import GatewaySettings


def _schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    """Columns of the per-window series (units in the names, as in the simulator's
    series) and of its gauges (polars is imported here, when --out needs it, not for
    every start of the CLI)."""
    import polars as pl

    windows = {"start_s": pl.Float64, "length_s": pl.Float64, "tenant": pl.Int64, "ops": pl.Int64, "bytes": pl.Int64,
               "iops": pl.Float64, "mean_us": pl.Float64, "p50_us": pl.Float64, "p95_us": pl.Float64,
               "p99_us": pl.Float64, "max_us": pl.Float64}
    return windows, {"start_s": pl.Float64, "name": pl.Utf8, "value": pl.Float64}


def _row(row: _core.WindowRow | _core.GaugeRow, schema: dict[str, Any]) -> dict[str, Any]:
    """A row of the per-window series or of its gauges as its table's columns (those of
    :func:`_schemas`, which are the typed row's fields)."""
    return {k: getattr(row, k) for k in schema}


def _ready_line(info: _core.GatewayInfo) -> str:
    n = len(info.exports)
    cap = f", emulated {fmt_rate(info.iops)}" if info.iops else ""
    metrics = f"; metrics at http://{info.metrics}/metrics" if info.metrics else ""
    tls = {"on": ", TLS offered", "require": ", TLS required"}.get(info.tls, "")
    return (f"serving {n} export{'s' if n != 1 else ''} on {_where(info)} "
            f"(policy {info.policy}, depth {info.depth}{cap}{tls}{_ring(info)}){metrics}; Ctrl-C to stop")


def _ring(info: _core.GatewayInfo) -> str:
    """``, direct reads through io_uring`` when the gateway reads so."""
    return ", direct reads through io_uring" if info.direct_reads == "io_uring" else ""


def _where(info: _core.GatewayInfo) -> str:
    """``nbd://127.0.0.1:10809`` or ``the Unix socket /run/nbd.sock``."""
    listen = info.listen
    return f"the Unix socket {listen.removeprefix('unix:')}" if listen.startswith("unix:") else uri(info)


def _tables(stats: _core.GatewayStats) -> tuple[Table, Table]:
    """What each tenant moved, then its response times and errors: two tables that read
    at 80 columns (export names fold onto further lines, figures as every table prints
    them: :func:`~storqos.base.units.fmt_number`)."""
    traffic = Table(title=f"storqos serve: {stats.policy} for {stats.elapsed_s:.1f} s, "
                          f"{stats.connections} connection(s)")
    traffic.add_column("tenant")
    traffic.add_column("exports", overflow="fold")
    for c in ("ops", "reads", "writes", "flushes", "MiB", "IOPS"):
        traffic.add_column(c, justify="right", no_wrap=True)
    latency = Table(title="response time per tenant")
    latency.add_column("tenant")
    for c in ("mean µs", "p50 µs", "p99 µs", "max µs", "errors"):
        latency.add_column(c, justify="right", no_wrap=True)
    for r in stats.tenants:
        traffic.add_row(str(r.tenant), ", ".join(r.exports), f"{r.ops:,}", f"{r.reads:,}",
                        f"{r.writes:,}", f"{r.flushes:,}", fmt_number(r.bytes / 2**20), fmt_number(r.iops))
        latency.add_row(str(r.tenant), *(fmt_number(v) for v in (r.mean_us, r.p50_us, r.p99_us, r.max_us)),
                        f"{r.errors:,}")
    return traffic, latency


@po.with_policy_options("serve", after="policy")
def serve_cmd(
    export: Annotated[
        list[str] | None,
        typer.Option("--export", "-e", help="An export NAME=PATH[:TENANT] backed by an existing file (repeat; tenant defaults to its position). Replaces the config file's exports."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-C", help="Serve what this TOML file describes (exports, tenants with their weights, "
                                            "reservations, limits and SLOs, policy, listen address, depth, iops); "
                                            "flags override it. See docs/gateway.md."),
    ] = None,
    check: Annotated[bool, typer.Option("--check", help="Only check the configuration (the file, the flags, the export "
                                                        "files, the policy, the sockets it would create) and say what "
                                                        "would be served, as the start would, binding nothing.")] = False,
    policy: Annotated[str | None, typer.Option("--policy", "-p", help=po.policy_help("serve") + f" Default {po.DEFAULT_POLICY}.")] = None,
    metrics: Annotated[str | None, typer.Option("--metrics", help="Serve Prometheus metrics at http://HOST:PORT/metrics "
                                                  "(per-tenant requests, bytes, errors, latency histogram, SLO "
                                                  "compliance; queue depth, connections, the policy's gauges).")] = None,
    control: Annotated[Path | None, typer.Option("--control", help="Create a control socket here (mode 0600) for "
                                                   "`storqos ctl`: stats, change a tenant's weight, reservation, "
                                                   "limit or SLO live, drain.")] = None,
    listen: Annotated[str | None, typer.Option(help="HOST:PORT to listen on (port 0 picks a free one; default "
                                                    f"{DEFAULT_LISTEN}), or unix:/PATH for a Unix socket "
                                                    "(clients: nbd+unix:///NAME?socket=/PATH).")] = None,
    tls: Annotated[str | None, typer.Option("--tls", help="off | on (TLS offered, plain clients served too) | require "
                                                           "(plain clients refused). Default: require when a "
                                                           "certificate is given, else off.")] = None,
    tls_cert: Annotated[Path | None, typer.Option("--tls-cert", help="The server's certificate chain, a PEM file.")] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="The server's private key, a PEM file.")] = None,
    tls_client_ca: Annotated[Path | None, typer.Option("--tls-client-ca", help="Ask clients for a certificate signed "
                                                                               "by this CA (PEM) and refuse those "
                                                                               "without one.")] = None,
    depth: Annotated[
        int | None,
        typer.Option(help="I/Os outstanding on the backend at once (also SFQ(D)'s D); default 8, or 1 with --iops "
                          "(the simulator's constant device has one slot: the policy holds the queue)."),
    ] = None,
    iops: Annotated[str | None, typer.Option(help="Emulate a device of this capacity (e.g. 2k) so QoS shows on fast disks.")] = None,
    device_profile: Annotated[
        Path | None, typer.Option("--device-profile", help="The backend's profile from `storqos calibrate`: its cost "
                                                           "model, its parallelism as --depth, its capacity for the "
                                                           "policies that need one.")] = None,
    direct: Annotated[
        bool, typer.Option("--direct", help="Read and write every export's file with O_DIRECT, past this host's page "
                                            "cache (as qemu-nbd --cache=none): clients then see the disk's own times. "
                                            "One export only: direct = true in its export table of the config file.")] = False,
    direct_reads: Annotated[
        str | None, typer.Option("--direct-reads", help="How direct exports' files are read: threads (the default: "
                                                        "the gateway's I/O threads) or io_uring (submitted by its "
                                                        "scheduler without waking a thread, as qemu-nbd --aio=native; "
                                                        "Linux 5.6 or later). Needs a direct export.")] = None,
    duration: Annotated[str | None, typer.Option("--for", help="Stop after this long (e.g. 30s, 5min); default: until Ctrl-C / SIGTERM.")] = None,
    window: Annotated[
        str | None,
        typer.Option(help="Also keep a per-window series (per tenant: ops, IOPS, p50/p95/p99 µs) and the "
                          "policy's gauges, in windows of this length (e.g. 1s): one line per window while "
                          "serving, streamed to --out (memory stays bounded), or all of it in --json."),
    ] = None,
    out_file: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write the per-window series to this file, .parquet, .csv or .json "
                                         "(needs --window); the gauges go beside it as NAME.gauges.SUFFIX."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON (for scripts); the ready line goes to stderr.")] = False,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Join the cluster etcd://HOST:PORT/NAME: each tenant's "
                                                                  "reservation and limit then hold for its total over "
                                                                  "every gateway of the cluster, split by demand every "
                                                                  "500 ms (policy mclock). See docs/cluster.md.")] = None,
    cluster_id: Annotated[str | None, typer.Option("--cluster-id", help="This gateway's name in the cluster (default "
                                                                        "HOST/LISTEN-ADDRESS).")] = None,
    **policy_params: Any,
) -> None:
    """Serve files over NBD through a QoS policy, one tenant per export, until Ctrl-C or --for.

    Clients (qemu-io, qemu-img, nbdcopy, nbd-client) connect to nbd://HOST:PORT/NAME
    (nbds:// with TLS, nbd+unix:///NAME?socket=PATH on a Unix socket).
    All tenants share one scheduler and --depth backend slots; the policy is the same
    code the simulator runs. On exit: ops, MiB, IOPS and latency per tenant. With --config, SIGHUP reloads the file (the policy and the tenants' keys change live).

    Example: [bold]truncate -s 1G a.img b.img; storqos serve --export a=a.img:0 --export b=b.img:1 --policy wf2q --weights 2,1 --iops 2k[/bold]

    then: [bold]qemu-io -f raw nbd://127.0.0.1:10809/a -c 'write -P 0xab 0 64k' -c 'read -P 0xab 0 64k'[/bold]
    """
    from storqos.live.gateway_config import load as load_gateway_config
    from storqos.live.gateway_config import merged, one_of

    cap = parse_rate(iops, "--iops") if iops is not None else None
    dur = None if duration is None else parse_positive_duration(duration, "--for") / 1e9
    window_s = None if window is None else parse_positive_duration(window, "--window") / 1e9
    settings = load_gateway_config(config) if config is not None else None
    if settings is None and not export:
        raise InputError("give at least one export, e.g. --export web=/srv/web.img, or a --config file", "--export")
    flags: dict[str, Any] = {
        "exports": export or None, "policy": policy, "listen": listen, "depth": depth, "iops": cap, "duration_s": dur,
        "window_s": window_s, "metrics": metrics, "control": str(control) if control else None, "policy_params": policy_params,
        "tls": {"mode": tls, "cert": _opt(tls_cert), "key": _opt(tls_key), "client_ca": _opt(tls_client_ca)}}
    if device_profile is not None:
        from storqos.model.device_profile import load_profile

        flags["device_profile"] = load_profile(device_profile)
    if direct_reads is not None:
        one_of(DIRECT_READS, direct_reads, "--direct-reads")
    cfg = _direct_if(merged(settings, **flags), direct, direct_reads)

    def reload() -> dict[str, Any]:
        # SIGHUP: the file again, with the same flags over it (in a cluster, the same one).
        assert config is not None
        again = load_gateway_config(config)
        if member is not None and _cluster_of(again, cluster_flag, cluster_id_flag) != (cluster, cluster_id):
            member.state.conflicts += 1
            raise InputError("[cluster] changed: a gateway joins or leaves a cluster only when it starts", str(config))
        return _direct_if(merged(again, **flags), direct, direct_reads)

    window_s = cfg["window_s"]
    if out_file is not None and window_s is None:
        raise InputError("give --window too: --out writes the per-window series", "--out")
    if check:
        info = check_gateway(cfg)
        for w in info.warnings:
            warn_input(w)
        what = f"{config}: ok" if config is not None else "ok"
        lines = [f"{what}, would serve {len(info.exports)} export(s) on {_where(info)} "
                 f"(policy {info.policy}, depth {info.depth}"
                 f"{', emulated ' + fmt_rate(info.iops) if info.iops else ''}{_ring(info)})"]
        lines += [f"  {e.name}: tenant {e.tenant}, {fmt_size(e.size_bytes)}{_access(e)}, {e.path}"
                  for e in info.exports]
        # Plain lines, written at once: printed one by one through rich, 19,000 exports took 0.6 s more.
        sys.stdout.write("\n".join(lines) + "\n")
        return
    if out_file is not None:
        # Checked before serving: the series of a long session must not be lost at the end.
        check_table_file(out_file, "--out")
        check_table_file(_gauges_file(out_file), "--out")
    cluster_flag, cluster_id_flag = cluster, cluster_id
    cluster, cluster_id = _cluster_of(settings, cluster, cluster_id)
    table = settings.file.background if settings is not None else None
    # The cluster agent and the background job talk to the gateway through its control
    # socket: one in a private directory when the configuration has none.
    private = _private_control(cfg) if table is not None or cluster is not None else None
    job, member = None, None
    try:
        if table is not None:
            from storqos.live.background_job import BackgroundJob, job_settings

            assert config is not None
            job = BackgroundJob(job_settings(table, cfg, config.parent), cfg["control"])
        if cluster is not None:
            member = _join(cluster, cluster_id, cfg)
    except BaseException:
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)
        raise

    def ready(info: _core.GatewayInfo) -> None:
        if member is not None:
            member.start(cfg["control"], info.listen)
        if job is not None:
            job.start(lambda name: uri(info, name))
        stream = sys.stderr if json_out else sys.stdout
        lines = [_ready_line(info)]
        for e in info.exports:
            lines.append(f"  {uri(info, e.name)}  tenant {e.tenant}  {fmt_size(e.size_bytes)}"
                         f"{_access(e).replace(',', ' ')}  {e.path}")
        stream.write("\n".join(lines) + "\n")
        stream.flush()

    # The series is handed over as windows close: printed, streamed to --out, and kept
    # in memory only for --json (which prints it whole at the end).
    streams: tuple[TableStream, TableStream] | None = None
    schemas = _schemas() if out_file is not None or json_out else None
    if out_file is not None:
        from storqos.base.table_stream import TableStream

        assert schemas is not None
        streams = (TableStream(out_file, schemas[0]), TableStream(_gauges_file(out_file), schemas[1]))
    kept: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    counts = [0, 0]

    def on_window(rows: list[_core.WindowRow], gauges: list[_core.GaugeRow]) -> None:
        counts[0] += len(rows)
        counts[1] += len(gauges)
        if schemas is not None:
            row_dicts = [_row(r, schemas[0]) for r in rows]
            gauge_dicts = [_row(g, schemas[1]) for g in gauges]
            if streams is not None:
                streams[0].add(row_dicts)
                streams[1].add(gauge_dicts)
            if json_out:
                kept[0].extend(row_dicts)
                kept[1].extend(gauge_dicts)
        if not json_out:
            # One line per closed window while serving (not with --json: stdout is the JSON).
            for start in sorted({r.start_s for r in rows}):
                parts = [f"tenant {r.tenant}: {fmt_rate(r.iops)}, p50 {fmt_duration(r.p50_us * 1e3)}, "
                         f"p99 {fmt_duration(r.p99_us * 1e3)}" for r in rows if r.start_s == start]
                out.print(Text.assemble((f"{start:9.3f} s", "dim"), "  " + "  │  ".join(parts)), highlight=False)

    try:
        stats = serve(cfg, ready, on_window if window_s is not None else None, reload if config is not None else None)
        for s in streams or ():
            s.close()
    except BaseException:
        for s in streams or ():
            s.abort()
        raise
    finally:
        if job is not None:
            job.stop()
        if member is not None:
            member.stop()
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)
    if json_out:
        doc = json.loads(stats.to_json())
        doc["windows"], doc["gauges"] = kept
        if out_file is not None:
            doc["windows_file"], doc["gauges_file"] = str(out_file), str(_gauges_file(out_file))
        emit_json(doc)
        return
    for t in _tables(stats):
        out.print(t)
    if window_s is not None:
        where = f": {out_file}" if out_file is not None else " (in --json, or --out FILE)"
        n, g = counts
        out.print(f"per-window series: {n:,} row{'s' if n != 1 else ''} of {fmt_duration(window_s * 1e9)} windows with activity, "
                  f"{g:,} gauge sample{'s' if g != 1 else ''}{where}")
    if stats.protocol_errors:
        out.print(f"{stats.protocol_errors} connection(s) closed for protocol errors (see the log above)", style="yellow")


def _cluster_of(settings: GatewaySettings | None, cluster: str | None,
                cluster_id: str | None) -> tuple[str | None, str | None]:
    """The cluster to join and this gateway's id in it, from the flags and the config
    file's [cluster]; a flag naming another cluster than the file is an error (a gateway
    belongs to one cluster: its exports are claimed in one)."""
    table = settings.file.cluster if settings is not None else None
    if table is not None:
        if cluster is not None:
            from storqos.live.etcd import parse_cluster_uri

            mine, theirs = parse_cluster_uri(table.url, "[cluster] url"), parse_cluster_uri(cluster)
            if mine.name != theirs.name:
                raise InputError(f"names cluster {theirs.name!r}, the config file's [cluster] {mine.name!r}: a "
                                 f"gateway belongs to one cluster", "--cluster")
        cluster = cluster or table.url
        cluster_id = cluster_id or table.id
    if cluster_id is not None and cluster is None:
        raise InputError("give --cluster too: the id is this gateway's name in a cluster", "--cluster-id")
    return cluster, cluster_id


def _private_control(cfg: dict[str, Any]) -> str | None:
    """Give ``cfg`` a control socket in a private directory if it has none; that
    directory, to remove at the end, or None."""
    if cfg.get("control") is not None:
        return None
    private = tempfile.mkdtemp(prefix="storqos-gateway-")
    cfg["control"] = str(Path(private) / "control.sock")
    return private


def _join(cluster: str, cluster_id: str | None, cfg: dict[str, Any]) -> ClusterMember:
    """Join cluster ``cluster`` (etcd://HOST:PORT/NAME) before serving ``cfg`` (which has
    a control socket): the member."""
    from storqos.live.cluster_member import ClusterMember, default_member_id
    from storqos.live.etcd import parse_cluster_uri

    member = ClusterMember(parse_cluster_uri(cluster, "--cluster"), cfg, cluster_id or default_member_id(cfg["listen"]))
    member.join()
    return member


def _direct_if(cfg: dict[str, Any], direct: bool, reads: str | None) -> dict[str, Any]:
    """``cfg`` with every export direct (``--direct``) and its direct reads as
    ``--direct-reads`` asks (None: as the file says), else as it is."""
    if direct:
        cfg["exports"] = [{**e, "direct": True} for e in cfg["exports"]]
    if reads is not None:
        cfg["direct_reads"] = reads
    return cfg


def _opt(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _access(export: _core.GatewayExport) -> str:
    """``, read-only, direct, allow 10.0.0.0/8`` for an export that is any of them."""
    parts = (["read-only"] if export.read_only else []) + (["direct"] if export.direct else []) + (
        [f"allow {' '.join(export.allow)}"] if export.allow else [])
    return "".join(f", {p}" for p in parts)


def _gauges_file(series: Path) -> Path:
    """Where the gauges go beside the series file: NAME.gauges.SUFFIX."""
    return series.with_name(f"{series.stem}.gauges{series.suffix}")


def register(app: typer.Typer) -> None:
    """Add ``storqos serve`` to the app."""
    app.command("serve")(serve_cmd)
