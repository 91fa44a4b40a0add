"""The planner's bounds on the capacity, and the bad-input checks against the device
(seed 000: RTT decomposition, capacity planning Cmin(f, δ)).

RTT admits the most requests of a stream that any schedule can finish within δ on a
server of rate C (seed 000, Lemmas 1–3). So tenant i cannot meet ``pP_i<=D_i`` under
*any* policy below ``need_i = Cmin_i(P_i, D_i)`` of its own stream, and all tenants
together not below ``Cmin(merged, ΣP_i·n_i/N, max D_i)``: their maximum (÷
:data:`CMIN_SLACK`) is a lower bound on the capacity, a proof on the constant-rate device
and elsewhere a first guess the search checks by simulation. FCFS meets every SLO on a
constant server of ``Cmin(merged, 100 %, min D_i)``: the first upper guess.

With a headroom h every SLO must also hold with the load × (1 + h), so the bounds are
those of the trace at that load (:func:`.problem.scaled_trace`; more load needs no less
capacity, and FCFS at the loaded trace's Cmin(100 %) meets every SLO at both loads);
``need_planned`` is each tenant's need there, the rate the policies are sized for.

Bad input is refused here, before any search: an SLO below the device's
service time at the largest capacity allowed, reservations adding up to more than it, a
cap below a reservation or below what the tenant's SLO needs alone.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from storqos import _core
from storqos.base.errors import InputError
from storqos.base.units import fmt_duration
from storqos.model import registry
from storqos.planning.advise.family import DeviceFamily
from storqos.planning.advise.problem import Problem, max_units, scaled_trace

#: The planner's Cmin is within 0.1 % above the true minimum (storqos_core::shaping::cmin):
#: the lower bound divides it by this.
CMIN_SLACK = 1.001
#: Default largest capacity the search allows, as a multiple of the tenants' total mean
#: arrival rate: a device a hundred times the load is not a plan but a sign of an SLO the
#: device cannot meet. ``--max-capacity`` overrides it.
MAX_CAPACITY_OVER_LOAD = 100.0
#: How long the closed client that measures one disk's IOPS runs (simulated s).
DISK_PROBE_S = 10


def cmin(arrivals: np.ndarray, fraction: float, deadline_ns: int) -> float:
    """Cmin(f, δ) of one stream (IOPS), by the planner kernel (seed 000)."""
    res = _core.capacity_table(arrivals, [int(deadline_ns)], [float(min(1.0, fraction))])
    return float(res.cmin_iops[0][0])


def prepare(p: Problem, max_capacity: float | None = None, where: str = "advise") -> None:
    """Compute the planner's bounds and check the SLOs against the device: an SLO no
    allowed capacity can meet, contradictory reservations or caps are an InputError."""
    judged = [t for t in p.tenants if t.slo is not None]
    if not judged:
        raise InputError("no tenant has an SLO (give e.g. slo = \"p99<=10ms\" to at least one)", where)
    p.max_capacity = max_capacity if max_capacity is not None else MAX_CAPACITY_OVER_LOAD * p.total_iops
    tenant = p.trace["tenant"].to_numpy()
    n = sum(t.requests for t in p.tenants)
    f_all = sum(t.slo.percentile * t.requests for t in judged if t.slo is not None) / n
    d_max = max(t.slo.latency_ns for t in judged)  # type: ignore[union-attr]
    d_min = min(t.slo.latency_ns for t in judged)  # type: ignore[union-attr]

    def needs(arrivals: np.ndarray) -> list[float]:
        return [0.0 if t.slo is None else cmin(np.ascontiguousarray(arrivals[tenant == i]), t.slo.percentile,
                                               t.slo.latency_ns) for i, t in enumerate(p.tenants)]

    nominal = p.trace["arrival_ns"].to_numpy().astype(np.uint64)
    p.need = needs(nominal)
    planned = scaled_trace(p.trace, p.load)["arrival_ns"].to_numpy().astype(np.uint64) if p.headroom > 0 else nominal
    p.need_planned = needs(planned) if p.headroom > 0 else list(p.need)
    p.lower = max(max(p.need_planned), cmin(planned, f_all, d_max)) / CMIN_SLACK
    p.upper = cmin(planned, 1.0, d_min)
    if p.family.integer:
        p.disk_iops = disk_iops(p.family)
    check_feasible(p, where)


def disk_iops(fam: DeviceFamily) -> float:
    """One disk's random 4 KiB IOPS at depth 1 (a closed client for 10 simulated s)."""
    from storqos.model.sim import ClosedClient, simulate

    res = simulate(None, registry.default().name, fam.spec(1),
                   closed=[ClosedClient(outstanding=1, span="16GiB", stop=f"{DISK_PROBE_S}s")], seed=1)
    return float(res.tenants["completed"][0]) / DISK_PROBE_S


def check_feasible(p: Problem, where: str) -> None:
    """The bad-input rules: an SLO below the device's service time at the
    largest capacity allowed, a reservation sum above it, a cap below a reservation or
    below what the tenant's SLO needs."""
    top = max_units(p)
    # A lone request of each tenant's median size, one second apart, on the largest device allowed.
    sizes = p.trace.group_by("tenant").agg(pl.col("size").median().cast(pl.UInt32)).sort("tenant")
    k = sizes.height
    lone = pl.DataFrame({"arrival_ns": [i * 1_000_000_000 for i in range(k)], "size": sizes["size"],
                         "offset": pl.Series([0] * k, dtype=pl.UInt64), "is_read": [True] * k,
                         "tenant": sizes["tenant"]})
    from storqos.model.sim import simulate

    res = simulate(lone, registry.default().name, p.family.spec(max(top, 1.0) if not p.family.integer else max(1, math.floor(top))),
                   seed=p.seed)
    service = dict(zip(res.tenants["tenant"].to_list(), res.tenants["max_ns"].to_list(), strict=True))
    allowed = p.family.unit(top if not p.family.integer else max(1, math.floor(top)))
    for i, t in enumerate(p.tenants):
        if t.slo is None:
            continue
        s = float(service.get(i, 0))
        if t.slo.latency_ns < s:
            raise InputError(
                f"tenant {t.name!r}: {t.slo.text} is below the device's service time ({fmt_duration(s)} for one "
                f"request at {allowed}, the most the search allows: --max-capacity)", where)
        if not p.family.integer and p.need[i] > p.max_capacity:
            raise InputError(
                f"tenant {t.name!r}: {t.slo.text} needs at least {p.need[i]:,.0f} IOPS even alone (Cmin), above "
                f"the most the search allows ({p.max_capacity:,.0f} IOPS: --max-capacity)", where)
        if t.limit is not None and t.reservation is not None and t.limit < t.reservation:
            raise InputError(f"tenant {t.name!r}: its cap ({t.limit:,.0f} IOPS) is below its reservation "
                             f"({t.reservation:,.0f} IOPS)", where)
        if t.limit is not None and t.limit < p.need[i] / CMIN_SLACK:
            raise InputError(f"tenant {t.name!r}: its cap ({t.limit:,.0f} IOPS) is below the {p.need[i]:,.0f} IOPS "
                             f"its SLO {t.slo.text} needs even alone (Cmin)", where)
    res_sum = sum(t.reservation or 0.0 for t in p.tenants)
    if res_sum > p.max_capacity:
        raise InputError(f"the reservations add up to {res_sum:,.0f} IOPS, above the most the search allows "
                         f"({p.max_capacity:,.0f} IOPS: --max-capacity)", where)


__all__ = ["CMIN_SLACK", "MAX_CAPACITY_OVER_LOAD", "check_feasible", "cmin", "disk_iops", "prepare"]
