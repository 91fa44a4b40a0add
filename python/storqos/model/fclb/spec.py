"""Seed 003 (feedback-controlled leaky bucket over YFQ), §2–§3: the policy specs.

``yfq_spec`` and ``fclb_spec`` build the JSON specs the core runs (``storqos_core::fclb``,
``schedulers::yfq``); ``workload_spec`` parses a workload's demanded IOPS, response time
and bucket; ``check_gain`` states the controller's stability bound.

>>> fclb_spec(["40:35ms:8", "20:38ms:4"], backend=yfq_spec([2, 1]), pole=0.4)["workloads"][0]
{'iops': 40.0, 'rt_ns': 35000000, 'bucket': 8.0}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from storqos import _core
from storqos.base.core_json import core_json
from storqos.base.errors import ConfigError, InputError
from storqos.base.units import parse_count, parse_duration, parse_rate, parse_size

#: Controller modes of the ``fclb`` policy.
MODES: tuple[str, ...] = ("feedback", "fixed", "off")


def yfq_spec(weights: Sequence[float] | None = None, batch: int | None = None) -> dict[str, Any]:
    """A YFQ back-end spec (weights per tenant, batch size ≥ 1)."""
    spec: dict[str, Any] = {"kind": "yfq"}
    if weights is not None:
        spec["weights"] = [float(w) for w in weights]
    if batch is not None:
        spec["batch"] = parse_count(batch, "--batch", minimum=1, maximum=2**32 - 1)
    return spec


@dataclass
class Workload:
    """A workload's demanded performance (seed 003 §2): ``iops`` (``"40"``, ``"1.5k"``)
    within ``rt`` (``"35ms"``) at the 95th percentile, requests of ``size``; ``bucket``
    is its token bucket size (whole tokens)."""

    name: str
    iops: str | float
    rt: str | float
    size: str | int = 4096
    bucket: int | None = None

    @classmethod
    def parse(cls, text: str, where: str = "--workload") -> Workload:
        """``NAME:IOPS:RT[:SIZE]`` (``w1:40:35ms:4KiB``) or ``IOPS:RT[:BUCKET]`` when the
        first field is a number."""
        parts = [p.strip() for p in text.split(":")]
        if len(parts) < 2 or not all(parts):
            raise InputError(f"malformed workload {text!r} (expected NAME:IOPS:RT[:SIZE], e.g. w1:40:35ms)", where)
        try:
            float(parts[0].lower().rstrip("k"))
            numeric = True
        except ValueError:
            numeric = False
        if numeric:
            if len(parts) > 3:
                raise InputError(f"malformed workload {text!r} (expected IOPS:RT[:BUCKET])", where)
            bucket = _bucket(parts[2], where) if len(parts) == 3 else None
            return cls(name="", iops=parts[0], rt=parts[1], bucket=bucket)
        if len(parts) not in (3, 4):
            raise InputError(f"malformed workload {text!r} (expected NAME:IOPS:RT[:SIZE], e.g. w1:40:35ms)", where)
        return cls(name=parts[0], iops=parts[1], rt=parts[2], size=parts[3] if len(parts) == 4 else 4096)

    def iops_value(self, where: str = "--workload") -> float:
        return parse_rate(self.iops, where)

    def rt_ns(self, where: str = "--workload") -> int:
        ns = parse_duration(self.rt, where, default_unit="ms")
        if ns <= 0:
            raise InputError(f"response time of workload {self.name or '?'} must be > 0", where)
        return ns

    def size_bytes(self, where: str = "--workload") -> int:
        return parse_size(self.size, where)


def _bucket(value: Any, where: str) -> int:
    try:
        b = float(value)
    except (TypeError, ValueError):
        raise InputError(f"bucket size must be a whole number of tokens, got {value!r}", where) from None
    if b < 1 or b != int(b):
        raise InputError(f"bucket size must be a whole number >= 1 of tokens, got {value!r}", where)
    return int(b)


def workload_spec(w: str | dict[str, Any] | Workload, where: str = "--workloads") -> dict[str, Any]:
    """One FCLB workload as the core's JSON: from ``"IOPS:RT[:BUCKET]"``, a
    :class:`Workload`, or a dict with ``iops``, ``rt`` (or ``rt_ns``), optional
    ``bucket``, ``ref`` (or ``ref_ns``) and ``ceiling`` (IOPS)."""
    if isinstance(w, str):
        w = Workload.parse(w, where)
    if isinstance(w, Workload):
        spec: dict[str, Any] = {"iops": w.iops_value(where), "rt_ns": w.rt_ns(where)}
        if w.bucket is not None:
            spec["bucket"] = float(_bucket(w.bucket, where))
        return spec
    d = dict(w)
    spec = {"iops": parse_rate(d.pop("iops"), where)}
    if "rt_ns" in d:
        spec["rt_ns"] = int(d.pop("rt_ns"))
    else:
        spec["rt_ns"] = parse_duration(d.pop("rt"), where, default_unit="ms")
    if "bucket" in d:
        spec["bucket"] = float(_bucket(d.pop("bucket"), where))
    if "ref_ns" in d or "ref" in d:
        spec["ref_ns"] = int(d.pop("ref_ns")) if "ref_ns" in d else parse_duration(d.pop("ref"), where, default_unit="ms")
    if "ceiling" in d:
        spec["ceiling_iops"] = parse_rate(d.pop("ceiling"), where)
    if d:
        raise InputError(f"unknown workload field(s): {', '.join(sorted(d))}", where)
    return spec


def fclb_spec(
    workloads: Sequence[str | dict[str, Any] | Workload] | str,
    *,
    backend: dict[str, Any] | None = None,
    gain: float | str | None = None,
    pole: float | None = None,
    plant_gain: float | None = None,
    mode: str | None = None,
) -> dict[str, Any]:
    """An ``fclb`` policy spec: workload i = tenant i; ``gain`` K (IOPS/ms) or ``pole``
    (K = (1 − p)/G with ``plant_gain`` G in ms/IOPS, default the paper's 0.3), or
    ``gain="online"``: G measured by the loop itself from the start value ``plant_gain``
    and ``pole`` placed on the estimate every period (``storqos_core::fclb::estimator``);
    ``mode`` ``feedback`` (default), ``fixed`` or ``off``; the back end defaults to YFQ with
    equal weights. The core rejects K outside (0, 2/G) with the bound in the message."""
    if isinstance(workloads, str):
        workloads = [w for w in workloads.split(",") if w.strip()]
    if not workloads:
        raise InputError("fclb needs at least one workload", "--workloads")
    spec: dict[str, Any] = {"kind": "fclb", "workloads": [workload_spec(w) for w in workloads]}
    if gain is not None and not isinstance(gain, str) and pole is not None:
        raise InputError("give either the controller gain or the pole, not both", "--gain")
    if isinstance(gain, str):
        if gain.strip().lower() != "online":
            raise InputError(f'gain: expected a number (IOPS/ms) or "online", got {gain!r}', "--gain")
        spec["gain_iops_per_ms"] = "online"
    elif gain is not None:
        spec["gain_iops_per_ms"] = float(gain)
    if pole is not None:
        spec["pole"] = float(pole)
    if plant_gain is not None:
        spec["plant_gain_ms_per_iops"] = float(plant_gain)
    if mode is not None:
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r} (known: {', '.join(MODES)})", "--mode")
        spec["mode"] = mode
    spec["then"] = backend or yfq_spec()
    _core.check_policy(core_json(spec, "policy"))
    return spec


def check_gain(gain: float, plant_gain: float) -> float:
    """The closed-loop pole p = 1 − K·G, or an :class:`InputError` stating the stability
    bound 0 < K < 2/G."""
    try:
        return _core.fclb_check_gain(float(gain), float(plant_gain))
    except ConfigError as e:
        raise ConfigError(e.message, "--gain") from None
