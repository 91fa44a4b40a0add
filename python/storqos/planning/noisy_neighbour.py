"""A noisy neighbour on shared storage: what ``storqos demo`` runs.

Tenant 0 is a real trace: the bundled WebSearch excerpt (a search engine, ≈ 445 IOPS)
or the user's; tenant 1 is a synthetic batch job that bursts for ≈ 0.2 s every ≈ 3 s
(an on/off MMPP), at 1.2k IOPS next to the excerpt and at 1.2× the user trace's own
Cmin (100 % within 10 ms) next to a user's trace, so that its bursts overrun every
capacity the demo tries whatever the trace's scale. Both share one constant-rate server; FCFS lets the bursts
queue in front of tenant 0's requests, WF2Q+ with equal weights isolates them. The demo
runs both policies at three capacities and reports per-tenant response times, then plots
the response-time CDFs.

Capacities: for the bundled excerpt, 1.2×, 1.5× and 2× the pair's mean rate. For a
user's trace, sized from its burstiness: the capacity Cmin at which 95 %, 99 % and 100 %
of its own requests would meet the 10 ms deadline alone (seed 000's planner), plus the
neighbour's mean rate. Or the capacities the user gives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from storqos.base.paths import make_folder, replacing
from storqos.base.units import MAX_RATE_IOPS
from storqos.model import registry, synth
from storqos.model.sim import simulate
from storqos.traces import bundled, read_trace

#: Capacities as multiples of the combined mean arrival rate (the bundled excerpt).
CAPACITY_FACTORS = (1.2, 1.5, 2.0)
#: Fractions of a user trace's requests that meet the deadline alone at each capacity.
CMIN_FRACTIONS = (95.0, 99.0, 100.0)
#: The policies compared.
POLICIES = (registry.default().name, "wf2q")
#: The deadline whose compliance the table reports.
DEADLINE_NS = 10_000_000
#: The noisy neighbour: ON at 1.2k IOPS for Exp(200 ms), OFF for Exp(2.8 s) (mean ≈ 80 IOPS).
BURST: dict[str, Any] = {"rate_on": 1200, "rate_off": 0, "mean_on": "200ms", "mean_off": "2800ms", "seed": 42}
#: The neighbour's name in tables and plots.
NEIGHBOUR = "batch burst"


#: A user trace's neighbour bursts at this multiple of the trace's Cmin(100 %, 10 ms).
BURST_OVER_CMIN = 1.2


def _cmins(web: pl.DataFrame) -> dict[float, float]:
    """The trace's own Cmin (IOPS) for each of :data:`CMIN_FRACTIONS` within 10 ms."""
    from storqos.planning.planner import capacity_table

    table = capacity_table(web, [f"{DEADLINE_NS}ns"], list(CMIN_FRACTIONS))
    return {f: float(table[f"cmin_iops_{f:g}%"][0]) for f in CMIN_FRACTIONS}


def run_demo(out_dir: Path, trace_path: Path | None = None, capacities: list[float] | None = None) -> dict[str, Any]:
    """Run the demo, write ``cdf.png`` and ``table.csv`` into ``out_dir``; return the rows.

    ``capacities`` (IOPS) replace the default three (see the module's docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    path = trace_path or bundled("websearch")
    web = read_trace(path).with_columns(pl.lit(0, pl.UInt32).alias("tenant"))
    name = "websearch" if trace_path is None else path.stem
    span_ns = int(web["arrival_ns"].to_numpy().max())
    cmins = _cmins(web) if trace_path is not None else {}
    rate_on = round(BURST_OVER_CMIN * cmins[100.0]) if cmins else BURST["rate_on"]
    # The neighbour is streamed by the core (never materialised: a sparse week-long trace
    # beside it would make tens of millions of requests), and the results are read from
    # the core's per-tenant summaries and CDFs, so memory stays bounded whatever the span.
    burst = synth.onoff(**{**BURST, "rate_on": rate_on}, duration=f"{span_ns}ns", size=8192, tenant=1,  # type: ignore[arg-type]
                        materialize=False)
    assert isinstance(burst, dict)
    window = f"{max(span_ns // 100, 1_000_000_000)}ns"  # windows are not used: few of them
    # The neighbour's requests and mean rate over the trace's span (counted by streaming it alone).
    burst_requests = simulate(None, registry.default().name, "constant", capacity=MAX_RATE_IOPS, generators=[burst], window=window).arrived
    burst_iops = burst_requests / (span_ns / 1e9)
    if capacities:
        caps = [(float(c), "given") for c in capacities]
    elif cmins:
        caps = [(float(round(cmins[f] + burst_iops)), f"Cmin {f:g} % + neighbour") for f in CMIN_FRACTIONS]
    else:
        mean = (web.height + burst_requests) / (span_ns / 1e9)
        caps = [(float(round(mean * f)), f"{f:.1f}× mean rate") for f in CAPACITY_FACTORS]
    rows: list[dict[str, Any]] = []
    make_folder(out_dir, "--out")
    fig, axes = plt.subplots(1, len(caps), figsize=(5.2 * len(caps), 4.2), sharey=True, squeeze=False)
    colors = {registry.default().name: "tab:red", "wf2q+": "tab:blue"}
    for ax, (cap, why) in zip(axes[0], caps, strict=True):
        for policy in POLICIES:
            res = simulate(web, policy, "constant", capacity=cap, generators=[burst], window=window)
            tenants = {int(r["tenant"]): r for r in res.tenants.to_dicts()}
            cdf = {t: res.cdf.filter(pl.col("tenant") == t) for t in (0, 1)}
            within = cdf[0].filter(pl.col("response_ns") <= DEADLINE_NS)["fraction"]
            done = sum(r["completed"] for r in tenants.values())
            rows.append(
                {
                    "policy": res.policy,
                    "capacity_iops": cap,
                    "capacity_from": why,
                    "web_p95_ns": tenants[0]["p95_ns"],
                    "web_p99_ns": tenants[0]["p99_ns"],
                    "web_within_10ms": float(within.max()) if within.len() else 0.0,  # type: ignore[arg-type]
                    "burst_p99_ns": tenants[1]["p99_ns"] if 1 in tenants else 0.0,
                    "all_mean_ns": sum(r["mean_ns"] * r["completed"] for r in tenants.values()) / max(done, 1),
                }
            )
            for t, style in ((0, "-"), (1, ":")):
                xs, ys = cdf[t]["response_ns"].to_numpy() / 1e6, cdf[t]["fraction"].to_numpy()
                ax.step(np.r_[xs[:1], xs], np.r_[0.0, ys], style, where="post",  # from 0 at the fastest response
                        color=colors[res.policy], label=f"{res.policy}: {(name, NEIGHBOUR)[t]}")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{cap:g} IOPS ({why})")
        ax.set_xlabel("response time (ms)")
        ax.axvline(DEADLINE_NS / 1e6, color="grey", linestyle="--", linewidth=1)
        ax.grid(True, which="both", alpha=0.3)
    first = axes[0][0]
    first.set_ylabel("fraction of requests ≤ x")
    first.legend(loc="lower right", fontsize=8)
    fig.suptitle(f"{path.name} + bursty batch tenant on one server: FCFS vs WF2Q+ (equal weights)")
    fig.tight_layout()
    plot = out_dir / "cdf.png"
    with replacing(plot) as part:
        fig.savefig(part, dpi=110, format="png")
    plt.close(fig)
    table = out_dir / "table.csv"
    with replacing(table) as part:
        pl.DataFrame(rows).write_csv(part)
    return {
        "trace": path.name,
        "tenant": name,
        "requests": web.height + burst_requests,
        "web_requests": web.height,
        "burst_requests": burst_requests,
        "burst_iops": burst_iops,
        "mean_iops": (web.height + burst_requests) / (span_ns / 1e9),
        "rows": rows,
        "plot": str(plot),
        "table": str(table),
    }
