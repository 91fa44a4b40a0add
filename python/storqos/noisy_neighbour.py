"""A noisy neighbour on shared storage: what ``storqos demo`` runs.

Tenant 0 is a real trace: the bundled WebSearch excerpt (a search engine, ≈ 445 IOPS)
or the user's; tenant 1 is a synthetic batch job that bursts at 1.2k IOPS for ≈ 0.2 s
every ≈ 3 s (an on/off MMPP). Both share one constant-rate server; FCFS lets the bursts
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

from . import synth
from .paths import replacing
from .sim import simulate
from .traces import bundled, merge, read_trace, stats

#: Capacities as multiples of the combined mean arrival rate (the bundled excerpt).
CAPACITY_FACTORS = (1.2, 1.5, 2.0)
#: Fractions of a user trace's requests that meet the deadline alone at each capacity.
CMIN_FRACTIONS = (95.0, 99.0, 100.0)
#: The policies compared.
POLICIES = ("fcfs", "wf2q")
#: The deadline whose compliance the table reports.
DEADLINE_NS = 10_000_000
#: The noisy neighbour: ON at 1.2k IOPS for Exp(200 ms), OFF for Exp(2.8 s) (mean ≈ 80 IOPS).
BURST = {"rate_on": 1200, "rate_off": 0, "mean_on": "200ms", "mean_off": "2800ms", "seed": 42}
#: The neighbour's name in tables and plots.
NEIGHBOUR = "batch burst"


def _q(x: np.ndarray, q: float) -> float:
    return float(np.quantile(x, q, method="higher")) if len(x) else 0.0


def _capacities(web: pl.DataFrame, burst_iops: float, bundled_trace: bool, mean_iops: float) -> list[tuple[float, str]]:
    """The three capacities (IOPS) and how each was chosen."""
    if bundled_trace:
        return [(float(round(mean_iops * f)), f"{f:.1f}× mean rate") for f in CAPACITY_FACTORS]
    from .planner import capacity_table

    table = capacity_table(web, [f"{DEADLINE_NS}ns"], list(CMIN_FRACTIONS))
    out = []
    for f in CMIN_FRACTIONS:
        cmin = float(table[f"cmin_iops_{f:g}%"][0])
        out.append((float(round(cmin + burst_iops)), f"Cmin {f:g} % + neighbour"))
    return out


def run_demo(out_dir: Path, trace_path: Path | None = None, capacities: list[float] | None = None) -> dict[str, Any]:
    """Run the demo, write ``cdf.png`` and ``table.csv`` into ``out_dir``; return the rows.

    ``capacities`` (IOPS) replace the default three (see the module's docstring)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    path = trace_path or bundled("websearch")
    web = read_trace(path)
    name = "websearch" if trace_path is None else path.stem
    span_ns = int(web["arrival_ns"].to_numpy().max())
    burst = synth.onoff(**BURST, duration=f"{span_ns}ns", size=8192)  # type: ignore[arg-type]
    assert isinstance(burst, pl.DataFrame)
    df = merge([web, burst])
    mean_iops = stats(df)["mean_iops"]
    burst_iops = burst.height / max(span_ns / 1e9, 1e-9)  # the neighbour's mean over the trace's span
    if capacities:
        caps = [(float(c), "given") for c in capacities]
    else:
        caps = _capacities(web, burst_iops, trace_path is None, mean_iops)
    rows: list[dict[str, Any]] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(caps), figsize=(5.2 * len(caps), 4.2), sharey=True, squeeze=False)
    colors = {"fcfs": "tab:red", "wf2q+": "tab:blue"}
    for ax, (cap, why) in zip(axes[0], caps, strict=True):
        for policy in POLICIES:
            res = simulate(df, policy, "constant", capacity=cap, keep_requests=True)
            assert res.requests is not None
            resp = {t: res.requests.filter(pl.col("tenant") == t)["response_ns"].to_numpy() for t in (0, 1)}
            rows.append(
                {
                    "policy": res.policy,
                    "capacity_iops": cap,
                    "capacity_from": why,
                    "web_p95_ns": _q(resp[0], 0.95),
                    "web_p99_ns": _q(resp[0], 0.99),
                    "web_within_10ms": float((resp[0] <= DEADLINE_NS).mean()),
                    "burst_p99_ns": _q(resp[1], 0.99),
                    "all_mean_ns": float(res.requests["response_ns"].cast(pl.Float64).mean() or 0.0),  # type: ignore[arg-type]
                }
            )
            for t, style in ((0, "-"), (1, ":")):
                xs = np.sort(resp[t]) / 1e6
                ax.plot(xs, np.arange(1, len(xs) + 1) / max(len(xs), 1), style, color=colors[res.policy],
                        label=f"{res.policy}: {(name, NEIGHBOUR)[t]}")
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
        "requests": df.height,
        "web_requests": web.height,
        "burst_requests": burst.height,
        "burst_iops": burst_iops,
        "mean_iops": mean_iops,
        "rows": rows,
        "plot": str(plot),
        "table": str(table),
    }
