"""Miser (seed 000: Lu, "Workload Shaping for QoS and Power Efficiency of Storage
Systems", §3.3.2): the slack its guarantee needs. Miser keeps RTT's primary class within
δ on Cmin + ΔC only when ΔC·δ ≥ 1, and a run given less is warned, not refused.

>>> miser_slack(100, 200, 50_000_000) is None
True
>>> miser_slack(100, 110, 50_000_000)[1]
120
"""

from __future__ import annotations

import math
from typing import Any

from storqos.model import registry

#: Miser's core kind.
KIND: str = registry.policy("miser").kind


def miser_slack(cmin_iops: float, capacity_iops: float, deadline_ns: float) -> tuple[str, int] | None:
    """Miser (seed 000) keeps the primary class within δ by serving the overflow class
    only while every queued primary request has a free place to spare; that needs
    ΔC·δ ≥ 1 spare service above Cmin. Below it: what falls short (one sentence) and the
    smallest whole capacity that is enough; else None."""
    delta_s = deadline_ns / 1e9
    spare = (capacity_iops - cmin_iops) * delta_s
    if spare >= 1 - 1e-9:  # the tolerance lets the capacity suggested below pass
        return None
    shown = math.floor(spare * 1000) / 1000  # rounded down: never "ΔC·δ = 1 < 1"
    return (f"capacity {capacity_iops:g} IOPS is Cmin {cmin_iops:g} + ΔC {capacity_iops - cmin_iops:g}: ΔC·δ = {shown:g} "
            f"< 1 request within the deadline δ = {delta_s * 1e3:g} ms, so Miser cannot guarantee the primary class's "
            "deadline", math.ceil(cmin_iops + 1 / delta_s - 1e-6))


def spec_slack(pspec: dict[str, Any], dspec: dict[str, Any]) -> tuple[str, int] | None:
    """:func:`miser_slack` of a run's policy and device specs: None unless the policy is
    Miser on a device of one known rate (constant or exponential service)."""
    if pspec.get("kind") != KIND or dspec.get("kind") not in ("constant", "exponential"):
        return None
    return miser_slack(float(pspec["capacity_iops"]), float(dspec["iops"]), pspec["deadline_ns"])
