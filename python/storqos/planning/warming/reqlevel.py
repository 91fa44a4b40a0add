"""Request-level check of the fast-tier model and of the policies' schedules (seed 002,
§3.2 and §4.2), on the Rust core's LRU cache device (``{"kind": "cache"}``,
``crates/storqos-core/src/devices/cache.rs``).

The stream has three tenants:

* :data:`USER` — 4 KiB random reads over the user working set ``[0, C)`` (it fits the
  fast tier exactly, §4.1: "the fast tier can fit the entire ... user active working
  set"), Poisson at the per-second user rate;
* :data:`SYSTEM` — 4 KiB random reads over a working set :data:`SYSTEM_SPAN_X` times
  larger than the tier, at F / 4 KiB IOPS while system work is on: its misses fill the
  tier at speed F and the LRU evicts the user blocks;
* :data:`WARM` — the explicit warm-up, a sequential read of ``[0, C)`` in
  :data:`WARM_CHUNK` requests at speed F while system work is off and the user set is
  not yet fully read back; the cache device makes those blocks resident.

A user request is a hit when its completion comes from the fast tier (``target`` 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from storqos.model import registry
from storqos.model.sim import simulate
from storqos.planning.warming.fasttier import FastTier

USER, SYSTEM, WARM = 0, 1, 2
BLOCK = 4096
#: Warm-up request size: 16 KiB sequential reads.
WARM_CHUNK = 16384
#: System working set relative to the fast tier (§1: "much larger").
SYSTEM_SPAN_X = 50
#: Where the system working set starts on the volume (beyond the user set).
SYSTEM_BASE = 1 << 40


@dataclass(frozen=True)
class CacheSetup:
    """A request-level tier: capacity, warm-up speed and the two tiers' IOPS."""

    capacity_bytes: int = 16 << 20
    warm_rate_bps: float = (16 << 20) / 60
    fast_iops: float = 5000.0
    slow_iops: float = 250.0

    def model(self) -> FastTier:
        """The analytic counterpart (Eqs. 1–14) of this setup."""
        return FastTier(self.capacity_bytes, self.warm_rate_bps, 1 / self.fast_iops, 1 / self.slow_iops)

    def device(self) -> dict[str, object]:
        return {
            "kind": "cache",
            "fast": {"kind": "exponential", "iops": self.fast_iops},
            "slow": {"kind": "exponential", "iops": self.slow_iops},
            "capacity_bytes": int(self.capacity_bytes),
            "block_bytes": BLOCK,
            "warm_tenants": [WARM],
        }


def build_stream(setup: CacheSetup, user_iops: np.ndarray, system_on: np.ndarray, seed: int = 0,
                 prewarm: bool = True) -> pl.DataFrame:
    """Requests for a schedule given per second: user IOPS and system work on/off.

    The warm-up runs (from where it stopped) whenever system work is off and the user
    set has been (partly) evicted since the last full warm-up. With ``prewarm`` the
    tier starts with the user set resident (a warm-up pass before time 0 is replaced by
    a pass in the first ``C / F`` seconds, tagged as warm-up, with no user requests
    before it ends).
    """
    rng = np.random.default_rng(seed)
    c_blocks = setup.capacity_bytes // BLOCK
    sys_iops = setup.warm_rate_bps / BLOCK
    warm_iops = setup.warm_rate_bps / WARM_CHUNK
    chunks = setup.capacity_bytes // WARM_CHUNK
    parts: list[tuple[np.ndarray, int, np.ndarray, int]] = []
    t0 = 0.0
    if prewarm:
        t0 = chunks / warm_iops
        at = np.arange(chunks) / warm_iops
        parts.append((at, WARM, np.arange(chunks) * WARM_CHUNK, WARM_CHUNK))
    # Users.
    for tenant, rate in ((USER, np.asarray(user_iops, float)), (SYSTEM, np.where(system_on, sys_iops, 0.0))):
        n = rng.poisson(rate)
        sec = np.repeat(np.arange(len(rate)), n)
        at = t0 + sec + rng.random(len(sec))
        if tenant == USER:
            off = rng.integers(0, c_blocks, len(sec)) * BLOCK
        else:
            off = SYSTEM_BASE + rng.integers(0, c_blocks * SYSTEM_SPAN_X, len(sec)) * BLOCK
        parts.append((at, tenant, off, BLOCK))
    # Warm-up: sequential chunks while system work is off and something was evicted.
    at_w, off_w = [], []
    pos, dirty = chunks, False
    for second, on in enumerate(system_on):
        if on:
            dirty, pos = True, 0
            continue
        if not dirty:
            continue
        k = int(warm_iops) + (1 if rng.random() < warm_iops - int(warm_iops) else 0)
        for j in range(k):
            if pos >= chunks:
                dirty = False
                break
            at_w.append(t0 + second + j / max(k, 1))
            off_w.append(pos * WARM_CHUNK)
            pos += 1
    parts.append((np.asarray(at_w), WARM, np.asarray(off_w, dtype=np.int64), WARM_CHUNK))
    frames = [
        pl.DataFrame({
            "arrival_ns": (np.asarray(at) * 1e9).astype(np.int64),
            "size": np.full(len(at), size, np.uint32),
            "offset": np.asarray(off, dtype=np.uint64),
            "tenant": np.full(len(at), tenant, np.uint32),
            "is_read": np.ones(len(at), bool),
        })
        for at, tenant, off, size in parts if len(at)
    ]
    return pl.concat(frames).sort("arrival_ns", maintain_order=True)


def run(setup: CacheSetup, user_iops: np.ndarray, system_on: np.ndarray, *, seed: int = 0) -> pl.DataFrame:
    """Simulate the stream (FCFS in front of the cache device); per-request log of the
    user requests with ``t_s`` (since the end of the pre-warm), ``hit`` and
    ``response_ns``."""
    trace = build_stream(setup, user_iops, system_on, seed)
    t0 = (setup.capacity_bytes // WARM_CHUNK) / (setup.warm_rate_bps / WARM_CHUNK)
    res = simulate(trace, registry.default().name, setup.device(), seed=seed, keep_requests=True)
    req = res.requests
    assert req is not None
    return req.filter(pl.col("tenant") == USER).select(
        ((pl.col("arrival_ns") / 1e9) - t0).alias("t_s"),
        (pl.col("target") == 0).alias("hit"),
        "response_ns",
    )


def hit_rate_check(setup: CacheSetup | None = None, *, user_iops: float = 10.0, window_s: float = 10.0,
                   seed: int = 0) -> pl.DataFrame:
    """User hit rate per window, measured vs Eqs. 2, 9, 12, over: T_fast warm, T_fast of
    system work, 1.5·T_fast without system work (explicit warm-up), where T_fast = C/F.

    Columns: ``t_s`` (window start), ``system_on``, ``measured_hit``, ``model_hit``.
    """
    setup = setup or CacheSetup()
    tier = setup.model()
    tf = int(round(tier.t_fast_s))
    on = np.concatenate([np.zeros(tf, bool), np.ones(tf, bool), np.zeros(int(1.5 * tf), bool)])
    log = run(setup, np.full(len(on), user_iops), on, seed=seed)
    w = log.with_columns((pl.col("t_s") // window_s).cast(pl.Int64).alias("w")).group_by("w").agg(
        pl.col("hit").mean().alias("measured_hit")).sort("w")
    s_mid = []
    for k in w["w"].to_list():
        a = k * window_s
        # model S at the middle of the window
        steps = on[: int(a + window_s / 2)]
        s_mid.append(tier.trajectory(steps, 1.0)[-1] if len(steps) else 0.0)
    return w.with_columns(
        (pl.col("w") * window_s).alias("t_s"),
        pl.Series("system_on", [bool(on[min(int(k * window_s + window_s / 2), len(on) - 1)]) for k in w["w"].to_list()]),
        pl.Series("model_hit", [float(tier.hit_rate(s)) for s in s_mid]),
    ).select("t_s", "system_on", "measured_hit", "model_hit")


__all__ = ["BLOCK", "SYSTEM", "USER", "WARM", "WARM_CHUNK", "CacheSetup", "build_stream", "hit_rate_check", "replay", "run",
           "setup_for_warmup"]


def replay(setup: CacheSetup, per_min: np.ndarray, system_on_min: np.ndarray, *, seed: int = 0) -> pl.DataFrame:
    """Request-level replay of a per-minute schedule (e.g. one evaluated day of
    :func:`storqos.planning.warming.policies.evaluate`): user Poisson arrivals at each minute's
    rate, system work and warm-up as in :func:`build_stream`. Returns the user log of
    :func:`run` (``t_s`` from the first minute)."""
    user_iops = np.repeat(np.asarray(per_min, float) / 60.0, 60)
    on = np.repeat(np.asarray(system_on_min, bool), 60)
    return run(setup, user_iops, on, seed=seed)


def setup_for_warmup(t_fast_s: float, capacity_bytes: int = 64 << 20) -> CacheSetup:
    """A request-level tier of ``capacity_bytes`` whose warm-up takes ``t_fast_s``."""
    return CacheSetup(capacity_bytes=capacity_bytes, warm_rate_bps=capacity_bytes / t_fast_s)
