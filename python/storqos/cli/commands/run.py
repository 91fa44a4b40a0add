"""``storqos run``: run an experiment file (policies × parameter grid) and write
Parquet tables, a JSON summary and a self-contained HTML report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from storqos.base.console import emit_json, err, out
from storqos.base.units import fmt_ms, fmt_number, plural


def _print_schema(value: bool) -> None:
    if value:
        from storqos.experiments.experiment_schema import json_schema

        emit_json(json_schema())
        raise typer.Exit()


def run_cmd(
    experiment: Annotated[Path, typer.Argument(help="Experiment file (TOML).", show_default=False)],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Directory for the Parquet tables, summary.json and report.html.")] = Path("out/run"),
    dask: Annotated[
        str | None,
        typer.Option("--dask", help="Run on a Dask cluster: tcp://HOST:8786, or local:N for a LocalCluster of N workers."),
    ] = None,
    workers: Annotated[int | None, typer.Option("--workers", "-w", help="Local process-pool size (default: CPU count; 1 = in this process).")] = None,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Write report.html.")] = True,
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the result tables as markdown here (docs/results/NAME.md).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON (for scripts) instead of tables.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Only check the file (keys, values, traces) and say how many runs it makes.")] = False,
    schema: Annotated[
        bool,
        typer.Option("--schema", is_eager=True, callback=_print_schema,
                     help="Print the experiment file's JSON Schema (for editors) and exit."),
    ] = False,
) -> None:
    """Run every policy at every grid point of an experiment file; write tenants/windows/cdf Parquet, summary.json and report.html.

    The file lists traces and tenants (with SLOs, weights, reservations, limits), the device, the policies and a \\[grid] of parameters: docs/experiments.md describes every key, --check only checks a file, --schema prints its JSON Schema. Runs go to a local process pool, or to Dask with --dask (identical results: every run has its own seed).

    Example: [bold]storqos run examples/experiments/compare.toml --out out/compare[/bold]
    """
    from storqos.base.paths import check_output_dir, check_output_file, replacing
    from storqos.experiments.experiment import load, run_experiment
    from storqos.experiments.outputs import write_outputs
    from storqos.experiments.sweep import backend_from_flags

    backend = backend_from_flags(dask, workers, "a local process pool")
    check_output_dir(out_dir, "--out")
    if markdown is not None:
        check_output_file(markdown, "--markdown")
    exp = load(experiment)
    if check:
        points = max(len(exp.points), 1)
        out.print(f"{experiment}: ok, {plural(len(exp.runs), 'run')} ({plural(len(exp.policies), 'policy', 'policies')}"
                  f" × {plural(points, 'grid point')})",
                  markup=False, highlight=False, soft_wrap=True)
        return
    show = sys.stderr.isatty() and not json_out
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True, disable=not show,
    ) as progress:
        task = progress.add_task(f"{exp.name}: runs on {backend}", total=len(exp.runs))
        result = run_experiment(exp, backend=backend, workers=workers, on_done=lambda _i: progress.advance(task))
    write_outputs(result, out_dir, report=report)
    if markdown is not None:
        from storqos.experiments.report import markdown as to_markdown

        with replacing(markdown) as part:
            part.write_text(to_markdown(result, result.files.get("report")) + "\n")
        result.files["markdown"] = str(markdown)
    summary = result.summary()
    if json_out:
        emit_json(summary)
        return
    t = Table(title=f"{exp.name}: {len(exp.runs)} runs on {backend} in {result.wall_s:.1f} s")
    keys = sorted({k for run in summary["runs"] for k in run["point"]})
    if keys:
        t.caption = "grid: " + ", ".join(keys)
    # The run (its policy, then one line per grid key) and the tenant's name fold onto
    # further lines rather than end in "…"; the figures keep their width: the table
    # stays within 80 columns.
    t.add_column("policy, grid point" if keys else "policy", overflow="fold")
    t.add_column("tenant", overflow="fold")
    for col in ("own\nIOPS", "p95 ms", "p99 ms", "≤ SLO"):  # own: over the tenant's own span
        t.add_column(col, justify="right", no_wrap=True)
    for run in summary["runs"]:
        # The run's policy, then one line per grid key by its last part (the caption
        # names the whole key), beside its tenants' rows.
        label = [Text(run["policy"], style="bold"),
                 *(Text(f"{k.rsplit('.', 1)[-1]}={v}") for k, v in run["point"].items())]
        rows = run["tenants"]
        for i in range(max(len(rows), len(label))):
            first = label[i] if i < len(label) else ""
            last = i == max(len(rows), len(label)) - 1
            if i >= len(rows):
                t.add_row(first, end_section=last)
                continue
            row = rows[i]
            within = row.get("within_slo")
            t.add_row(
                first,
                row["name"],
                fmt_number(row.get("iops_active") or 0),
                fmt_ms(row.get("p95_ns")),
                fmt_ms(row.get("p99_ns")),
                "–" if within is None else f"{100 * within:.1f} %",
                end_section=last,
            )
    out.print(t)
    for name, path in result.files.items():
        out.print(f"{name}: {path}")


def register(app: typer.Typer) -> None:
    """Add ``storqos run`` to the app."""
    app.command("run")(run_cmd)


__all__ = ["register"]
