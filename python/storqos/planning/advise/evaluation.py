"""One simulation of a policy at a capacity, judged end to end.

A request's response time runs from its *arrival* to its completion, whatever the
policy does between: what a client sees. Unfinished requests count as misses. For
SARC+AVATAR the paper's own metric (seed 001: deadline misses counted from SARC's
release, which does not see the time SARC holds a request back) is kept beside it; see
"Both metrics" in docs/results/twolevel.md. More load compresses the trace's time
(arrivals ÷ load, :func:`.problem.scaled_trace`) instead of adding requests, so the same
requests arrive faster.

A capacity is tried (:class:`Trial`) at every load of :attr:`.problem.Problem.loads`:
first at the headroom's, which fails first, then, if every SLO held there, at the
trace's own; it holds when every SLO holds at both. :class:`Runner` counts and
remembers the trials and simulations of one search (a capacity is tried once).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import polars as pl

from storqos.model import registry
from storqos.planning.advise.policies import policy_for
from storqos.planning.advise.problem import Problem, headroom_text, scaled_trace

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


def evaluate(p: Problem, kind: str, capacity: float, *, load: float = 1.0, keep_cdf: bool = False) -> Evaluation:
    """Simulate ``kind`` (parameters from the SLOs) at ``capacity`` with the load × ``load``
    and judge every tenant end to end (arrival to completion)."""
    from storqos.model.sim import simulate

    pspec = policy_for(p, kind, capacity)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = simulate(scaled_trace(p.trace, load), pspec, p.family.spec(capacity), seed=p.seed)
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
    # The two-level policies report AVATAR's low-level deadline misses as gauges.
    pol = registry.lookup(kind)
    if pol is not None and pol.form == "two_level" and res.gauges.height:
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


@dataclass
class Trial:
    """One capacity tried at every load the SLOs are judged at (the headroom's first):
    ``evaluations`` in that order, stopped at the first load where an SLO failed."""

    capacity: float
    evaluations: list[Evaluation]

    @property
    def met(self) -> bool:
        """Every SLO held at every load."""
        return all(e.met for e in self.evaluations)

    @property
    def worst(self) -> float:
        """The worst tenant's achieved / bound over the loads tried (> 1: an SLO fails)."""
        return max(e.worst for e in self.evaluations)

    @property
    def nominal(self) -> Evaluation | None:
        """The evaluation at the trace's own load (None: not run, an SLO failed at more)."""
        return next((e for e in self.evaluations if e.load == 1.0), None)

    @property
    def loaded(self) -> Evaluation | None:
        """The evaluation at the headroom's load (None without headroom)."""
        return next((e for e in self.evaluations if e.load != 1.0), None)

    def failures(self, p: Problem) -> list[str]:
        """Which SLOs failed, and at which load: ``burst (p95≤100ms: 143 ms at +10 % load)``."""
        out = []
        for e in self.evaluations:
            for t, m, q in zip(p.tenants, e.margin, e.achieved_ns, strict=True):
                if m is not None and m < 0 and t.slo is not None:
                    got = "unfinished" if q is None or not math.isfinite(q) else f"{q / 1e6:.3g} ms"
                    at = "" if e.load == 1.0 else f" at {headroom_text(e.load - 1)} load"
                    out.append(f"{t.name} ({t.slo.text}: {got}{at})")
        return out


class Runner:
    """Counts and remembers the trials of one search: ``run(c)`` tries the policy at the
    capacity ``c`` (quantized: :meth:`quantize`) at every load of ``p.loads`` unless it
    was before; ``run(c, every_load=True)`` runs the loads a failure skipped too."""

    def __init__(self, p: Problem, kind: str) -> None:
        self.p, self.kind = p, kind
        #: (capacity, every SLO met at every load, worst tenant's achieved / bound), in the order tried
        self.history: list[tuple[float, bool, float]] = []
        self.cache: dict[float, Trial] = {}
        #: simulations run (a trial runs one per load, fewer when an SLO fails at the first)
        self.simulations = 0

    def __call__(self, c: float, *, every_load: bool = False) -> Trial:
        c = self.quantize(c)
        trial = self.cache.get(c)
        if trial is None:
            trial = self.cache[c] = Trial(c, [])
            for load in self.p.loads:
                self._run(trial, load)
                if not trial.met:
                    break
            self.history.append((c, trial.met, trial.worst))
        if every_load:
            for load in self.p.loads:
                if all(e.load != load for e in trial.evaluations):
                    self._run(trial, load)
        return trial

    def _run(self, trial: Trial, load: float) -> None:
        trial.evaluations.append(evaluate(self.p, self.kind, trial.capacity, load=load, keep_cdf=load == 1.0))
        self.simulations += 1

    def quantize(self, c: float) -> float:
        """A whole number of disks (at least 1), else :data:`CAPACITY_DIGITS` digits."""
        if self.p.family.integer:
            return float(max(1, math.ceil(c - 1e-9)))
        return float(f"{c:.{CAPACITY_DIGITS}g}")


__all__ = ["Evaluation", "Runner", "Trial", "evaluate"]
