"""``storqos calibrate``: measure a storage target and write its device profile."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError
from storqos.base.units import fmt_rate, fmt_size, parse_duration, parse_size
from storqos.cli.commands.options import AwakeOpt, JsonOpt


def _list(text: str, parse: type[int] | None, where: str) -> list[int]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    if not items:
        raise InputError("give at least one value", where)
    if parse is None:
        return [parse_size(s, where) for s in items]
    try:
        return [int(s) for s in items]
    except ValueError:
        raise InputError(f"malformed list {text!r} (expected whole numbers, e.g. 1,4,16)", where) from None


#: Longest measurement point (--time), in seconds.
MAX_POINT_S = 3600.0


def calibrate(
    target: Annotated[str, typer.Argument(help="What to measure: nbd://HOST:PORT/EXPORT, a file (≥ 64 MiB) or a "
                                               "block device.", show_default=False)],
    out_file: Annotated[Path, typer.Option("--out", "-o", help="Where to write the device profile (TOML).")]
    = Path("device-profile.toml"),
    sizes: Annotated[str, typer.Option(help="Request sizes measured at queue depth 1.")] = "4k,16k,64k,256k,1m",
    queue_depths: Annotated[str, typer.Option(help="Queue depths of the 4 KiB random-read throughput curve.")]
    = "1,2,4,8,16,32,64",
    time: Annotated[float, typer.Option(help="Seconds per measurement point.")] = 1.0,
    passes: Annotated[int, typer.Option(help="Measure every point this many times, one whole pass after another, "
                                             "and keep each point's median: a busy moment that slowed one pass "
                                             "does not become the profile.")] = 1,
    writes: Annotated[bool, typer.Option("--writes", help="Also measure writes (they OVERWRITE the target's "
                                                          "data).")] = False,
    buffered: Annotated[bool, typer.Option("--buffered", help="Files and devices: go through the page cache "
                                                              "instead of O_DIRECT.")] = False,
    engine: Annotated[str, typer.Option(help="What measures: fio (the storage's own time) or replay (NBD only: "
                                             "storqos replay's client, whose own time per request is then part "
                                             "of the profile, as in storqos validate).")] = "fio",
    idle_spacings: Annotated[str, typer.Option(help="Also measure the 4 KiB requests at rest spaced by each of these "
                                                   "(e.g. 250us,500us,1ms,10ms,50ms; 100us to 10s): the longer the "
                                                   "client and the server slept, the more a lone request pays to wake "
                                                   "them, and one soon after the last reply finds them awake; "
                                                   "storqos validate then gives each lone request the time of its "
                                                   "idle gap.")] = "",
    awake_cpus: AwakeOpt = "no",
    json_out: JsonOpt = False,
) -> None:
    """Measure a storage target and write a device profile for simulate and serve.

    Each request class (read, and write with --writes; random and sequential; each
    size) is measured at queue depth 1, then 4 KiB random reads at each queue depth,
    then 4 KiB random reads one every 2 ms (a request at rest, which wakes up
    the client and the server), and with --idle-spacings at other spacings too; with
    --engine replay, bursts of 32 requests due at
    once, random and sequential (the time per issue and per completion:
    validate's path in a burst).
    The profile holds the measurements and what is fitted to them: the capacity (best
    4 KiB random-read IOPS), the parallelism, a service-time model for `storqos simulate
    --device-profile` and a cost model for `storqos serve --device-profile`.

    fio measures by default. With --engine replay, an NBD target is measured by
    storqos replay's own client, so that a simulation with the profile predicts what a
    replay will measure (its per-request time, tens of µs, included).

    On a virtual machine the profile also records how much CPU time the host took from
    the machine while it measured; above 1 % a warning says the profile may come out
    slower than the device.

    Example: [bold]storqos calibrate nbd://127.0.0.1:10809/disk --out disk.toml[/bold]

    Example: [bold]storqos calibrate /srv/images/test.img --writes --time 2 --out file.toml[/bold]
    """
    from storqos.base.paths import check_output_file, replacing
    from storqos.base.progress import Stages
    from storqos.live.calibrate import calibrate as run
    from storqos.live.calibrate import plan
    from storqos.live.cpu_latency import can_keep_awake
    from storqos.model.device_profile import AT_REST_SPACING_US, dump_profile

    if not 0 < time <= MAX_POINT_S:  # nan and inf too: a point measured for ever
        raise InputError(f"must be > 0 and at most {MAX_POINT_S:g} seconds, got {time:g}", "--time")
    check_output_file(out_file, "--out")
    can_keep_awake(awake_cpus)  # a typo, or `yes` where it cannot, fails before anything starts
    size_list = _list(sizes, None, "--sizes")
    spacings_us = [parse_duration(x.strip(), "--idle-spacings") // 1000 for x in idle_spacings.split(",") if x.strip()]
    depth_list = _list(queue_depths, int, "--queue-depths")
    todo = plan(sizes=size_list, depths=depth_list, writes=writes, seconds=time, engine=engine,
                idle_spacings_us=spacings_us)
    per_pass = todo.points

    def progress(i: int, n: int, _what: str) -> None:
        # Said once the first point is measured: a target that does not answer, or a
        # setting refused, is one error line.
        if i == 0:
            return
        if stages.estimate_s is None:
            stages.begin(f"{target}: {passes} pass{'es' if passes > 1 else ''} of {per_pass} points of {time:g} s",
                         passes * todo.pass_seconds())
        if i < n and (i % per_pass == 0 or i == 1):  # a pass begins: a stage
            stages.stage(f"pass {i // per_pass + 1} of {passes}: {per_pass} points", todo.pass_seconds())
        stages.step(i % per_pass if i < n else per_pass, per_pass)

    # Progress on stderr: the plan and its estimate, then a line per pass (a bar on a terminal).
    with Stages("calibrate") as stages:
        profile = run(target, sizes=size_list, depths=depth_list, writes=writes, direct=not buffered, seconds=time,
                      passes=passes, engine=engine, idle_spacings_us=spacings_us, awake=awake_cpus, progress=progress)
    with replacing(out_file) as part:
        part.write_text(dump_profile(profile))
    if json_out:
        emit_json({**profile.model_dump(), "profile_file": str(out_file)})
        return
    out.print(Text.assemble((str(target), "bold"), f": capacity {fmt_rate(profile.capacity_iops)} (4 KiB random reads), "
              f"parallelism {profile.parallelism}, {profile.op_time_us:.1f} µs per op, "
              f"{fmt_size(profile.bandwidth_bytes_per_s)}/s" + ("; measured with the CPUs kept awake" if profile.cpus_awake else "")))
    t = Table(title="response time at queue depth 1")
    for col in ("op", "size", "IOPS", "mean ms", "p50 ms", "p99 ms"):
        t.add_column(col, justify="left" if col == "op" else "right")
    for p in profile.service:
        pc = dict(p.percentiles_us)
        t.add_row(f"{'rand' if p.pattern == 'random' else 'seq'} {p.op}", fmt_size(p.size), f"{p.iops:,.0f}", f"{p.mean_us / 1e3:.3g}",
                  f"{pc.get(50.0, p.mean_us) / 1e3:.3g}", f"{pc.get(99.0, p.mean_us) / 1e3:.3g}")
    out.print(t)
    d = Table(title="4 KiB random reads by queue depth")
    for col in ("depth", "IOPS", "mean ms", "p50 ms", "p99 ms"):
        d.add_column(col, justify="right")
    for q in profile.queue_depth:
        d.add_row(str(q.qd), f"{q.iops:,.0f}", f"{q.mean_us / 1e3:.3g}", f"{q.p50_us / 1e3:.3g}",
                  f"{q.p99_us / 1e3:.3g}")
    out.print(d)
    for r in [profile.at_rest, profile.at_rest_write, *(profile.at_rest_idle or [])]:
        if r is not None:
            every = getattr(r, "spacing_us", AT_REST_SPACING_US) / 1e3
            out.print(f"4 KiB random {r.op}s at rest, one every {every:g} ms: p50 "
                      f"{dict(r.percentiles_us).get(50.0, r.mean_us):.0f} µs")
    for b in profile.burst or []:
        out.print(f"bursts of {b.requests} 4 KiB {b.pattern} {b.op}s from rest: {b.issue_us:.1f} µs per issue, "
                  f"{b.finish_us:.1f} µs per completion")
    out.print(f"device profile: {out_file}")


def register(app: typer.Typer) -> None:
    """Add ``storqos calibrate`` to the app."""
    app.command("calibrate")(calibrate)
