"""``storqos check``: a model of a real QoS system (QEMU's throttling, nbdkit's rate
filter, Linux's blk-throttle and BFQ) checked against that system on this machine,
predicted beside measured."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError
from storqos.base.units import fmt_ms, parse_duration
from storqos.cli.commands.options import FormatOpt, JsonOpt, SortOpt, TimeUnitOpt, load_tenants
from storqos.model import policy_options as po
from storqos.model import registry

if TYPE_CHECKING:
    import polars as pl

#: The systems ``storqos check`` starts, and how.
LIVE_TARGETS = ("qemu", "nbdkit", "cgroup")
#: The emulated device's latency where the system runs over one.
DEFAULT_LATENCY = "1ms"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f}%"


def table(title: str, rows: pl.DataFrame) -> Table:
    """Per tenant: IOPS predicted and its error live, p50 and p99 predicted and their
    errors, and the demerit, in 80 columns."""
    t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False)
    for col in ("tenant", "IOPS", "Δ", "p50 ms", "Δ", "p99 ms", "Δ", "demerit ms"):
        t.add_column(col, justify="left" if col == "tenant" else "right", overflow="fold")
    for row in rows.to_dicts():
        t.add_row(row["name"], f"{row['iops_pred']:,.1f}", _pct(row["iops_err"]),
                  fmt_ms(row["p50_ns_pred"]), _pct(row["p50_err"]), fmt_ms(row["p99_ns_pred"]), _pct(row["p99_err"]),
                  fmt_ms(row["demerit_ns"]))
    return t


def starter(target: str, latency_ns: int, *, kind: str | None = None) -> Any:
    """What starts ``target`` for a spec and a number of tenants (:data:`storqos.live.stacks.check.Starter`);
    ``latency_ns`` is the emulated device's (not for ``cgroup``, which runs on a loop
    device; ``kind``: the model's core kind, whose kernel parts ``cgroup`` checks for)."""
    if target == "qemu":
        from storqos.live.stacks.qemu_daemon import QemuDaemon, require

        require()
        return functools.partial(QemuDaemon, latency_ns=latency_ns)
    if target == "nbdkit":
        from storqos.live.stacks.nbdkit_server import NbdkitServers
        from storqos.live.stacks.nbdkit_server import require as need_nbdkit

        need_nbdkit()
        return functools.partial(NbdkitServers, latency_ns=latency_ns)
    if target == "cgroup":
        from storqos.live.stacks.cgroup import CgroupDevice
        from storqos.live.stacks.cgroup import require as need_cgroup

        need_cgroup(kind=kind)
        return CgroupDevice
    raise InputError(f"unknown system {target!r} (known: {', '.join(LIVE_TARGETS)})", "TARGET")


@po.with_policy_options("simulate", after="latency")
def check(
    target: Annotated[str, typer.Argument(help=f"The system: {' or '.join(LIVE_TARGETS)}.", show_default=False)],
    traces: Annotated[list[Path], typer.Argument(help="Trace files: one tenant each, in the order given.",
                                                 show_default=False)],
    policy: Annotated[str | None, typer.Option("--policy", "-p", help="The model of the system (default: the "
                                                                      "system's one).", show_default=False)] = None,
    latency: Annotated[str | None, typer.Option(help="The emulated device's latency per request, whatever is in "
                                                     f"flight (default {DEFAULT_LATENCY}; nbdkit: whole milliseconds; "
                                                     "cgroup: not taken, the loop device has its own).",
                                                show_default=False)] = None,
    max_requests: Annotated[int | None, typer.Option(help="Check only the first N requests.")] = None,
    format: FormatOpt = None,
    time_unit: TimeUnitOpt = None,
    sort: SortOpt = False,
    json_out: JsonOpt = False,
    **policy_params: Any,
) -> None:
    """Check a model of a real QoS system against the system itself, on this machine.

    The trace is simulated through the model (its settings are the policy options, as
    `storqos simulate` takes them), then replayed live through the real system started
    here in front of an emulated device of fixed latency: QEMU's qemu-storage-daemon
    with throttle groups, one NBD export per tenant, or one nbdkit with its rate filter
    per tenant. For cgroup (as root, with the cgroup v1 blkio controller), a loop device
    in memory with direct I/O, one blkio cgroup per tenant with its throttle limits or
    BFQ weight, each tenant's requests issued from inside its cgroup. Per tenant: IOPS,
    p50 and p99 predicted, each one's difference live (Δ = live / predicted − 1), and the demerit (the RMS horizontal distance between
    the predicted and the live response-time distributions).

    Example: [bold]storqos check qemu web.trace batch.trace --iops 200,100 --iops-burst 400,none[/bold]

    Example: [bold]storqos check nbdkit web.trace --bps 2MiB/s --latency 2ms[/bold]

    Example: [bold]sudo storqos check cgroup web.trace batch.trace --policy bfq --weights 300,100[/bold]
    """
    from storqos.live.stacks.check import check as run

    key = target.strip().lower()
    if key not in LIVE_TARGETS:
        raise InputError(f"unknown system {target!r} (known: {', '.join(LIVE_TARGETS)})", "TARGET")
    models = registry.for_target(key)
    name = models[0].name if policy is None else policy
    found = registry.lookup(name)
    if found is None or found not in models:
        raise InputError(f"{name!r} is no model of {key} (its models: {', '.join(p.name for p in models)})",
                         "--policy")
    if key == "cgroup" and latency is not None:
        raise InputError("the cgroup check runs on a loop device, whose latency is its own: drop --latency",
                         "--latency")
    latency_ns = parse_duration(latency or DEFAULT_LATENCY, "--latency", default_unit="ms")
    if latency_ns <= 0:
        raise InputError(f"must be > 0, got {latency!r}", "--latency")
    if max_requests is not None and max_requests < 1:
        raise InputError(f"must be >= 1, got {max_requests}", "--max-requests")
    start = starter(key, latency_ns, kind=found.kind)
    df, names = load_tenants(traces, format, time_unit, sort, None)
    if max_requests is not None:
        df = df.head(max_requests)
    params = {k: v for k, v in policy_params.items() if v is not None}
    tenants = int(df["tenant"].max() or 0) + 1 if df.height else 0  # type: ignore[arg-type]
    labels = [(names or {}).get(t, str(t)) for t in range(tenants)]
    res = run(df, found.name, params, start, names=labels)
    if json_out:
        emit_json({"target": key, "policy": res.policy, "spec": res.spec, "service_ns": res.service_ns,
                   "tenants": res.tenants.to_dicts()})
        return
    out.print(table(f"{found.name} on {key}, service {fmt_ms(res.service_ns)} ms: predicted, Δ live",
                     res.tenants))


def register(app: typer.Typer) -> None:
    """Add ``storqos check`` to the app."""
    app.command("check")(check)
