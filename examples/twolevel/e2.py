"""Seed 001 E2 (§4.2, Table 1): average throughput of FIXED, ADAPTIVE and SARC (each
over AVATAR) with two bursty classes near capacity and loose SLOs, (250 IOPS, 900 ms)
and (200 IOPS, 600 ms), rates ×3.3 for the 8-disk array (storqos.model.twolevel.workloads.E2_SCALE).
ADAPTIVE runs with the paper's P_rt = 20 %, P_inc = 2.5 %, P_dec = 5 %.
Prints the table (markdown), IOPS per class, total and low-level miss ratio.

    .venv/bin/python examples/twolevel/e2.py
"""

from __future__ import annotations

import argparse

import polars as pl
from storqos.base.shared import shared_path
from storqos.model.twolevel import analysis, workloads
from storqos.traces import read_trace


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=200.0)
    args = ap.parse_args()
    tpcc = read_trace(shared_path("traces/tpcc-excerpt/tpcc-small.trace"), format="mqsim")  # request shapes
    w = workloads.e2_workload(args.duration, tpcc_shapes=tpcc)
    rows = []
    for p in ("fixed+avatar", "adaptive+avatar", "sarc+avatar"):
        r = analysis.simulate(w, p, workloads.e2_slo(), until=f"{args.duration}s")
        x = [c / args.duration for c in r.tenants["completed"].to_list()]
        m = analysis.miss_ratio(r)
        rows.append({"policy": p, "mail IOPS": x[0], "tpcc IOPS": x[1], "total IOPS": sum(x),
                     "miss ratio": m["missed"].sum() / m["completed"].sum()})
    offered = w.height / args.duration
    print(f"offered load {offered:.0f} IOPS, SLOs {workloads.e2_slo()}")
    with pl.Config(tbl_formatting="MARKDOWN", tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True, float_precision=3):
        print(pl.DataFrame(rows))


if __name__ == "__main__":
    main()
