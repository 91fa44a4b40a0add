"""The RTD example (§3.2.2, graduated QoS): a response-time distribution
90 %@20 ms, 99 %@50 ms, 100 %@500 ms turned into one capacity per tier by recursive RTT
decomposition, each tier then simulated on its own constant-rate FCFS server to check the
cumulative fractions. Writes docs/results/shaping_rtd.md.

    .venv/bin/python examples/shaping/rtd.py [--shared ../shared/traces]
"""

from __future__ import annotations

import polars as pl
from _common import cli, load_traces, md, num, pct, write_section
from storqos.planning import planner

SPEC = "90%@20ms,99%@50ms,100%@500ms"


def main() -> None:
    args = cli(__doc__)
    traces = load_traces(args.shared)
    results = {name: planner.rtd(traces[name], SPEC) for name in traces.names()}
    fmt = {
        "fraction": lambda v: f"{100 * v:g} %",
        "δ (ms)": "g",
        "achieved (cumulative)": lambda v: pct(v, 2),
        "admitted": lambda v: f"{v:,}",
    }
    ren = {
        "deadline_ms": "δ (ms)",
        "capacity_iops": "capacity (IOPS)",
        "tier_max_response_ms": "tier max response (ms)",
        "achieved_fraction": "achieved (cumulative)",
    }
    body = [
        (
            f"RTD `{SPEC}`: tier 1 is RTT's primary class at Cmin(90 %, 20 ms); tier 2 gets the capacity that "
            "lets the overflow bring the cumulative fraction to 99 % within 50 ms; tier 3 the rest within 500 ms. "
            "*achieved (cumulative)*: the fraction of all requests within the tier's δ when every tier is "
            "served by FCFS on its own server at its capacity (simulated). *100 % within 20 ms*: the capacity "
            "one server would need to give every request the first tier's bound. The tiers are separate "
            "servers, so an RTD can cost more than that when the trace is hardly bursty (TPC-C)."
        ),
        "",
    ]
    rows = []
    for name, r in results.items():
        body += [
            f"## {name}",
            "",
            md(r.tiers.rename(ren), fmt),
            "",
            f"Total {num(r.total_iops)} IOPS; 100 % within 20 ms would need {num(r.all_at_first_deadline_iops)} IOPS.",
            "",
        ]
        rows.append(
            {
                "trace": name,
                "RTD total (IOPS)": r.total_iops,
                "tier capacities": " + ".join(num(c) for c in r.tiers["capacity_iops"]),
                "100 % within 20 ms (IOPS)": r.all_at_first_deadline_iops,
                "RTD ÷ 100 %@20 ms": r.total_iops / r.all_at_first_deadline_iops,
            }
        )
    summ = pl.DataFrame(rows)
    body[2:2] = ["## All traces", "", md(summ, {"RTD ÷ 100 %@20 ms": ".2f"}), ""]
    w = results["WebSearch"]
    summary = [
        f"**Summary.** WebSearch, RTD {SPEC}: tiers of "
        + " + ".join(num(c) for c in w.tiers["capacity_iops"])
        + f" = {num(w.total_iops)} IOPS against {num(w.all_at_first_deadline_iops)} IOPS for 100 % within 20 ms "
        f"({w.total_iops / w.all_at_first_deadline_iops:.2f}×); simulated cumulative fractions "
        + ", ".join(pct(v, 2) for v in w.tiers["achieved_fraction"])
        + ". "
        + (
            "RTD total vs 100 % within 20 ms (IOPS): "
            + "; ".join(
                f"{n} {num(r.total_iops)} vs {num(r.all_at_first_deadline_iops)}"
                for n, r in results.items()
                if n != "WebSearch"
            )
            + "."
            if len(results) > 1
            else ""
        )
    ]
    write_section(args.docs, "rtd", summary, body, traces)


if __name__ == "__main__":
    main()
