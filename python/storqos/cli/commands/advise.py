"""``storqos advise``: the cheapest policy and capacity that keep every tenant's SLO,
found and proven by simulation (:mod:`storqos.planning.advise`)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from storqos.base.console import emit_json, err, out
from storqos.base.errors import InputError
from storqos.base.units import fmt_ms as _ms  # the ms columns as every table prints them, report.html's too


def _margin(m: float | None) -> str:
    if m is None or not math.isfinite(m):
        return "–"
    return f"{100 * m:+.0f} %" if abs(m) >= 0.1 else f"{100 * m:+.1f} %"


def _robust(ns: float | None, margin: float | None) -> str:
    return _ms(ns) + ("" if margin is None else (" ✓" if margin >= 0 else " ✗"))


def advise_cmd(
    file: Annotated[Path, typer.Argument(help="Advise file (TOML): tenants with their SLOs and the device family.",
                                         show_default=False)],
    policy: Annotated[str | None, typer.Option(
        "--policy", "-p", help="Policies to compare, comma-separated (default: fcfs, wf2q, mclock, sarc+avatar, "
        "miser, fclb; also edf, sfq, yfq).")] = None,
    max_capacity: Annotated[str | None, typer.Option(
        "--max-capacity", help="The most capacity the search may try, in IOPS (default: 100 × the tenants' mean "
        "load).")] = None,
    out_dir: Annotated[Path | None, typer.Option(
        "--out", "-o", help="Write advice.json, advice.parquet and report.html (the CDFs) into this directory.")] = None,
    dask: Annotated[str | None, typer.Option(
        "--dask", help="Search on a Dask cluster: tcp://HOST:8786, or local:N for a LocalCluster of N workers.")] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", "-w", help="Local processes, one policy's search each (default 2; 1 = in this process).")] = None,
    headroom: Annotated[str, typer.Option(
        "--headroom", help="Extra load every answer must also survive: a capacity counts only if every SLO still "
        "holds with every tenant's arrival rate this much higher (the same requests arriving faster); 0 turns it "
        "off.")] = "10%",
    target: Annotated[str | None, typer.Option(
        "--target", help="Advise the QoS of a system you run instead of storqos' policies: qemu, libvirt, cgroup, "
        "nbdkit, spdk, ceph or rbd; its model's settings are searched and the cheapest answer is printed in the "
        "system's own syntax (docs/stacks.md).", show_default=False)] = None,
    check_live: Annotated[bool, typer.Option(
        "--check-live", help="With --target qemu, libvirt, nbdkit or cgroup: run the answer on the real system "
        "here, in front of an emulated device of 1 ms latency, and show it measured beside the model "
        "(storqos check).")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the advice as JSON (for scripts) instead of tables.")] = False,
) -> None:
    """Find the least capacity at which each policy keeps every tenant's SLO, rank the policies, and prove it by simulation.

    The file lists the tenants as an experiment file does ([bold]\\[\\[trace]][/bold] with an optional split, [bold]\\[\\[tenant]][/bold] with a trace or a generator), each with an SLO such as slo = "p99<=10ms" (99 % of its requests finish within 10 ms of arriving), an optional reservation and limit (IOPS); and a \\[device] family whose capacity advise finds: constant, exponential, array (servers = N), disk (N striped disk models), tiered, or profile (path = a device profile from storqos calibrate, scaled: the answer is also a multiple of the measured device). Each policy's parameters come from the SLOs (weights, reservations, SARC+AVATAR and FCLB targets, Miser's Cmin from the planner). The answer holds with headroom: every SLO holds at the capacity shown both at the trace's load and at 10 % more (--headroom), and some SLO fails at 0.98 × it; the last column is each tenant at the extra load. A policy that meets the SLOs at no capacity the search allows is "never", with the reason. docs/advise.md explains the method.

    Example: [bold]storqos advise examples/advise/advise.toml --out out/advise[/bold]
    """
    from storqos.base.paths import check_output_dir
    from storqos.experiments.sweep import backend_from_flags
    from storqos.planning.advise import (
        DISPLAY,
        PROOF_FACTOR,
        TOLERANCE,
        advise,
        load_problem,
        parse_headroom,
        parse_policies,
        reason,
        write_outputs,
    )
    from storqos.planning.advise.problem import headroom_text

    backend = backend_from_flags(dask, workers, "local processes")
    backend = "serial" if backend == "local" and workers == 1 else backend
    if out_dir is not None:
        check_output_dir(out_dir, "--out")
    if target is not None:
        from storqos.model import registry

        if policy is not None:
            raise InputError("give --target or --policy, not both (a target's models are its policies)", "--target")
        models = registry.for_target(target)
        if not models:
            raise InputError(f"unknown system {target!r} (known: {', '.join(registry.targets())})", "--target")
        policy = ",".join(m.name for m in models)
    live_target = None
    if check_live:
        from storqos.cli.commands.check import LIVE_TARGETS, starter

        if target is None:
            raise InputError("--check-live runs a target's answer: give --target too", "--check-live")
        live_target = "qemu" if target == "libvirt" else target
        if live_target not in LIVE_TARGETS:
            raise InputError(f"{target} cannot be run here (these can: qemu, libvirt, "
                             f"{', '.join(t for t in LIVE_TARGETS if t != 'qemu')})", "--check-live")
        start = starter(live_target, 1_000_000)  # says what to install before the search
    kinds = parse_policies(policy)
    h = parse_headroom(headroom)
    problem = load_problem(file, max_capacity=max_capacity, headroom=h)
    show = sys.stderr.isatty() and not json_out
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True, disable=not show) as progress:
        task = progress.add_task(f"{problem.name}: searching {len(kinds)} policies on {backend}", total=len(kinds))
        advice = advise(problem, kinds, backend=backend, workers=workers, on_done=lambda _i: progress.advance(task))
    files = write_outputs(advice, out_dir) if out_dir is not None else {}
    pasted = _target_settings(advice, target) if target is not None else None
    checked = None
    if live_target is not None and pasted is not None and pasted["spec"] is not None:
        from storqos.live.stacks.check import check

        names = [t.name for t in problem.tenants]
        checked = check(problem.trace, pasted["spec"], {}, start, names=names)
    if json_out:
        emit_json({**advice.summary(), "files": files, **({"settings": pasted} if pasted is not None else {}),
                   **({"check_live": checked.tenants.to_dicts()} if checked is not None else {})})
        return
    fam = problem.family
    more = headroom_text(problem.headroom)
    if problem.headroom > 0:
        held = (f"capacity: the least at which every SLO holds at the trace's load and at {more.removeprefix('+')} "
                f"more (--headroom), to within {100 * TOLERANCE:g} %; last column: achieved at {more} load")
    else:
        held = f"capacity: the least at which every SLO holds at the trace's load (no headroom), to within {100 * TOLERANCE:g} %"
    caption = f"{held}; achieved: the SLO's percentile, arrival to completion; margin: 1 − achieved / bound"
    if fam.measured is not None:
        caption += f"; ×: the capacity over the measured device's {fam.measured.capacity_iops:,.0f} IOPS"
    room = f" with {more.removeprefix('+')} headroom" if problem.headroom > 0 else ""
    t = Table(title=f"{problem.name}: least capacity per policy{room}, cheapest first ({fam.describe()})",
              box=box.SIMPLE_HEAD, caption=caption, padding=(0, 1))
    unit = "disks" if fam.integer else "IOPS"
    cols = ["policy", unit, "tenant", "SLO", "achieved ms", "margin"] + ([f"{more} ms"] if problem.headroom > 0 else [])
    for col in cols:
        t.add_column(col, justify="left" if col in ("policy", "tenant", "SLO") else "right", no_wrap=col == "policy")
    for r in advice.ranked:
        value = f"{r.capacity:,.0f}"
        cap = [{"ok": value, "any": f"≤ {value}", "never": "never"}[r.status]]
        multiple = fam.multiple(r.capacity)
        if multiple is not None and r.status != "never":  # a device profile: also × the measured device
            cap.append(f"{multiple:.3g}×")
        n = len(problem.tenants)
        if n < len(cap):
            cap = ["\n".join(cap)]
        for i, ten in enumerate(problem.tenants):
            t.add_row(
                DISPLAY.get(r.policy, r.policy) if i == 0 else "",
                cap[i] if i < len(cap) else "",
                ten.name,
                ten.slo.text if ten.slo else "–",
                _ms(r.at.achieved_ns[i]),
                _margin(r.at.margin[i]),
                *([_robust(r.robust.achieved_ns[i], r.robust.margin[i]) if r.robust else "–"] if problem.headroom > 0 else []),
                end_section=i == n - 1,
            )
    out.print(t)
    checks = Table(title=f"proof: met at the capacity{' (both loads)' if problem.headroom > 0 else ''}, not at "
                         f"{PROOF_FACTOR:g} ×", box=box.SIMPLE_HEAD, padding=(0, 1))
    for col in ("policy", "at capacity", f"at {PROOF_FACTOR:g} ×", "fails there", "sims"):
        checks.add_column(col, justify="left" if col in ("policy", "fails there") else "right")
    for r in advice.ranked:
        met = r.at.met and (r.robust is None or r.robust.met)
        held = "all met" if met else "missed"
        if r.below is not None:
            fails = [f"{problem.tenants[i].name}{'' if e.load == 1.0 else f' at {more}'}" for e in r.below.evaluations
                     for i, m in enumerate(e.margin) if m is not None and m < 0]
            below = fam.unit(r.below.capacity)
            why = ", ".join(fails) if fails else "none (!)"
        else:
            below = "–"
            why = {"any": "met at the least tried", "never": "never met"}.get(r.status, "–")
        checks.add_row(DISPLAY.get(r.policy, r.policy), held, below, why, str(r.simulations))
    out.print(checks)
    for r in advice.ranked:
        paper = [m for m in r.at.paper_miss if m is not None]
        if paper:
            e2e = [1 - w for w in r.at.within if w is not None]
            out.print(f"{DISPLAY.get(r.policy, r.policy)}: deadline misses after SARC releases (the SARC+AVATAR paper's metric) "
                      + ", ".join(f"{100 * m:.1f} %" for m in paper) + "; end to end "
                      + ", ".join(f"{100 * m:.1f} %" for m in e2e), soft_wrap=False)
        for note in r.notes:
            out.print(f"{DISPLAY.get(r.policy, r.policy)}: {note}")
        if r.status == "never":
            out.print(f"{DISPLAY.get(r.policy, r.policy)}: never: {reason(r)}")
    out.print(Text.assemble(("advice:", "bold"), f" {advice.explanation()}"))
    if pasted is not None:
        if pasted["lines"]:
            out.print(Text.assemble((f"{target} settings", "bold"), f" ({pasted['policy']} at "
                                    f"{pasted['capacity']:,.0f} IOPS):"))
            for line in pasted["lines"]:
                out.print(line, soft_wrap=True, markup=False, highlight=False)
        else:
            out.print(f"{target}: no settings meet every SLO at any capacity the search allows")
    if checked is not None and pasted is not None:
        from storqos.cli.commands.check import table as check_table

        out.print(check_table(f"{pasted['policy']} on {live_target}, live: predicted, Δ live", checked.tenants))
    for name, path in files.items():
        out.print(f"{name}: {path}")


def _target_settings(advice: Any, target: str) -> dict[str, Any]:
    """The cheapest answer's settings in ``target``'s syntax (no lines: none holds)."""
    from storqos.planning.advise import policy_for
    from storqos.planning.targets.emit import settings

    held = [r for r in advice.ranked if r.status == "ok"]
    if not held:
        return {"target": target, "policy": None, "capacity": None, "spec": None, "lines": []}
    best = held[0]
    spec = policy_for(advice.problem, best.policy, best.capacity)
    names = [t.name for t in advice.problem.tenants]
    return {"target": target, "policy": best.policy, "capacity": best.capacity, "spec": spec,
            "lines": settings(target, spec, names)}


def register(app: typer.Typer) -> None:
    """Add ``storqos advise`` to the app."""
    app.command("advise")(advise_cmd)


__all__ = ["register"]
