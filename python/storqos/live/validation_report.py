"""The report of ``storqos validate``: predicted beside measured, as a self-contained HTML
page (plotly, offline: per run, each tenant's response-time CDF simulated and live) and
as markdown (``docs/results/validation.md``)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from storqos.base.units import fmt_ms, fmt_number
from storqos.experiments.report import PAGE_CSS, grid_shape, thin
from storqos.live.host_steal import took
from storqos.live.validate import RunValidation, Validation
from storqos.model.tenant_figures import PERCENTILES

#: Points per CDF line.
CDF_POINTS = 400


def _cdf(log: pl.DataFrame, tenant: int) -> tuple[list[float], list[float]]:
    r = np.sort(log.filter(pl.col("tenant") == tenant)["response_ns"].to_numpy())
    if not r.size:
        return [], []
    df = thin(pl.DataFrame({"ms": r / 1e6, "f": np.arange(1, r.size + 1) / r.size}), CDF_POINTS)
    return df["ms"].to_list(), df["f"].to_list()


#: Line of each curve of :func:`cdf_figure`: (legend name, dash, colour, width).
_CURVES = {"predicted": ("predicted", "dash", "#636efa", 2.0), "measured": ("measured", "solid", "#ef553b", 2.0),
           "other": ("other replays", "solid", "rgba(239, 85, 59, 0.35)", 1.0)}


def cdf_figure(v: Validation, index: int) -> Any:
    """One run: per tenant, the simulated (dashed) and live (solid) response-time CDFs;
    with repeated replays, the live one is the replay shown in the tables' log
    (:attr:`RunValidation.measured`) and the other replays are drawn thin and pale
    beside it, so that how far the live side moves from one replay to the next is seen."""
    from plotly.subplots import make_subplots

    run = v.runs[index]
    names = run.tenants["name"].to_list()
    ids = run.tenants["tenant"].to_list()
    rows, cols = grid_shape(len(names))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=names, shared_yaxes=True)
    others = [log for log in run.replays if log is not run.measured]
    curves = [("other", log) for log in others] + [("predicted", run.predicted), ("measured", run.measured)]
    for k, (t, _name) in enumerate(zip(ids, names, strict=True)):
        for c, (what, log) in enumerate(curves):
            name, dash, colour, width = _CURVES[what]
            x, y = _cdf(log, int(t))
            first = k == 0 and (what != "other" or c == 0)
            fig.add_scatter(x=x, y=y, mode="lines", name=name, legendgroup=what, showlegend=first,
                            line={"dash": dash, "color": colour, "width": width, "shape": "hv"},
                            row=k // cols + 1, col=k % cols + 1,
                            hovertemplate="%{x:.3g} ms: %{y:.4f}<extra>" + name + "</extra>")
        fig.update_xaxes(type="log", title_text="response time (ms)", row=k // cols + 1, col=k % cols + 1)
    fig.update_yaxes(title_text="fraction ≤ x", range=[0, 1.02], col=1)
    fig.update_layout(title=f"{html.escape(run.label)}: response-time CDF, simulated vs live", template="plotly_white",
                      height=330 * rows + 80)
    return fig


def _pct(x: float | None) -> str:
    return "–" if x is None or not np.isfinite(x) else f"{100 * x:+.1f} %"


def _cells(r: dict[str, Any], unit: str = "") -> list[str]:
    """One tenant's row: run, tenant, requests, IOPS and each percentile predicted /
    live / Δ (times in ms, followed by ``unit``)."""
    cells = [r["run"], r["name"], f"{r['requests']:,}", fmt_number(r["iops_pred"]), fmt_number(r["iops_meas"]),
             _pct(r["iops_err"])]
    for q in PERCENTILES:
        cells += [fmt_ms(r[f"p{q}_ns_pred"]) + unit, fmt_ms(r[f"p{q}_ns_meas"]) + unit, _pct(r[f"p{q}_err"])]
    return cells


def html_table(v: Validation) -> str:
    """Every run's tenants: IOPS and percentiles, predicted / measured / error."""
    head = ["run", "tenant", "requests", "IOPS pred", "IOPS live", "Δ"]
    for q in PERCENTILES:
        head += [f"p{q} pred ms", f"p{q} live ms", "Δ"]
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for r in v.table().to_dicts():
        out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _cells(r)) + "</tr>")
    return "\n".join(out) + "</table>"


def render(v: Validation) -> tuple[str, int]:
    """The page and its number of figures."""
    import plotly.io as pio
    import plotly.offline

    figs = []
    for i in range(len(v.runs)):
        div = pio.to_html(cdf_figure(v, i), full_html=False, include_plotlyjs=False, div_id=f"fig-{i}",
                          config={"displaylogo": False, "responsive": True})
        figs.append(f'<div class="storqos-figure">{div}</div>')
    sched = "".join(
        f"<li>{html.escape(r.label)}: issue-time error p99 {r.schedule.get('issue_error_p99_us', 0):.0f} µs, "
        f"{r.schedule.get('late', 0):,} requests &gt; 1 ms late, {r.errors:,} errors"
        + (f", {took(r.schedule['steal_ms'])} (steal time)" if r.schedule.get("steal_ms") else "")
        + _made(r)
        + (f" — {html.escape(r.fell_behind)}" if r.fell_behind else "") + "</li>" for r in v.runs)
    rest = "".join(f"<p>{html.escape(line)}</p>" for line in notes(v))
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="storqos-figures" content="{len(figs)}">
<title>storqos validate: {html.escape(v.name)}</title>
<style>{PAGE_CSS}</style>
<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>
</head><body>
<h1>storqos validate: {html.escape(v.name)}</h1>
<p class="meta">live device: {html.escape(v.device)} · Δ = live / predicted − 1</p>
{html_table(v)}
<h2>Replays</h2><ul>{sched}</ul>{rest}
{''.join(figs)}
</body></html>
"""
    return page, len(figs)


def write_html(v: Validation, path: Path) -> int:
    """Write the page whole or not at all; return the number of figures."""
    from storqos.base.paths import replacing

    page, n = render(v)
    with replacing(path) as part:
        part.write_text(page, encoding="utf-8")
    return n


def _made(r: RunValidation) -> str:
    """How many replays a run took: ", best of 3 replays", ", 4 replays for 3 counted"."""
    if r.repeats > 1:
        return f", {r.attempts} replays made for {r.repeats} counted" if r.attempts > r.repeats else ""
    return f", best of {r.attempts} replays" if r.attempts > 1 else ""


def spread_line(v: Validation) -> str:
    """One sentence, when runs were replayed more than once: how far a tenant's live p50
    moved from one replay to the next (empty otherwise)."""
    runs = [r for r in v.runs if r.repeats > 1]
    if not runs:
        return ""
    spread = pl.concat([r.spread(50) for r in runs])["p50_spread"].to_numpy()
    counts = sorted({r.repeats for r in runs})
    return (f"Live figures are each tenant's medians over {' or '.join(map(str, counts))} replays of its run "
            f"(the runs replayed in turn); a tenant's live p50 moved from one replay to the next by ±"
            f"{100 * np.median(spread):.1f} % (median) and ±{100 * spread.max():.1f} % at most "
            "(half the range, over the median).")


def rest_line(v: Validation) -> str:
    """One sentence: the device's time at rest after each replay beside its profile's
    (empty when not measured: the emulated device)."""
    drift = v.rest_drift()
    base = v.profile_rest_p50_us()
    if not drift or base is None:
        return ""
    runs = ", ".join(f"{label} {us:,.0f} µs ({d:+.0%})" for label, us, d in drift)
    after = "each replay" if all(r.repeats == 1 for r in v.runs) else "each replay, a run's median"
    return (f"The device at rest (lone 4 KiB reads 2 ms apart, p50) after {after}: {runs}; "
            f"the profile's {base:,.0f} µs.")


def notes(v: Validation) -> list[str]:
    """The sentences under a validation's table, as far as they apply: how far the live
    p50s spread over repeated replays (:func:`spread_line`), and the device at rest
    beside its profile (:func:`rest_line`)."""
    return [line for line in (spread_line(v), rest_line(v)) if line]


def markdown(v: Validation, *, title: bool = True) -> str:
    """The table as markdown."""
    lines = [f"## {v.name} ({v.device})", ""] if title else []
    lines += ["| run | tenant | requests | IOPS pred | IOPS live | Δ | p50 pred | p50 live | Δ | p95 pred | "
              "p95 live | Δ | p99 pred | p99 live | Δ |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in v.table().to_dicts():
        lines.append("| " + " | ".join(_cells(r, " ms")) + " |")
    behind = [f"{r.label} ({r.fell_behind}{_made(r)})" for r in v.runs if r.fell_behind]
    if behind:
        lines += ["", "Replays that fell behind the trace's timing: " + "; ".join(behind) + "."]
    lines += [line for text in notes(v) for line in ("", text)]
    return "\n".join(lines) + "\n"


__all__ = ["cdf_figure", "html_table", "markdown", "notes", "render", "rest_line", "spread_line", "write_html"]
