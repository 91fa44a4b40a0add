"""``storqos ctl``: talk to a running gateway through its control socket (``storqos
serve --control PATH``): show its statistics, change a tenant's weight, reservation,
limit or SLO, or the whole policy, live, add or remove an export, follow its background
job, and drain it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError
from storqos.base.units import fmt_duration, fmt_number, fmt_span, parse_duration, parse_rate
from storqos.live.control_client import check_in_range, command
from storqos.model import policy_options as po

SocketOpt = Annotated[Path, typer.Option("--socket", "-s", help="The gateway's control socket (serve --control PATH).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the gateway's reply as JSON (for scripts).")]

ctl = typer.Typer(help="Talk to a running gateway (storqos serve --control PATH): stats, live changes, its "
                       "background job, drain.",
                  no_args_is_help=True)


def _tenant(value: str) -> str | int:
    return int(value) if value.isdigit() else value


def _answer(reply: dict[str, Any], json_out: bool, line: Callable[[dict[str, Any]], str]) -> None:
    """The gateway's reply: as JSON, or as the one line ``line`` makes of it."""
    if json_out:
        emit_json(reply)
    else:
        out.print(line(reply), markup=False, highlight=False)


def _value(key: str, v: Any) -> str:
    """One parameter's value in words: a per-tenant list as ``2:1`` (``none`` for an
    absent entry), times and rates with their unit (``10ms``, ``160iops``), a tenant's
    SLO as ``--slo`` writes it (``160iops@400ms``), a nested policy as its words."""
    if isinstance(v, dict):
        return policy_words(v) if "kind" in v else "@".join(_value(k, x) for k, x in v.items())
    if isinstance(v, list):
        return ":".join(_value(key, x) for x in v)
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int, float)):
        if key.endswith("_ns"):
            return fmt_duration(v).replace(" ", "")
        return f"{v:g}" + ("iops" if key.endswith("_iops") else "")
    return str(v)


def policy_words(spec: Any) -> str:
    """A policy as the gateway's stats give it (the simulator's spec) in words, named as
    ``--policy`` names it, with its parameters: ``fcfs``, ``wf2q weights 2:1``,
    ``mclock reservations 100:0 weights 1:2 limits none:500 at-limit wait``."""
    from storqos.model.specs import canonical_policy

    if not isinstance(spec, dict) or "kind" not in spec:
        return "unknown" if spec is None else str(spec)
    kind = str(spec["kind"])
    try:
        name = canonical_policy(kind)
    except InputError:  # a kind the gateway has and --policy does not name (baa)
        name = kind
    params = [f"{k.removesuffix('_ns').removesuffix('_iops').replace('_', '-')} {_value(k, v)}"
              for k, v in spec.items() if k != "kind"]
    return " ".join([name, *params])


@ctl.command("stats")
def stats_cmd(socket: SocketOpt, json_out: JsonOpt = False) -> None:
    """Per-tenant operations, IOPS and latency so far, the policy, the connections."""
    r = command(socket, {"cmd": "stats"})
    if json_out:
        emit_json(r)
        return
    names = {int(k): v for k, v in (r.get("names") or {}).items()}
    t = Table(title=f"{socket}: {r['elapsed_s']:.1f} s, {r['open_connections']} connection(s) open"
                    + (", draining" if r.get("draining") else ""))
    t.add_column("tenant", overflow="fold")  # "id name": a long name folds rather than ends in "…"
    for col in ("ops", "IOPS", "p50 µs", "p99 µs", "errors"):
        t.add_column(col, justify="right", no_wrap=True)
    for x in r.get("tenants") or []:
        name = names.get(int(x["tenant"]))
        t.add_row(f"{x['tenant']} {name}" if name else str(x["tenant"]), f"{x['ops']:,}", fmt_number(x["iops"]),
                  fmt_number(x["p50_us"]), fmt_number(x["p99_us"]), f"{x['errors']:,}")
    out.print(t)
    out.print(f"policy: {policy_words(r.get('policy'))}", markup=False, highlight=False)
    b = r.get("background")
    if b is not None:
        out.print(f"background job: {_job_state(b)}, {b['done']:,} requests, {b['progress']:.0%} of this "
                  "pass (storqos ctl background)", markup=False, highlight=False)


def _job_state(b: dict[str, Any]) -> str:
    """A background job's state in words: ``running``, ``warming the fast tier``, ``stopped``."""
    return "running" if b["running"] else "stopped, warming the fast tier" if b["warming"] else "stopped"


def background_lines(b: dict[str, Any]) -> list[str]:
    """A ``[background]`` job's report in words: its state and the users', its day
    model, the next change the model predicts, its progress."""
    interval, src, days, k = float(b["interval_s"]), str(b["model_source"]), int(b["model_days"]), int(b["model_classes"])
    if not b["model"]:
        model = "none yet: the job follows the detected state alone (feedback)"
    elif src == "learned":
        model = f"learned from {days} day(s) of the users' counts, {k} day class(es)"
    else:
        model = f"loaded from {src}, {k} day class(es)"
    thr = float(b["threshold"])
    model += (f"; High above {thr:.3g} requests per interval" if thr >= 0
              else "; no High/Low threshold yet (an hour of counts gives one)")
    n, lead = float(b["next_change_min"]), float(b["lead"])
    if n >= 0:
        ahead = f" ({fmt_span(n * interval * 1e9)} from now)" if interval > 0 else ""
        change = f"High predicted in {n:,.0f} interval(s){ahead}; the job stops {lead:,.0f} before it"
    else:
        change = "none predicted" + (" (the users are High; the job waits for Low)" if b["high"] else "")
    progress = (f"{b['done']:,} requests read, {float(b['progress']):.0%} of the current pass, "
                f"{int(b['passes']):,} pass(es) done; warm-up {b['warmed']:,} requests")
    clock = f"{int(b['intervals']):,} interval(s) of {fmt_span(interval * 1e9)} counted" if interval > 0 else ""
    return [f"job: {_job_state(b)}; the users: {'High' if b['high'] else 'Low'} (detected)",
            f"day model: {model}", f"next change: {change}", f"progress: {progress}",
            *([f"calendar: {clock}"] if clock else [])]


@ctl.command("background")
def background_cmd(socket: SocketOpt, json_out: JsonOpt = False) -> None:
    """The gateway's \\[background] job: running or not, its day model, the next change the model predicts, its progress."""
    b = command(socket, {"cmd": "stats"}).get("background")
    if json_out:
        emit_json({"background": b})
        return
    if b is None:
        raise InputError("this gateway runs no [background] job, or it has not reported yet", str(socket))
    for line in background_lines(b):
        out.print(line, markup=False, highlight=False)


@ctl.command("set")
def set_cmd(
    tenant: Annotated[str, typer.Argument(help="The tenant: its name in the config file, or its id.", show_default=False)],
    socket: Annotated[Path | None, typer.Option("--socket", "-s", help="The gateway's control socket (serve --control "
                                                                        "PATH).")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Change the tenant in every gateway of this cluster, "
                                                                  "etcd://HOST:PORT/NAME, at once (instead of --socket): "
                                                                  "its reservation and limit are then its total.")] = None,
    weight: Annotated[float | None, typer.Option(help="Its weight (wf2q, sfq, yfq, mclock), from 0.001 to 1e9.")] = None,
    reservation: Annotated[str | None, typer.Option(help="Its reservation in IOPS (mclock), e.g. 300: 0 (none) or "
                                                         "from 0.001 to 1e9.")] = None,
    limit: Annotated[str | None, typer.Option(help="Its limit in IOPS (mclock), e.g. 1k: from 0.001 to 1e9.")] = None,
    slo: Annotated[str | None, typer.Option(help="Its latency target, e.g. 10ms (the SLO metrics).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Change a tenant's weight, reservation, limit or SLO in the running gateway.

    The change is checked first (a wrong one leaves the gateway as it was); then dispatch pauses until the backend is empty and the new policy takes the queued requests: none is lost.

    Example: [bold]storqos ctl set batch --weight 3 --socket /run/storqos/gw.sock[/bold]

    In a cluster (storqos serve --cluster), the change goes to etcd and every gateway takes its share of it within a second:

    Example: [bold]storqos ctl set web --reservation 500 --limit 2k --cluster etcd://10.0.0.5:2379/prod[/bold]
    """
    if (socket is None) == (cluster is None):
        raise InputError("give the gateway's --socket, or the --cluster whose gateways all change", "--socket")
    cmd: dict[str, Any] = {"cmd": "set", "tenant": _tenant(tenant)}
    if weight is not None:
        if not (math.isfinite(weight) and weight > 0):
            raise InputError(f"must be a finite number > 0, got {weight:g}", "--weight")
        cmd["weight"] = check_in_range(weight, "weight", "--weight")
    if reservation is not None:
        rate = 0.0 if reservation.strip() == "0" else parse_rate(reservation, "--reservation")
        cmd["reservation"] = check_in_range(rate, "reservation", "--reservation")
    if limit is not None:
        cmd["limit"] = check_in_range(parse_rate(limit, "--limit"), "limit", "--limit")
    if slo is not None:
        cmd["slo_s"] = parse_duration(slo, "--slo", default_unit="ms") / 1e9
    if cluster is not None:
        if slo is not None:
            raise InputError("a latency target is each gateway's: set it with --socket", "--slo")
        _set_in_cluster(cluster, tenant, cmd, json_out)
        return
    assert socket is not None
    r = command(socket, cmd)
    if json_out:
        emit_json(r)
        return
    what = ", ".join(r["changed"])
    out.print(f"tenant {r['tenant']}: {what} changed" + (f"; policy now {r['policy']}" if r.get("policy") else ""),
              markup=False, highlight=False)


@ctl.command("policy")
def policy_cmd(
    socket: SocketOpt,
    policy: po.PolicyOpt = po.DEFAULT_POLICY,
    weights: po.WeightsOpt = None,
    reservations: po.ReservationsOpt = None,
    limits: po.LimitsOpt = None,
    at_limit: po.AtLimitOpt = None,
    iops: Annotated[str | None, typer.Option(help="The emulated capacity, for rtt-fq's total capacity.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Replace the running gateway's whole policy (the same options as storqos simulate)."""
    from storqos.model.specs import check_tenant_lists, policy_spec

    spec = policy_spec(policy, weights=weights, reservations=reservations, limits=limits, at_limit=at_limit,
                       total_capacity=iops)
    # One entry per tenant the gateway serves, as `serve` checks its own (a list of another
    # length was taken, padded or cut without a word).
    st = command(socket, {"cmd": "stats"})
    ids = [int(t["tenant"]) for t in st.get("tenants") or []] + [int(k) for k in st.get("names") or {}]
    if ids:
        check_tenant_lists(spec, max(ids) + 1)
    _answer(command(socket, {"cmd": "policy", "spec": spec}), json_out, lambda r: f"policy now {r['policy']}")


@ctl.command("add-export")
def add_export_cmd(
    name: Annotated[str, typer.Argument(help="The NBD export name clients will open.", show_default=False)],
    path: Annotated[Path, typer.Argument(help="Its backing file (an existing regular file).", show_default=False)],
    socket: SocketOpt,
    tenant: Annotated[str, typer.Option(help="Its tenant: a name from the config file, or an id.")] = "0",
    read_only: Annotated[bool, typer.Option("--read-only", help="Serve it read-only.")] = False,
    allow: Annotated[list[str] | None, typer.Option(help="A client address or network allowed (repeat); "
                                                         "default: any.")] = None,
    direct: Annotated[bool, typer.Option("--direct", help="Read and write its file with O_DIRECT, past the "
                                                          "host's page cache.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Serve a new export from now on (the file is checked first; the gateway is unchanged if it does not open).

    Example: [bold]storqos ctl add-export scratch /srv/scratch.img --tenant batch --socket /run/storqos/gw.sock[/bold]
    """
    from storqos.live.gateway import check_export_file

    check_export_file(path.resolve(), name, "PATH")
    export: dict[str, Any] = {"name": name, "path": str(path.resolve()), "tenant": _tenant(tenant),
                              "read_only": read_only, "allow": list(allow or []), "direct": direct}
    _answer(command(socket, {"cmd": "add-export", "export": export}), json_out,
            lambda r: f"export {r['export']} served (tenant {r['tenant']})")


@ctl.command("remove-export")
def remove_export_cmd(
    name: Annotated[str, typer.Argument(help="The export to offer no more.", show_default=False)],
    socket: SocketOpt,
    json_out: JsonOpt = False,
) -> None:
    """Offer an export no more: new clients are refused; the ones connected keep it until they close."""
    _answer(command(socket, {"cmd": "remove-export", "name": name}), json_out,
            lambda r: f"export {r['export']} removed; {r['open_connections']} connection(s) still use it")


def _set_in_cluster(cluster: str, tenant: str, cmd: dict[str, Any], json_out: bool) -> None:
    """Write tenant ``tenant``'s changed promises to the cluster's etcd."""
    from storqos.live.cluster_member import Promise
    from storqos.live.etcd import Etcd, parse_cluster_uri

    uri = parse_cluster_uri(cluster, "--cluster")
    etcd = Etcd(uri.endpoint)
    key = f"{uri.prefix}tenants/{tenant}"
    text = etcd.get(key)
    p = Promise() if text is None else Promise.parse(text, f"{uri}: tenant {tenant}")
    changed = [k for k in ("weight", "reservation", "limit") if k in cmd]
    if not changed:
        raise InputError("give --weight, --reservation or --limit", "--cluster")
    for k in changed:
        setattr(p, k, cmd[k])
    etcd.put(key, p.check(f"tenant {tenant}").json())
    if json_out:
        emit_json({"ok": True, "cluster": str(uri), "tenant": tenant, "changed": changed,
                   "promises": {"reservation": p.reservation, "limit": p.limit, "weight": p.weight}})
        return
    limit = "none" if p.limit is None else f"{p.limit:g} IOPS"
    out.print(f"cluster {uri.name}: tenant {tenant} now reservation {p.reservation:g} IOPS, limit {limit}, weight "
              f"{p.weight:g} over all its gateways", markup=False, highlight=False)


@ctl.command("cluster")
def cluster_cmd(
    cluster: Annotated[str, typer.Argument(help="The cluster, etcd://HOST:PORT/NAME.", show_default=False)],
    json_out: JsonOpt = False,
) -> None:
    """A cluster's live gateways (their address, tenants and last window's demand) and its tenants' total promises, as etcd holds them.

    Example: [bold]storqos ctl cluster etcd://10.0.0.5:2379/prod[/bold]
    """
    from storqos.live.cluster_member import Promise
    from storqos.live.etcd import Etcd, parse_cluster_uri

    uri = parse_cluster_uri(cluster, "cluster")
    etcd = Etcd(uri.endpoint)
    members = {}
    for m, text in etcd.prefix(uri.prefix + "members/").items():
        try:
            members[m] = json.loads(text)
        except ValueError:
            members[m] = {}
    promises = {t: Promise.parse(text, f"{uri}: tenant {t}") for t, text in etcd.prefix(uri.prefix + "tenants/").items()}
    if json_out:
        emit_json({"cluster": str(uri), "members": members,
                   "tenants": {t: {"reservation": p.reservation, "limit": p.limit, "weight": p.weight}
                               for t, p in promises.items()}})
        return
    g = Table(title=f"cluster {uri.name}: {len(members)} gateway(s)")
    for c in ("gateway", "address", "tenants: demand per window"):
        g.add_column(c, overflow="fold")
    for m, rec in sorted(members.items()):
        demand = rec.get("demand", {})
        g.add_row(m, str(rec.get("listen", "")), ", ".join(f"{t}: {demand.get(t, 0):g}" for t in rec.get("tenants", [])))
    t = Table(title="tenants' promises over all their gateways")
    t.add_column("tenant", overflow="fold")
    for c in ("reservation IOPS", "limit IOPS", "weight"):
        t.add_column(c, justify="right", no_wrap=True)
    for name, p in sorted(promises.items()):
        t.add_row(name, f"{p.reservation:g}", "none" if p.limit is None else f"{p.limit:g}", f"{p.weight:g}")
    out.print(g)
    out.print(t)


@ctl.command("drain")
def drain_cmd(socket: SocketOpt, json_out: JsonOpt = False) -> None:
    """Take no new connection; the gateway stops (with its statistics) once the open ones have closed."""
    _answer(command(socket, {"cmd": "drain"}), json_out,
            lambda r: f"draining: {r['open_connections']} connection(s) still open")


def register(app: typer.Typer) -> None:
    """Add ``storqos ctl`` to the app."""
    app.add_typer(ctl, name="ctl")
