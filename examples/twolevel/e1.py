"""Seed 001 E1 (§4.1, Fig. 5): SARC+AVATAR vs SARC+Facade under a transient overload.

A steady WebSearch class and a bursty OLTP class, SLOs (160 IOPS, 400 ms) and (190 IOPS,
900 ms) scaled to the 8-disk array: rates ×4, latencies ÷4, and — so that time runs 4×
faster everywhere — the controllers' window (1 s → 250 ms) and T_SARC (100 ms → 25 ms)
÷4 too (storqos.model.twolevel.workloads.E1_SCALE, e1_timing); SLO compliance is judged per 250 ms.
Two variants of the web class: the UMass WebSearch excerpt (../shared/traces,
rate-scaled; the bundled excerpt otherwise) and synthetic random 16 KiB reads.
Writes docs/results/twolevel_e1.png (trace variant) and prints the miss-ratio table
(markdown). ``--unscaled-timing`` keeps the 1 s window and 100 ms T_SARC (the earlier,
inconsistent setup) for comparison.

    .venv/bin/python examples/twolevel/e1.py [--out docs/results]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl
from storqos.base.shared import shared_path
from storqos.model import slo
from storqos.model.twolevel import analysis, plots, workloads
from storqos.traces import read_trace


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/results")
    ap.add_argument("--duration", type=float, default=240.0)
    ap.add_argument("--unscaled-timing", action="store_true")
    args = ap.parse_args()
    s = workloads.e1_slo()
    timing = {"control_window": "1s", "period": "100ms"} if args.unscaled_timing else workloads.e1_timing()
    interval_ns = int(1e9 / (1.0 if args.unscaled_timing else workloads.E1_SCALE))
    end_ns = int(args.duration * 1e9)
    rows = []
    # The UMass WebSearch and TPC-C excerpts from the shared traces (STORQOS_SHARED or ../shared).
    websearch = read_trace(shared_path("traces/umass-websearch-excerpt/wsrch-small.trace"), format="mqsim")
    tpcc = read_trace(shared_path("traces/tpcc-excerpt/tpcc-small.trace"), format="mqsim")
    for web in ("trace", "synthetic"):
        w = workloads.e1_workload(args.duration, web=web, web_trace=websearch, oltp_shapes=tpcc)
        runs = {p: analysis.simulate(w, p, s, window=f"{interval_ns}ns", **timing) for p in ("sarc+avatar", "sarc+facade")}
        for p, r in runs.items():
            m = analysis.miss_ratio(r)
            ts = analysis.timeseries(r).filter(pl.col("start_s") < args.duration)
            burst = ts.filter(pl.col("start_s").is_between(60.0, 100.0, closed="left"))["lo"]
            calm = ts.filter(pl.col("start_s").is_between(20.0, 60.0, closed="left"))["lo"]
            comp = slo.compliance(slo.judge(r.windows.filter(pl.col("start_ns") < end_ns), s, interval_ns=interval_ns))
            rows.append({
                "web class": web, "policy": p,
                "miss web": m["miss_ratio"][0], "miss oltp": m["miss_ratio"][1],
                "miss all": m["missed"].sum() / m["completed"].sum(),
                "L^O mean 20-60 s": float(calm.clip(upper_bound=1e6).mean()),
                "L^O min after 60 s": float(ts.filter(pl.col("start_s") >= 60.0)["lo"].min()),
                "L^O max 60-100 s": float(burst.max()),
                "SLO met web": comp["met"][0], "SLO met oltp": comp["met"][1],
            })
        if web == "trace":
            plots.plot(runs, s, Path(args.out) / "twolevel_e1.png", title=f"E1, WebSearch trace ({s}; window {timing['control_window']})")
    df = pl.DataFrame(rows)
    with pl.Config(tbl_formatting="MARKDOWN", tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True, float_precision=3, tbl_width_chars=400, tbl_cols=20):
        print(df)


if __name__ == "__main__":
    main()
