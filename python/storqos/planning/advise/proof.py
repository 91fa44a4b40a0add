"""The proof of a search's answer, under the headroom rule.

- **At the answer** every SLO holds at the trace's load and at (1 + headroom) × it:
  the search's last holding trial (:class:`.evaluation.Trial`).
- **Minimality**: at :data:`PROOF_FACTOR` × the answer (one disk fewer for disks) at
  least one SLO fails at one of the two loads, simulated. (When every one held there,
  the search starts again below it: :func:`.capacity_search.search`.) A policy that
  meets every SLO at the least capacity the search may try is reported ``any`` ("met
  at any capacity the search allows"); one that misses at the most it may try
  ``never``, with the reason: which tenant's SLO failed there and at which load, or the
  constraint that makes it fail at every capacity (an mClock cap below what the
  tenant's SLO needs), which the search checks before it simulates anything.
- **Robustness** is the headroom itself: the answer's evaluation at the extra load is
  kept (``robust``) and shown beside the one at the trace's load.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from storqos.model import registry
from storqos.planning.advise.bounds import CMIN_SLACK
from storqos.planning.advise.evaluation import Evaluation, Runner, Trial
from storqos.planning.advise.problem import Problem, headroom_text, max_units

#: The minimality check: at this fraction of the reported capacity some SLO must fail
#: (the advisor's promise: at 0.98× of it at least one SLO fails).
PROOF_FACTOR = 0.98
#: What a search may conclude.
STATUSES = ("ok", "any", "never")


@dataclass
class PolicyAdvice:
    """One policy's answer: ``status`` ``"ok"`` (minimum capacity found), ``"never"``
    (some SLO fails at every capacity the search allows: ``reason`` says which) or
    ``"any"`` (every SLO holds at the least capacity the search tries); the evaluation at
    the answer (at the trace's load), the minimality trial below it, the evaluation at
    the headroom's load (``robust``; None without headroom), and how many simulations."""

    policy: str
    status: str
    capacity: float
    at: Evaluation
    below: Trial | None
    robust: Evaluation | None
    simulations: int
    #: the simulations of the search alone (without the proof run), for the benchmark
    search_simulations: int
    #: the capacities the search tried (each a trial at every load), without the proof's
    search_trials: int
    history: list[tuple[float, bool, float]]
    wall_s: float
    notes: list[str] = field(default_factory=list)
    #: why a ``never`` policy never meets the SLOs (empty otherwise)
    reason: str = ""


def below(p: Problem, capacity: float) -> float:
    """Where minimality is checked: :data:`PROOF_FACTOR` × the capacity, one disk fewer."""
    return capacity - 1 if p.family.integer else capacity * PROOF_FACTOR


def ruled_out(p: Problem, kind: str) -> str | None:
    """A constraint under which ``kind`` meets the SLOs at no capacity, said in words, or
    None: an mClock cap below what the tenant's SLO needs alone at the planned load
    (Cmin_i: no schedule serving it at the capped rate can meet it, seed 000's Lemma 3)."""
    if kind in registry.tenant_key_users("limit"):  # a policy that applies the tenants' caps
        for t, need in zip(p.tenants, p.need_planned, strict=True):
            if t.limit is not None and t.slo is not None and t.limit < need / CMIN_SLACK:
                at = f" at {headroom_text(p.headroom)} load" if p.headroom > 0 else ""
                return (f"tenant {t.name!r}'s cap ({t.limit:,.0f} IOPS) is below the {need:,.0f} IOPS its SLO "
                        f"{t.slo.text} needs alone{at} (Cmin), so no capacity helps")
    return None


def never_reason(p: Problem, kind: str, trial: Trial) -> str:
    """Why ``kind`` meets the SLOs at no capacity up to ``trial``'s (the most allowed): a
    constraint that rules every capacity out (:func:`ruled_out`), else which SLOs failed there."""
    constraint = ruled_out(p, kind)
    if constraint is not None:
        return constraint
    failed = ", ".join(trial.failures(p)) or "an SLO"
    top = "the most the search allows (--max-capacity)" if trial.capacity >= max_units(p) * (1 - 1e-9) else "the top"
    return f"at {p.family.unit(trial.capacity)}, {top}, {failed} still failed"


def prove(p: Problem, kind: str, run: Runner, status: str, capacity: float, at: Trial, notes: list[str],
          t0: float, searched: int | None = None, tried: int | None = None) -> PolicyAdvice:
    """The search's answer with its proof: the minimality trial (``ok`` only; the search
    may have run it already). ``searched`` / ``tried``: the search's own simulations and
    trials (default: all ``run`` did so far). A ``never`` answer is simulated at every
    load (a failure stops a trial at the first) so that its table row is complete."""
    assert status in STATUSES, status
    searched = run.simulations if searched is None else searched
    tried = len(run.history) if tried is None else tried
    below_t: Trial | None = None
    if status == "ok":
        below_t = run(below(p, capacity))
    reason = ""
    if status == "never":
        at = run(capacity, every_load=True)
        reason = never_reason(p, kind, at)
    nominal = at.nominal
    assert nominal is not None
    return PolicyAdvice(policy=kind, status=status, capacity=capacity, at=nominal, below=below_t,
                        robust=at.loaded, simulations=run.simulations, search_simulations=searched,
                        search_trials=tried, history=list(run.history), wall_s=time.perf_counter() - t0,
                        notes=notes, reason=reason)


__all__ = ["PROOF_FACTOR", "PolicyAdvice", "below", "never_reason", "prove", "ruled_out"]
