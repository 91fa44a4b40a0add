"""What advise is asked: the tenants with their SLOs, one trace of all their requests,
the device family whose capacity is the unknown, and the planner's bounds on it
(filled in by :mod:`.bounds`). Plain data; reading a file into it is :mod:`.inputs`.

An SLO ``pP<=D`` says that a fraction P of a tenant's requests finish within
D of their *arrival*: end to end, what a client sees, whatever the policy does between.

The **headroom** h is the extra load an answer must also survive: every SLO must hold
with the trace as it is *and* with every tenant's arrival rate × (1 + h), the same
requests arriving faster (:func:`scaled_trace`: each arrival time ÷ (1 + h)). Policies
are sized for that load (:attr:`Problem.need_planned`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from storqos.base.units import fmt_duration
from storqos.planning.advise.family import DeviceFamily

#: The extra load an answer must also hold at, unless told otherwise (``--headroom``): a
#: least capacity found at the trace's own load has no margin left (docs/advise.md's
#: example: SARC+AVATAR's 2,879 IOPS gave its burst tenant 143 ms at 10 % more load
#: against a 100 ms bound), so 10 %, the extra load the proof used to only report.
DEFAULT_HEADROOM = 0.10
#: The largest headroom taken: ten times the load (beyond it a plan is for another workload).
MAX_HEADROOM = 9.0


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
    #: every SLO must also hold at (1 + headroom) × the load (0: off)
    headroom: float = DEFAULT_HEADROOM
    #: what each tenant's SLO needs alone at (1 + headroom) × its load, the rate policies are
    #: sized for (IOPS; 0 without SLO; equal to ``need`` without headroom)
    need_planned: list[float] = field(default_factory=list)

    @property
    def total_iops(self) -> float:
        """The tenants' total mean arrival rate."""
        return sum(t.mean_iops for t in self.tenants)

    @property
    def load(self) -> float:
        """The load the answer is planned for, as a multiple of the trace's: 1 + headroom."""
        return 1.0 + self.headroom

    @property
    def loads(self) -> tuple[float, ...]:
        """The loads every SLO is judged at: (1 + headroom, 1), or (1,) without headroom."""
        return (self.load, 1.0) if self.headroom > 0 else (1.0,)


def scaled_trace(trace: pl.DataFrame, load: float) -> pl.DataFrame:
    """``trace`` with every tenant's arrival rate × ``load``: each arrival time ÷ ``load``
    (rounded to the ns), the same requests, sizes and offsets."""
    if load == 1.0:
        return trace
    return trace.with_columns((pl.col("arrival_ns").cast(pl.Float64) / load).round().cast(pl.Int64))


def headroom_text(h: float) -> str:
    """``+10 %`` (the headroom as the tables say it)."""
    return f"+{100 * h:.3g} %"


def to_capacity(p: Problem, iops: float) -> float:
    """An IOPS figure in the family's capacity unit (disks for ``disk``)."""
    return iops / p.disk_iops if p.family.integer and p.disk_iops > 0 else iops


def to_iops(p: Problem, capacity: float) -> float:
    """A capacity in the family's unit as IOPS (a number of disks × one disk's IOPS)."""
    return capacity * p.disk_iops if p.family.integer else capacity


def max_units(p: Problem) -> float:
    """The largest capacity the search allows, in the family's unit."""
    return to_capacity(p, p.max_capacity)


__all__ = ["DEFAULT_HEADROOM", "MAX_HEADROOM", "Problem", "Slo", "TenantInfo", "headroom_text", "max_units",
           "scaled_trace", "to_capacity", "to_iops"]
