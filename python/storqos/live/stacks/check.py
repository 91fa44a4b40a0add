"""A model of a QoS system checked against the real system on this machine: the same
trace simulated through the model and replayed live through the system, per tenant
IOPS, p50, p95 and p99 predicted beside measured, and Ruemmler and Wilkes' demerit
between the two response-time distributions.

The device under the real system is emulated with a fixed latency and no limit on
parallelism (QEMU's ``null-co`` with ``latency-ns``; nbdkit's ``delay`` filter), so the
model's device is that: each request takes its service time, however many are in
flight. The service times the model draws from are the ones measured: the responses of
requests sent now and then (Poisson, one in flight at a time mostly) through the same
system without limits, which adds the round trip of NBD and the system's own path to
the emulated latency. A loop device's requests take longer at rest than under load (its
worker threads and the CPUs go to sleep between spaced reads: a p50 of 80 µs against 50
under load), so for blk-cgroup the probe is the trace itself, replayed without limits
(and, for BFQ, through BFQ with equal weights and no idling: its own path costs some
10 µs a request). QEMU's path is not a constant: its event loop waits in whole
milliseconds, so a 1 ms sleep of ``null-co`` answers after 1 to 2 ms (p50 1.2 ms, p99
2.1 ms here), and a model with the median alone is off by 80 % at p99.

QEMU's NBD server handles at most 16 requests of one connection at a time
(``MAX_NBD_REQUESTS``): over one connection the requests behind 16 throttled ones wait
in the socket, and a tenant's writes wait behind its throttled reads. That is the
export's queue, not the limiter the model is of (a guest's own queue depth would be
another), so each tenant's requests go round robin over 64 connections to its export.
nbdkit serves each tenant over one connection: its worker threads are the model's."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import polars as pl

from storqos.base.errors import InputError
from storqos.live.replay import replay
from storqos.model.sim import simulate
from storqos.model.specs import policy_spec
from storqos.model.tenant_figures import PERCENTILES, demerit, per_tenant

#: Servers of the model's device: more than ever in flight in a check.
MODEL_SERVERS = 4096
#: The probe of the service times: this many reads, this far apart on average (ns), at
#: Poisson times (so that they meet the system's timers at every phase).
PROBE_REQUESTS, PROBE_GAP_NS = 200, 4_000_000
#: Points of the service times' quantile function the model's device keeps.
PROBE_QUANTILES = 41


class Served(Protocol):
    """A running system, which replays a trace through itself."""

    def run(self, trace: pl.DataFrame, *, warmup: bool) -> pl.DataFrame:
        """Replay ``trace`` (each tenant's requests to its own export or cgroup) and
        return the request log (``storqos simulate --out``'s columns); ``warmup``: first
        one unlogged read per connection. An :class:`InputError` if any request failed."""
        ...


class NbdServed:
    """The part of a served system over NBD: each tenant's URI, and its replay spread
    over ``connections`` connections per tenant."""

    uris: dict[int, str]
    connections: int

    def run(self, trace: pl.DataFrame, *, warmup: bool) -> pl.DataFrame:
        """:meth:`Served.run` over NBD (:func:`storqos.live.replay.replay`)."""
        res = replay(trace, self.uris, warmup=warmup, connections=self.connections)
        if res.errors:
            raise InputError(f"{sum(res.errors.values())} request(s) failed live: {res.first_error}", "check")
        return res.requests


#: Starts the real system for a spec (``{}``: no limits) and a number of tenants.
Starter = Callable[[dict[str, Any], int], AbstractContextManager[Served]]


@dataclass
class StackCheck:
    """One live check."""

    #: the model's policy and its spec
    policy: str
    spec: dict[str, Any]
    #: per tenant: ``name``, ``requests``, ``iops_pred``, ``iops_meas``, ``pNN_ns_pred``,
    #: ``pNN_ns_meas`` (NN in :data:`PERCENTILES`), their errors ``iops_err``, ``pNN_err``
    #: (measured / predicted − 1) and ``demerit_ns``
    tenants: pl.DataFrame
    #: the median of the service times the model's device draws from (ns)
    service_ns: int
    #: both request logs
    predicted: pl.DataFrame
    measured: pl.DataFrame


def _probe(start: Starter, spec: dict[str, Any], trace: pl.DataFrame, tenants: int) -> np.ndarray:
    """The responses (ns) of requests sent through the system without limits (``{}``,
    or what the starter's ``unlimited(spec)`` says): where the starter says
    ``probe_under_load``, ``trace`` itself (of ``tenants`` tenants); otherwise
    :data:`PROBE_REQUESTS` reads at Poisson times :data:`PROBE_GAP_NS` apart on average."""
    unlimited = getattr(start, "unlimited", None)
    free = unlimited(spec) if unlimited is not None else {}
    if getattr(start, "probe_under_load", False):
        probe = trace
    else:
        n, tenants = PROBE_REQUESTS, 1
        rng = np.random.default_rng(1)
        probe = pl.DataFrame({"arrival_ns": np.cumsum(rng.exponential(PROBE_GAP_NS, n)).astype(np.int64),
                              "tenant": np.zeros(n, dtype=np.int64), "offset": np.arange(n, dtype=np.int64) * 4096,
                              "size": np.full(n, 4096, dtype=np.int64), "is_read": np.ones(n, dtype=bool)})
    with start(free, tenants) as served:
        log = served.run(probe, warmup=True)
    return log["response_ns"].to_numpy().astype(np.float64)


def service_device(responses_ns: np.ndarray) -> dict[str, Any]:
    """The model's device: :data:`MODEL_SERVERS` servers, each request's service drawn
    from the quantile function of ``responses_ns``, for reads and writes alike."""
    qs = np.linspace(0.0, 1.0, PROBE_QUANTILES)
    points = [[float(q), float(v)] for q, v in zip(qs, np.quantile(responses_ns, qs), strict=True)]
    classes = [{"op": op, "pattern": pattern, "bytes": 4096, "quantiles_ns": points}
               for op in ("read", "write") for pattern in ("random", "sequential")]
    return {"kind": "array", "servers": MODEL_SERVERS, "assign": "shared",
            "service": {"kind": "measured", "classes": classes}}


def check(trace: pl.DataFrame, policy: str | dict[str, Any], params: dict[str, Any], start: Starter, *,
          names: list[str] | None = None, seed: int = 1) -> StackCheck:
    """Check ``policy`` (a model of the system ``start`` runs, with its ``params``, as
    ``storqos simulate`` takes them; or a ready core spec) on ``trace``: simulated, then
    replayed live."""
    spec = policy_spec(policy, **params)
    policy = policy if isinstance(policy, str) else str(spec["kind"])
    tenants = int(trace["tenant"].cast(pl.Int64).max() or 0) + 1 if trace.height else 0  # type: ignore[arg-type]
    if not tenants:
        raise InputError("the trace has no requests", "check")
    names = names or [str(t) for t in range(tenants)]
    responses = _probe(start, spec, trace, tenants)
    service_ns = int(np.median(responses))
    device = service_device(responses)
    sim = simulate(trace, spec, device, seed=seed, keep_requests=True)
    predicted = sim.requests
    assert predicted is not None
    with start(spec, tenants) as served:
        # No warm-up reads: they would go through the limiter and leave its buckets
        # part full when the trace begins.
        measured = served.run(trace, warmup=False)
    pred, meas = per_tenant(predicted, names), per_tenant(measured, names)
    stats = ["requests", "iops", *(f"p{q}_ns" for q in PERCENTILES)]
    table = pred.select("tenant", "name", *stats).join(meas.select("tenant", *stats), on="tenant",
                                                       suffix="_meas", how="left")
    table = table.rename({s: f"{s}_pred" for s in stats if s != "requests"})
    table = table.with_columns(
        (pl.col("iops_meas") / pl.col("iops_pred") - 1).alias("iops_err"),
        *((pl.col(f"p{q}_ns_meas") / pl.col(f"p{q}_ns_pred") - 1).alias(f"p{q}_err") for q in PERCENTILES))
    gaps = []
    for t in table["tenant"].to_list():
        a = predicted.filter(pl.col("tenant") == t)["response_ns"].to_numpy()
        b = measured.filter(pl.col("tenant") == t)["response_ns"].to_numpy()
        gaps.append(demerit(a, b))
    table = table.with_columns(pl.Series("demerit_ns", gaps))
    return StackCheck(policy, spec, table, service_ns, predicted, measured)


__all__ = ["MODEL_SERVERS", "NbdServed", "Served", "StackCheck", "Starter", "check", "service_device"]
