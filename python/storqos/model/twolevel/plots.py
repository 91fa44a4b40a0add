"""Seed 001 (SARC + AVATAR), §4's figures: per policy, L^O and credits, the per-class
low-level percentile against its SLO, and the per-interval SLO verdicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from storqos.base.paths import make_folder
from storqos.model.sim import SimResult
from storqos.model.slo import ClassSlo, judge, parse_slo
from storqos.model.twolevel.analysis import timeseries

_VERDICT_LEVEL = {"latency met": 0, "throughput met": 1, "violated": 2}


def plot(
    runs: Mapping[str, SimResult],
    slo: str | Sequence[ClassSlo],
    path: str | Path,
    *,
    cls: int | None = None,
    title: str | None = None,
) -> Path:
    """Seed 001 Fig. 5-style figure for several runs of the same workload: per run,
    the low-level percentile response time of class ``cls`` (default: the last class)
    against its deadline, the queue threshold L^O, and the per-second SLO verdicts.
    Written to ``path`` (PNG/SVG/PDF by suffix); returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    slos = parse_slo(slo)
    c = len(slos) - 1 if cls is None else cls
    n = len(runs)
    fig, axes = plt.subplots(3, n, figsize=(5.5 * n, 8.5), sharex=True, squeeze=False)
    colours = {"latency met": "#4c9a2a", "throughput met": "#2a6f9a", "violated": "#c23b22"}
    for j, (name, res) in enumerate(runs.items()):
        ts = timeseries(res)
        ax = axes[0][j]
        if f"low_p_ms.{c}" in ts.columns:
            ax.plot(ts["start_s"], ts[f"low_p_ms.{c}"], lw=0.9, label=f"class {slos[c].name}: low-level p")
        ax.axhline(slos[c].latency_ns / 1e6, color="k", ls="--", lw=0.8, label="deadline D")
        ax.set_yscale("log")
        ax.set_ylabel("low-level percentile response (ms)")
        ax.set_title(name)
        ax.legend(fontsize=8)
        ax = axes[1][j]
        lo = ts["lo"].to_numpy().copy() if "lo" in ts.columns else None
        if lo is not None:
            finite = lo[lo != float("inf")]
            cap = (finite.max() if finite.size else 1.0) * 1.2
            over = lo == float("inf")
            lo[over] = cap
            ax.step(ts["start_s"], lo, where="post", lw=0.9, label="L^O (threshold / depth)")
            if over.any():
                ax.scatter(ts["start_s"].to_numpy()[over], lo[over], s=6, color="#c23b22", label="overload (L^O = ∞)")
        ax.set_yscale("log")
        ax.set_ylabel("utility queue threshold")
        ax.legend(fontsize=8)
        ax = axes[2][j]
        v = judge(res.windows, slos)
        for k in range(len(slos)):
            rows = v.filter(pl.col("tenant") == k)
            ax.scatter(rows["start_s"], [k] * rows.height, c=[colours[x] for x in rows["verdict"]], s=8, marker="|")
        ax.set_yticks(range(len(slos)), [s.name for s in slos])
        ax.set_xlabel("time (s)")
        ax.set_ylabel("SLO per second")
        handles = [plt.Line2D([], [], color=col, marker="|", ls="", label=lab) for lab, col in colours.items()]
        ax.legend(handles=handles, fontsize=8, loc="upper right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    make_folder(out.parent)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
