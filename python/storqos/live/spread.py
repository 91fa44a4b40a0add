"""Replay of a trace over several gateways at once (``storqos replay TRACE URI --spread
URI2 ...``): each request goes to the gateway the cluster simulator's hash placement
picks for its object (:func:`storqos._core.hash_placement`: the tenant and the offset's
4 MiB object), and each tenant's client runs dmClock's side (Gulati, Merchant & Varman,
OSDI 2010, §4): it counts its completions per gateway and phase and sends, with each
request, the service it received at the other gateways since its previous request to
this one, through storqos' NBD extension (docs/gateway-protocol.md). Gateways that do
not take the extension, and NBD servers other than storqos', serve it as a plain client.

The engine is the extension's (:func:`storqos._core.replay_spread`: its own NBD client,
since libnbd can send nothing beside a request); this module turns a trace into its
arrays and its log into a :class:`~storqos.live.replay.ReplayResult`, the same result as
any replay, whose ``target`` column is each request's gateway (0 = the first URI)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from storqos.base.errors import InputError
from storqos.base.uri import split_nbd
from storqos.live.replay import MAX_REQUEST, ReplayResult, failures, request_log

#: Most requests in flight per (tenant, gateway) connection.
DEFAULT_DEPTH = 64
#: Most gateways a replay spreads over (the log's ``target`` column is a byte).
MAX_GATEWAYS = 256


@dataclass
class SpreadResult:
    """A spread replay: what any replay gives, each request's gateway, and which
    gateways took the dmClock extension."""

    result: ReplayResult
    #: per request, in trace order: its gateway (an index into the URIs)
    server: np.ndarray
    #: per tenant id: per gateway, True / False (took the extension or not), None (unused)
    dmclock: dict[int, list[bool | None]]
    #: per request: served in the reservation phase, as its gateway said
    reservation: np.ndarray


def _host_port(uri: str, where: str) -> tuple[str, str]:
    """``(HOST:PORT, export)`` of a plain-TCP NBD URI (the spread replay's client speaks
    neither TLS nor Unix sockets)."""
    parts = split_nbd(uri, where)
    if parts.scheme != "nbd":
        raise InputError(f"{uri}: a spread replay connects over plain TCP only (nbd://HOST:PORT/EXPORT)", where)
    if not parts.hostname:
        raise InputError(f"{uri}: no host", where)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{parts.port or 10809}", parts.path.lstrip("/")


def replay_spread(trace: pl.DataFrame, uris: list[dict[int, str]], *, speed: float = 1.0, dmclock: bool = True,
                  depth: int = DEFAULT_DEPTH, stall_s: float = 60.0, seed: int = 0,
                  object_bytes: int = 4 << 20) -> SpreadResult:
    """Replay ``trace`` (storqos' trace schema) over the gateways ``uris[k]`` (each
    tenant's export URI on gateway ``k``), open loop at ``speed`` times the trace's rate,
    each request to its object's gateway under hash placement (``seed``,
    ``object_bytes``). With ``dmclock``, the tenants' requests carry dmClock's δ and ρ to
    every gateway that takes the extension. Errors: :class:`InputError`, one line."""
    from storqos import _core

    if not (speed > 0 and np.isfinite(speed)):
        raise InputError(f"must be a finite number > 0, got {speed}", "--speed")
    if not trace.height:
        raise InputError("the trace has no requests", "replay")
    if not 2 <= len(uris) <= MAX_GATEWAYS:
        raise InputError(f"a spread replay needs 2 to {MAX_GATEWAYS} gateways, got {len(uris)}", "--spread")
    big = int(trace["size"].cast(pl.Int64).to_numpy().max())
    if big > MAX_REQUEST:
        raise InputError(f"a request of {big:,} bytes: a spread replay sends at most {MAX_REQUEST >> 20} MiB at once",
                         "replay")
    tenant = trace["tenant"].cast(pl.UInt32).to_numpy()
    ids = sorted(int(t) for t in np.unique(tenant))
    targets: list[list[tuple[str, str]]] = [[] for _ in range(ids[-1] + 1)]
    for t in ids:
        for k, by_tenant in enumerate(uris):
            if t not in by_tenant:
                raise InputError(f"tenant {t} has no export on gateway {k}", "--tenant-map")
            targets[t].append(_host_port(by_tenant[t], "--spread" if k else "URI"))
    offset = trace["offset"].cast(pl.UInt64).to_numpy()
    server = _core.hash_placement(tenant, offset, len(uris), object_bytes=object_bytes, seed=seed)
    at = trace["arrival_ns"].cast(pl.Int64).to_numpy()
    at = ((at - at.min()) / speed).astype(np.uint64)
    size, is_read = trace["size"].cast(pl.UInt32).to_numpy(), trace["is_read"].to_numpy()
    log = _core.replay_spread(targets, at, tenant, server, offset, size, is_read, dmclock=dmclock, depth=depth,
                              timeout_s=stall_s)
    issue = log.issue_ns.astype(np.int64)
    finish = log.finish_ns.astype(np.int64)
    ok = log.error == 0
    errors, bad = failures(tenant, ok)
    first_error = None if bad is None else f"request {bad}: NBD error {int(log.error[bad])} from gateway {int(server[bad])}"
    start = int(issue.min())
    req = request_log(tenant, size, is_read, issue, finish, ok, start, target=server)
    res = ReplayResult(
        requests=req, issue_error_ns=issue - at.astype(np.int64), errors=errors, first_error=first_error,
        span_s=(int(finish.max()) - start) / 1e9, scheduled_span_s=float(at.max()) / 1e9,
        export_bytes={}, mode="open", wrapped=int(log.wrapped))
    return SpreadResult(res, server, {t: log.dmclock[t] for t in ids}, log.reservation)


__all__ = ["DEFAULT_DEPTH", "MAX_GATEWAYS", "SpreadResult", "replay_spread"]
