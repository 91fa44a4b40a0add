"""Shared helpers of the seed 003 examples: run cases, print their tables, plot series."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
from storqos.model.fclb.cases import COMPARED, Experiment, run_experiment

OUT = Path(__file__).resolve().parents[2] / "out" / "fclb"


def run(cases: list[str]) -> Experiment:
    """Derive the setup (admission → references, profiled G → K) and run ``cases`` with
    FCLB, a fixed leaky bucket and plain YFQ."""
    return run_experiment(cases, COMPARED)


def print_case(exp: Experiment, case: str) -> None:
    s = exp.summary.filter(pl.col("case") == case).select(
        "policy", "workload", "throughput_iops", "steady_iops", "violation_pct", "p95_ms", "throughput_ratio"
    )
    with pl.Config(tbl_rows=20, tbl_cols=10, tbl_width_chars=120, float_precision=1):
        print(f"== {case} ==")
        print(s)
        ts = exp.series.filter((pl.col("case") == case) & (pl.col("policy") == "fclb")).sort("start_s", "workload")
        print("FCLB time series (every 5 s): completed IOPS, replenish rate r_i, p95 from the bucket")
        print(ts.filter(pl.col("start_s") % 5 == 0).select("start_s", "workload", "iops", "rate_iops", "rt_p95_ms"))


def plot_case(exp: Experiment, case: str) -> Path | None:
    """Response time and throughput per second under FCLB (out/fclb/<case>.png)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # plotting is optional
        return None
    OUT.mkdir(parents=True, exist_ok=True)
    ts = exp.series.filter((pl.col("case") == case) & (pl.col("policy") == "fclb")).sort("start_s")
    fig, (a, b) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for w in sorted(ts["workload"].unique()):
        d = ts.filter(pl.col("workload") == w)
        a.plot(d["start_s"], d["rt_p95_ms"], label=f"{w} p95 (ms)")
        b.plot(d["start_s"], d["iops"], label=f"{w} throughput (IOPS)")
        b.plot(d["start_s"], d["rate_iops"], "--", label=f"{w} rate r_i (IOPS)")
    a.axhline(35, color="grey", lw=0.5)
    a.axhline(38, color="grey", lw=0.5)
    a.set_ylabel("p95 response (ms)")
    a.set_ylim(0, 120)
    b.set_ylabel("IOPS")
    b.set_xlabel("time (s)")
    a.legend()
    b.legend()
    fig.suptitle(f"seed 003, case {case}: FCLB over YFQ 2:1")
    p = OUT / f"{case}.png"
    fig.savefig(p, dpi=100)
    plt.close(fig)
    return p


def main(cases: list[str]) -> None:
    exp = run(cases)
    print(f"K = {exp.setup['gain_iops_per_ms']:.3f} IOPS/ms (G = {exp.setup['plant_gain_ms_per_iops']:.3f} ms/IOPS, "
          f"pole {exp.setup['pole']}), references {[r / 1e6 for r in exp.setup['reference_ns']]} ms")
    for c in cases:
        print_case(exp, c)
        p = plot_case(exp, c)
        if p:
            print(f"plot: {p}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["both"])
