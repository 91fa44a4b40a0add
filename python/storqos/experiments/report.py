"""One self-contained HTML report per experiment (plotly, interactive, works offline).

The report holds, for every grid point: per-tenant response-time CDFs with one line per
policy (and each tenant's SLO latency), per-window time series of the 95th-percentile
response time, and a table of per-tenant results; then, for every numeric grid
parameter (the device capacity above all), curves of each tenant's p99 against it, one
line per policy ("capacity curves").

plotly.js is inlined once in the page head (the same script ``include_plotlyjs=True``
embeds), so the file needs no network; each figure is a ``<div class="storqos-figure">``
and ``<meta name="storqos-figures">`` says how many there are (the browser test checks
that every one rendered).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from storqos.base.units import fmt_ms, fmt_number

if TYPE_CHECKING:
    from storqos.experiments.experiment import ExperimentResult

#: Grid points that get their own CDF / time-series figures (larger grids: curves only).
MAX_POINT_FIGURES = 12
#: Points per CDF line (the histogram CDF is thinned to keep the page small).
CDF_POINTS = 300
#: Subplot columns per figure.
COLUMNS = 3
#: Colour of policy i (plotly's default qualitative palette).
PALETTE = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880", "#ff97ff", "#fecb52")


def _color(policies: Sequence[str], name: str) -> str:
    return PALETTE[list(policies).index(name) % len(PALETTE)] if name in policies else "#444"


def grid_shape(n: int) -> tuple[int, int]:
    """Rows and columns of subplots for ``n`` panels."""
    cols = min(COLUMNS, max(n, 1))
    return math.ceil(max(n, 1) / cols), cols


def thin(df: pl.DataFrame, n: int) -> pl.DataFrame:
    """At most about ``n`` evenly spaced rows of ``df`` (the last one kept)."""
    if df.height <= n:
        return df
    step = df.height / n
    idx = sorted({min(df.height - 1, int(i * step)) for i in range(n)} | {df.height - 1})
    return df[idx]


def _numeric(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        from storqos.base.errors import InputError
        from storqos.base.units import parse_duration, parse_rate

        for parse in (parse_rate, lambda x, w: float(parse_duration(x, w))):
            try:
                return float(parse(v, "grid"))
            except (InputError, ValueError):
                continue
    return None


def slo_line(fig: Any, slo_ns: float, row: int, col: int, *, horizontal: bool = False) -> None:
    """A dashed grey line at an SLO latency across a response-time axis in ms: vertical
    on a CDF's x axis, ``horizontal`` on a curve's y axis.

    The axis is logarithmic, and on a log axis plotly places a shape at the data value
    itself (``x0 = 20`` for 20 ms); only annotations and the axis range are given as
    log10 of the value (at log10 of a 20 ms SLO the line would sit at 1.3 ms)."""
    add = fig.add_hline if horizontal else fig.add_vline
    add(slo_ns / 1e6, line_dash="dash", line_color="grey", row=row, col=col)


def _point_label(point: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in point.items()) or "single point"


def cdf_figure(result: ExperimentResult, point: dict[str, Any]) -> Any:
    """Per-tenant response-time CDFs at one grid point, one line per policy."""
    from plotly.subplots import make_subplots

    tenants = result.experiment.runs[0].tenants
    rows, cols = grid_shape(len(tenants))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[t.name for t in tenants], shared_yaxes=True)
    policies = result.experiment.policies
    for o in (o for o in result.outputs if o.point == point):
        for ti in range(len(tenants)):
            c = thin(o.cdf.filter(pl.col("tenant") == ti).sort("response_ns"), CDF_POINTS)
            fig.add_scatter(
                x=(c["response_ns"] / 1e6).to_list(), y=c["fraction"].to_list(), mode="lines",
                name=o.policy_name, legendgroup=o.policy_name, showlegend=ti == 0,
                line={"color": _color(policies, o.policy_name), "shape": "hv"},
                row=ti // cols + 1, col=ti % cols + 1,
                hovertemplate="%{x:.3g} ms: %{y:.4f}<extra>" + html.escape(o.policy_name) + "</extra>",
            )
    for ti, t in enumerate(tenants):
        r, c_ = ti // cols + 1, ti % cols + 1
        fig.update_xaxes(type="log", title_text="response time (ms)", row=r, col=c_)
        if t.slo_ns:
            slo_line(fig, t.slo_ns, row=r, col=c_)
    fig.update_yaxes(title_text="fraction ≤ x", range=[0, 1.02], col=1)
    fig.update_layout(title=f"Response-time CDF per tenant — {_point_label(point)}", height=330 * rows + 80,
                      template="plotly_white", legend_title_text="policy")
    return fig


def timeseries_figure(result: ExperimentResult, point: dict[str, Any]) -> Any:
    """Per-tenant 95th-percentile response time per window, one line per policy."""
    from plotly.subplots import make_subplots

    tenants = result.experiment.runs[0].tenants
    rows, cols = grid_shape(len(tenants))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[t.name for t in tenants], shared_xaxes=True)
    policies = result.experiment.policies
    for o in (o for o in result.outputs if o.point == point):
        for ti in range(len(tenants)):
            w = o.windows.filter((pl.col("tenant") == ti) & (pl.col("completed") > 0)).sort("start_ns")
            fig.add_scatter(
                x=(w["start_ns"] / 1e9).to_list(), y=(w["p95_ns"] / 1e6).to_list(), mode="lines+markers",
                marker={"size": 4}, name=o.policy_name, legendgroup=o.policy_name, showlegend=ti == 0,
                line={"color": _color(policies, o.policy_name)}, row=ti // cols + 1, col=ti % cols + 1,
            )
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="p95 response (ms)", col=1)
    fig.update_xaxes(title_text="time (s)", row=rows)
    fig.update_layout(title=f"95th-percentile response time per window — {_point_label(point)}",
                      height=300 * rows + 80, template="plotly_white", legend_title_text="policy")
    return fig


def curve_figure(result: ExperimentResult, key: str, stat: str = "p99_ns") -> Any:
    """Each tenant's ``stat`` against the numeric grid parameter ``key``, a line per
    policy (and per value of the other grid parameters)."""
    from plotly.subplots import make_subplots

    tenants = result.experiment.runs[0].tenants
    rows, cols = grid_shape(len(tenants))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[t.name for t in tenants], shared_xaxes=True)
    policies = result.experiment.policies
    lines: dict[str, list[Any]] = {}
    for o in result.outputs:
        others = {k: v for k, v in o.point.items() if k != key}
        label = o.policy_name + (f" ({_point_label(others)})" if others else "")
        lines.setdefault(label, []).append(o)
    for li, (label, outs) in enumerate(lines.items()):
        outs = sorted(outs, key=lambda o: _numeric(o.point[key]) or 0.0)
        xs = [_numeric(o.point[key]) for o in outs]
        for ti in range(len(tenants)):
            ys = []
            for o in outs:
                row = o.tenants.filter(pl.col("tenant") == ti)
                v = row[stat][0] if row.height and stat in row.columns else None
                ys.append(None if v is None else v / 1e6)
            fig.add_scatter(x=xs, y=ys, mode="lines+markers", name=label, legendgroup=label, showlegend=ti == 0,
                            line={"color": _color(policies, outs[0].policy_name), "dash": ("solid", "dot", "dash")[li % 3]
                                  if len(lines) > len(policies) else "solid"},
                            row=ti // cols + 1, col=ti % cols + 1)
    for ti, t in enumerate(tenants):
        if t.slo_ns:
            slo_line(fig, t.slo_ns, row=ti // cols + 1, col=ti % cols + 1, horizontal=True)
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text=f"{stat.removesuffix('_ns')} response (ms)", col=1)
    fig.update_xaxes(title_text=key, row=rows)
    fig.update_layout(title=f"{stat.removesuffix('_ns')} response time against {key}", height=300 * rows + 80,
                      template="plotly_white", legend_title_text="policy")
    return fig


def _table(result: ExperimentResult, point: dict[str, Any]) -> str:
    head = ("policy", "tenant", "requests", "own IOPS", "p50 ms", "p95 ms", "p99 ms", "max ms", "≤ SLO", "SLO met")
    body = []
    for o in (o for o in result.outputs if o.point == point):
        for r in o.tenants.to_dicts():
            def ms(k: str, r: dict[str, Any] = r) -> str:
                return fmt_ms(r.get(k))
            within = r.get("within_slo")
            met = r.get("slo_met")
            cells = [o.policy_name, r["name"], f"{r['completed']:,}", fmt_number(r.get("iops_active") or 0), ms("p50_ns"),
                     ms("p95_ns"), ms("p99_ns"), ms("max_ns"), "–" if within is None else f"{100 * within:.1f} %",
                     "–" if met is None else ("yes" if met else "no")]
            body.append("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
    return ("<table><thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(body) + "</tbody></table>")


PAGE_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1300px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
td, th { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
td:nth-child(-n+2), th:nth-child(-n+2) { text-align: left; }
td:nth-child(n+3) { white-space: nowrap; }
.meta { color: #666; font-size: 0.9em; }
"""


def render(result: ExperimentResult) -> tuple[str, int]:
    """The report's HTML and its number of figures."""
    import plotly.io as pio
    import plotly.offline

    exp = result.experiment
    sections: list[str] = []
    figures = 0

    def fig_html(fig: Any) -> str:
        nonlocal figures
        div = pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=f"fig-{figures}",
                          config={"displaylogo": False, "responsive": True})
        figures += 1
        return f'<div class="storqos-figure">{div}</div>'

    points = exp.points
    numeric_keys = [k for k, vs in exp.grid.items() if len(vs) > 1 and all(_numeric(v) is not None for v in vs)]
    if numeric_keys:
        sections.append("<h2>Curves over the grid</h2>")
        for k in numeric_keys:
            sections.append(fig_html(curve_figure(result, k)))
    for point in points[:MAX_POINT_FIGURES]:
        sections.append(f"<h2>{html.escape(_point_label(point))}</h2>")
        sections.append(_table(result, point))
        sections.append(fig_html(cdf_figure(result, point)))
        sections.append(fig_html(timeseries_figure(result, point)))
    if len(points) > MAX_POINT_FIGURES:
        sections.append(f"<p class='meta'>{len(points) - MAX_POINT_FIGURES} more grid points: see tenants.parquet.</p>")
    tenants = exp.runs[0].tenants if exp.runs else []
    tenant_list = ", ".join(
        html.escape(t.name) + (f" (SLO {t.slo_ns / 1e6:g} ms)" if t.slo_ns else "") for t in tenants
    )
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="storqos-figures" content="{figures}">
<title>storqos: {html.escape(exp.name)}</title>
<style>{PAGE_CSS}</style>
<script type="text/javascript">{plotly.offline.get_plotlyjs()}</script>
</head><body>
<h1>storqos experiment: {html.escape(exp.name)}</h1>
<p>{html.escape(exp.description)}</p>
<p class="meta">{len(result.outputs)} runs ({len(exp.policies)} policies × {len(points)} grid points) on
{html.escape(result.backend)} in {result.wall_s:.1f} s · device: {html.escape(result.outputs[0].device_display if result.outputs else '')}
· tenants: {tenant_list}</p>
{''.join(sections)}
</body></html>
"""
    return page, figures


def markdown(result: ExperimentResult, report_path: str | None = None) -> str:
    """The results as markdown: one table per grid point (docs/results/<experiment>.md)."""
    exp = result.experiment
    lines = [f"# Experiment `{exp.name}`", "", exp.description, ""]
    if exp.path is not None:
        lines += [f"Regenerate: `storqos run {exp.path} --out out/experiments/{exp.name}"
                  f" --markdown docs/results/{exp.name}.md` (or `make reproduce`).", ""]
    if report_path:
        lines += [f"Interactive report (CDFs, time series, capacity curves): `{report_path}`.", ""]
    lines += ["\"own IOPS\" is each tenant's requests over its own span, its first arrival to its last completion.", ""]
    tenants = exp.runs[0].tenants if exp.runs else []
    slo = [f"{t.name} {t.slo_ns / 1e6:g} ms" for t in tenants if t.slo_ns]
    if slo:
        pct = exp.runs[0].percentile * 100
        lines += [f"SLO latencies: {', '.join(slo)}; \"≤ SLO\" is the fraction of the tenant's requests within it"
                  f" (met when ≥ {pct:g} %).", ""]
    for point in exp.points:
        lines += [f"## {_point_label(point)}", "",
                  "| policy | tenant | requests | own IOPS | p50 ms | p95 ms | p99 ms | ≤ SLO |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for o in (o for o in result.outputs if o.point == point):
            for r in o.tenants.to_dicts():
                def ms(k: str, r: dict[str, Any] = r) -> str:
                    return fmt_ms(r.get(k))
                w = r.get("within_slo")
                lines.append(f"| {o.policy_name} | {r['name']} | {r['completed']:,} | {fmt_number(r.get('iops_active') or 0)} | "
                             f"{ms('p50_ns')} | {ms('p95_ns')} | {ms('p99_ns')} | {'–' if w is None else f'{100 * w:.1f} %'} |")
        lines.append("")
    return "\n".join(lines)


def write_report(result: ExperimentResult, path: str | Path) -> int:
    """Write the report to ``path``; return the number of figures."""
    from storqos.base.paths import replacing

    page, n = render(result)
    with replacing(Path(path)) as part:
        part.write_text(page, encoding="utf-8")
    return n


__all__ = ["PAGE_CSS", "cdf_figure", "curve_figure", "grid_shape", "markdown", "render", "slo_line", "thin",
           "timeseries_figure", "write_report"]
