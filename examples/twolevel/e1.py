"""Seed 001 E1 (§4.1, Fig. 5): SARC+AVATAR vs SARC+Facade under a transient overload.

A steady WebSearch-like class and a bursty OLTP class, SLOs (160 IOPS, 400 ms) and
(190 IOPS, 900 ms) scaled to the 8-disk array (rates ×4, latencies ÷4, see
storqos.twolevel.E1_SCALE). Two variants of the web class: the UMass WebSearch excerpt
(../shared/traces, rate-scaled) and synthetic random 16 KiB reads (the Rust test's).
Writes docs/results/twolevel_e1.png and prints the miss-ratio table (markdown).

    .venv/bin/python examples/twolevel/e1.py [--out docs/results]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from storqos import slo, twolevel as tl


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="docs/results")
    ap.add_argument("--duration", type=float, default=240.0)
    args = ap.parse_args()
    s = tl.e1_slo()
    rows = []
    for web in ("synthetic", "trace"):
        w = tl.e1_workload(args.duration, web=web)
        runs = {p: tl.simulate(w, p, s) for p in ("sarc+avatar", "sarc+facade")}
        for p, r in runs.items():
            m = tl.miss_ratio(r)
            ts = tl.timeseries(r)
            lo = ts.filter(pl.col("start_s") < args.duration)["lo"]
            comp = slo.compliance(slo.judge(r.windows.filter(pl.col("start_ns") < int(args.duration * 1e9)), s))
            rows.append({
                "web class": web, "policy": p,
                "miss web": m["miss_ratio"][0], "miss oltp": m["miss_ratio"][1],
                "miss all": m["missed"].sum() / m["completed"].sum(),
                "L^O min": float(lo.min()), "L^O max": float(lo.max()),
                "SLO met web": comp["met"][0], "SLO met oltp": comp["met"][1],
            })
        if web == "synthetic":
            tl.plot(runs, s, Path(args.out) / "twolevel_e1.png", title=f"E1 ({s})")
    df = pl.DataFrame(rows)
    with pl.Config(tbl_formatting="MARKDOWN", tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True, float_precision=3):
        print(df)


if __name__ == "__main__":
    main()
