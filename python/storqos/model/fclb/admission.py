"""Seed 003 (feedback-controlled leaky bucket over YFQ), §2 admission control and §3
controller tuning, run by the core (``storqos_core::fclb::admission``, ``tuning``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from storqos import _core
from storqos.base.errors import InputError
from storqos.base.units import check_seed, parse_duration
from storqos.model.fclb.spec import Workload, yfq_spec
from storqos.model.specs import device_spec


@dataclass
class AdmissionReport:
    """Seed 003 admission control (§2, Table 3). Times in ms, rates in IOPS."""

    admitted: bool
    #: T = Σ IOPS_i
    target_iops: float
    achieved_iops: float
    #: end of the storage's stable area (None without a curve)
    stable_limit_iops: float | None
    #: name, iops, rt_ms (demanded), rt_measured_ms (RT′), rt_target_ms (RT″ = 1.2·RT′),
    #: reference_ms (the controller's reference), admitted
    table: pl.DataFrame
    #: the IOPS → p95 curve: offered_iops, achieved_iops, p95_ms, mean_ms
    curve: pl.DataFrame

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (units in every key)."""
        return {
            "admitted": self.admitted,
            "target_iops": self.target_iops,
            "achieved_iops": self.achieved_iops,
            "stable_limit_iops": self.stable_limit_iops,
            "workloads": self.table.to_dicts(),
            "curve": self.curve.to_dicts(),
        }


def curve_frame(d: _core.ProfileCurve) -> pl.DataFrame:
    """The core's IOPS → p95 curve as a DataFrame in ms."""
    return pl.DataFrame(
        {
            "offered_iops": d.offered_iops,
            "achieved_iops": d.achieved_iops,
            "p95_ms": [x / 1e6 for x in d.p95_ns],
            "mean_ms": [x / 1e6 for x in d.mean_ns],
        },
        schema={"offered_iops": pl.Float64, "achieved_iops": pl.Float64, "p95_ms": pl.Float64, "mean_ms": pl.Float64},
    )


def admission_report(d: _core.Admission) -> AdmissionReport:
    """The core's admission result as an :class:`AdmissionReport`."""
    r = d.rows
    table = pl.DataFrame(
        {
            "name": r.name,
            "iops": r.iops,
            "rt_ms": [x / 1e6 for x in r.rt_ns],
            "rt_measured_ms": [x / 1e6 for x in r.rt_measured_ns],
            "rt_target_ms": [x / 1e6 for x in r.rt_target_ns],
            "reference_ms": [x / 1e6 for x in r.reference_ns],
            "admitted": r.ok,
        }
    )
    return AdmissionReport(
        admitted=d.admitted,
        target_iops=d.target_iops,
        achieved_iops=d.achieved_iops,
        stable_limit_iops=d.stable_limit_iops,
        table=table,
        curve=curve_frame(d.curve),
    )


def _device(device: str | dict[str, Any], profile: str | None, capacity: str | float | None) -> dict[str, Any]:
    if isinstance(device, dict):
        return device
    if device == "disk":
        return device_spec("disk", profile=profile or "desktop-7200", queue="fifo", capacity=capacity)
    return device_spec(device, capacity=capacity, profile=profile)


def admit(
    workloads: Sequence[Workload | str],
    *,
    device: str | dict[str, Any] = "disk",
    profile: str | None = None,
    capacity: str | float | None = None,
    weights: Sequence[float] | None = None,
    curve_rates: Sequence[float] | None = None,
    duration: str | float = "60s",
    seed: int = 1,
) -> AdmissionReport:
    """Admission control of seed 003 §2: drive the mix at T = Σ IOPS_i through YFQ
    (weights default to the IOPS_i) in front of ``device`` (default: the seed's 7,200 RPM
    disk, FIFO), take each workload's p95 RT′, admit iff RT_i ≥ 1.2·RT′ for all. Also
    profiles the IOPS → p95 curve at ``curve_rates`` (default: T to 1.5·T in 5 % steps)."""
    ws = [Workload.parse(w) if isinstance(w, str) else w for w in workloads]
    if not ws:
        raise InputError("give at least one workload, e.g. --workload w1:40:35ms", "--workload")
    rows: list[dict[str, Any]] = [
        {"name": w.name or f"w{i + 1}", "iops": w.iops_value(), "rt_ns": w.rt_ns(), "bytes": w.size_bytes()}
        for i, w in enumerate(ws)
    ]
    names = [r["name"] for r in rows]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:  # the report's rows, and the verdict per workload, are by name
        raise InputError(f"workload name(s) {', '.join(dup)} given twice: give each a distinct name", "--workload")
    total = sum(r["iops"] for r in rows)
    rates = list(curve_rates) if curve_rates is not None else [total * (1 + 0.05 * k) for k in range(11)]
    back = yfq_spec(list(weights) if weights is not None else [r["iops"] for r in rows])
    dur = parse_duration(duration, "--duration")
    if dur <= 0:
        raise InputError("duration must be > 0", "--duration")
    out = _core.fclb_admit(
        json.dumps(rows), json.dumps(_device(device, profile, capacity)), json.dumps(back),
        curve_rates=[float(x) for x in rates], duration_ns=dur, seed=check_seed(seed),
    )
    return admission_report(out)


def tune(
    mix: Sequence[Workload | str],
    operating_iops: float,
    pole: float,
    *,
    device: str | dict[str, Any] = "disk",
    profile: str | None = None,
    weights: Sequence[float] | None = None,
    duration: str | float = "60s",
    seed: int = 1,
) -> dict[str, Any]:
    """Profile the plant gain G (ms/IOPS) of the mix around ``operating_iops`` and place
    the pole: returns G, K = (1 − p)/G (IOPS/ms), the bound 2/G and the probes."""
    ws = [Workload.parse(w) if isinstance(w, str) else w for w in mix]
    rows = [{"iops": w.iops_value(), "bytes": w.size_bytes()} for w in ws]
    back = yfq_spec(list(weights) if weights is not None else [r["iops"] for r in rows])
    t = _core.fclb_tune(
        json.dumps(rows), json.dumps(_device(device, profile, None)), json.dumps(back),
        float(operating_iops), float(pole), duration_ns=parse_duration(duration, "--duration"), seed=check_seed(seed),
    )
    return {"plant_gain_ms_per_iops": t.plant_gain_ms_per_iops, "pole": t.pole, "gain_iops_per_ms": t.gain_iops_per_ms,
            "bound_iops_per_ms": t.bound_iops_per_ms, "operating_iops": t.operating_iops, "rt0_ms": t.rt0_ms,
            "probes": curve_frame(t.probes)}
