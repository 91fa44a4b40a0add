"""The proof of a search's answer and its robustness (issue 19, point 3).

- **At the answer** every SLO holds: the search's last holding simulation.
- **Minimality**: at :data:`PROOF_FACTOR` × the answer (one disk fewer for disks) at
  least one SLO fails, simulated. (When one held there, the search starts again below
  it: :func:`.capacity_search.search`.) A policy that meets every SLO at the least
  capacity the search may try is reported ``any`` ("met at any capacity the search
  allows"); one that misses at the most it may try ``never``.
- **Robustness**: the SLOs at :data:`ROBUST_LOAD` × the load at the same capacity (the
  trace's arrival times divided by 1.1: the same requests, faster).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .evaluation import Evaluation, Runner, evaluate
from .problem import Problem

#: The minimality check: at this fraction of the reported capacity some SLO must fail
#: (issue 19: "at 0.98× of it at least one fails").
PROOF_FACTOR = 0.98
#: The robustness check: the load (request rate) the reported capacity is also tried at
#: (issue 19: "+10 % load").
ROBUST_LOAD = 1.10
#: What a search may conclude.
STATUSES = ("ok", "any", "never")


@dataclass
class PolicyAdvice:
    """One policy's answer: ``status`` ``"ok"`` (minimum capacity found), ``"never"``
    (some SLO fails at every capacity the search allows) or ``"any"`` (every SLO holds at
    the least capacity the search tries); the evaluation at the answer, the minimality
    check below it, the robustness check at +10 % load, and how many simulations."""

    policy: str
    status: str
    capacity: float
    at: Evaluation
    below: Evaluation | None
    robust: Evaluation | None
    simulations: int
    #: the simulations of the search alone (without the two proof runs), for the benchmark
    search_simulations: int
    history: list[tuple[float, bool, float]]
    wall_s: float
    notes: list[str] = field(default_factory=list)


def below(p: Problem, capacity: float) -> float:
    """Where minimality is checked: :data:`PROOF_FACTOR` × the capacity, one disk fewer."""
    return capacity - 1 if p.family.integer else capacity * PROOF_FACTOR


def prove(p: Problem, kind: str, run: Runner, status: str, capacity: float, at: Evaluation, notes: list[str],
          t0: float, searched: int | None = None) -> PolicyAdvice:
    """The search's answer with its proof: the minimality run (``ok`` only; the search
    may have run it already) and the robustness run (not for ``never``). ``searched``:
    the search's own simulations (default: all ``run`` did so far)."""
    assert status in STATUSES, status
    searched = len(run.history) if searched is None else searched
    below_e: Evaluation | None = None
    robust: Evaluation | None = None
    if status == "ok":
        below_e = run(below(p, capacity))
    if status != "never":
        robust = evaluate(p, kind, capacity, load=ROBUST_LOAD)
    sims = len(run.history) + (robust is not None)
    return PolicyAdvice(policy=kind, status=status, capacity=capacity, at=at, below=below_e, robust=robust,
                        simulations=sims, search_simulations=searched, history=list(run.history),
                        wall_s=time.perf_counter() - t0, notes=notes)


__all__ = ["PROOF_FACTOR", "ROBUST_LOAD", "PolicyAdvice", "below", "prove"]
