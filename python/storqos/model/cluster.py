"""Simulating a cluster: many servers, each a copy of the device model behind its own
copy of the policy, with the tenants' requests placed on them, and the tenants' global
reservations and limits kept by dmClock (Gulati, Merchant & Varman, OSDI 2010, §4) or a
periodic split of them by demand, or not at all.

The event loop is the Rust core's (``storqos_core::sim::cluster``); this module checks
the cluster's settings, converts columns in and DataFrames out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal, Unpack

import numpy as np
import polars as pl

from storqos import _core
from storqos.base.core_json import core_json
from storqos.base.errors import InputError
from storqos.base.units import check_seed, parse_count, parse_duration, parse_size
from storqos.model.sim import (
    DEFAULT_POLICY,
    ClosedClient,
    DeviceParams,
    PreparedRun,
    SimParams,
    group_frame,
    in_callers_names,
    naming_options,
    prepare_run,
    window_frame,
)
from storqos.model.specs import PolicyParams, check_keywords, with_keywords

#: How requests find their servers: by a hash of their object, or the trace's own column.
PLACEMENTS: tuple[str, ...] = ("hash", "device")
#: How the servers keep the tenants' global promises.
COORDINATIONS: tuple[str, ...] = ("none", "dmclock", "split")
#: When a dmClock server charges the service its clients report having had elsewhere:
#: every report as it arrives (storqos), or each request its own (the paper, Ceph's
#: dmclock library).
CHARGES: tuple[str, ...] = ("arrival", "request")
#: Object size of hash placement when none is given (an RBD image's objects).
DEFAULT_OBJECT_SIZE = "4MiB"
#: Period of the split allocator when none is given.
DEFAULT_SPLIT_PERIOD = "500ms"


@dataclass(frozen=True)
class Cluster:
    """A cluster's shape.

    - ``servers``: how many servers, each a copy of the run's device behind its own copy
      of the policy.
    - ``placement``: ``hash`` (a request's object, its tenant and offset over
      ``object_size``, hashes with ``seed`` to a primary server; its ``replicas`` are the
      next servers round the ring; reads go to the primary, writes to every replica and
      complete with the last) or ``device`` (the trace's ``server`` column, else its
      ``device`` column numbered in order of appearance).
    - ``coordination``: ``none`` (each server alone: a tenant's reservation and limit
      hold at every server it uses), ``dmclock`` (global mClock parameters everywhere and
      each request says the service its tenant had elsewhere) or ``split`` (local mClock,
      each tenant's reservation, weight and limit split by its demand at each server every
      ``period``). ``dmclock`` and ``split`` need the ``mclock`` policy.
    - ``charge``: with ``dmclock``, when a server charges the service a tenant reports
      having had elsewhere: ``arrival`` (every report as it arrives) or ``request``
      (each request its own report, as the paper and Ceph's dmclock library do, which
      lets a tenant that keeps requests queued run past its limit).
    """

    servers: int
    placement: Literal["hash", "device"] = "hash"
    replicas: int = 1
    object_size: str | int = DEFAULT_OBJECT_SIZE
    seed: int = 0
    coordination: Literal["none", "dmclock", "split"] = "none"
    period: str | float = DEFAULT_SPLIT_PERIOD
    charge: Literal["arrival", "request"] = "arrival"

    def to_spec(self, where: str = "--cluster") -> dict[str, Any]:
        """The core's JSON form, each value checked (errors name ``where``'s options)."""
        servers = parse_count(self.servers, where, minimum=1, maximum=_core.MAX_CLUSTER_SERVERS)
        if self.placement not in PLACEMENTS:
            raise InputError(f"placement must be one of {', '.join(PLACEMENTS)}, got {self.placement!r}", "--placement")
        if self.coordination not in COORDINATIONS:
            raise InputError(f"coordination must be one of {', '.join(COORDINATIONS)}, got {self.coordination!r}",
                             "--coordination")
        if self.placement == "hash":
            top = min(_core.MAX_REPLICAS, servers)
            replicas = parse_count(self.replicas, "--replicas", minimum=1, maximum=top)
            object_bytes = parse_size(self.object_size, "--object-size")
            if object_bytes <= 0:
                raise InputError("object size must be > 0 bytes", "--object-size")
            placement: dict[str, Any] = {"kind": "hash", "object_bytes": object_bytes, "replicas": replicas,
                                         "seed": check_seed(self.seed)}
        else:
            if self.replicas != 1:
                raise InputError("device placement puts each request on its one server: replicas need hash placement",
                                 "--replicas")
            placement = {"kind": "given"}
        coordination: dict[str, Any] = {"kind": self.coordination}
        if self.charge not in CHARGES:
            raise InputError(f"charge must be one of {', '.join(CHARGES)}, got {self.charge!r}", "charge")
        if self.coordination == "dmclock":
            coordination["charge"] = self.charge
        elif self.charge != "arrival":
            raise InputError("charge applies to dmclock coordination only", "charge")
        if self.coordination == "split":
            period = parse_duration(self.period, "--split-period")
            if period <= 0:
                raise InputError("split period must be > 0", "--split-period")
            coordination["period_ns"] = period
        return {"servers": servers, "placement": placement, "coordination": coordination}


def alt_range_trace(clients: int, servers: int, seconds: float, iops: float = 100.0, spread: int = 10) -> pl.DataFrame:
    """The clients of Ceph's dmclock simulator, "alternate range" placement: each of
    ``clients`` asks ``iops`` 4 KiB reads, evenly spaced, for ``seconds``, its k-th to
    server (⌊0.5 + i·S/C⌋ + k mod ``spread``) mod S, S = ``servers`` (a ``server``
    column, for ``placement="device"``)."""
    n = int(round(iops * seconds))
    k = np.repeat(np.arange(n), clients)
    i = np.tile(np.arange(clients), n)
    server = (np.floor(0.5 + i * servers / clients).astype(np.int64) + k % spread) % servers
    return pl.DataFrame({"arrival_ns": np.round(k * 1e9 / iops).astype(np.int64) + i * 1_000, "tenant": i,
                         "offset": k * 4096, "size": np.full(k.size, 4096), "is_read": np.ones(k.size, dtype=bool),
                         "server": server})


@dataclass
class ClusterResult:
    """What a cluster simulation returns. All times in nanoseconds unless a column says ``_s``."""

    policy: str
    device: str
    cluster: Cluster
    #: per tenant, as its client sees its requests (arrival to the last replica's
    #: completion): the columns of :attr:`storqos.model.sim.SimResult.tenants`
    tenants: pl.DataFrame
    #: one-row summary over all requests
    total: pl.DataFrame
    #: per-window, per-tenant series (client view), with ``iops``
    windows: pl.DataFrame
    #: per server: sub-requests served (a write once per replica), bytes, response at
    #: the server (mean/p50/p99/max), served by reservation, unfinished
    servers: pl.DataFrame
    #: response-time CDF per tenant (response_ns, fraction)
    cdf: pl.DataFrame
    #: the policies' gauges (start_ns, name, value): none are sampled across servers
    gauges: pl.DataFrame
    arrived: int
    unfinished: int
    end_ns: int
    events: int
    wall_s: float
    params: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (units in every key)."""
        return {
            "policy": self.policy,
            "device": self.device,
            "cluster": self.params.get("cluster", {}),
            "arrived": self.arrived,
            "unfinished": self.unfinished,
            "simulated_s": self.end_ns / 1e9,
            "wall_s": self.wall_s,
            "total": self.total.to_dicts()[0] if self.total.height else {},
            "tenants": self.tenants.to_dicts(),
            "servers": self.servers.to_dicts(),
        }


def server_column(trace: pl.DataFrame | None, servers: int) -> np.ndarray:
    """Each request's server for device placement: the trace's ``server`` column, else
    its ``device`` column numbered in order of first appearance; every server must be
    one of the cluster's."""
    if trace is None or trace.height == 0:
        return np.zeros(0, np.uint32)
    if "server" in trace.columns:
        col = trace["server"]
        if col.null_count() or (col.cast(pl.Int64, strict=False).min() or 0) < 0:  # type: ignore[operator]
            raise InputError("the trace's server column must hold server numbers from 0", "server")
        ids = col.cast(pl.UInt32).to_numpy()
        what = "server numbers"
    elif "device" in trace.columns:
        dev = trace["device"].cast(pl.String)
        order = dev.unique(maintain_order=True)
        ids = dev.replace_strict(order, pl.Series(np.arange(order.len(), dtype=np.uint32)),
                                 return_dtype=pl.UInt32).to_numpy()
        what = f"{order.len()} devices"
    else:
        raise InputError("device placement needs the trace's device (or server) column", "--placement")
    top = int(ids.max()) if ids.size else 0
    if top >= servers:
        raise InputError(f"the trace's {what} need {top + 1} servers, the cluster has {servers}: give a cluster of "
                         f"{top + 1} or more, or hash placement", "--cluster")
    return np.ascontiguousarray(ids, dtype=np.uint32)


@with_keywords(PolicyParams, DeviceParams)
def simulate_cluster(
    trace: pl.DataFrame | None = None,
    policy: str | dict[str, Any] = DEFAULT_POLICY,
    device: str | dict[str, Any] = "constant",
    *,
    cluster: Cluster,
    capacity: str | float | None = None,
    generators: list[dict[str, Any]] | None = None,
    closed: list[ClosedClient] | None = None,
    seed: int = 1,
    window: str | float = "1s",
    until: str | float | None = None,
    **params: Unpack[SimParams],
) -> ClusterResult:
    """Simulate ``trace`` through a :class:`Cluster` of servers, each a ``device`` (of
    ``capacity`` IOPS) behind its own ``policy``; the policy's and device's keyword
    arguments are :func:`storqos.model.sim.simulate`'s. Reservations and limits are each
    tenant's total over the cluster under ``dmclock`` and ``split``, and hold at each
    server under ``none``. Returns a :class:`ClusterResult`.

    >>> simulate_cluster(None, "fcfs", cluster=Cluster(servers=0), capacity=100)
    Traceback (most recent call last):
    ...
    storqos.base.errors.InputError: cluster=: must be at least 1, got 0
    """
    check_keywords("simulate_cluster", params, PolicyParams, DeviceParams)
    try:
        return _simulate_cluster(trace, policy, device, cluster=cluster, capacity=capacity, generators=generators,
                                 closed=closed, seed=seed, window=window, until=until, params=dict(params))
    except InputError as e:
        raise in_callers_names(e) from None


#: :func:`simulate_cluster` for ``storqos simulate --cluster``: errors name the options.
simulate_cluster_cli = naming_options(simulate_cluster)


def _simulate_cluster(trace: pl.DataFrame | None, policy: str | dict[str, Any], device: str | dict[str, Any], *,
                      cluster: Cluster, capacity: str | float | None, generators: list[dict[str, Any]] | None,
                      closed: list[ClosedClient] | None, seed: int, window: str | float, until: str | float | None,
                      params: dict[str, Any]) -> ClusterResult:
    cspec = cluster.to_spec()
    run: PreparedRun = prepare_run(trace, policy, device, capacity=capacity, generators=generators, closed=closed,
                                   seed=seed, window=window, until=until, params=params,
                                   copies=cspec["servers"] if cluster.coordination != "none" else 1)
    given = server_column(trace, cspec["servers"]) if cluster.placement == "device" else None
    if given is not None and (run.closed_specs or run.generators):
        raise InputError("closed-loop clients and generators have no server column: use hash placement with them",
                         "--placement")
    if cluster.coordination != "none" and run.pspec.get("kind") != "mclock":
        raise InputError(f"{cluster.coordination} coordination keeps mClock's reservations and limits across the "
                         f"servers: give --policy mclock (got {run.pname})", "--coordination")
    arrival, tenant, size, offset, is_read, _target = run.cols
    t0 = time.perf_counter()
    out = _core.simulate_cluster(
        arrival, tenant, size, offset, is_read, given,
        core_json(run.pspec, "policy"),
        core_json(run.dspec, "device"),
        core_json(cspec, "cluster"),
        closed_json=core_json(run.closed_specs, "closed"),
        generators_json=core_json(run.generators, "generator"),
        seed=run.seed,
        window_ns=run.window_ns,
        until_ns=run.until_ns,
    )
    wall = time.perf_counter() - t0
    spans = out.total.span_s
    run_span = float(spans[0]) if len(spans) else 0.0
    windows = window_frame(out.windows).with_columns((pl.col("completed") * 1e9 / run.window_ns).alias("iops"))
    s = out.servers
    servers = pl.DataFrame({"server": s.server, "completed": s.completed, "bytes": s.bytes, "mean_ns": s.mean_ns,
                            "p50_ns": s.p50_ns, "p99_ns": s.p99_ns, "max_ns": s.max_ns,
                            "by_reservation": s.by_reservation, "unfinished": s.unfinished})
    return ClusterResult(
        policy=run.pname,
        device=run.dname,
        cluster=cluster,
        tenants=group_frame(out.tenants, "tenant", run_span),
        total=group_frame(out.total, None, run_span),
        windows=windows,
        servers=servers,
        cdf=pl.DataFrame({"tenant": out.cdf.tenant, "response_ns": out.cdf.response_ns, "fraction": out.cdf.fraction}),
        gauges=pl.DataFrame(schema={"start_ns": pl.UInt64, "name": pl.Utf8, "value": pl.Float64}),
        arrived=out.arrived,
        unfinished=out.unfinished,
        end_ns=out.end_ns,
        events=out.events,
        wall_s=wall,
        params={"policy": run.pspec, "device": run.dspec, "cluster": cspec, "seed": run.seed},
    )
