"""Figs. 4.2–4.3 on the trace excerpts: how FCFS does on the *undecomposed* trace at the
capacity C = Cmin(f, δ) where RTT's decomposition lets a fraction f meet δ. Per request:
the response-time CDF of FCFS at C against the decomposed primary class (RTT's f of the
requests, served alone at C, all within δ). Writes docs/results/shaping_fcfs_compliance.md
and shaping_fcfs_compliance.png (one panel per δ, log-x CDFs as the thesis).

    .venv/bin/python examples/shaping/fcfs_compliance.py [--shared ../shared/traces]
"""

from __future__ import annotations

import numpy as np
import polars as pl
import storqos
from _common import (
    TRACE_COLORS,
    cli,
    load_traces,
    md,
    ms_axis,
    num,
    pct,
    pyplot,
    save,
    write_section,
)
from storqos import _core
from storqos.planning import planner

#: Fig. 4.2: f = 90 % at δ = 10, 20, 50 ms; Fig. 4.3: f = 95 %, 99 % at 50 ms.
CASES = [(90.0, "10ms"), (90.0, "20ms"), (90.0, "50ms"), (95.0, "50ms"), (99.0, "50ms")]
#: A response counts as within δ up to δ + TOLERANCE_NS: the simulated constant-rate
#: server runs on a nanosecond clock, which on TPC-C (24 µs per request) leaves up to
#: ~2 µs of rounding on a 20 ms response of RTT's primary class.
TOLERANCE_NS = 10_000


def fcfs_responses(t: pl.DataFrame, capacity: float) -> np.ndarray:
    """Per-request response time (ns) of FCFS on a constant-rate server, in trace order."""
    res = storqos.simulate(t, "fcfs", "constant", capacity=capacity, keep_requests=True)
    assert res.requests is not None
    out = np.empty(t.height, dtype=np.int64)
    out[res.requests["id"].to_numpy()] = res.requests["response_ns"].to_numpy()
    return out


def main() -> None:
    args = cli(__doc__)
    traces = load_traces(args.shared)
    rows = []
    curves: dict[tuple[str, float, str], tuple[float, np.ndarray]] = {}
    for name in traces.names():
        t = traces[name]
        a = planner.arrivals(t)
        for f, d in CASES:
            dn = planner.parse_deadlines([d])[0]
            c = planner.cmin(t, f, d)
            resp = fcfs_responses(t, c)
            primary = np.asarray(_core.rtt_classify(a, c, dn), dtype=bool)
            # The decomposed primary class served alone by FCFS at C (what RTT promises).
            sub = t[np.flatnonzero(primary).tolist()]
            presp = fcfs_responses(sub, c)
            ok = dn + TOLERANCE_NS
            rows.append(
                {
                    "trace": name,
                    "f": f,
                    "δ (ms)": dn / 1e6,
                    "C = Cmin(f, δ)": c,
                    "FCFS ≤ δ": float(np.mean(resp <= ok)),
                    "FCFS ≤ δ, RTT-primary requests": float(
                        np.mean(resp[primary] <= ok)
                    ),
                    "FCFS p90 (ms)": float(np.quantile(resp, 0.9)) / 1e6,
                    "FCFS max (ms)": float(resp.max()) / 1e6,
                    "RTT primary share": float(primary.mean()),
                    "primary alone ≤ δ": float(np.mean(presp <= ok)),
                    "primary max (ms)": float(presp.max()) / 1e6,
                }
            )
            curves[(name, f, d)] = (c, np.sort(resp) / 1e6)
    df = pl.DataFrame(rows)

    plt = pyplot()
    fig42 = [c for c in CASES if c[0] == 90.0]
    fig, axes = plt.subplots(
        1, len(fig42), figsize=(5.0 * len(fig42), 5.2), sharey=True
    )
    for ax, (f, d) in zip(axes, fig42, strict=False):
        dms = planner.parse_deadlines([d])[0] / 1e6
        for name in traces.names():
            c, r = curves[(name, f, d)]
            y = np.arange(1, r.size + 1) / r.size
            within = df.filter(
                (pl.col("trace") == name)
                & (pl.col("f") == f)
                & (pl.col("δ (ms)") == dms)
            )["FCFS ≤ δ"].item()
            ax.plot(
                r,
                y,
                color=TRACE_COLORS[name],
                label=f"{name}: FCFS at C = {num(c, 3)} IOPS, {pct(within, 0)} ≤ δ",
            )
        ax.axvline(dms, color="grey", ls="--", lw=1)
        ax.axhline(f / 100, color="grey", ls=":", lw=1)
        ax.plot(
            [dms],
            [f / 100],
            marker="*",
            ms=14,
            color="black",
            ls="none",
            label=f"any trace, RTT-decomposed: {f:g} % ≤ δ at the same C",
        )
        ms_axis(ax, "x")
        ax.set_xlim(0.01, 1e4)
        ax.set_ylim(0, 1.0)
        ax.set_xlabel("response time (ms, log scale)")
        ax.set_title(
            f"({'abc'[fig42.index((f, d))]}) target {f:g} % within δ = {dms:g} ms"
        )
        ax.legend(
            fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.15), frameon=False
        )
    axes[0].set_ylabel("fraction of requests with response ≤ x")
    fig.suptitle(
        "FCFS on the undecomposed trace at C = Cmin(90 %, δ) (Fig. 4.2): response-time CDF"
    )
    fig.tight_layout()
    img = save(fig, args.docs, "shaping_fcfs_compliance")

    fmt = {
        "f": "g",
        "δ (ms)": "g",
        "FCFS ≤ δ": pct,
        "FCFS ≤ δ, RTT-primary requests": pct,
        "RTT primary share": pct,
        "primary alone ≤ δ": pct,
    }
    body = [
        img,
        "",
        (
            "C is the capacity at which RTT's decomposition lets a fraction f of the requests meet δ "
            "(Table 4.1). *FCFS ≤ δ*: the fraction of all requests that FCFS, serving the whole trace "
            "at C, completes within δ. *FCFS p90*: the bound FCFS would meet for 90 % of the requests. "
            "*RTT primary share*: the requests RTT keeps in the primary class; *primary alone ≤ δ*: "
            "those requests served by FCFS at C with the overflow removed (checked by simulation, not "
            f"assumed; a response counts as within δ up to δ + {TOLERANCE_NS // 1000} µs, for the simulator's "
            "nanosecond rounding). *FCFS ≤ δ, RTT-primary requests*: how the same requests fare when the overflow "
            "is not removed."
        ),
        "",
        "## Fig. 4.2: f = 90 %, δ = 10, 20, 50 ms",
        "",
        md(df.filter(pl.col("f") == 90.0), fmt),
        "",
        "## Fig. 4.3: f = 95 % and 99 %, δ = 50 ms",
        "",
        md(df.filter(pl.col("f") > 90.0), fmt),
        "",
        (
            "Thesis (its WebSearch trace): 54 %, 8 % and 5 % of the requests within 10, 20 and 50 ms "
            "at Cmin(90 %); 30 % and 81 % within 50 ms at Cmin(95 %) and Cmin(99 %)."
        ),
        "",
    ]

    web = df.filter(pl.col("trace") == "WebSearch")

    def w(f: float, dms: float, col: str = "FCFS ≤ δ") -> float:
        return web.filter((pl.col("f") == f) & (pl.col("δ (ms)") == dms))[col].item()

    others = "; ".join(
        f"{n} "
        + "/".join(
            pct(v, 0)
            for v in df.filter((pl.col("trace") == n) & (pl.col("f") == 90.0))[
                "FCFS ≤ δ"
            ]
        )
        for n in traces.names()
        if n != "WebSearch"
    )
    summary = [
        (
            f"**Summary.** At C = Cmin(90 %, δ), FCFS on the undecomposed WebSearch trace meets δ = 10, 20, "
            f"50 ms for only {pct(w(90, 10))}, {pct(w(90, 20))}, {pct(w(90, 50))} of the requests "
            f"(90 % only within {num(w(90, 10, 'FCFS p90 (ms)'), 3)}, {num(w(90, 20, 'FCFS p90 (ms)'), 3)}, "
            f"{num(w(90, 50, 'FCFS p90 (ms)'), 3)} ms), while RTT's primary class ("
            f"{pct(w(90, 50, 'RTT primary share'))} of the requests at 50 ms) served alone at the same C meets δ for "
            f"{pct(w(90, 50, 'primary alone ≤ δ'))}. Other traces (FCFS ≤ δ at 10/20/50 ms): {others}."
        )
    ]
    write_section(args.docs, "fcfs_compliance", summary, body, traces)


if __name__ == "__main__":
    main()
