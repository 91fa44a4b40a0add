"""advise's files: ``advice.json`` (:meth:`.advice.Advice.summary`),
``advice.parquet`` (one row per policy × tenant) and a self-contained ``report.html``:
the ranked table, the recommendation, and per tenant the response-time CDF (arrival to
completion) of every policy at its reported capacity.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl

from storqos.base.units import fmt_ms
from storqos.planning.advise.advice import Advice
from storqos.planning.advise.capacity_search import TOLERANCE
from storqos.planning.advise.policies import DISPLAY
from storqos.planning.advise.problem import headroom_text
from storqos.planning.advise.proof import PROOF_FACTOR

#: Points per CDF curve in the report (thinned; the curves stay stepwise).
CDF_POINTS = 300


def html_report(a: Advice) -> str:
    """A self-contained HTML page: the ranked table, the recommendation, and per tenant
    the response-time CDF of every policy at its reported capacity (plotly, offline)."""
    import html as _html

    from plotly.offline import get_plotlyjs
    from plotly.subplots import make_subplots

    from storqos.experiments.report import PALETTE, grid_shape, slo_line, thin

    p = a.problem
    judged = list(range(len(p.tenants)))
    rows, cols = grid_shape(len(judged))
    titles = []
    for i in judged:
        s = p.tenants[i].slo
        titles.append(f"{p.tenants[i].name} ({s.text if s is not None else 'best effort'})")
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles)
    for k, r in enumerate(a.ranked):
        if r.at.cdf is None:
            continue
        label = f"{DISPLAY.get(r.policy, r.policy)} @ {p.family.unit(r.capacity)}" + (" (never)" if r.status == "never" else "")
        for j, i in enumerate(judged):
            c = thin(r.at.cdf.filter(pl.col("tenant") == i).sort("response_ns"), CDF_POINTS)
            fig.add_scatter(x=(c["response_ns"] / 1e6).to_list(), y=c["fraction"].to_list(), mode="lines",
                            name=label, legendgroup=r.policy, showlegend=j == 0,
                            line={"color": PALETTE[k % len(PALETTE)], "shape": "hv"},
                            row=j // cols + 1, col=j % cols + 1)
    for j, i in enumerate(judged):
        t = p.tenants[i]
        fig.update_xaxes(type="log", title_text="response time, arrival to completion (ms)", row=j // cols + 1,
                         col=j % cols + 1)
        if t.slo is not None:
            slo_line(fig, t.slo.latency_ns, row=j // cols + 1, col=j % cols + 1)
    fig.update_yaxes(title_text="fraction ≤ x", range=[0, 1.02], col=1)
    fig.update_layout(title="Response-time CDF per tenant, each policy at its reported capacity",
                      height=330 * rows + 80, template="plotly_white", legend_title_text="policy")
    table = a.rows()
    head = ["rank", "policy", "capacity", "tenant", "SLO", "achieved (ms)", "margin", f"at {headroom_text(p.headroom)} load (ms)",
            "simulations"]
    body = []
    for row in table.iter_rows(named=True):
        body.append("<tr>" + "".join(f"<td>{_html.escape(str(v))}</td>" for v in (
            row["rank"], DISPLAY.get(row["policy"], row["policy"]),
            "never" if row["capacity"] is None else p.family.unit(row["capacity"]), row["tenant"], row["slo"],
            fmt_ms(row["achieved_ns"]), _pct(row["margin"]), fmt_ms(row["robust_achieved_ns"]), row["simulations"])) + "</tr>")
    return (
        "<!doctype html><html><head><meta charset='utf-8'><meta name='storqos-figures' content='1'>"
        f"<title>storqos advise: {_html.escape(p.name)}</title><script>{get_plotlyjs()}</script>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:2px 8px;"
        "border-bottom:1px solid #ddd;text-align:right}</style></head><body>"
        f"<h1>storqos advise: {_html.escape(p.name)}</h1><p>{_html.escape(a.explanation())}</p>"
        f"<p>Device: {_html.escape(p.family.describe())}. SLOs judged end to end (arrival to completion). "
        f"Capacity to within {100 * TOLERANCE:g} %; at {PROOF_FACTOR:g}× it some SLO fails. "
        f"{_html.escape(_headroom_sentence(p.headroom))}</p>"
        "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(body) + "</table>"
        f"<div class='storqos-figure'>{fig.to_html(full_html=False, include_plotlyjs=False)}</div></body></html>"
    )


def _headroom_sentence(h: float) -> str:
    """What the capacities hold at besides the trace's load."""
    if h <= 0:
        return "No headroom: each capacity is the least at the trace's own load."
    return f"Every capacity also meets every SLO with {headroom_text(h).removeprefix('+')} more load (--headroom)."


def _pct(m: float | None) -> str:
    if m is None or not math.isfinite(m):
        return "–"
    return f"{100 * m:+.1f} %"


def write_outputs(a: Advice, out_dir: Path) -> dict[str, str]:
    """``advice.json``, ``advice.parquet`` (the rows) and ``report.html`` into ``out_dir``."""
    from storqos.base.paths import replacing

    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"json": out_dir / "advice.json", "table": out_dir / "advice.parquet", "report": out_dir / "report.html"}
    with replacing(files["json"]) as part:
        part.write_text(json.dumps(a.summary(), indent=2) + "\n")
    with replacing(files["table"]) as part:
        a.rows().write_parquet(part)
    with replacing(files["report"]) as part:
        part.write_text(html_report(a))
    return {k: str(v) for k, v in files.items()}


__all__ = ["html_report", "write_outputs"]
