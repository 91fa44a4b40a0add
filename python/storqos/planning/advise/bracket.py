"""Closing a capacity bracket [lo fails, hi holds] until ``hi ≤ lo·(1 + tol)`` (or, for
a count of disks, ``hi − lo ≤ 1``) in few simulations, and **never more than bisection**
of the same bracket needs. Pure: the simulation is a ``probe`` callable, so the
guarantee is tested on made-up functions (tests/python/test_advise.py).

Each simulation gives the worst tenant's ratio *achieved percentile / bound* (> 1: an
SLO fails), which falls with capacity. Three ideas, each from a known root finder:

1. **Interpolate** (regula falsi, in log capacity against log ratio): probe where the
   line through the bracket's ends crosses ratio 1. When that estimate is within a
   tolerance of an end, probe just inside the tolerance from that end instead
   (:data:`CLOSING_INSIDE`): the run closes the bracket unless the estimate was wrong.
2. **Illinois** (Dowell & Jarratt, BIT 11, 1971): when the same end is kept twice in a
   row, its log ratio is halved for the next estimate, so regula falsi does not creep
   towards the answer from one side (what a convex ratio, FCFS's, makes it do).
3. **Project** (ITP: Oliveira & Takahashi, ACM TOMS 47(1), 2021, with n₀ = 0):
   bisection closes a bracket of (log) width W to w in ``n = ⌈log₂(W / w)⌉`` probes.
   Before each probe, with m probes of the n left, the probe is moved into the window
   ``[hi − w·2^(m−1), lo + w·2^(m−1)]`` (never empty: it holds the midpoint), so
   whichever end it replaces the bracket is then at most ``w·2^(m−1)`` wide, and after
   n probes it is closed. Interpolation aims freely while it gains on bisection and is
   pulled towards the midpoint as it falls behind.

The advise benchmark (benches/advise.py) prompted 3: FCLB+YFQ's ratio is flat over a
wide range above the answer and then jumps, so the line through the ends overshot again
and again (12 simulations against bisection's 10). ITP's own default, n₀ = 1 (one probe
more than bisection at worst), saved another 5 % of the simulations in our searches (108
against 114 over the benchmark, the tests' mix and the worked example); we keep n₀ = 0,
the bound promised above (never more than bisection).
"""

from __future__ import annotations

import math
from collections.abc import Callable

#: A probe keeps this fraction of the tolerance away from either end of the bracket (a
#: probe at an end would learn nothing).
END_MARGIN = 0.2
#: A closing probe sits this far inside the tolerance from an end, so that one rounded
#: to the simulated precision still closes the bracket when the estimate was right.
CLOSING_INSIDE = 0.99
#: A bracket counts as closed up to this relative excess over the tolerance: capacities
#: are rounded to 9 significant digits before they are simulated
#: (:data:`.evaluation.CAPACITY_DIGITS`), which may leave the last probe 5e-9 off its window.
ROUNDING = 1e-7
#: Ratios are capped here before their log is taken (an SLO failing a million-fold).
RATIO_CAP = 1e6

#: A probe: capacity → (every SLO met, worst tenant's achieved / bound).
Probe = Callable[[float], tuple[bool, float]]


def closed(lo: float, hi: float, tol: float, integer: bool) -> bool:
    """Whether [lo, hi] is within ``tol`` (``hi − lo ≤ 1`` for a count)."""
    if integer:
        return hi - lo <= 1
    return hi <= lo * (1 + tol) * (1 + ROUNDING)


def _goal(tol: float, integer: bool) -> float:
    """The width bisection closes to, in the coordinate it halves (log capacity, or the
    count)."""
    return 1.0 if integer else math.log1p(tol)


def _coord(c: float, integer: bool) -> float:
    return c if integer else math.log(c)


def bisection_steps(lo: float, hi: float, tol: float, integer: bool = False) -> int:
    """How many probes bisection (geometric midpoints; midpoints of a count) needs to
    close [lo, hi]: ⌈log₂(W / w)⌉, the most :func:`close` takes."""
    if closed(lo, hi, tol, integer):
        return 0
    width = _coord(hi, integer) - _coord(lo, integer)
    return max(1, math.ceil(math.log2(width / _goal(tol, integer)) - 1e-12))


def _crossing(lo: float, a: float, hi: float, b: float) -> float:
    """Where the line through (log lo, a) and (log hi, b) crosses 0 (a > 0 ≥ b)."""
    if a == b:
        return math.sqrt(lo * hi)
    return math.exp(math.log(lo) + a * (math.log(hi) - math.log(lo)) / (a - b))


def close(probe: Probe, lo: float, r_lo: float | None, hi: float, r_hi: float | None, *, tol: float,
          integer: bool = False, quantize: Callable[[float], float] = float) -> tuple[float, float]:
    """Shrink [lo fails, hi holds] to ``tol`` (see the module's description) and return
    it. ``r_lo`` / ``r_hi`` are the ends' ratios (None: not simulated, e.g. a proven
    lower bound); ``quantize`` rounds a capacity as the simulations do. Takes at most
    :func:`bisection_steps` probes."""
    budget = bisection_steps(lo, hi, tol, integer)
    goal = _goal(tol, integer)
    # The ends' log ratios the interpolation uses (Illinois: the one kept twice is halved).
    a = None if r_lo is None else math.log(min(max(r_lo, 1.0), RATIO_CAP))
    b = None if r_hi is None else math.log(min(max(r_hi, 1 / RATIO_CAP), 1.0))
    kept: str | None = None  # the end the last probe did not replace
    probes = 0
    while not closed(lo, hi, tol, integer):
        left = budget - probes
        assert left >= 1, (lo, hi, budget)  # the projection's invariant: width ≤ goal·2^left
        reach = goal * 2.0 ** (left - 1)  # the widest the bracket may be after this probe
        est = _crossing(lo, a, hi, b) if a is not None and b is not None and a > 0 else None
        if integer:
            c = float(math.ceil(est)) if est is not None else float(math.floor((lo + hi) / 2))
            c = min(max(c, hi - reach, lo + 1), lo + reach, hi - 1)
        else:
            if est is None:
                c = math.sqrt(lo * hi)
            elif est >= hi / (1 + tol):  # within a tolerance of the top: a run that closes
                c = hi / (1 + CLOSING_INSIDE * tol)  # the bracket unless the estimate is wrong
            elif est <= lo * (1 + tol):  # ... of the bottom
                c = lo * (1 + CLOSING_INSIDE * tol)
            else:
                c = est
            c = min(max(c, lo * (1 + END_MARGIN * tol)), hi / (1 + END_MARGIN * tol))
            c = min(max(c, hi * math.exp(-reach)), lo * math.exp(reach))  # the projection
        c = quantize(c)
        met, ratio = probe(c)
        probes += 1
        if met:
            hi, b = c, math.log(min(max(ratio, 1 / RATIO_CAP), 1.0))
            if kept == "lo" and a is not None:
                a /= 2
            kept = "lo"
        else:
            lo, a = c, math.log(min(max(ratio, 1.0), RATIO_CAP))
            if kept == "hi" and b is not None:
                b /= 2
            kept = "hi"
    return lo, hi


__all__ = ["Probe", "bisection_steps", "close", "closed"]
