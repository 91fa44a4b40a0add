"""The answer to the operator's question: every policy's least capacity, ranked, with the
recommendation explained in one or two sentences, as tables
(:meth:`Advice.rows`, one row per policy × tenant) and JSON (:meth:`Advice.summary`).
The HTML report and the files are :mod:`.report`.

The explanation compares the cheapest policy with FCFS (else the runner-up): by how
much less capacity it needs, what the policy does that saves it (:data:`WHY`), and which
tenant's SLO sets the other's capacity (the tenant with the least margin). Every answer
holds at the headroom's extra load too (:mod:`.capacity_search`), and the explanation
says so; a policy that is ``never`` says why (:func:`reason`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import polars as pl

from storqos.model import registry
from storqos.planning.advise.capacity_search import TOLERANCE
from storqos.planning.advise.evaluation import FRACTION_EPS, Evaluation
from storqos.planning.advise.policies import DISPLAY
from storqos.planning.advise.problem import Problem, headroom_text, max_units, to_iops
from storqos.planning.advise.proof import PolicyAdvice


@dataclass
class Advice:
    """Every policy's answer, ranked (cheapest first; policies that never meet the SLOs
    last), with the recommendation in words."""

    problem: Problem
    results: list[PolicyAdvice]
    backend: str
    wall_s: float

    @property
    def ranked(self) -> list[PolicyAdvice]:
        """Cheapest first; ``never`` last."""
        order = {"any": 0, "ok": 0, "never": 1}
        return sorted(self.results, key=lambda r: (order[r.status], r.capacity if r.status != "never" else 0.0))

    def explanation(self) -> str:
        """One or two sentences: the cheapest policy, by how much, and why."""
        return explain(self)

    def rows(self) -> pl.DataFrame:
        """One row per (policy, tenant), ranked: capacity, SLO, achieved and margin at the
        trace's load and at the headroom's (``robust_*``)."""
        p = self.problem
        out = []
        for rank, r in enumerate(self.ranked, 1):
            for i, t in enumerate(p.tenants):
                out.append({
                    "rank": rank, "policy": r.policy, "status": r.status,
                    "capacity": r.capacity if r.status != "never" else None,
                    "capacity_iops": to_iops(p, r.capacity) if r.status != "never" else None,
                    "capacity_multiple": p.family.multiple(r.capacity) if r.status != "never" else None,
                    "tenant": t.name,
                    "slo": t.slo.text if t.slo else "best effort",
                    "slo_percentile": t.slo.percentile if t.slo else None,
                    "slo_latency_ns": t.slo.latency_ns if t.slo else None,
                    "achieved_ns": r.at.achieved_ns[i],
                    "within_slo": r.at.within[i],
                    "margin": r.at.margin[i],
                    "paper_miss_ratio": r.at.paper_miss[i],
                    "below_capacity": r.below.capacity if r.below else None,
                    "below_met": all(w is None or w >= t.slo.percentile - FRACTION_EPS
                                     for w in (e.within[i] for e in r.below.evaluations))
                    if r.below and t.slo else None,
                    "headroom": p.headroom,
                    "robust_achieved_ns": r.robust.achieved_ns[i] if r.robust else None,
                    "robust_margin": r.robust.margin[i] if r.robust else None,
                    "simulations": r.simulations,
                    "reason": r.reason or None,
                })
        return pl.DataFrame(out, infer_schema_length=None)

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the problem, each policy's answer with its proof, the explanation."""
        p = self.problem
        return {
            "name": p.name,
            "device": p.family.describe(),
            "tenants": [{"name": t.name, "slo": t.slo.text if t.slo else None,
                         "percentile": t.slo.percentile if t.slo else None,
                         "latency_ns": t.slo.latency_ns if t.slo else None,
                         "reservation_iops": t.reservation, "limit_iops": t.limit, "requests": t.requests,
                         "mean_iops": t.mean_iops, "needs_alone_iops": need, "needs_alone_planned_iops": planned}
                        for t, need, planned in zip(p.tenants, p.need, p.need_planned, strict=True)],
            "bounds_iops": {"lower": p.lower, "fcfs_upper": p.upper, "max": p.max_capacity},
            "headroom": p.headroom,
            "tolerance": TOLERANCE,
            "backend": self.backend,
            "wall_s": self.wall_s,
            "recommendation": self.explanation(),
            "policies": [
                {"policy": r.policy, "status": r.status,
                 "capacity": r.capacity if r.status != "never" else None,
                 "capacity_unit": "disks" if p.family.integer else "IOPS",
                 "capacity_iops": to_iops(p, r.capacity) if r.status != "never" else None,
                 "capacity_multiple": p.family.multiple(r.capacity) if r.status != "never" else None,
                 "simulations": r.simulations, "search_simulations": r.search_simulations,
                 "search_trials": r.search_trials, "wall_s": r.wall_s, "notes": r.notes,
                 "reason": reason(r) if r.status == "never" else None,
                 "search": [{"capacity": c, "met": m, "worst_ratio": w} for c, m, w in r.history],
                 "tenants": [_tenant_json(p, r, i) for i in range(len(p.tenants))],
                 "below": {"capacity": r.below.capacity, "met": r.below.met, "failed": r.below.failures(p)}
                 if r.below else None,
                 "robust": {"load": p.load, "met": r.robust.met} if r.robust else None}
                for r in self.ranked
            ],
        }


def _tenant_json(p: Problem, r: PolicyAdvice, i: int) -> dict[str, Any]:
    t = p.tenants[i]
    return {
        "tenant": t.name,
        "achieved_ns": _finite(r.at.achieved_ns[i]),
        "within_slo": r.at.within[i],
        "margin": _finite(r.at.margin[i]),
        "end_to_end_miss_ratio": None if r.at.within[i] is None else 1 - r.at.within[i],  # type: ignore[operator]
        "paper_miss_ratio": r.at.paper_miss[i],
        "below_achieved_ns": _finite(r.below.nominal.achieved_ns[i]) if r.below and r.below.nominal else None,
        "robust_achieved_ns": _finite(r.robust.achieved_ns[i]) if r.robust else None,
        "robust_margin": _finite(r.robust.margin[i]) if r.robust else None,
    }


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else v


def _binding(p: Problem, e: Evaluation) -> int | None:
    """The tenant with the least margin."""
    best: tuple[float, int] | None = None
    for i, m in enumerate(e.margin):
        if m is not None and (best is None or m < best[0]):
            best = (m, i)
    return None if best is None else best[1]


#: What a policy does that can save capacity, in words (said of the cheapest policy).
WHY: dict[str, str] = {
    "fcfs": "lets any tenant's burst use the whole device: no share caps a bursty tenant",
    "edf": "serves requests by deadline, so tenants with tight bounds overtake those with loose ones",
    "wf2q": "gives each tenant its weighted share, so a tenant's requests do not queue behind another's burst",
    "sfq": "gives each tenant its weighted share",
    "yfq": "gives each tenant its weighted share in batches",
    "mclock": "reserves each tenant the rate its SLO needs, so another tenant's burst cannot take it",
    "sarc+avatar": "serves requests by deadline (AVATAR's EDF) and each tenant at its contracted rate, so tenants "
                   "with tight bounds go first and a loose one absorbs the wait",
    "miser": "lets only an overflow fraction of the requests wait",
    "fclb": "shares the device between tenants by rate (YFQ) and meters bursts through token buckets",
}
#: Why a policy never meets the SLOs, in words.
WHY_NOT: dict[str, str] = {
    "sarc+avatar": "SARC holds each tenant's bursts above its contracted rate, a wait the end-to-end latency counts",
    "fclb": "the token buckets hold bursts above each tenant's rate, a wait the end-to-end latency counts",
    "mclock": "a tenant's cap holds its bursts back",
    "fcfs": "a tenant queues behind every other tenant's burst",
}


def reason(r: PolicyAdvice) -> str:
    """Why a ``never`` policy never meets the SLOs: what failed at the most the search
    allows (or the constraint that rules every capacity out), and what the policy does
    that causes it (:data:`WHY_NOT`)."""
    why = WHY_NOT.get(r.policy)
    return r.reason + (f": {why}" if why else "")


def _holds(p: Problem) -> str:
    """What every answer was also checked at, in words ('' without headroom)."""
    if p.headroom <= 0:
        return ""
    return f" Every answer also holds at {headroom_text(p.headroom).removeprefix('+')} more load (--headroom)."


def explain(a: Advice) -> str:
    """One or two sentences: the cheapest policy, against FCFS (or the runner-up), and why."""
    p = a.problem
    ranked = a.ranked
    ok = [r for r in ranked if r.status != "never"]
    at_load = f" (also at {headroom_text(p.headroom)} load)" if p.headroom > 0 else ""
    if not ok:
        return (f"No policy meets every SLO{at_load} at any capacity up to {p.family.unit(max_units(p))}: relax the "
                "SLOs, lower --headroom, or raise --max-capacity.")
    best = ok[0]
    name = DISPLAY.get(best.policy, best.policy)
    others = [r for r in ranked if r is not best]
    ref = next((r for r in others if r.policy == registry.default().name), others[0] if others else None)
    if ref is None:
        return f"{name} meets every SLO at {p.family.unit(best.capacity)}.{_holds(p)}"
    rname = DISPLAY.get(ref.policy, ref.policy)
    b = _binding(p, best.at)
    tb = p.tenants[b] if b is not None else None
    if ref.status == "never":
        return (f"{name} meets every SLO at {p.family.unit(best.capacity)}; {rname} never does ({reason(ref)})."
                f"{_holds(p)}")
    if ref.capacity <= best.capacity * (1 + TOLERANCE):
        return (f"{name} and {rname} need the same capacity ({p.family.unit(best.capacity)}) within {100 * TOLERANCE:g} %: "
                f"the binding tenant {tb.name if tb else '?'} is limited by the device, not by the schedule.{_holds(p)}")
    saving = 100 * (1 - best.capacity / ref.capacity)
    rb = _binding(p, ref.robust or ref.at)
    tr = p.tenants[rb] if rb is not None else None
    because = f"it {WHY.get(best.policy, 'schedules differently')}"
    if tr is not None and tr.slo is not None:
        because += f"; under {rname} it is {tr.name} ({tr.slo.text}) that sets the capacity"
    return (f"{name} needs {saving:.0f} % less capacity than {rname} ({p.family.unit(best.capacity)} vs "
            f"{p.family.unit(ref.capacity)}) because {because}.{_holds(p)}")


__all__ = ["WHY", "WHY_NOT", "Advice", "explain", "reason"]
