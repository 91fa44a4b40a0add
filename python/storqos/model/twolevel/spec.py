"""Seed 001 (SARC + AVATAR two-level scheduler), §3: the policy specs of SARC+AVATAR and
the baselines SARC+Facade, FIXED+AVATAR and ADAPTIVE+AVATAR, from an SLO string.

>>> spec = twolevel_spec("sarc+avatar", "web:160iops@400ms,oltp:190iops@900ms")
>>> spec["kind"], spec["slo"][1]
('sarc_avatar', {'rate_iops': 190.0, 'latency_ns': 900000000})
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from storqos.base.errors import InputError
from storqos.base.units import parse_positive_duration
from storqos.model import registry
from storqos.model.slo import ClassSlo, slo_fields

#: Policy names → core kinds: the registry's two-level policies.
KINDS: dict[str, str] = {p.name: p.kind for p in registry.registry().policies if p.form == "two_level"}

#: Seed 001's storage utility (§4: "a RAID 5 system with 8 Seagate Cheetah9LP 10K RPM
#: disks"): 8 disks striped by 64 KiB, each a 10k RPM disk model serving its queue SPTF,
#: so throughput and latency both rise with the queue depth (≈ 160 IOPS at depth 1,
#: ≈ 1,850 at depth 256).
ARRAY_8_DISKS: dict[str, Any] = {
    "kind": "array",
    "servers": 8,
    "assign": "striped",
    "stripe_bytes": 65536,
    "service": {"kind": "disk", "profile": "enterprise-10k", "queue": "sptf"},
}

def twolevel_spec(
    policy: str,
    slo: str | Sequence[ClassSlo] | None,
    *,
    percentile: str | float | None = None,
    period: str | float | None = None,
    window: str | float | None = None,
    p_rt: float | None = None,
    p_inc: float | None = None,
    p_dec: float | None = None,
    facade_overload: str | None = None,
) -> dict[str, Any]:
    """The core spec of a two-level policy (``sarc+avatar``, ``sarc+facade``,
    ``fixed+avatar``, ``adaptive+avatar``) with SLOs ``"web:160iops@400ms,..."``.

    ``period`` is T_SARC (default 100 ms), ``window`` AVATAR's / Facade's control window
    (default 1 s); ``p_rt``, ``p_inc``, ``p_dec`` are ADAPTIVE's (defaults 0.2, 0.025,
    0.05, the paper's E2 values). ``facade_overload`` (sarc+facade only) is Facade's
    overload test: ``"per_class"`` (default) or ``"total"`` (arrival rate > Σ R_i).
    """
    key = policy.strip().lower()
    if key not in KINDS:
        raise InputError(f"unknown two-level policy {policy!r} (known: {', '.join(KINDS)})", "--policy")
    if slo is None:
        raise InputError(f"{key} needs per-class SLOs, e.g. --slo web:160iops@400ms,oltp:190iops@900ms", "--slo")
    spec: dict[str, Any] = {"kind": KINDS[key], **slo_fields(slo, percentile)}
    if period is not None:
        spec["period_ns"] = parse_positive_duration(period, "--period", default_unit="ms")
    if window is not None:
        spec["window_ns"] = parse_positive_duration(window, "--control-window", default_unit="ms")
    adaptive = {"p_rt": p_rt, "p_inc": p_inc, "p_dec": p_dec}
    for name, v in adaptive.items():
        if v is None:
            continue
        if key != "adaptive+avatar":
            raise InputError(f"{name} only applies to adaptive+avatar", f"--{name.replace('_', '-')}")
        spec[name] = float(v)
    if facade_overload is not None:
        if key != "sarc+facade":
            raise InputError("facade_overload only applies to sarc+facade", "--facade-overload")
        if facade_overload not in ("per_class", "total"):
            raise InputError(f"must be per_class or total, got {facade_overload!r}", "--facade-overload")
        spec["facade_overload"] = facade_overload
    return spec
