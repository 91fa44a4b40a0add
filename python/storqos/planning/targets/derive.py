"""The settings of a real system's QoS derived from tenants' SLOs, for ``storqos advise
--target``: what each model of :mod:`storqos_core::stacks` is configured with when advise
searches its least capacity.

Each tenant's rate is advise's contracted rate (its reservation, else what its SLO needs
alone at the planned load, else its mean rate at that load; :func:`storqos.planning.advise.rates`).

- **Rate limiters** (QEMU, blk-throttle, nbdkit, SPDK, librbd): each tenant is limited to
  :data:`LIMIT_MARGIN` × its rate (its own ``limit`` where the file gives one), rounded
  up to what the system takes (whole IOPS; SPDK: multiples of 1,000; bytes per second
  from the tenant's mean request size). A limiter holds a tenant to its limit whatever
  the others do, and a tenant that offers no more than its rate waits in its limiter
  at most as long as behind a server of 1.25 × its SLO's rate, which leaves the rest of
  its latency bound to the device. blk-throttle has no total limit: reads and writes
  each get the tenant's limit.
- **BFQ**: weights in proportion to the rates, the largest 1,000 (the kernel's range
  1–1,000).
- **Ceph mClock**: a custom profile (every client shares one allocation in Reef): the
  clients' reservation is their rates' sum over the capacity (at most 1), the recovery
  and best-effort classes' what their tenants need."""

from __future__ import annotations

import math
from typing import Any

from storqos.base.errors import InputError
from storqos.model.specs import policy_spec
from storqos.planning.advise.problem import Problem

#: A limit over the rate the tenant's SLO needs: room for the device's own time.
LIMIT_MARGIN = 1.25
#: SPDK's IOPS limits are multiples of this (``SPDK_BDEV_QOS_MIN_IOS_PER_SEC``).
SPDK_IOPS_STEP = 1000
#: SPDK's byte limits are whole MiB/s.
SPDK_BYTES_STEP = 1 << 20
#: BFQ's largest weight (``BFQ_MAX_WEIGHT``).
BFQ_MAX_WEIGHT = 1000


def _mean_bytes(p: Problem, tenant: int) -> float:
    sizes = p.trace.filter(p.trace["tenant"] == tenant)["size"]
    return float(sizes.mean() or 4096)  # type: ignore[arg-type]


def limits(p: Problem, rates: list[float]) -> list[float]:
    """Each tenant's limit in IOPS: its own ``limit``, else :data:`LIMIT_MARGIN` × its rate."""
    return [t.limit if t.limit else LIMIT_MARGIN * r for t, r in zip(p.tenants, rates, strict=True)]


def stack_spec(p: Problem, policy: str, capacity: float, rates: list[float]) -> dict[str, Any]:
    """The core spec of the model ``policy`` (a policy whose registry entry has targets)
    configured for ``p``'s SLOs on a device of ``capacity`` IOPS."""
    lim = limits(p, rates)
    whole = [str(math.ceil(x)) for x in lim]
    n = len(p.tenants)
    if policy in ("qemu-throttle", "rbd-qos"):
        return policy_spec(policy, iops=whole)
    if policy == "blk-throttle":
        return policy_spec(policy, read_iops=whole, write_iops=whole)
    if policy == "spdk-qos":
        return policy_spec(policy, iops=[str(SPDK_IOPS_STEP * math.ceil(x / SPDK_IOPS_STEP)) for x in lim])
    if policy == "nbdkit-rate":
        return policy_spec(policy, bps=[str(math.ceil(x * _mean_bytes(p, i))) for i, x in enumerate(lim)],
                           threads="1")
    if policy == "bfq":
        top = max(rates)
        return policy_spec(policy, weights=[float(max(1, round(BFQ_MAX_WEIGHT * r / top))) for r in rates])
    if policy == "ceph-mclock":
        share = min(1.0, sum(rates) / capacity) if capacity > 0 else 1.0
        return policy_spec(policy, mclock_profile="custom", total_capacity=capacity, classes=["client"] * n,
                           client_res=f"{share:.6f}", client_wgt="1", client_lim="1")
    raise InputError(f"advise cannot derive the settings of {policy!r}", "--target")


__all__ = ["BFQ_MAX_WEIGHT", "LIMIT_MARGIN", "SPDK_BYTES_STEP", "SPDK_IOPS_STEP", "limits", "stack_spec"]
