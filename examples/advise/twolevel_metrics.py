"""Seed 001's E1 judged two ways: the paper's deadline-miss ratio,
counted from the moment SARC releases a request to AVATAR, beside the end-to-end miss
ratio (arrival to completion: what a client sees, and what ``storqos advise`` judges),
for SARC+AVATAR, SARC+Facade and plain FCFS on the same 8-disk array and workload.

    .venv/bin/python examples/advise/twolevel_metrics.py [--duration 240]

Writes a markdown table to stdout (docs/results/twolevel.md, "Both metrics").
"""

from __future__ import annotations

import argparse

import polars as pl
from storqos.base.shared import shared_path
from storqos.model.sim import simulate
from storqos.model.slo import parse_slo
from storqos.model.twolevel import analysis, workloads
from storqos.model.twolevel.spec import ARRAY_8_DISKS
from storqos.traces import read_trace


def end_to_end_miss(res, slos) -> list[float]:  # type: ignore[no-untyped-def]
    """Per class: the share of its requests whose response (arrival to completion) exceeds D_i."""
    out = []
    for i, s in enumerate(slos):
        c = res.cdf.filter(pl.col("tenant") == i).sort("response_ns")
        ok = c.filter(pl.col("response_ns") <= s.latency_ns)["fraction"]
        done = float(res.tenants.filter(pl.col("tenant") == i)["completed"].sum())
        out.append(1.0 - (float(ok.max()) if ok.len() else 0.0))
        assert done > 0
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=240.0)
    args = ap.parse_args()
    s = workloads.e1_slo()
    slos = parse_slo(s)
    timing = workloads.e1_timing()
    websearch = read_trace(shared_path("traces/umass-websearch-excerpt/wsrch-small.trace"), format="mqsim")
    tpcc = read_trace(shared_path("traces/tpcc-excerpt/tpcc-small.trace"), format="mqsim")
    print("| web class | policy | paper: web | paper: oltp | end to end: web | end to end: oltp |")
    print("|---|---|---:|---:|---:|---:|")
    for web in ("trace", "synthetic"):
        w = workloads.e1_workload(args.duration, web=web, web_trace=websearch, oltp_shapes=tpcc)
        for p in ("sarc+avatar", "sarc+facade", "fcfs"):
            if p == "fcfs":
                r = simulate(w, "fcfs", ARRAY_8_DISKS)
                paper = ["–", "–"]
            else:
                r = analysis.simulate(w, p, s, **timing)
                m = analysis.miss_ratio(r)
                paper = [f"{100 * x:.1f} %" for x in m["miss_ratio"].to_list()]
            e2e = end_to_end_miss(r, slos)
            print(f"| {web} | {p} | {paper[0]} | {paper[1]} | {100 * e2e[0]:.1f} % | {100 * e2e[1]:.1f} % |", flush=True)


if __name__ == "__main__":
    main()
