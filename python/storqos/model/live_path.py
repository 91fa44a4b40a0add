"""Simulated requests as a client of the live path sees them: a device profile's path at
rest and in bursts applied to a simulation's kept requests, by the core
(:class:`storqos._core.LivePath`, ``storqos_core::sim::live_path``, which says what it
models and where its numbers come from). ``storqos validate`` compares the live replay
with this; ``storqos simulate --device-profile`` prints it."""

from __future__ import annotations

import numpy as np
import polars as pl

from storqos._core import LivePath
from storqos.model.device_profile import DeviceProfile


def live_path(profile: DeviceProfile) -> LivePath:
    """The core's live path of ``profile`` (:meth:`DeviceProfile.live_path`), its hold
    shares fitted."""
    return LivePath(profile.live_path())


def with_path(requests: pl.DataFrame, profile: DeviceProfile, offsets: np.ndarray | None = None) -> pl.DataFrame:
    """``requests`` (a simulation's kept requests: ``arrival_ns``, ``finish_ns``,
    ``response_ns``; ``is_read`` (all reads without it), ``wait_ns`` and ``dispatch_ns``
    when kept) as a client of ``profile``'s live path sees them, in arrival order. With
    the profile's bursts measured, ``arrival_ns`` becomes when the replay issues each
    request and the times count from there. With ``offsets`` (each request's offset by
    its ``id``, the row of the trace simulated; ``tenant`` and ``size`` then too) and
    sequential bursts measured, a request that continues its tenant's previous one of
    its op takes the sequential bursts' time between completions."""
    if not requests.height:
        return requests
    req = requests.sort("arrival_ns", maintain_order=True)
    n = req.height
    path = live_path(profile)

    def col(name: str) -> np.ndarray:
        return req[name].to_numpy().astype(np.int64)

    reads = req["is_read"].to_numpy().astype(bool) if "is_read" in req.columns else np.ones(n, dtype=bool)
    wait = col("wait_ns") if "wait_ns" in req.columns else np.zeros(n, dtype=np.int64)
    seq: dict[str, np.ndarray] = {}
    if offsets is not None:
        seq = {"tenant": req["tenant"].to_numpy().astype(np.uint32),
               "offset": np.asarray(offsets, dtype=np.uint64)[req["id"].to_numpy()],
               "size": req["size"].to_numpy().astype(np.uint64)}
    issued, response, finish, left = path.apply(col("arrival_ns"), col("finish_ns"), col("response_ns"), wait,
                                                reads, **seq)
    if not path.has_bursts:
        return req.with_columns(pl.Series("response_ns", response).cast(pl.UInt64),
                                pl.Series("finish_ns", finish).cast(pl.UInt64))
    out = req.with_columns(pl.Series("arrival_ns", issued).cast(pl.UInt64),
                           pl.Series("response_ns", response).cast(pl.UInt64),
                           pl.Series("finish_ns", finish).cast(pl.UInt64))
    if "wait_ns" in req.columns and "dispatch_ns" in req.columns:  # dispatched once issued, after what is left
        out = out.with_columns(pl.Series("wait_ns", left).cast(pl.UInt64),
                               pl.Series("dispatch_ns", issued + left).cast(pl.UInt64))
    return out


__all__ = ["live_path", "with_path"]
