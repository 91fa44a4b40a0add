"""What advise is asked: the tenants with their SLOs, one trace of all their requests,
the device family whose capacity is the unknown, and the planner's bounds on it
(filled in by :mod:`.bounds`). Plain data; reading a file into it is :mod:`.inputs`.

An SLO ``pP<=D`` (issue 19) says that a fraction P of a tenant's requests finish within
D of their *arrival*: end to end, what a client sees, whatever the policy does between.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from ..units import fmt_duration
from .family import DeviceFamily


@dataclass(frozen=True)
class Slo:
    """A fraction ``percentile`` of a tenant's requests finish within ``latency_ns`` of
    their arrival."""

    percentile: float
    latency_ns: int

    @property
    def text(self) -> str:
        """``p99≤10ms``."""
        return f"p{100 * self.percentile:g}≤{fmt_duration(self.latency_ns).replace(' ', '')}"


@dataclass(frozen=True)
class TenantInfo:
    """One tenant: its name, SLO (None: best effort, not judged), reservation and cap
    (IOPS), weight, requests and mean rate over the run."""

    name: str
    slo: Slo | None
    reservation: float | None
    limit: float | None
    weight: float | None
    requests: int
    mean_iops: float


@dataclass
class Problem:
    """What the search needs: one trace of every tenant's requests (``tenant`` column),
    the tenants, the device family, the seed and the largest capacity allowed."""

    name: str
    trace: pl.DataFrame
    tenants: list[TenantInfo]
    family: DeviceFamily
    seed: int = 1
    max_capacity: float = 0.0
    span_ns: int = 0
    #: the capacity each tenant needs alone for its SLO, Cmin_i(P_i, D_i) (IOPS; 0 without SLO)
    need: list[float] = field(default_factory=list)
    #: lower bound on the capacity of any policy on a constant server (IOPS)
    lower: float = 0.0
    #: capacity at which FCFS meets every SLO on a constant server (IOPS)
    upper: float = 0.0
    #: a single disk's random IOPS at depth 1 (disk family only)
    disk_iops: float = 0.0

    @property
    def total_iops(self) -> float:
        """The tenants' total mean arrival rate."""
        return sum(t.mean_iops for t in self.tenants)


def to_capacity(p: Problem, iops: float) -> float:
    """An IOPS figure in the family's capacity unit (disks for ``disk``)."""
    return iops / p.disk_iops if p.family.integer and p.disk_iops > 0 else iops


def to_iops(p: Problem, capacity: float) -> float:
    """A capacity in the family's unit as IOPS (a number of disks × one disk's IOPS)."""
    return capacity * p.disk_iops if p.family.integer else capacity


def max_units(p: Problem) -> float:
    """The largest capacity the search allows, in the family's unit."""
    return to_capacity(p, p.max_capacity)


__all__ = ["Problem", "Slo", "TenantInfo", "max_units", "to_capacity", "to_iops"]
