"""``storqos admit``: seed 003's admission control for a set of workloads on a storage model."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError


def admit_cmd(
    workload: Annotated[
        list[str],
        typer.Option(
            "--workload",
            "-w",
            help="A workload NAME:IOPS:RT[:SIZE]: demanded rate, p95 response time, request size (repeat).",
        ),
    ],
    device: Annotated[str, typer.Option("--device", "-d", help="Storage model: disk | constant | exponential | array.")] = "disk",
    profile: Annotated[str | None, typer.Option(help="Disk profile (default desktop-7200, the seed's 7,200 RPM disk).")] = None,
    capacity: Annotated[str | None, typer.Option("--capacity", "-c", help="Capacity in IOPS for constant / exponential / array.")] = None,
    weights: Annotated[str | None, typer.Option(help="YFQ weights of the workloads, e.g. 2,1 (default: their IOPS).")] = None,
    duration: Annotated[str, typer.Option(help="Simulated length of each profiling run.")] = "60s",
    seed: Annotated[int, typer.Option(help="Random seed of the profiling runs.")] = 1,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON (for scripts) instead of tables.")] = False,
) -> None:
    """Decide whether the storage can guarantee every workload's demanded response time: drive the mix at the sum of the demanded rates, measure the 95th-percentile response time and admit when every demand is at least 1.2× it.

    Drives the mixed workload at T = Σ IOPS, takes each workload's 95th percentile RT′,
    adds a 20 % margin (RT″ = 1.2·RT′) and admits the set iff every demanded RT ≥ RT″.
    Also profiles the storage's IOPS → p95 curve from T upwards and reports its stable
    area. RT″ (or the demand less 20 % when higher) is the FCLB controller's reference.

    Example: [bold]storqos admit --workload w1:40:35ms --workload w2:20:38ms --device disk[/bold]
    """
    from storqos.model.fclb.admission import admit

    w = None
    if weights is not None:
        try:
            w = [float(x) for x in weights.replace(":", ",").split(",") if x.strip()]
        except ValueError:
            raise InputError(f"malformed weights {weights!r} (expected e.g. 2,1)", "--weights") from None
        if len(w) != len(workload) or any(x <= 0 for x in w):
            raise InputError(f"give one weight > 0 per workload ({len(workload)}), got {weights!r}", "--weights")
    rep = admit(workload, device=device, profile=profile, capacity=capacity, weights=w, duration=duration, seed=seed)
    if json_out:
        emit_json(rep.to_dict())
        return
    verdict = ("ADMITTED", "green") if rep.admitted else ("REJECTED", "red")
    t = Table(title=Text.assemble(f"T = {rep.target_iops:,.1f} IOPS (achieved {rep.achieved_iops:,.1f} IOPS): ", verdict))
    for col in ("workload", "IOPS", "demanded RT (ms)", "RT′ p95 (ms)", "RT″ = 1.2·RT′ (ms)", "reference (ms)", "admitted"):
        t.add_column(col, justify="left" if col == "workload" else "right")
    for r in rep.table.to_dicts():
        t.add_row(
            r["name"], f"{r['iops']:,.1f}", f"{r['rt_ms']:.2f}", f"{r['rt_measured_ms']:.2f}",
            f"{r['rt_target_ms']:.2f}", f"{r['reference_ms']:.2f}", "yes" if r["admitted"] else "no",
        )
    out.print(t)
    c = Table(title="storage profile (mix at each rate)")
    for col in ("offered (IOPS)", "achieved (IOPS)", "p95 (ms)", "mean (ms)"):
        c.add_column(col, justify="right")
    for r in rep.curve.to_dicts():
        c.add_row(f"{r['offered_iops']:,.1f}", f"{r['achieved_iops']:,.1f}", f"{r['p95_ms']:.2f}", f"{r['mean_ms']:.2f}")
    out.print(c)
    limit = rep.stable_limit_iops
    out.print(f"stable area ends at {limit:,.1f} IOPS" if limit is not None else "no stable area in the profiled range")


def register(app: typer.Typer) -> None:
    """Add ``storqos admit`` to the app."""
    app.command("admit")(admit_cmd)


__all__ = ["InputError", "register"]
