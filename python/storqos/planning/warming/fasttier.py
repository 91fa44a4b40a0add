"""Fast-tier hit rate H(t) and user slowdown S(t) (seed 002, §3.2, Eqs. 1–14).

Notation (the paper's; R and μ are mean *times* per request here — the paper calls them
"speeds" and "rates" but its Eq. 4, R_slow = (1 + S_max)·μ_origi with S_max > 0, only
reads consistently as times, which is how we take them):

* Eq. 1: μ(t) = (1 + S(t))·μ_origi = H·R_fast + (1 − H)·R_slow — the mean user service
  time with hit rate H; μ_origi = H_0·R_fast + (1 − H_0)·R_slow without system work.
* Eq. 2: H = ((1 + S)·μ_origi − R_slow) / (R_fast − R_slow).
* Eq. 5: S_max = R_slow / μ_origi − 1 (every user request served by the slow tier).
* Eq. 7: C = F·T_fast — a tier of capacity C filled at transfer speed F takes T_fast.
* Eqs. 3, 6, 9: while system work runs, S grows linearly at a = S_max / T_fast =
  S_max·F / C (its working set fills the tier at speed F).
* Eqs. 10–12: while it does not run (the tier is being warmed with the user working
  set), S falls at b = a.
* Eqs. 13–14 combine both (the paper's Eq. 13 prints the two cases' signs swapped
  relative to Eqs. 9 and 12; we follow Eqs. 9 and 12), S clipped to [0, S_max], so H
  moves linearly between H_0 and 0 at rate H_0·F / C.

:class:`FastTier` holds the parameters and steps S(t) through a schedule of system-work
on/off intervals; :mod:`storqos.planning.warming.reqlevel` checks the straight lines against a
request-level LRU simulation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from storqos.base.errors import InputError


@dataclass(frozen=True)
class FastTier:
    """A fast tier of ``capacity_bytes`` warmed at ``warm_rate_bps`` (bytes/s).

    ``r_fast_s`` / ``r_slow_s``: mean service time of a user request on the fast / slow
    tier (s); ``h0``: hit rate with the user working set resident (Eq. 5's note: it may
    be below 1).
    """

    capacity_bytes: float
    warm_rate_bps: float
    r_fast_s: float = 0.0002
    r_slow_s: float = 0.004
    h0: float = 1.0

    def __post_init__(self) -> None:
        if not self.capacity_bytes > 0:
            raise InputError(f"fast tier capacity must be > 0 bytes, got {self.capacity_bytes}", "--fast-tier")
        if not self.warm_rate_bps > 0:
            raise InputError(f"warm-up rate must be > 0 bytes/s, got {self.warm_rate_bps}", "--warm-rate")
        if not 0 < self.r_fast_s < self.r_slow_s:
            raise InputError(f"need 0 < fast service time < slow service time, got {self.r_fast_s} s and {self.r_slow_s} s")
        if not 0 < self.h0 <= 1:
            raise InputError(f"base hit rate must be in (0, 1], got {self.h0}")

    @classmethod
    def from_warmup(cls, t_fast_s: float, **kw: float) -> FastTier:
        """A tier whose full warm-up takes ``t_fast_s`` (C = F·T_fast with F = 1 B/s)."""
        return cls(capacity_bytes=float(t_fast_s), warm_rate_bps=1.0, **kw)

    @property
    def t_fast_s(self) -> float:
        """Eq. 7: T_fast = C / F (s)."""
        return self.capacity_bytes / self.warm_rate_bps

    @property
    def mu_origi_s(self) -> float:
        """Eq. 1 at S = 0: mean user service time without system work (s)."""
        return self.h0 * self.r_fast_s + (1 - self.h0) * self.r_slow_s

    @property
    def s_max(self) -> float:
        """Eq. 5: the slowdown when the whole tier holds system data."""
        return self.r_slow_s / self.mu_origi_s - 1

    @property
    def a_per_s(self) -> float:
        """Eqs. 6–7, 9: slowdown growth (and, Eq. 11, decay) per second: S_max·F / C."""
        return self.s_max / self.t_fast_s

    def hit_rate(self, s: float | np.ndarray) -> float | np.ndarray:
        """Eq. 2: hit rate at slowdown ``s``."""
        return ((1 + s) * self.mu_origi_s - self.r_slow_s) / (self.r_fast_s - self.r_slow_s)

    def service_time(self, s: float | np.ndarray) -> float | np.ndarray:
        """Eq. 1 / 8: mean user service time at slowdown ``s`` (s)."""
        return (1 + s) * self.mu_origi_s

    def step(self, s: float, system_on: bool, dt_s: float) -> float:
        """Eqs. 9 and 12: slowdown after ``dt_s`` seconds with system work on or off."""
        ds = self.a_per_s * dt_s
        return min(self.s_max, s + ds) if system_on else max(0.0, s - ds)

    def trajectory(self, system_on: np.ndarray, dt_s: float, s0: float = 0.0) -> np.ndarray:
        """Slowdown at the *end* of each step of a schedule (one bool per step)."""
        out = np.empty(len(system_on))
        s = s0
        for i, on in enumerate(system_on):
            s = self.step(s, bool(on), dt_s)
            out[i] = s
        return out


__all__ = ["FastTier"]
