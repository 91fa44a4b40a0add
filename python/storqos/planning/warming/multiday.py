"""Request-level evaluation of the policies over many days (seed 002 §4.2, Figs. 14–15).

The per-minute evaluator (:func:`storqos.planning.warming.policies.evaluate`) is the *planner*:
it decides, minute by minute, when each policy runs system work (detected / predicted
/ true High and Low states, utilisation limit). This module then *replays* the
evaluation days request by request through the Rust core's simulator, in front of the
LRU cache-tier device (``crates/storqos-core/src/devices/cache.rs``), with one
``storqos.simulate`` per (policy, warm-up time) and three tenants:

* :data:`~storqos.planning.warming.reqlevel.USER` — the workload's own user requests (open-loop:
  the trace's arrival times), each a 4 KiB read of a uniformly drawn block of the user
  working set ``[0, C)`` (it fits the fast tier exactly, §4.1);
* :data:`~storqos.planning.warming.reqlevel.SYSTEM` — system work: Poisson 4 KiB reads at
  ``F / 4 KiB`` IOPS over a working set :data:`~storqos.planning.warming.reqlevel.SYSTEM_SPAN_X`
  times the tier, *only inside the policy's system-work minutes*. Its misses fill the
  tier at speed F and the LRU evicts the user set (T_fast = C/F of system work empties
  it, Eq. 9);
* :data:`~storqos.planning.warming.reqlevel.WARM` — the explicit warm-up: from the start of every
  off-interval that follows system work, a sequential read of ``[0, C)`` in 16 KiB
  chunks at speed F, cut short when system work resumes (a full pass takes T_fast).

The tier starts warm: a warm-up pass before the first evaluated minute (no user or
system requests during it). Results per policy: user response-time percentiles and
CDF from the user tenant's per-request log, hit fraction (served by the fast tier),
completed system work (system-tenant completions, GiB and requests).

**Scale.** Warm-up time T_fast is varied through the tier capacity, C = F·T_fast
(§4.2: "different fast tier capacities (measured by the time it takes to warm up)"),
with a fixed F = :data:`F_BPS` (one 4 KiB system request per second, one 16 KiB
warm-up chunk every 4 s). The devices are 5000 IOPS (fast) and 250 IOPS (slow),
exponential (the planner's 0.2 ms / 4 ms). The synthetic workload peaks at 1 user
IOPS; absolute rates are scaled down so that 21 days (~1.8 M requests per policy)
simulate in seconds — only their ratios matter to the cache (who evicts whom, how
fast), and every device stays lightly loaded, as in the paper's simulation (§4.2:
"response time remains flat during the full range of user arrival intensities").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from storqos.base.errors import InputError
from storqos.model import registry
from storqos.model.sim import simulate
from storqos.planning.warming.daymodel import DayModel
from storqos.planning.warming.fasttier import FastTier
from storqos.planning.warming.intensity import DAY_MIN, Intensity
from storqos.planning.warming.policies import GRID_S, POLICIES, Knobs, PolicyResult, compare
from storqos.planning.warming.reqlevel import BLOCK, SYSTEM, SYSTEM_BASE, SYSTEM_SPAN_X, USER, WARM, WARM_CHUNK, CacheSetup

#: Warm-up / system-work transfer speed F (bytes/s): one 4 KiB block per second.
F_BPS = 4096.0
MIN_NS = 60_000_000_000


def setup_for(t_fast_s: float, f_bps: float = F_BPS, fast_iops: float = 5000.0, slow_iops: float = 250.0) -> CacheSetup:
    """The tier whose warm-up at ``f_bps`` takes ``t_fast_s``: C = F·T_fast, rounded to
    whole 16 KiB warm-up chunks (≥ 1)."""
    if not t_fast_s > 0:
        raise InputError(f"warm-up time must be > 0 s, got {t_fast_s}")
    chunks = max(1, round(f_bps * t_fast_s / WARM_CHUNK))
    return CacheSetup(capacity_bytes=chunks * WARM_CHUNK, warm_rate_bps=f_bps, fast_iops=fast_iops, slow_iops=slow_iops)


@dataclass
class RequestResult:
    """One policy replayed request by request over the evaluated minutes."""

    policy: str
    t_fast_min: float
    user_requests: int
    hit_fraction: float
    mean_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    system_requests: int
    system_gib: float
    system_on_h: float
    warm_requests: int
    cdf: np.ndarray  # fraction of user requests ≤ GRID_S
    wall_s: float
    plan: PolicyResult | None = field(default=None, repr=False)

    def row(self) -> dict[str, Any]:
        """Table row (units in the keys)."""
        return {"policy": self.policy, "t_fast_min": self.t_fast_min, "user_requests": self.user_requests,
                "hit_pct": 100 * self.hit_fraction, "mean_ms": self.mean_ms, "p50_ms": self.p50_ms,
                "p90_ms": self.p90_ms, "p99_ms": self.p99_ms, "system_requests": self.system_requests,
                "system_gib": self.system_gib, "system_on_h": self.system_on_h, "warm_requests": self.warm_requests,
                "sim_wall_s": self.wall_s}


def _on_intervals(on: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[start, stop) minute indices of the runs of True in ``on``."""
    d = np.diff(np.concatenate([[0], on.astype(np.int8), [0]]))
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1)


def build_streams(setup: CacheSetup, user_ns: np.ndarray, system_on_min: np.ndarray, *, seed: int = 0) -> pl.DataFrame:
    """The three tenants' requests for one schedule.

    ``user_ns``: user arrival times (ns) relative to the first evaluated minute;
    ``system_on_min``: the policy's system work per minute. Times in the result are
    shifted by the pre-warm pass (C/F); user requests outside the schedule are dropped.
    """
    rng = np.random.default_rng(seed)
    on = np.asarray(system_on_min, bool)
    n_min = len(on)
    c_blocks = setup.capacity_bytes // BLOCK
    chunks = setup.capacity_bytes // WARM_CHUNK
    warm_gap_ns = WARM_CHUNK / setup.warm_rate_bps * 1e9
    sys_per_min = setup.warm_rate_bps / BLOCK * 60
    t0 = int(chunks * warm_gap_ns)
    parts: list[tuple[np.ndarray, int, np.ndarray, int]] = []
    # Pre-warm pass before minute 0.
    parts.append(((np.arange(chunks) * warm_gap_ns).astype(np.int64), WARM, np.arange(chunks) * WARM_CHUNK, WARM_CHUNK))
    # Users: open loop, uniform over the user set.
    u = np.asarray(user_ns, np.int64)
    u = u[(u >= 0) & (u < n_min * MIN_NS)]
    parts.append((t0 + u, USER, rng.integers(0, c_blocks, len(u)) * BLOCK, BLOCK))
    # System work: Poisson inside the on-minutes.
    minutes = np.flatnonzero(on)
    k = rng.poisson(sys_per_min, len(minutes))
    m = np.repeat(minutes, k)
    at = t0 + m * MIN_NS + (rng.random(len(m)) * MIN_NS).astype(np.int64)
    parts.append((at, SYSTEM, SYSTEM_BASE + rng.integers(0, c_blocks * SYSTEM_SPAN_X, len(m)) * BLOCK, BLOCK))
    # Warm-up: a sequential pass from the start of each off-interval after system work.
    starts, stops = _on_intervals(~on)
    w_at, w_off = [], []
    for a, b in zip(starts, stops, strict=True):
        if a == 0:  # the tier is warm at minute 0 (pre-warm) and nothing evicted it yet
            continue
        n = min(chunks, int(np.ceil((b - a) * MIN_NS / warm_gap_ns)))
        j = np.arange(n)
        w_at.append(t0 + a * MIN_NS + (j * warm_gap_ns).astype(np.int64))
        w_off.append(j * WARM_CHUNK)
    if w_at:
        parts.append((np.concatenate(w_at), WARM, np.concatenate(w_off), WARM_CHUNK))
    frames = [
        pl.DataFrame({
            "arrival_ns": np.asarray(at, np.int64),
            "size": np.full(len(at), size, np.uint32),
            "offset": np.asarray(off, np.uint64),
            "tenant": np.full(len(at), tenant, np.uint32),
        })
        for at, tenant, off, size in parts if len(at)
    ]
    return pl.concat(frames).sort("arrival_ns", maintain_order=True)


def run_schedule(setup: CacheSetup, user_ns: np.ndarray, system_on_min: np.ndarray, *, policy: str = "",
                 t_fast_min: float = 0.0, seed: int = 0) -> RequestResult:
    """Replay one schedule through ``storqos.simulate`` (FCFS, the cache device)."""
    trace = build_streams(setup, user_ns, system_on_min, seed=seed)
    res = simulate(trace, registry.default().name, setup.device(), seed=seed + 1, keep_requests=True)
    req = res.requests
    assert req is not None
    if res.unfinished:
        raise InputError(f"request-level replay left {res.unfinished} requests unfinished (device overloaded?)")
    user = req.filter(pl.col("tenant") == USER)
    rt_s = np.sort(user["response_ns"].to_numpy()) / 1e9
    n = len(rt_s)
    q = np.percentile(rt_s, [50, 90, 99]) * 1e3 if n else np.zeros(3)
    sys_done = int((req["tenant"] == SYSTEM).sum())
    return RequestResult(
        policy=policy,
        t_fast_min=t_fast_min,
        user_requests=n,
        hit_fraction=float((user["target"].to_numpy() == 0).mean()) if n else 0.0,
        mean_ms=float(rt_s.mean() * 1e3) if n else 0.0,
        p50_ms=float(q[0]),
        p90_ms=float(q[1]),
        p99_ms=float(q[2]),
        system_requests=sys_done,
        system_gib=sys_done * BLOCK / 2**30,
        system_on_h=float(np.asarray(system_on_min, bool).sum()) / 60,
        warm_requests=int((req["tenant"] == WARM).sum()),
        cdf=np.searchsorted(rt_s, GRID_S, side="right") / max(n, 1),
        wall_s=res.wall_s,
    )


def user_arrivals(trace: pl.DataFrame, days: range, start_minute_of_day: int = 0) -> np.ndarray:
    """Arrival times (ns) of the trace's requests inside ``days``, relative to the first
    evaluated minute (the trace's minute 0 is ``start_minute_of_day`` after midnight of
    day 0, as in :func:`~storqos.planning.warming.intensity.per_minute`)."""
    a = trace["arrival_ns"].to_numpy().astype(np.int64) + int(start_minute_of_day) * MIN_NS
    lo, hi = days.start * DAY_MIN * MIN_NS, days.stop * DAY_MIN * MIN_NS
    a = a[(a >= lo) & (a < hi)]
    return np.sort(a - lo)


def evaluate_requests(
    intensity: Intensity,
    trace: pl.DataFrame,
    model: DayModel,
    t_fast_s: float,
    days: range,
    *,
    knobs: Knobs | None = None,
    policies: tuple[str, ...] = POLICIES,
    start_minute_of_day: int = 0,
    f_bps: float = F_BPS,
    seed: int = 0,
) -> dict[str, RequestResult]:
    """Plan every policy over ``days`` with the per-minute evaluator (tier T_fast =
    ``t_fast_s``), then replay each schedule request by request (module notes)."""
    plans = compare(intensity, model, FastTier.from_warmup(t_fast_s), days, knobs, policies)
    setup = setup_for(t_fast_s, f_bps)
    users = user_arrivals(trace, days, start_minute_of_day)
    out = {}
    for p, plan in plans.items():
        r = run_schedule(setup, users, plan.system_on, policy=p, t_fast_min=t_fast_s / 60, seed=seed)
        r.plan = plan
        out[p] = r
    return out


__all__ = ["F_BPS", "RequestResult", "build_streams", "evaluate_requests", "run_schedule", "setup_for", "user_arrivals"]
