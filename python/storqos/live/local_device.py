"""Replay of a trace against a local file or block device (``storqos replay TRACE
/dev/loop0``), at the trace's timing, each tenant from a thread of its own and, when
given, from inside its own cgroup, so that the kernel's per-cgroup controllers (blk-
throttle, BFQ) see each tenant as they would see a container's. The engine is the
extension's (:func:`storqos._core.replay_local`: io_uring, or blocking threads where the
kernel refuses io_uring); this module turns a trace into its arrays and its log into a
:class:`~storqos.live.replay.ReplayResult`, the same result as a replay over NBD."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from storqos.base.errors import InputError
from storqos.live.replay import ReplayResult, failures, request_log

#: Most requests in flight per tenant (the engine's own bound is higher).
DEFAULT_DEPTH = 256


def is_local_target(target: str) -> bool:
    """Whether ``target`` (replay's second argument) names a local file or device rather
    than an NBD URI: a path, not ``scheme://`` (nor ``nbd:`` mistyped)."""
    return "://" not in target and not target.lower().startswith(("nbd:", "nbds:", "nbd+"))


def replay_device(trace: pl.DataFrame, path: str | Path, *, speed: float = 1.0, direct: bool = True,
                  writes: bool = False, cgroups: Sequence[str | None] | None = None, depth: int = DEFAULT_DEPTH,
                  stall_s: float = 10.0) -> ReplayResult:
    """Replay ``trace`` (storqos' trace schema) against the file or block device at
    ``path``, open loop at ``speed`` times the trace's rate. ``cgroups[t]``: the cgroup
    v1 directory tenant ``t``'s thread joins first (``None``: the caller's). ``direct``:
    O_DIRECT, offsets rounded down and sizes up to 4 KiB. Writes are refused unless
    ``writes`` (they overwrite the device). Errors: :class:`InputError`, one line."""
    from storqos import _core

    if not (speed > 0 and np.isfinite(speed)):
        raise InputError(f"must be a finite number > 0, got {speed}", "--speed")
    if not trace.height:
        raise InputError("the trace has no requests", "replay")
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or device", "replay")
    n_writes = int((~trace["is_read"]).sum())
    if n_writes and not writes:
        raise InputError(f"the trace has {n_writes:,} writes, which would overwrite {p}: give --writes to "
                         "allow them", "--writes")
    at = trace["arrival_ns"].cast(pl.Int64).to_numpy()
    at = ((at - at.min()) / speed).astype(np.uint64)
    tenant = trace["tenant"].cast(pl.UInt32).to_numpy()
    size, is_read = trace["size"].cast(pl.UInt32).to_numpy(), trace["is_read"].to_numpy()
    if cgroups is not None and len(cgroups) <= int(tenant.max()):
        raise InputError(f"{len(cgroups)} cgroup(s) for tenants 0..{int(tenant.max())}", "replay")
    log = _core.replay_local(str(p), at, tenant, trace["offset"].cast(pl.UInt64).to_numpy(), size,
                             is_read, direct=direct, cgroups=list(cgroups) if cgroups is not None else None, depth=depth,
                             stall_s=stall_s, writes=writes)
    issue = log.issue_ns.astype(np.int64)
    finish = log.finish_ns.astype(np.int64)
    result = log.result
    ok = result >= 0
    errors, bad = failures(tenant, ok)
    first_error = None if bad is None else f"request {bad}: {os.strerror(int(-result[bad]))}"
    start = int(issue.min())
    req = request_log(tenant, size, is_read, issue, finish, ok, start)
    with open(p, "rb") as f:
        device_bytes = f.seek(0, os.SEEK_END)
    return ReplayResult(
        requests=req, issue_error_ns=issue - at.astype(np.int64), errors=errors, first_error=first_error,
        span_s=(int(finish.max()) - start) / 1e9, scheduled_span_s=float(at.max()) / 1e9,
        export_bytes=dict.fromkeys((int(t) for t in np.unique(tenant)), device_bytes), mode="open",
        wrapped=int(log.wrapped))


__all__ = ["DEFAULT_DEPTH", "is_local_target", "replay_device"]
