"""Policy and device specs: user-facing names and parameters → the JSON schema of
``storqos_core::spec`` (one schema for the CLI, the Python API, experiment files and the
gateway).

>>> policy_spec("wf2q", weights=[2, 1])
{'kind': 'wf2q', 'weights': [2.0, 1.0]}
>>> device_spec("constant", capacity=500)
{'kind': 'constant', 'iops': 500.0}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from . import _core
from .errors import InputError
from .units import parse_duration, parse_rate

#: Policy names and what they are (``storqos simulate --policy``).
POLICIES: dict[str, str] = {
    "fcfs": "first-come first-served (no QoS)",
    "edf": "earliest deadline first, per-class relative deadlines (--deadline)",
    "wf2q": "WF2Q+ weighted fair queuing between tenants (--weights)",
    "sfq": "SFQ(D) start-time fair queuing with dispatch depth D (--weights, --depth)",
    "miser": "RTT decomposition + Miser recombination at Cmin for deadline δ (--cmin, --deadline)",
    "rtt-fq": "RTT decomposition + WF2Q+ between the classes, weights Cmin : ΔC (--cmin, --deadline, --capacity)",
}
#: Other accepted spellings.
POLICY_ALIASES: dict[str, str] = {
    "wfq": "wf2q", "wf2q+": "wf2q", "sfq(d)": "sfq", "fifo": "fcfs", "rtt+miser": "miser", "rtt+fq": "rtt-fq",
}

#: Device names and what they model (``storqos simulate --device``).
DEVICES: dict[str, str] = {
    "constant": "one server of C IOPS, 1/C s per request (--capacity)",
    "exponential": "one server, Exp(1/C) service (--capacity)",
    "array": "k servers with an internal queue (--servers, --capacity per server)",
    "disk": "a mechanical disk model (seek + rotation + transfer) (--profile)",
    "tiered": "SSD + HDD tiers, tier from a hit ratio or the trace (--capacity SSD,HDD, --hit-ratio)",
}


def canonical_policy(name: str) -> str:
    """The canonical policy name for ``name`` or an :class:`InputError` listing them."""
    key = name.strip().lower()
    key = POLICY_ALIASES.get(key, key)
    if key not in POLICIES:
        raise InputError(f"unknown policy {name!r} (known: {', '.join(POLICIES)})", "--policy")
    return key


def _weights(weights: Sequence[float] | str | None) -> list[float] | None:
    if weights is None:
        return None
    if isinstance(weights, str):
        try:
            weights = [float(w) for w in weights.replace(":", ",").split(",") if w.strip()]
        except ValueError:
            raise InputError(f"malformed weights {weights!r} (expected e.g. 2,1)", "--weights") from None
    out = [float(w) for w in weights]
    if not out or any(not w > 0 for w in out):
        raise InputError(f"weights must all be > 0, got {weights!r}", "--weights")
    return out


def policy_spec(
    name: str | dict[str, Any],
    *,
    weights: Sequence[float] | str | None = None,
    depth: int | None = None,
    deadlines: Sequence[str | float] | str | None = None,
    by: str | None = None,
    cost: str | None = None,
    cmin: str | float | None = None,
    total_capacity: str | float | None = None,
) -> dict[str, Any]:
    """Build a policy spec from a name and its parameters (a dict is passed through).

    ``cmin`` is the primary-class capacity of the RTT policies; ``total_capacity`` the
    device's Cmin + ΔC (rtt-fq derives the class weights from both).
    """
    if isinstance(name, dict):
        return name
    kind = canonical_policy(name)
    spec: dict[str, Any] = {"kind": kind}
    if kind in ("wf2q", "sfq"):
        w = _weights(weights)
        if w is not None:
            spec["weights"] = w
        if by is not None:
            spec["by"] = by
        if cost is not None:
            spec["cost"] = cost
    if kind == "sfq":
        d = 1 if depth is None else int(depth)
        if d < 1:
            raise InputError(f"dispatch depth must be >= 1, got {depth}", "--depth")
        spec["depth"] = d
    if kind in ("miser", "rtt-fq"):
        if cmin is None or deadlines is None:
            raise InputError(f"{kind} needs --cmin (the primary-class capacity, IOPS) and --deadline (δ)", "--cmin")
        c = parse_rate(cmin, "--cmin")
        d = deadlines if isinstance(deadlines, str) else ",".join(str(x) for x in deadlines)
        delta = parse_duration(d.split(",")[0], "--deadline", default_unit="ms")
        if delta <= 0:
            raise InputError("the deadline must be > 0", "--deadline")
        if kind == "miser":
            return {"kind": "miser", "capacity_iops": c, "deadline_ns": delta}
        if total_capacity is None:
            raise InputError("rtt-fq needs the total capacity Cmin + ΔC (--capacity)", "--capacity")
        total = parse_rate(total_capacity, "--capacity")
        if total <= c:
            raise InputError(f"--capacity ({total:g}) must exceed --cmin ({c:g}): ΔC = capacity − Cmin > 0", "--capacity")
        return {"kind": "rtt", "capacity_iops": c, "deadline_ns": delta,
                "then": {"kind": "wf2q", "weights": [c, total - c], "by": "class"}}
    if kind == "edf":
        if deadlines is None:
            raise InputError("edf needs per-class deadlines, e.g. --deadline 10ms,50ms", "--deadline")
        if isinstance(deadlines, str):
            deadlines = [d for d in deadlines.split(",") if d.strip()]
        ns = [parse_duration(d, "--deadline", default_unit="ms") for d in deadlines]
        if any(d <= 0 for d in ns):
            raise InputError("deadlines must be > 0", "--deadline")
        spec["deadlines_ns"] = ns
        spec["default_deadline_ns"] = ns[-1]
    return spec


def device_spec(
    name: str | dict[str, Any],
    *,
    capacity: str | float | Sequence[str | float] | None = None,
    servers: int | None = None,
    profile: str | None = None,
    queue: str | None = None,
    hit_ratio: float | None = None,
    depth: int | None = None,
    bandwidth: float | None = None,
) -> dict[str, Any]:
    """Build a device spec from a name and its parameters (a dict is passed through)."""
    if isinstance(name, dict):
        return name
    kind = name.strip().lower()
    if kind not in DEVICES:
        raise InputError(f"unknown device {name!r} (known: {', '.join(DEVICES)})", "--device")

    def cap(value: Any) -> float:
        if value is None:
            raise InputError(f"device {kind!r} needs a capacity, e.g. --capacity 500", "--capacity")
        return parse_rate(value, "--capacity")

    if kind == "constant":
        spec: dict[str, Any] = {"kind": "constant", "iops": cap(capacity)}
        if bandwidth is not None:
            spec["bandwidth"] = float(bandwidth)
        return spec
    if kind == "exponential":
        return {"kind": "exponential", "iops": cap(capacity)}
    if kind == "array":
        k = 1 if servers is None else int(servers)
        spec = {"kind": "array", "servers": k, "assign": "shared", "service": {"kind": "exponential", "iops": cap(capacity)}}
        if depth is not None:
            spec["depth"] = int(depth)
        return spec
    if kind == "disk":
        spec = {"kind": "disk"}
        if profile is not None:
            spec["profile"] = profile
        if queue is not None:
            spec["queue"] = queue
        return spec
    # tiered: capacity "SSD,HDD"
    if isinstance(capacity, str):
        parts = [p for p in capacity.split(",") if p.strip()]
    elif isinstance(capacity, (list, tuple)):
        parts = list(capacity)
    else:
        parts = []
    if len(parts) != 2:
        raise InputError("tiered device needs two capacities, fast then slow, e.g. --capacity 5000,100", "--capacity")
    spec = {
        "kind": "tiered",
        "fast": {"kind": "exponential", "iops": cap(parts[0])},
        "slow": {"kind": "exponential", "iops": cap(parts[1])},
    }
    if hit_ratio is not None:
        if not 0 <= hit_ratio <= 1:
            raise InputError(f"hit ratio must be in [0, 1], got {hit_ratio}", "--hit-ratio")
        spec["hit_ratio"] = float(hit_ratio)
    if depth is not None:
        spec["depth"] = int(depth)
    return spec


def check(policy: dict[str, Any], device: dict[str, Any]) -> tuple[str, str]:
    """Validate both specs in the core; return their display names."""
    try:
        return _core.check_policy(json.dumps(policy)), _core.check_device(json.dumps(device))
    except ValueError as e:
        raise InputError(str(e)) from None
