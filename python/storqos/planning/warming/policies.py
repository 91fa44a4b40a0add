"""System-work scheduling policies and their evaluation (seed 002, §3.3 Fig. 8, §4).

Policies (all stop system work in the High state and warm the fast tier whenever system
work is stopped; they differ in *when* they stop and resume it):

* ``user-only`` — no system work (the baseline; Fig. 14 "null" system throughput);
* ``feedback`` — reactive: system work runs while the online detector
  (:func:`~storqos.planning.warming.intensity.detect_states`, a trailing mean) says Low; the
  warm-up starts only once High is detected;
* ``prediction`` — proactive (Fig. 8): in Low, system work runs only while the predicted
  residual Low time exceeds T_fast (step 2.b); once it does not, system work stops and
  the tier warms (2.c); if High is detected before the predicted change, it falls back
  to the feedback action (§4.1: "if the prediction time for a High state is in the
  future but the High state is already detected, then system work is stopped and the
  fast tier is warmed-up ... reactively");
* ``oracle`` — knows the future states: stops exactly T_fast before each High period.

Knobs of Fig. 8: hit-rate thresholds (H^low_lower, H^low_upper) in Low and
(H^high_lower, H^high_upper) in High (system work stops when H ≤ lower and resumes when
H ≥ upper; ``h_high=None`` = never in High), and the utilisation limit UTIL_threshold:
system work runs only while the user utilisation of the last :data:`UTIL_WINDOW_MIN`
minutes is below it, and then takes the device up to that limit.

**Evaluation (per-minute model).** For the multi-day sweeps each minute is one step:
the fast tier follows :class:`~storqos.planning.warming.fasttier.FastTier` (Eqs. 1–14); the
user requests of minute t see hit rate H(t), total utilisation ρ = ρ_user + ρ_system
(capped at :data:`RHO_CAP`) and an exponential response of mean R_fast/(1 − ρ) on a hit
and R_slow/(1 − ρ) on a miss (an M/M/1-style stretch; the paper's simulation assumes
exponential service, §4.2). The user response-time CDF is the request-weighted mixture
over minutes, computed exactly on a log grid. Completed system work = device time it
received (hours). This is the *planner*: the reported Figs. 14–15 replay these
schedules request by request over all evaluated days (:mod:`storqos.planning.warming.multiday`).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from storqos.base.errors import InputError
from storqos.planning.warming.daymodel import MIN_MATCHES, DayModel
from storqos.planning.warming.fasttier import FastTier
from storqos.planning.warming.intensity import DAY_MIN, DETECT_MIN, HIGH, LOW, Intensity, detect_states
from storqos.planning.warming.predict import Predictor

POLICIES = ("user-only", "feedback", "prediction", "oracle")
#: Trailing window (minutes) of UTIL_past in Fig. 8.
UTIL_WINDOW_MIN = 5
#: Default UTIL_threshold: system work may fill the device up to this utilisation.
UTIL_LIMIT = 0.7
#: Utilisation cap of the response-time stretch 1/(1 − ρ) (a saturated minute is
#: reported at 20× service time rather than infinity).
RHO_CAP = 0.95
#: Quantile of the residual Low time the prediction policy plans with (below the
#: median: stopping a little early costs some system work, late costs cold-tier misses).
PLAN_QUANTILE = 0.1
#: Response-time grid of the CDF (s): 1 µs … 100 s, log-spaced.
GRID_S = np.logspace(-6, 2, 801)


@dataclass
class Knobs:
    """Fig. 8's control knobs."""

    h_low: tuple[float, float] = (0.0, 0.0)
    h_high: tuple[float, float] | None = None
    util_limit: float = UTIL_LIMIT
    plan_quantile: float = PLAN_QUANTILE

    def __post_init__(self) -> None:
        for name, pair in (("h_low", self.h_low), ("h_high", self.h_high)):
            if pair is not None and not (0 <= pair[0] <= pair[1] <= 1):
                raise InputError(f"{name} thresholds must satisfy 0 <= lower <= upper <= 1, got {pair}")
        if not 0 < self.util_limit <= 1:
            raise InputError(f"utilisation limit must be in (0, 1], got {self.util_limit}", "--util-limit")
        if not 0 < self.plan_quantile < 1:
            raise InputError(f"plan quantile must be in (0, 1), got {self.plan_quantile}")


@dataclass
class PolicyResult:
    """One policy over the evaluated minutes."""

    policy: str
    user_requests: int
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    system_work_h: float
    system_on_h: float
    cold_fraction: float  # user requests served with H below H_0
    cdf: np.ndarray  # fraction ≤ GRID_S
    system_on: np.ndarray  # per minute
    hit_rate: np.ndarray  # per minute
    schedule: list[dict[str, Any]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """Table row (units in the keys)."""
        return {"policy": self.policy, "user_requests": self.user_requests, "mean_ms": self.mean_ms,
                "p50_ms": self.p50_ms, "p90_ms": self.p90_ms, "p99_ms": self.p99_ms,
                "system_work_h": self.system_work_h, "system_on_h": self.system_on_h,
                "cold_fraction": self.cold_fraction}


def _next_high(states: np.ndarray) -> np.ndarray:
    """Minutes from each minute to the next High minute (0 inside High; inf if none)."""
    out = np.full(len(states), np.inf)
    nxt = math.inf
    for i in range(len(states) - 1, -1, -1):
        if states[i] == HIGH:
            nxt = i
        out[i] = nxt - i
    return out


def _quantile(cdf: np.ndarray, q: float) -> float:
    return float(np.interp(q, cdf, GRID_S))


def low_pools(model: DayModel, day_class: int, next_class: int, start_of_day: int) -> list[list[float]]:
    """The observed Low durations (minutes, sorted) a Low period begun at
    ``start_of_day`` in a day of ``day_class`` (followed by one of ``next_class``) is
    predicted from, narrowest first: the pools :meth:`DayModel.residual` widens through."""
    return [sorted(model.durations(LOW, day_class, start_of_day, next_class).tolist()),
            sorted(model.durations(LOW, day_class, start_of_day).tolist()),
            sorted(model.durations(LOW, day_class).tolist()), sorted(model.durations(LOW).tolist())]


def planned_residual(pools: list[list[float]], elapsed: float, q: float = PLAN_QUANTILE) -> float:
    """The prediction policy's residual Low time (minutes) after ``elapsed`` minutes of
    Low: the ``q``-quantile of D − elapsed over the first pool with :data:`MIN_MATCHES`
    durations D > elapsed (0: the change is due). System work runs while it exceeds
    T_fast (Fig. 8, step 2.b); the gateway's background job decides by it too."""
    for pool in pools:
        longer = pool[bisect.bisect_right(pool, elapsed):]
        if len(longer) >= MIN_MATCHES:  # same as np.quantile(longer, q) - elapsed
            pos = q * (len(longer) - 1)
            j = int(pos)
            hi_v = longer[min(j + 1, len(longer) - 1)]
            return longer[j] + (hi_v - longer[j]) * (pos - j) - elapsed
    return 0.0


def evaluate(
    policy: str,
    intensity: Intensity,
    model: DayModel,
    tier: FastTier,
    days: range,
    knobs: Knobs | None = None,
) -> PolicyResult:
    """Run ``policy`` over ``days`` of ``intensity`` with ``model`` (trained on earlier
    days) and the fast ``tier``; see the module notes."""
    if policy not in POLICIES:
        raise InputError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})", "--policy")
    knobs = knobs or Knobs()
    if days.start < 0 or days.stop > intensity.days or len(days) == 0:
        raise InputError(f"evaluation days {days.start}..{days.stop - 1} outside the {intensity.days} days of data")
    x = intensity.per_min
    lo, hi = days.start * DAY_MIN, days.stop * DAY_MIN
    truth = model.states(x)
    detected = detect_states(x, model.threshold, DETECT_MIN)
    to_high = _next_high(truth)
    t_fast_min = tier.t_fast_s / 60
    pred = Predictor(model, intensity)
    s = 0.0
    blocked = False
    util_hist: list[float] = []
    period_start, period_state = lo, int(detected[lo])
    pools: list[list[float]] | None = None
    n = hi - lo
    on_arr = np.zeros(n, bool)
    h_arr = np.zeros(n)
    mix_w, mix_h, mix_k = np.zeros(n), np.zeros(n), np.ones(n)
    mean_acc = 0.0
    users = 0.0
    cold = 0.0
    sys_dev_s = 0.0
    for i, t in enumerate(range(lo, hi)):
        st = int(detected[t])
        if st != period_state:
            period_state, period_start, pools = st, t, None
        h = float(tier.hit_rate(s))
        m = float(tier.service_time(s))
        rho_u = float(x[t]) / 60.0 * m
        recent = util_hist[-UTIL_WINDOW_MIN:]
        util_past = sum(recent) / len(recent) if recent else 0.0
        if policy == "user-only":
            allowed = False
        elif policy == "oracle":
            allowed = truth[t] == LOW and to_high[t] > t_fast_min
        elif st == HIGH:
            allowed = knobs.h_high is not None
        elif policy == "feedback":
            allowed = True
        else:
            if pools is None:
                day = period_start // DAY_MIN
                pools = low_pools(model, pred.day_class(day), pred.day_class(day + 1), period_start % DAY_MIN)
            allowed = planned_residual(pools, t - period_start, knobs.plan_quantile) > t_fast_min
        thr = knobs.h_low if (truth[t] == LOW if policy == "oracle" else st == LOW) else (knobs.h_high or (1.0, 1.0))
        if blocked and h >= thr[1]:
            blocked = False
        if allowed and thr[0] > 0 and h <= thr[0]:  # a lower threshold of 0 disables the stop
            blocked = True
        on = bool(allowed and not blocked and util_past <= knobs.util_limit and rho_u < knobs.util_limit)
        rho_s = max(0.0, knobs.util_limit - rho_u) if on else 0.0
        rho = min(rho_u + rho_s, RHO_CAP)
        util_hist.append(rho_u)
        if x[t] > 0:
            stretch = 1.0 / (1.0 - rho)
            mix_w[i], mix_h[i], mix_k[i] = x[t], h, stretch
            mean_acc += x[t] * m * stretch
            users += x[t]
            if h < tier.h0 - 1e-9:
                cold += x[t]
        sys_dev_s += rho_s * 60.0
        on_arr[i] = on
        h_arr[i] = h
        s = tier.step(s, on, 60.0)
    cdf = _mixture_cdf(mix_w, mix_h, mix_k, tier) / users if users > 0 else np.zeros(len(GRID_S))
    return PolicyResult(
        policy=policy,
        user_requests=int(users),
        mean_ms=1e3 * mean_acc / users if users else 0.0,
        p50_ms=1e3 * _quantile(cdf, 0.5),
        p90_ms=1e3 * _quantile(cdf, 0.9),
        p99_ms=1e3 * _quantile(cdf, 0.99),
        system_work_h=sys_dev_s / 3600,
        system_on_h=float(on_arr.sum()) / 60,
        cold_fraction=cold / users if users else 0.0,
        cdf=cdf,
        system_on=on_arr,
        hit_rate=h_arr,
        schedule=schedule(on_arr, h_arr, lo, tier.h0),
    )


def _mixture_cdf(w: np.ndarray, h: np.ndarray, k: np.ndarray, tier: FastTier) -> np.ndarray:
    """Σ_t w_t·[h_t·(1 − e^{−x/(R_fast·k_t)}) + (1 − h_t)·(1 − e^{−x/(R_slow·k_t)})] on
    :data:`GRID_S`; minutes with equal (h, k) to 4 digits are merged first."""
    key = np.stack([np.round(h, 4), np.round(k, 4)], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    wsum = np.bincount(inv.ravel(), weights=w, minlength=len(uniq))
    cdf = np.zeros(len(GRID_S))
    for (hh, kk), ww in zip(uniq, wsum, strict=True):
        if ww > 0:
            cdf += ww * (hh * -np.expm1(-GRID_S / (tier.r_fast_s * kk)) + (1 - hh) * -np.expm1(-GRID_S / (tier.r_slow_s * kk)))
    return cdf


def schedule(on: np.ndarray, h: np.ndarray, first_min: int, h0: float = 1.0) -> list[dict[str, Any]]:
    """System-work start/stop events and warm-up intervals (absolute minutes)."""
    ev: list[dict[str, Any]] = []
    prev = False
    for i, o in enumerate(on):
        if o and not prev:
            ev.append({"minute": first_min + i, "event": "system start"})
        if prev and not o:
            ev.append({"minute": first_min + i, "event": "system stop, warm-up start"})
            j = i
            while j < len(on) and not on[j] and h[j] < h0 - 1e-9:
                j += 1
            if j < len(on) and not on[j]:
                ev.append({"minute": first_min + j, "event": "warm-up done"})
        prev = bool(o)
    return ev


def compare(
    intensity: Intensity, model: DayModel, tier: FastTier, days: range, knobs: Knobs | None = None,
    policies: tuple[str, ...] = POLICIES,
) -> dict[str, PolicyResult]:
    """Every policy over the same days (``model`` is not modified)."""
    return {p: evaluate(p, intensity, model, tier, days, knobs) for p in policies}


__all__ = ["GRID_S", "PLAN_QUANTILE", "POLICIES", "RHO_CAP", "UTIL_LIMIT", "UTIL_WINDOW_MIN", "Knobs", "PolicyResult",
           "compare", "evaluate", "low_pools", "planned_residual", "schedule"]
