"""The least capacity at which every tenant meets its SLO under one policy, at the
trace's load and at (1 + headroom) × it (each capacity is a
:class:`.evaluation.Trial` of both), then its proof (:mod:`.proof`).

1. **Bracket.** The planner's bounds (seed 000, :mod:`.bounds`, at the headroom's
   load): the top starts at the capacity where FCFS meets every SLO on a constant
   server, doubled until every SLO holds (up to ``--max-capacity``: else ``never``);
   the bottom is the proven lower bound (constant-rate device: no simulation spent
   there) or, on the other families, that guess simulated and halved while every SLO
   still holds (down to the least capacity the policy runs at: then ``any``).
2. **Close** it to :data:`TOLERANCE` by interpolation safeguarded to need no more
   trials than bisection of the bracket (:mod:`.bracket`).
   A policy a constraint rules out at every capacity (:func:`.proof.ruled_out`) is
   ``never`` at once.
3. **Prove** minimality at 0.98 ×; when every SLO held there too (a policy whose
   compliance is not monotone in capacity), search again below it, up to
   :data:`MAX_RESTARTS` times.

:func:`plain_bisection` is the reference the advise benchmark counts against: bisection
from zero with no planner bounds.
"""

from __future__ import annotations

import math
import time

from storqos.planning.advise.bracket import close
from storqos.planning.advise.evaluation import Runner
from storqos.planning.advise.policies import policy_floor
from storqos.planning.advise.problem import Problem, max_units, to_capacity
from storqos.planning.advise.proof import PolicyAdvice, below, prove, ruled_out

#: The search stops when the smallest capacity that met every SLO is within this of the
#: largest that did not (the advisor's promise: the capacity to 0.5 %).
TOLERANCE = 0.005
#: Largest number of restarts when a capacity below the reported one meets every SLO
#: (a policy whose compliance is not monotone in capacity).
MAX_RESTARTS = 3
#: The least capacity a search halves down to on a continuous family, as a fraction of
#: the tenants' mean load: a device 64 times slower than the load queues without bound.
BOTTOM_OVER_LOAD = 1 / 64
#: Floors on a capacity halved downwards: one disk, or a thousandth of an IOPS.
MIN_DISKS, MIN_IOPS = 1.0, 1e-3
#: A capacity this close above the policy's floor is the floor (the note on Miser).
FLOOR_EPS = 1e-4


def search(p: Problem, kind: str, *, tol: float = TOLERANCE) -> PolicyAdvice:
    """The minimum capacity at which every SLO holds under ``kind`` (the module's points
    1–3), then its proof (:func:`.proof.prove`)."""
    t0 = time.perf_counter()
    run = Runner(p, kind)
    notes: list[str] = []
    least = MIN_DISKS if p.family.integer else MIN_IOPS
    floor = to_capacity(p, policy_floor(p, kind))
    top = run.quantize(max_units(p))  # rounded as the capacities compared with it are
    constant = p.family.kind == "constant"
    lower = max(to_capacity(p, p.lower), floor)
    lower = run.quantize(lower) if not p.family.integer else max(1.0, math.floor(lower))
    if ruled_out(p, kind) is not None:  # no capacity can help: said, simulated once (at the top) for the table
        return prove(p, kind, run, "never", top, run(top), notes, t0)
    # hi: the planner's FCFS point, doubled until every SLO holds.
    hi = run.quantize(min(max(to_capacity(p, p.upper), lower * (1 + 2 * tol)), top))
    e_hi = run(hi)
    while not e_hi.met:
        if hi >= top:
            return prove(p, kind, run, "never", hi, e_hi, notes, t0)
        hi = run.quantize(min(hi * 2, top))
        e_hi = run(hi)
    # lo: a proven failure below Cmin on the constant server; elsewhere checked.
    lo = lower
    r_lo: float | None = None
    lo_proven = constant and floor <= to_capacity(p, p.lower)
    if lo >= hi:
        lo = hi / 2
        lo_proven = False
    if not lo_proven:
        e_lo = run(lo)
        bottom = max(floor, to_capacity(p, p.total_iops) * BOTTOM_OVER_LOAD, least)
        while e_lo.met:
            hi, e_hi = lo, e_lo
            if run.quantize(max(lo / 2, bottom)) >= lo:  # at the bottom (quantized): nothing lower to try
                if floor > 0 and lo <= floor * (1 + FLOOR_EPS):
                    notes.append(f"every SLO holds at {p.family.unit(lo)}, the least capacity the policy runs at as "
                                 "derived (Miser: Cmin + 1/δ)")
                return prove(p, kind, run, "any", hi, e_hi, notes, t0)
            lo = run.quantize(max(lo / 2, bottom))
            e_lo = run(lo)
        r_lo = e_lo.worst
    searched, tried = run.simulations, len(run.history)
    for _ in range(MAX_RESTARTS + 1):
        lo, hi = _close(run, lo, r_lo, hi, tol)
        # Minimality: just below the answer some SLO must fail.
        searched, tried = run.simulations, len(run.history)
        below_c = below(p, hi)
        if below_c < (1 if p.family.integer else floor) or below_c <= 0:
            break
        e_below = run(below_c)
        if not e_below.met:
            break
        notes.append(f"every SLO also held at {p.family.unit(below_c)}, below the bracket: searched again below it")
        hi, r_lo = run.quantize(below_c), None
        lo = min(lo, hi / 2)
        if p.family.integer:
            lo = max(1.0, math.floor(lo))
        e = run(lo)
        while e.met:
            nxt = run.quantize(max(lo / 2, floor, least))
            if nxt >= lo:
                break
            hi, lo = lo, nxt
            e = run(lo)
        if e.met:
            return prove(p, kind, run, "any", lo, e, notes, t0)
        r_lo = e.worst
    return prove(p, kind, run, "ok", hi, run(hi), notes, t0, searched, tried)


def _close(run: Runner, lo: float, r_lo: float | None, hi: float, tol: float) -> tuple[float, float]:
    """:func:`.bracket.close` with the policy's simulations as the probe."""

    def probe(c: float) -> tuple[bool, float]:
        e = run(c)
        return e.met, e.worst

    return close(probe, lo, r_lo, hi, run(hi).worst, tol=tol, integer=run.p.family.integer, quantize=run.quantize)


def plain_bisection(p: Problem, kind: str, *, tol: float = TOLERANCE) -> tuple[float | None, int]:
    """The reference for the benchmark: bisection from zero with no planner bounds. The
    top starts at the tenants' total mean rate and doubles until every SLO holds; then
    [0, top] is halved until it is within ``tol``. Returns (capacity or None, simulations)."""
    run = Runner(p, kind)
    top = run.quantize(max_units(p))
    hi = run.quantize(max(to_capacity(p, p.total_iops), 1.0))
    while not run(hi).met:
        if hi >= top:
            return None, run.simulations
        hi = run.quantize(min(hi * 2, top))
    lo = 0.0
    while (hi - lo > 1) if p.family.integer else (hi - lo > tol * hi):
        mid = run.quantize((lo + hi) / 2)
        if mid >= hi or mid <= lo:
            break
        if run(mid).met:
            hi = mid
        else:
            lo = mid
    return hi, run.simulations


__all__ = ["MAX_RESTARTS", "TOLERANCE", "plain_bisection", "search"]
