"""Seed 003 from Python: the feedback-controlled leaky bucket (FCLB) over YFQ, its
admission control, controller tuning and the four experiment cases.

The policy, the profiling, the tuning and the experiments run in the Rust core
(``storqos_core::fclb``); this module builds specs and wraps results in DataFrames.

>>> fclb_spec(["40:35ms:8", "20:38ms:4"], backend=yfq_spec([2, 1]), pole=0.4)["workloads"][0]
{'iops': 40.0, 'rt_ns': 35000000, 'bucket': 8.0}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from . import _core
from .errors import InputError
from .specs import device_spec
from .units import check_seed, parse_duration, parse_rate, parse_size

#: The seven runs of seed 003 §4.5: case 1 (one workload inactive), case 2 (a step at
#: 30 s), case 3 (a pulse 5 s on / 5 s off) with each workload in the special role, and
#: case 4 (both active). ``w1`` is the 40 IOPS workload, ``w2`` the 20 IOPS one.
CASES: tuple[str, ...] = ("inactive-w2", "inactive-w1", "step-w2", "step-w1", "pulse-w2", "pulse-w1", "both")
#: The policies compared in the same runs: FCLB, a fixed leaky bucket, plain YFQ.
COMPARED: tuple[str, ...] = ("fclb", "fixed-bucket", "yfq")
#: Controller modes of the ``fclb`` policy.
MODES: tuple[str, ...] = ("feedback", "fixed", "off")


def yfq_spec(weights: Sequence[float] | None = None, batch: int | None = None) -> dict[str, Any]:
    """A YFQ back-end spec (weights per tenant, batch size ≥ 1)."""
    spec: dict[str, Any] = {"kind": "yfq"}
    if weights is not None:
        spec["weights"] = [float(w) for w in weights]
    if batch is not None:
        if int(batch) < 1:
            raise InputError(f"batch must be >= 1, got {batch}", "--batch")
        spec["batch"] = int(batch)
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
    gain: float | None = None,
    pole: float | None = None,
    plant_gain: float | None = None,
    mode: str | None = None,
) -> dict[str, Any]:
    """An ``fclb`` policy spec: workload i = tenant i; ``gain`` K (IOPS/ms) or ``pole``
    (K = (1 − p)/G with ``plant_gain`` G in ms/IOPS, default the paper's 0.3); ``mode``
    ``feedback`` (default), ``fixed`` or ``off``; the back end defaults to YFQ with
    equal weights. The core rejects K outside (0, 2/G) with the bound in the message."""
    if isinstance(workloads, str):
        workloads = [w for w in workloads.split(",") if w.strip()]
    if not workloads:
        raise InputError("fclb needs at least one workload", "--workloads")
    spec: dict[str, Any] = {"kind": "fclb", "workloads": [workload_spec(w) for w in workloads]}
    if gain is not None and pole is not None:
        raise InputError("give either the controller gain or the pole, not both", "--gain")
    if gain is not None:
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
    try:
        _core.check_policy(json.dumps(spec))
    except ValueError as e:
        raise InputError(str(e)) from None
    return spec


def check_gain(gain: float, plant_gain: float) -> float:
    """The closed-loop pole p = 1 − K·G, or an :class:`InputError` stating the stability
    bound 0 < K < 2/G."""
    try:
        return _core.fclb_check_gain(float(gain), float(plant_gain))
    except ValueError as e:
        raise InputError(str(e), "--gain") from None


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


def _curve(d: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "offered_iops": d["offered_iops"],
            "achieved_iops": d["achieved_iops"],
            "p95_ms": [x / 1e6 for x in d["p95_ns"]],
            "mean_ms": [x / 1e6 for x in d["mean_ns"]],
        },
        schema={"offered_iops": pl.Float64, "achieved_iops": pl.Float64, "p95_ms": pl.Float64, "mean_ms": pl.Float64},
    )


def _admission(d: dict[str, Any]) -> AdmissionReport:
    r = d["rows"]
    table = pl.DataFrame(
        {
            "name": r["name"],
            "iops": r["iops"],
            "rt_ms": [x / 1e6 for x in r["rt_ns"]],
            "rt_measured_ms": [x / 1e6 for x in r["rt_measured_ns"]],
            "rt_target_ms": [x / 1e6 for x in r["rt_target_ns"]],
            "reference_ms": [x / 1e6 for x in r["reference_ns"]],
            "admitted": r["ok"],
        }
    )
    return AdmissionReport(
        admitted=bool(d["admitted"]),
        target_iops=float(d["target_iops"]),
        achieved_iops=float(d["achieved_iops"]),
        stable_limit_iops=d["stable_limit_iops"],
        table=table,
        curve=_curve(d["curve"]),
    )


def _device(device: str | dict[str, Any], profile: str | None, capacity: str | float | None) -> dict[str, Any]:
    if isinstance(device, dict):
        return device
    if device == "disk":
        return device_spec("disk", profile=profile or "desktop-7200", queue="fifo")
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
    total = sum(r["iops"] for r in rows)
    rates = list(curve_rates) if curve_rates is not None else [total * (1 + 0.05 * k) for k in range(11)]
    back = yfq_spec(list(weights) if weights is not None else [r["iops"] for r in rows])
    dur = parse_duration(duration, "--duration")
    if dur <= 0:
        raise InputError("duration must be > 0", "--duration")
    try:
        out = _core.fclb_admit(
            json.dumps(rows), json.dumps(_device(device, profile, capacity)), json.dumps(back),
            curve_rates=[float(x) for x in rates], duration_ns=dur, seed=check_seed(seed),
        )
    except ValueError as e:
        raise InputError(str(e)) from None
    return _admission(out)


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
    try:
        out = _core.fclb_tune(
            json.dumps(rows), json.dumps(_device(device, profile, None)), json.dumps(back),
            float(operating_iops), float(pole), duration_ns=parse_duration(duration, "--duration"), seed=check_seed(seed),
        )
    except ValueError as e:
        raise InputError(str(e)) from None
    out["probes"] = _curve(out["probes"])
    return out


@dataclass
class Experiment:
    """Seed 003 §4 runs. ``summary``: one row per (case, policy, workload) with
    throughput_iops (mean over the 1 s windows the workload is active), steady_iops (the
    same after 20 s), violation_pct (completions above RT_i), p95_ms, final_rate_iops,
    total_iops and throughput_ratio (W1 : W2 over the run). ``series``: per second and
    workload (``start_s`` whole seconds), iops, rt_p95_ms (from the bucket) and
    rate_iops (r_i)."""

    setup: dict[str, Any]
    summary: pl.DataFrame
    series: pl.DataFrame
    admission: AdmissionReport = field(repr=False)


def run_experiment(
    cases: Sequence[str] = CASES, policies: Sequence[str] = COMPARED, *, pole: float | None = None, seed: int = 1
) -> Experiment:
    """Derive the setup the paper's way (admission → references, profiled G → K) and run
    ``cases`` under ``policies`` on the seed's disk with closed-loop W1 and W2."""
    try:
        out = _core.fclb_experiment(list(cases), list(policies), pole=pole, seed=check_seed(seed))
    except ValueError as e:
        raise InputError(str(e)) from None
    rows: list[dict[str, Any]] = []
    series: list[pl.DataFrame] = []
    for run in out["runs"]:
        w = run["workloads"]
        for k, wi in enumerate(w["workload"]):
            rows.append(
                {
                    "case": run["case"],
                    "policy": run["policy"],
                    "workload": f"W{wi + 1}",
                    "throughput_iops": w["throughput_iops"][k],
                    "steady_iops": w["steady_iops"][k],
                    "violation_pct": w["violation_pct"][k],
                    "p95_ms": w["p95_ms"][k],
                    # Plain YFQ has no bucket: no rate to report.
                    "final_rate_iops": None if run["policy"] == "yfq" else w["final_rate_iops"][k],
                    "total_iops": run["total_iops"],
                    "throughput_ratio": run["throughput_ratio"],
                }
            )
        win = pl.DataFrame(run["windows"]).select(
            (pl.col("start_ns") // 1_000_000_000).cast(pl.Int64).alias("start_s"),
            ("W" + (pl.col("tenant") + 1).cast(pl.Utf8)).alias("workload"),
            pl.col("completed").cast(pl.Float64).alias("iops"),
        )
        g = pl.DataFrame(run["gauges"], schema={"start_ns": pl.UInt64, "name": pl.Utf8, "value": pl.Float64})
        g = g.filter(pl.col("name").str.starts_with("fclb_rate_iops.") | pl.col("name").str.starts_with("fclb_rt_p95_ms."))
        g = g.with_columns(
            (pl.col("start_ns") // 1_000_000_000).cast(pl.Int64).alias("start_s"),
            ("W" + (pl.col("name").str.split(".").list.get(1).cast(pl.Int64) + 1).cast(pl.Utf8)).alias("workload"),
            pl.col("name").str.split(".").list.get(0).str.replace("fclb_", "").alias("gauge"),
        ).pivot(on="gauge", index=["start_s", "workload"], values="value")
        s = win.join(g, on=["start_s", "workload"], how="left").with_columns(
            pl.lit(run["case"]).alias("case"), pl.lit(run["policy"]).alias("policy")
        )
        series.append(s)
    setup = dict(out["setup"])
    admission = _admission(setup.pop("admission"))
    setup["probes"] = _curve(setup["probes"])
    return Experiment(
        setup=setup,
        summary=pl.DataFrame(rows),
        series=pl.concat(series, how="diagonal_relaxed") if series else pl.DataFrame(),
        admission=admission,
    )


__all__ = [
    "CASES",
    "COMPARED",
    "MODES",
    "AdmissionReport",
    "Experiment",
    "Workload",
    "admit",
    "check_gain",
    "fclb_spec",
    "run_experiment",
    "tune",
    "workload_spec",
    "yfq_spec",
]
