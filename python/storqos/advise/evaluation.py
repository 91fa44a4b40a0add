"""One simulation of a policy at a capacity, judged end to end (issue 19, point 5).

A request's response time runs from its *arrival* to its completion, whatever the
policy does between: what a client sees. Unfinished requests count as misses. For
SARC+AVATAR the paper's own metric (seed 001: deadline misses counted from SARC's
release, which does not see the time SARC holds a request back) is kept beside it; see
"Both metrics" in docs/results/twolevel.md. The robustness check compresses the trace's
time (arrivals ÷ load) instead of adding requests, so the same requests arrive faster.

:class:`Runner` counts and remembers the simulations of one search (a capacity is
simulated once).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import polars as pl

from .policies import policy_for
from .problem import Problem

#: Two fractions closer than this are equal (a fraction of requests P is met at P − ε).
FRACTION_EPS = 1e-12
#: Significant digits a continuous capacity is rounded to before it is simulated (so a
#: capacity reached twice is simulated once, and tables print what was run).
CAPACITY_DIGITS = 9


@dataclass
class Evaluation:
    """One simulation at a capacity: per tenant the achieved percentile (ns), the fraction
    within its bound, the margin (1 − achieved / bound) and, for SARC+AVATAR, the paper's
    miss ratio (after SARC releases a request) beside the end-to-end one."""

    capacity: float
    load: float
    met: bool
    achieved_ns: list[float | None]
    within: list[float | None]
    margin: list[float | None]
    paper_miss: list[float | None]
    wall_s: float
    cdf: pl.DataFrame | None = None

    @property
    def worst(self) -> float:
        """The worst tenant's achieved / bound (> 1: an SLO fails)."""
        m = [x for x in self.margin if x is not None]
        return 1.0 - min(m) if m else 0.0


def _scaled(trace: pl.DataFrame, load: float) -> pl.DataFrame:
    if load == 1.0:
        return trace
    return trace.with_columns((pl.col("arrival_ns").cast(pl.Float64) / load).round().cast(pl.Int64))


def evaluate(p: Problem, kind: str, capacity: float, *, load: float = 1.0, keep_cdf: bool = False) -> Evaluation:
    """Simulate ``kind`` (parameters from the SLOs) at ``capacity`` with the load × ``load``
    and judge every tenant end to end (arrival to completion)."""
    from ..sim import simulate

    pspec = policy_for(p, kind, capacity)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = simulate(_scaled(p.trace, load), pspec, p.family.spec(capacity), seed=p.seed)
    wall = time.perf_counter() - t0
    cdf = res.cdf
    achieved: list[float | None] = []
    within: list[float | None] = []
    margin: list[float | None] = []
    for i, t in enumerate(p.tenants):
        c = cdf.filter(pl.col("tenant") == i).sort("response_ns")
        if t.slo is None:
            achieved.append(None if c.height == 0 else float(c["response_ns"][-1]))
            within.append(None)
            margin.append(None)
            continue
        x = c["response_ns"].to_numpy()
        f = c["fraction"].to_numpy()
        done = float(res.tenants.filter(pl.col("tenant") == i)["completed"].sum()) if res.tenants.height else 0.0
        scale = done / t.requests if t.requests else 0.0  # unfinished requests count as misses
        f = f * scale
        ok = x <= t.slo.latency_ns
        w = float(f[ok].max()) if ok.any() else 0.0
        reach = np.flatnonzero(f >= t.slo.percentile - FRACTION_EPS)
        q = float(x[reach[0]]) if reach.size else float("inf")
        achieved.append(q)
        within.append(w)
        margin.append(1.0 - q / t.slo.latency_ns)
    paper: list[float | None] = [None] * len(p.tenants)
    if kind == "sarc+avatar" and res.gauges.height:
        g = res.gauges.group_by("name").agg(pl.col("value").last())
        vals = dict(g.iter_rows())
        for i in range(len(p.tenants)):
            done_i, missed_i = vals.get(f"low_done.{i}"), vals.get(f"low_missed.{i}")
            if done_i:
                paper[i] = float(missed_i or 0.0) / float(done_i)
    met = all(m is None or w is None or w >= t.slo.percentile - FRACTION_EPS
              for t, w, m in zip(p.tenants, within, margin, strict=True) if t.slo is not None)
    return Evaluation(capacity=capacity, load=load, met=met, achieved_ns=achieved, within=within, margin=margin,
                      paper_miss=paper, wall_s=wall, cdf=cdf if keep_cdf else None)


# ----------------------------------------------------------------------------- search


class Runner:
    """Counts and remembers the simulations of one search: ``run(c)`` simulates the
    policy at the capacity ``c`` (quantized: :meth:`quantize`) unless it was before."""

    def __init__(self, p: Problem, kind: str, load: float = 1.0) -> None:
        self.p, self.kind, self.load = p, kind, load
        #: (capacity, every SLO met, worst tenant's achieved / bound), in the order run
        self.history: list[tuple[float, bool, float]] = []
        self.cache: dict[float, Evaluation] = {}

    def __call__(self, c: float) -> Evaluation:
        c = self.quantize(c)
        if c not in self.cache:
            e = evaluate(self.p, self.kind, c, load=self.load, keep_cdf=True)
            self.cache[c] = e
            self.history.append((c, e.met, e.worst))
        return self.cache[c]

    def quantize(self, c: float) -> float:
        """A whole number of disks (at least 1), else :data:`CAPACITY_DIGITS` digits."""
        if self.p.family.integer:
            return float(max(1, math.ceil(c - 1e-9)))
        return float(f"{c:.{CAPACITY_DIGITS}g}")


__all__ = ["Evaluation", "Runner", "evaluate"]
