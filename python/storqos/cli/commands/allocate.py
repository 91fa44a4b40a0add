"""``storqos allocate``: fair shares and BAA / DRF / FQ allocations for tiered storage (seed 004)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError


def _iops(x: float) -> str:
    return f"{x:,.1f}"


def allocate_cmd(
    device: Annotated[
        list[str],
        typer.Option("--device", "-d", help="A device and its capacity in IOPS, NAME=IOPS (repeat: hdd=200, ssd=1k)."),
    ],
    client: Annotated[
        list[str],
        typer.Option(
            "--client",
            "-c",
            help="A backlogged client: NAME:hit=RATIO (two devices; fraction on the faster one) or "
            "NAME:DEV=FRACTION,... ; optional ,weight=W (repeat).",
        ),
    ],
    policy: Annotated[
        list[str] | None, typer.Option("--policy", "-p", help="baa | drf | fq (repeat; default all three).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON (for scripts) instead of tables.")] = False,
) -> None:
    """Split the devices' throughput among backlogged clients: fair share, allocation, per-device IOPS and utilisation for BAA, DRF and FQ.

    BAA (bottleneck-aware allocation) gives clients bound on the same device
    allocations proportional to their fair shares, keeps clients on different devices
    envy-free, and maximises the total; DRF equalises dominant shares; FQ equal throughputs.

    Example: [bold]storqos allocate --device hdd=200 --device ssd=1000 --client p:hit=0.75 --client q:hit=0.5 --client r:hit=0.9 --client s:hit=0.95[/bold]
    """
    from storqos.planning.alloc import BAA, POLICIES, allocate, parse_client, parse_device

    devices = [parse_device(d) for d in device]
    clients = [parse_client(c) for c in client]
    res = allocate(devices, clients, policy or POLICIES)
    if json_out:
        emit_json(res.to_dict())
        return
    names = res.device_names
    two_tier = all(c.hit is not None for c in clients)
    for pol in res.totals["policy"].to_list():
        total = res.totals.filter(policy=pol)["total_iops"].item()
        cl = res.clients.filter(policy=pol)
        dv = res.devices.filter(policy=pol)
        t = Table(title=f"{pol.upper()}: {_iops(total)} IOPS in total")
        t.add_column("client")
        if two_tier:
            t.add_column("hit ratio", justify="right")
        t.add_column("bound\non")  # the device that bottlenecks the client
        t.add_column("fair share\n(IOPS)", justify="right")
        t.add_column("allocated\n(IOPS)", justify="right")
        for n in names:
            t.add_column(f"{n}\n(IOPS)", justify="right")
        for r in cl.to_dicts():
            cells = [r["client"]]
            if two_tier:
                cells.append(f"{r['hit_ratio']:g}")
            cells += [r["bottleneck"], _iops(r["fair_share_iops"]), _iops(r["allocation_iops"])]
            cells += [_iops(r[f"{n}_iops"]) for n in names]
            t.add_row(*cells)
        out.print(t)
        d = Table(title=f"{pol.upper()}: devices")
        for col in ("device", "capacity (IOPS)", "load (IOPS)", "utilisation (%)"):
            d.add_column(col, justify="left" if col == "device" else "right")
        if pol == BAA:
            d.add_column("ρ (allocation / fair share)", justify="right")
        for r in dv.to_dicts():
            cells = [r["device"], _iops(r["capacity_iops"]), _iops(r["load_iops"]), f"{100 * r['utilisation']:.1f} %"]
            if pol == BAA:
                cells.append("-" if r["amplification"] is None else f"{r['amplification']:.4f}")
            d.add_row(*cells)
        out.print(d)


def register(app: typer.Typer) -> None:
    """Add ``storqos allocate`` to the app."""
    app.command("allocate")(allocate_cmd)


__all__ = ["InputError", "register"]
