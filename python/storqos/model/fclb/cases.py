"""Seed 003 (feedback-controlled leaky bucket over YFQ), §4.5: the four experiment cases
under FCLB, a fixed leaky bucket and plain YFQ (``storqos_core::fclb::experiment``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from storqos import _core
from storqos.base.units import check_seed
from storqos.model.fclb.admission import AdmissionReport, admission_report, curve_frame
from storqos.model.sim import gauge_frame, window_frame

#: The seven runs of seed 003 §4.5: case 1 (one workload inactive), case 2 (a step at
#: 30 s), case 3 (a pulse 5 s on / 5 s off) with each workload in the special role, and
#: case 4 (both active). ``w1`` is the 40 IOPS workload, ``w2`` the 20 IOPS one.
CASES: tuple[str, ...] = ("inactive-w2", "inactive-w1", "step-w2", "step-w1", "pulse-w2", "pulse-w1", "both")
#: The policies compared in the same runs: FCLB, a fixed leaky bucket, plain YFQ.
COMPARED: tuple[str, ...] = ("fclb", "fixed-bucket", "yfq")


@dataclass
class Experiment:
    """Seed 003 §4 runs. ``summary``: one row per (case, policy, workload) with
    throughput_iops (mean over the 1 s windows the workload is active), steady_iops (the
    same after 20 s), violation_pct (completions above RT_i), p95_ms, final_rate_iops,
    total_iops and throughput_ratio (W1 : W2 over the run). ``series``: per second and
    workload (``start_s`` whole seconds), iops, rt_p95_ms (from the bucket) and
    rate_iops (r_i)."""

    setup: dict[str, Any]
    summary: pl.DataFrame
    series: pl.DataFrame
    admission: AdmissionReport = field(repr=False)


def run_experiment(
    cases: Sequence[str] = CASES, policies: Sequence[str] = COMPARED, *, pole: float | None = None, seed: int = 1
) -> Experiment:
    """Derive the setup the paper's way (admission → references, profiled G → K) and run
    ``cases`` under ``policies`` on the seed's disk with closed-loop W1 and W2."""
    out = _core.fclb_experiment(list(cases), list(policies), pole=pole, seed=check_seed(seed))
    rows: list[dict[str, Any]] = []
    series: list[pl.DataFrame] = []
    for run in out.runs:
        w = run.workloads
        throughput, steady, violation, p95, final_rate = (w.throughput_iops, w.steady_iops, w.violation_pct, w.p95_ms,
                                                          w.final_rate_iops)
        for k, wi in enumerate(w.workload):
            rows.append(
                {
                    "case": run.case,
                    "policy": run.policy,
                    "workload": f"W{wi + 1}",
                    "throughput_iops": throughput[k],
                    "steady_iops": steady[k],
                    "violation_pct": violation[k],
                    "p95_ms": p95[k],
                    # Plain YFQ has no bucket: no rate to report.
                    "final_rate_iops": None if run.policy == "yfq" else final_rate[k],
                    "total_iops": run.total_iops,
                    "throughput_ratio": run.throughput_ratio,
                }
            )
        win = window_frame(run.windows).select(
            (pl.col("start_ns") // 1_000_000_000).cast(pl.Int64).alias("start_s"),
            ("W" + (pl.col("tenant") + 1).cast(pl.Utf8)).alias("workload"),
            pl.col("completed").cast(pl.Float64).alias("iops"),
        )
        g = gauge_frame(run.gauges)
        g = g.filter(pl.col("name").str.starts_with("fclb_rate_iops.") | pl.col("name").str.starts_with("fclb_rt_p95_ms."))
        g = g.with_columns(
            (pl.col("start_ns") // 1_000_000_000).cast(pl.Int64).alias("start_s"),
            ("W" + (pl.col("name").str.split(".").list.get(1).cast(pl.Int64) + 1).cast(pl.Utf8)).alias("workload"),
            pl.col("name").str.split(".").list.get(0).str.replace("fclb_", "").alias("gauge"),
        ).pivot(on="gauge", index=["start_s", "workload"], values="value")
        s = win.join(g, on=["start_s", "workload"], how="left").with_columns(
            pl.lit(run.case).alias("case"), pl.lit(run.policy).alias("policy")
        )
        series.append(s)
    st = out.setup
    admission = admission_report(st.admission)
    setup: dict[str, Any] = {
        "gain_iops_per_ms": st.gain_iops_per_ms,
        "plant_gain_ms_per_iops": st.plant_gain_ms_per_iops,
        "pole": st.pole,
        "bound_iops_per_ms": st.bound_iops_per_ms,
        "operating_iops": st.operating_iops,
        "reference_ns": st.reference_ns,
        "probes": curve_frame(st.probes),
    }
    return Experiment(
        setup=setup,
        summary=pl.DataFrame(rows),
        series=pl.concat(series, how="diagonal_relaxed") if series else pl.DataFrame(),
        admission=admission,
    )
