"""Throughput allocation for tiered storage (seed 004): BAA, DRF and FQ.

Thin over the Rust allocator (``storqos_core::alloc``): describe devices and clients,
get polars DataFrames back. Every column name carries its unit.

>>> from storqos.planning.alloc import Device, Client, allocate
>>> res = allocate([Device("hdd", 200), Device("ssd", 1000)],
...                [Client("p", hit=0.75), Client("q", hit=0.5), Client("r", hit=0.9), Client("s", hit=0.95)])
>>> res.clients.filter(policy="baa")["allocation_iops"].round(1).to_list()
[282.5, 141.3, 398.6, 377.6]

A client's load is either a hit ratio ``hit`` (two devices: the fraction of its requests
on the faster one, the paper's SSD) or explicit per-device fractions summing to 1
(``fractions={"hdd": 0.1, "ssd": 0.3, "nvme": 0.6}``). When a client loads two devices
equally relative to their capacities (``h = h_bal``), it counts as bound on the slower
one, as the paper's ``h_i ≤ h_bal`` puts it in ``D``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from storqos import _core
from storqos.base.errors import CoreError, InputError
from storqos.base.units import parse_rate
from storqos.model import registry

#: The allocator the gateway's tiered policy (the registry's policy of the ``tiers``
#: form) recomputes every period, as the registry declares it: its choices, its default.
_ALLOCATOR = next(q for p in registry.registry().policies if p.serve_form == "tiers" for q in p.serve_params
                  if q.key == "allocator")
#: Policies in report order.
POLICIES: tuple[str, ...] = _ALLOCATOR.choices
#: Bottleneck-aware allocation, the seed's own: the one that reports each device's
#: amplification ρ (allocation / fair share).
BAA: str = _ALLOCATOR.default or POLICIES[0]

#: How far a client's per-device fractions may miss summing to 1.
FRACTION_SUM_TOLERANCE = 1e-6


@dataclass(frozen=True)
class Device:
    """A device (tier) and its capacity in IOPS (random 4 KiB operations)."""

    name: str
    capacity: float


@dataclass(frozen=True)
class Client:
    """A backlogged client: its hit ratio (two devices) or per-device fractions, and weight."""

    name: str
    hit: float | None = None
    fractions: dict[str, float] | None = None
    weight: float = 1.0


@dataclass
class AllocationResult:
    """Allocations of every requested policy, in long format (one row per policy and
    client / device)."""

    #: policy, client, weight, hit_ratio, bottleneck, fair_share_iops, allocation_iops,
    #: then ``<device>_iops`` for each device
    clients: pl.DataFrame
    #: policy, device, capacity_iops, load_iops, utilisation (fraction), amplification
    #: (BAA's ρ of the device's bottleneck set; null otherwise)
    devices: pl.DataFrame
    #: policy, total_iops
    totals: pl.DataFrame
    device_names: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: one entry per policy with its clients and devices."""
        out: dict[str, Any] = {"policies": []}
        for pol in self.totals["policy"].to_list():
            cl = self.clients.filter(pl.col("policy") == pol).drop("policy")
            dv = self.devices.filter(pl.col("policy") == pol).drop("policy")
            total = self.totals.filter(pl.col("policy") == pol)["total_iops"].item()
            out["policies"].append(
                {"policy": pol, "total_iops": total, "clients": cl.to_dicts(), "devices": dv.to_dicts()}
            )
        return out


def parse_device(text: str, where: str = "--device") -> Device:
    """``NAME=CAPACITY`` (``hdd=200``, ``ssd=1.5k``, ``nvme=200kiops``)."""
    name, sep, cap = text.partition("=")
    name = name.strip()
    if not sep or not name or not cap.strip():
        raise InputError(f"malformed device {text!r} (expected NAME=IOPS, e.g. hdd=200)", where)
    return Device(name, parse_rate(cap, f"{where} {name}"))


def _number(text: str, what: str, where: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"{what} {text!r} is not a number", where) from None
    if not math.isfinite(v):
        raise InputError(f"{what} must be finite, got {text!r}", where)
    return v


def parse_client(text: str, where: str = "--client") -> Client:
    """``NAME:hit=H[,weight=W]`` or ``NAME:DEV=FRACTION,...[,weight=W]``."""
    name, sep, rest = text.partition(":")
    name = name.strip()
    if not sep or not name or not rest.strip():
        raise InputError(
            f"malformed client {text!r} (expected NAME:hit=RATIO or NAME:DEVICE=FRACTION,..., e.g. p:hit=0.75)", where
        )
    hit: float | None = None
    weight = 1.0
    fractions: dict[str, float] = {}
    for item in rest.split(","):
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq or not key or not val.strip():
            raise InputError(f"client {name}: malformed item {item!r} (expected KEY=VALUE)", where)
        if key == "hit":
            hit = _number(val, f"client {name}: hit ratio", where)
        elif key == "weight":
            weight = _number(val, f"client {name}: weight", where)
            if weight <= 0:
                raise InputError(f"client {name}: weight must be > 0, got {val.strip()}", where)
        else:
            if key in fractions:
                raise InputError(f"client {name}: device {key!r} given twice", where)
            fractions[key] = _number(val, f"client {name}: fraction on {key}", where)
    if hit is not None and fractions:
        raise InputError(f"client {name}: give either hit=RATIO or per-device fractions, not both", where)
    if hit is None and not fractions:
        raise InputError(f"client {name}: needs hit=RATIO or DEVICE=FRACTION items", where)
    return Client(name, hit=hit, fractions=fractions or None, weight=weight)


def _fraction_rows(devices: Sequence[Device], clients: Sequence[Client]) -> list[list[float]]:
    names = [d.name for d in devices]
    rows = []
    for c in clients:
        where = f"client {c.name}"
        if c.hit is not None:
            if len(devices) != 2:
                raise InputError(
                    f"hit=RATIO needs exactly 2 devices (got {len(devices)}); give per-device fractions instead", where
                )
            if not 0.0 <= c.hit <= 1.0:
                raise InputError(f"hit ratio must lie in [0, 1], got {c.hit}", where)
            fast = 1 if devices[1].capacity >= devices[0].capacity else 0
            row = [0.0, 0.0]
            row[fast], row[1 - fast] = c.hit, 1.0 - c.hit
        else:
            fr = c.fractions or {}
            unknown = sorted(set(fr) - set(names))
            if unknown:
                raise InputError(f"unknown device {unknown[0]!r} (devices: {', '.join(names)})", where)
            for dev, v in fr.items():
                if not 0.0 <= v <= 1.0:
                    raise InputError(f"fraction on {dev} must lie in [0, 1], got {v}", where)
            s = sum(fr.values())
            if abs(s - 1.0) > FRACTION_SUM_TOLERANCE:
                raise InputError(f"device fractions must sum to 1, got {s:g}", where)
            row = [fr.get(n, 0.0) / s for n in names]
        rows.append(row)
    return rows


def allocate(
    devices: Sequence[Device], clients: Sequence[Client], policies: Iterable[str] = POLICIES
) -> AllocationResult:
    """Allocate the devices' throughput among backlogged ``clients`` with each policy.

    Raises :class:`InputError` for bad input (capacity ≤ 0, hit ratio outside [0, 1],
    fractions not summing to 1, duplicate or unknown names, unknown policy).
    """
    if not devices:
        raise InputError("at least one device is needed (e.g. --device hdd=200 --device ssd=1000)")
    if not clients:
        raise InputError("at least one client is needed (e.g. --client p:hit=0.75)")
    policies = [p.lower() for p in policies]
    for kind, names in (("device", [d.name for d in devices]), ("client", [c.name for c in clients]),
                        ("policy", policies)):
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InputError(f"{kind} name {dup[0]!r} used twice", f"--{kind}")
    for d in devices:
        if not (math.isfinite(d.capacity) and d.capacity > 0):
            raise InputError(f"capacity must be > 0 IOPS, got {d.capacity}", f"device {d.name}")
    for c in clients:
        if not (math.isfinite(c.weight) and c.weight > 0):
            raise InputError(f"weight must be > 0, got {c.weight}", f"client {c.name}")
    for p in policies:
        if p not in POLICIES:
            raise InputError(f"unknown policy {p!r} (known: {', '.join(POLICIES)})", "--policy")
    rows = _fraction_rows(devices, clients)
    # The core breaks bottleneck ties towards the device listed first: list the slowest first.
    order = sorted(range(len(devices)), key=lambda k: devices[k].capacity)
    caps = [devices[k].capacity for k in order]
    frs = [[r[k] for k in order] for r in rows]
    weights = [c.weight for c in clients]
    names = [d.name for d in devices]
    hit_col = [c.hit for c in clients]

    crow: dict[str, list[Any]] = {
        "policy": [], "client": [], "weight": [], "hit_ratio": [], "bottleneck": [],
        "fair_share_iops": [], "allocation_iops": [],
    }
    per_dev: dict[str, list[float]] = {f"{n}_iops": [] for n in names}
    drow: dict[str, list[Any]] = {
        "policy": [], "device": [], "capacity_iops": [], "load_iops": [], "utilisation": [], "amplification": [],
    }
    totals: dict[str, list[Any]] = {"policy": [], "total_iops": []}
    for pol in policies:
        try:
            r = _core.allocate(caps, frs, pol, weights)
        except CoreError as e:
            raise InputError(e.message) from None  # the kind adds nothing to an allocation's message
        # Each attribute read converts the whole list: read each once.
        bottleneck, fair_share, throughput, per_device = r.bottleneck, r.fair_share, r.throughput, r.per_device
        device_iops, utilisation, amplification = r.device_iops, r.utilisation, r.amplification
        for i, c in enumerate(clients):
            crow["policy"].append(pol)
            crow["client"].append(c.name)
            crow["weight"].append(c.weight)
            crow["hit_ratio"].append(hit_col[i])
            crow["bottleneck"].append(names[order[bottleneck[i]]])
            crow["fair_share_iops"].append(fair_share[i])
            crow["allocation_iops"].append(throughput[i])
            for j, k in enumerate(order):
                per_dev[f"{names[k]}_iops"].append(per_device[i][j])
        for j, k in enumerate(order):
            drow["policy"].append(pol)
            drow["device"].append(names[k])
            drow["capacity_iops"].append(caps[j])
            drow["load_iops"].append(device_iops[j])
            drow["utilisation"].append(utilisation[j])
            drow["amplification"].append(amplification[j])
        totals["policy"].append(pol)
        totals["total_iops"].append(r.total)
    clients_df = pl.DataFrame({**crow, **per_dev}, schema_overrides={"hit_ratio": pl.Float64})
    devices_df = pl.DataFrame(drow, schema_overrides={"amplification": pl.Float64})
    # Devices in the order given.
    devices_df = devices_df.with_columns(
        pl.col("device").replace_strict({n: i for i, n in enumerate(names)}, return_dtype=pl.Int64).alias("_o"),
        pl.col("policy").replace_strict({p: i for i, p in enumerate(policies)}, return_dtype=pl.Int64).alias("_p"),
    ).sort("_p", "_o").drop("_o", "_p")
    return AllocationResult(clients_df, devices_df, pl.DataFrame(totals), names)


def simulate_tiered(
    hdd_iops: float,
    ssd_iops: float,
    hit_phases: Sequence[Sequence[tuple[str | float, float]]],
    policy: str = BAA,
    *,
    window: str | float = "60s",
    period: str | float = "100s",
    duration: str | float = "600s",
    sample: str | float = "10s",
    outstanding: int = 128,
    depth: int = 128,
    seed: int = 1,
    initial_allocation: bool = True,
    alarm: tuple[float, str | float] | None = None,
) -> pl.DataFrame:
    """Seed 004 §5.1: backlogged clients on an SSD + HDD array through the two-level
    scheduler (hit-ratio monitor over ``window``, re-allocation every ``period`` with
    ``policy``, WF2Q+ dispatch, ``depth`` requests outstanding in the array).

    ``hit_phases[i]`` lists client ``i``'s ``(from, hit ratio)`` phases (``from`` a
    duration, e.g. ``"510s"``). ``alarm=(threshold, check)`` also re-allocates when no
    device is busier than ``threshold`` over a check interval. Returns one row per
    sample and client: ``start_s``, ``client``, ``throughput_iops``,
    ``hdd_utilisation``, ``ssd_utilisation`` (fractions of capacity).
    """
    from storqos.base.units import parse_duration

    phases = [[(parse_duration(t, "hit phase"), float(h)) for t, h in ph] for ph in hit_phases]
    kw: dict[str, Any] = {}
    if alarm is not None:
        kw = {"alarm_threshold": float(alarm[0]), "alarm_check_ns": parse_duration(alarm[1], "alarm check")}
    try:
        r = _core.baa_scenario(
            float(hdd_iops), float(ssd_iops), phases, policy,
            parse_duration(window, "window"), parse_duration(period, "period"),
            parse_duration(duration, "duration"), parse_duration(sample, "sample"),
            outstanding=outstanding, depth=depth, seed=seed, initial_allocation=initial_allocation, **kw,
        )
    except CoreError as e:
        raise InputError(e.message) from None
    rows: dict[str, list[Any]] = {k: [] for k in ("start_s", "client", "throughput_iops", "hdd_utilisation", "ssd_utilisation")}
    # Each attribute read converts the whole list: read each once.
    throughput, hdd, ssd = r.throughput, r.hdd_utilisation, r.ssd_utilisation
    for s, start in enumerate(r.start_ns):
        for i, tp in enumerate(throughput[s]):
            rows["start_s"].append(start / 1e9)
            rows["client"].append(i)
            rows["throughput_iops"].append(tp)
            rows["hdd_utilisation"].append(hdd[s])
            rows["ssd_utilisation"].append(ssd[s])
    return pl.DataFrame(rows)


__all__ = [
    "AllocationResult", "Client", "Device", "POLICIES", "allocate", "parse_client", "parse_device", "simulate_tiered",
]
