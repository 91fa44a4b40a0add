"""``storqos demo``: the bundled WebSearch excerpt (tenants = its ASUs) through FCFS and
WF2Q+ (equal weights) on a constant-rate server at three capacities around its mean
rate; a table of response times and a PNG of the response-time CDFs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .sim import simulate
from .traces import bundled, read_trace, split_tenants, stats

#: Capacities as multiples of the trace's mean arrival rate.
CAPACITY_FACTORS = (1.1, 1.3, 1.6)
#: The policies compared.
POLICIES = ("fcfs", "wf2q")
#: The deadline whose compliance the table reports.
DEADLINE_NS = 10_000_000


def run_demo(out_dir: Path, trace_path: Path | None = None) -> dict[str, Any]:
    """Run the demo, write ``cdf.png`` and ``table.csv`` into ``out_dir``; return the rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = trace_path or bundled("websearch")
    df, mapping = split_tenants(read_trace(path), by="device")
    st = stats(df)
    mean_iops = st["mean_iops"]
    n_tenants = int(df["tenant"].n_unique())
    rows: list[dict[str, Any]] = []
    out_dir.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(CAPACITY_FACTORS), figsize=(5 * len(CAPACITY_FACTORS), 4), sharey=True)
    for ax, factor in zip(np.atleast_1d(axes), CAPACITY_FACTORS):
        cap = round(mean_iops * factor)
        for policy in POLICIES:
            res = simulate(df, policy, "constant", capacity=cap, keep_requests=True)
            assert res.requests is not None
            resp = res.requests["response_ns"].to_numpy()
            per_tenant = res.requests.group_by("tenant").agg(pl.col("response_ns").quantile(0.99, "higher").alias("p99"))
            rows.append(
                {
                    "policy": res.policy,
                    "capacity_iops": float(cap),
                    "mean_ns": float(resp.mean()),
                    "p95_ns": float(np.quantile(resp, 0.95, method="higher")),
                    "p99_ns": float(np.quantile(resp, 0.99, method="higher")),
                    "within_10ms": float((resp <= DEADLINE_NS).mean()),
                    "worst_tenant_p99_ns": float(per_tenant["p99"].max()),
                }
            )
            xs = np.sort(resp) / 1e6
            ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), label=res.policy)
        ax.set_xscale("log")
        ax.set_title(f"{cap} IOPS ({factor:.1f}× mean rate)")
        ax.set_xlabel("response time (ms)")
        ax.axvline(DEADLINE_NS / 1e6, color="grey", linestyle=":", linewidth=1)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right")
    np.atleast_1d(axes)[0].set_ylabel("fraction of requests ≤ x")
    fig.suptitle(f"{path.name}: response-time CDF, FCFS vs WF2Q+ (tenants = ASUs)")
    fig.tight_layout()
    plot = out_dir / "cdf.png"
    fig.savefig(plot, dpi=110)
    plt.close(fig)
    table = out_dir / "table.csv"
    pl.DataFrame(rows).write_csv(table)
    return {
        "trace": path.name,
        "requests": df.height,
        "tenants": n_tenants,
        "mean_iops": mean_iops,
        "rows": rows,
        "plot": str(plot),
        "table": str(table),
    }
