"""``storqos validate``: an experiment simulated and run live, predicted beside measured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table
from rich.text import Text

from storqos.base.console import emit_json, out
from storqos.base.errors import InputError, warn_input
from storqos.base.units import fmt_ms, parse_size
from storqos.cli.commands.options import AwakeOpt, JsonOpt

if TYPE_CHECKING:
    import polars as pl


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.1f}%"


def _table(title: str, table: pl.DataFrame) -> Table:
    """The terminal's table: per run (a row of its own) and tenant, the IOPS' difference
    and the p50 and p99 predicted, live and their difference (Δ = live / predicted − 1),
    in 80 columns."""
    t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False)
    for col in ("run, tenant", "IOPS Δ", "p50 ms", "live", "Δ", "p99 ms", "live", "Δ"):
        t.add_column(col, justify="left" if col == "run, tenant" else "right", overflow="fold")
    last = None
    for row in table.to_dicts():
        if row["run"] != last:
            t.add_row(Text(row["run"], style="bold"))
            last = row["run"]
        t.add_row(f"  {row['name']}", _pct(row["iops_err"]),
                  fmt_ms(row["p50_ns_pred"]), fmt_ms(row["p50_ns_meas"]), _pct(row["p50_err"]),
                  fmt_ms(row["p99_ns_pred"]), fmt_ms(row["p99_ns_meas"]), _pct(row["p99_err"]))
    return t


def validate(
    experiment: Annotated[Path, typer.Argument(help="Experiment file (TOML, as `storqos run` takes).",
                                               show_default=False)],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Folder for report.html, validation.parquet, both "
                                                              "request logs, summary.json and, on real files "
                                                              "(file, direct), device_profile.toml.")] = Path("out/validate"),
    live_device: Annotated[
        str, typer.Option(help="emulated: the gateway emulates the experiment's constant-rate device (--iops); "
                               "file: real files read through the page cache, modelled by a device profile "
                               "(measured first when none is given); direct: the same files read and written "
                               "with O_DIRECT, so the disk under them serves every request.")] = "emulated",
    device_profile: Annotated[
        Path | None, typer.Option("--device-profile", help="With --live-device file or direct: the profile "
                                                           "(from `storqos calibrate` of a gateway over such a "
                                                           "file, served the same way).")] = None,
    calibration_passes: Annotated[
        int | None, typer.Option(help="On real files without --device-profile: passes of the calibration "
                                      "made first, 3 unless given (each point's median kept; about 30 s "
                                      "each on 2 CPUs).", show_default=False)] = None,
    calibration_time: Annotated[
        float | None, typer.Option(help="On real files without --device-profile: seconds per point of that "
                                        "calibration, 0.5 unless given (about 20 points per pass scale with it; "
                                        "the requests at rest take as long as their spacings need).",
                                   show_default=False)] = None,
    export_size: Annotated[str, typer.Option(help="Size of each tenant's export; offsets wrap into it.")] = "256MiB",
    markdown_file: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the table as markdown here.")] = None,
    attempts: Annotated[int, typer.Option(help="Replays of a policy at most, until one keeps to the trace's timing "
                                               "and the host leaves the machine alone (a busy machine can hold "
                                               "the replay back by milliseconds); on real files, calibrations "
                                               "at most, until the host took at most 5 % of the machine's CPU "
                                               "time while one measured.")] = 3,
    repeats: Annotated[int, typer.Option(help="Live replays of each policy, counted (1-9): the policies are "
                                              "replayed in turn, then again, and each tenant's live figures are "
                                              "the medians over its replays; a real disk moves from minute to "
                                              "minute, and one replay catches it where it happens to be.")] = 1,
    direct_reads: Annotated[
        str, typer.Option("--direct-reads", help="With --live-device direct: how the gateway reads the files, "
                                                 "threads (its I/O threads) or io_uring (as `storqos serve "
                                                 "--direct-reads`); the calibration and the replays alike.")] = "threads",
    awake_cpus: AwakeOpt = "no",
    json_out: JsonOpt = False,
) -> None:
    """Run an experiment in the simulator and live, and report predicted beside measured.

    Every policy of the experiment runs twice on the same requests: simulated (keeping
    every request), then live: a gateway on loopback with the same policy, one export per
    tenant, and an open-loop replay of the requests at their times. Per tenant: IOPS and
    p50 / p95 / p99 response time, predicted, measured and their difference, with CDF
    plots in report.html. A replay that fell behind the trace's timing (over 1 % of
    requests issued more than 1 ms late: the machine was busy) or during which the host
    took more than 1 % of the machine's CPU time (steal time, on a virtual machine) is
    made again, up to --attempts times, and the table says when none kept up. On real
    files without --device-profile, the file is calibrated first (through a gateway that
    serves it as the replays will find it), again if the host took more than 5 % of the
    machine's CPU time meanwhile, up to --attempts times. The device's time at rest is
    measured again after each replay and shown
    beside its profile's: a prediction is no closer than the device is to its profile.
    With --repeats N every policy is replayed N times, the policies in turn, and the
    table gives each tenant's medians over its replays, with how far its p50 moved from
    one to the next. Closed-loop tenants cannot be replayed (give a trace or a generator).

    Example: [bold]storqos validate examples/validation/websearch.toml --out out/validate[/bold]

    Example: [bold]storqos validate examples/validation/hm_0.toml --live-device file --out out/validate-file[/bold]

    Example: [bold]storqos validate examples/validation/fiu_mail.toml --live-device direct --repeats 3[/bold]
    """
    import polars as pl

    from storqos.base.paths import check_output_dir, check_output_file, make_folder, replacing, write_table
    from storqos.base.progress import Stages
    from storqos.experiments.experiment import load
    from storqos.live.cpu_latency import can_keep_awake
    from storqos.live.validate import CALIBRATE_PASSES, CALIBRATE_SECONDS, MODES
    from storqos.live.validate import validate as run
    from storqos.live.validation_report import markdown, notes, write_html
    from storqos.model.device_profile import dump_profile, load_profile

    if live_device not in MODES:
        raise InputError(f"unknown value {live_device!r} ({', '.join(MODES)})", "--live-device")
    if device_profile is not None and live_device == "emulated":
        raise InputError("a device profile models real files: give --live-device file or direct too",
                         "--device-profile")
    for value, flag in ((calibration_time, "--calibration-time"), (calibration_passes, "--calibration-passes")):
        if value is not None and live_device == "emulated":
            raise InputError("only real files are calibrated: give --live-device file or direct too", flag)
        if value is not None and device_profile is not None:
            raise InputError("with --device-profile nothing is calibrated: give one or the other", flag)
    check_output_dir(out_dir, "--out")
    if markdown_file is not None:
        check_output_file(markdown_file, "--markdown")
    size = parse_size(export_size, "--export-size")
    can_keep_awake(awake_cpus)  # a typo, or `yes` where it cannot, fails before anything starts
    profile = load_profile(device_profile) if device_profile is not None else None
    exp = load(experiment)
    # Progress on stderr, stdout keeping the result: the plan and its estimate first, then
    # a line per stage (a bar on a terminal).
    with Stages("validate") as stages:
        res = run(exp, mode=live_device, profile=profile, export_bytes=size, attempts=attempts, repeats=repeats,
                  awake=awake_cpus,
                  direct_reads=direct_reads,
                  calibrate_passes=CALIBRATE_PASSES if calibration_passes is None else calibration_passes,
                  calibrate_seconds=CALIBRATE_SECONDS if calibration_time is None else calibration_time,
                  progress=stages)
    table = res.table()
    make_folder(out_dir, "--out")
    write_table(table, out_dir / "validation.parquet")
    for what in ("predicted", "measured"):
        logs = [getattr(r, what).with_columns(pl.lit(r.label).alias("run")) for r in res.runs]
        write_table(pl.concat(logs, how="vertical"), out_dir / f"requests_{what}.parquet")
    figures = write_html(res, out_dir / "report.html")
    summary: dict[str, Any] = {
        "experiment": exp.name, "live_device": res.device, "rows": table.to_dicts(), "report": str(out_dir / "report.html"),
        "replays": {r.label: {**r.schedule, "errors": r.errors, "fell_behind": r.fell_behind,
                                 "attempts": r.attempts, "repeats": r.repeats, "rest_p50_us": r.rest_p50_us,
                                 "p50_ns_per_replay": [t["p50_ns"].to_list() for t in r.per_replay]}
                    for r in res.runs},
    }
    if res.profile is not None:
        summary["device_profile"] = {k: getattr(res.profile, k) for k in
                                     ("target", "capacity_iops", "parallelism", "op_time_us", "bandwidth_bytes_per_s")}
        summary["device_profile"]["path_at_rest_us"] = res.profile.path_at_rest_us()
        summary["device_profile"]["write_path_at_rest_us"] = res.profile.path_at_rest_us("write")
        summary["device_profile"]["burst"] = [b.model_dump(exclude={"response_us"}) for b in res.profile.burst or []]
        summary["device_profile"]["rest_p50_us"] = res.profile_rest_p50_us()
        # The whole profile, to give `--device-profile` (validate, simulate, serve) next time.
        with replacing(out_dir / "device_profile.toml") as part:
            part.write_text(dump_profile(res.profile))
    with replacing(out_dir / "summary.json") as part:
        part.write_text(json.dumps(summary, indent=2, default=float) + "\n")
    if markdown_file is not None:
        with replacing(markdown_file) as part:
            part.write_text(markdown(res))
    for r in res.runs:
        if r.fell_behind:
            warn_input(f"{r.label}: {r.fell_behind}: the live run met a later schedule than the simulation")
    if json_out:
        emit_json(summary)
        return
    out.print(_table(f"{exp.name}: predicted vs live ({res.device})", table))
    for line in notes(res):
        out.print(line)
    out.print(f"report ({figures} CDF figures): {out_dir / 'report.html'}; table: {out_dir / 'validation.parquet'}")


def register(app: typer.Typer) -> None:
    """Add ``storqos validate`` to the app."""
    app.command("validate")(validate)
