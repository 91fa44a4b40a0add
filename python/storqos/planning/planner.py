"""Capacity planning by workload shaping (seed 000: Lu, "Workload Shaping for QoS and
Power Efficiency of Storage Systems").

- :func:`capacity_table`: Cmin(f, δ), the smallest capacity at which RTT lets a fraction
  f of the requests meet δ (Table 4.1), computed by the Rust planner kernel
  (``storqos_core::shaping::cmin``; within 0.1 % of the true minimum): the least
  capacity *any* schedule needs, which RTT decomposition + Miser recombination
  guarantees on Cmin + ΔC (ΔC·δ ≥ 1). Beside it, the capacity plain FCFS needs for the same target
  (``storqos_core::shaping::fcfs_capacity``: Lindley's recursion, exact arithmetic,
  within 0.1 %).
- :func:`recombine`: FCFS, Split, Fair Queuing and Miser at Cmin + ΔC (§4.4.2, Fig. 4.4):
  per-class summaries and response-time CDFs.
- :func:`rtd`: an n-tier response-time distribution (``90%@20ms,99%@50ms,100%@500ms``)
  → capacity per tier by recursive decomposition, checked by simulation (§3.2.2).
- :func:`consolidate`: sum of individual Cmin against Cmin of the merged workload
  (§4.5, Figs. 4.5–4.6).
- :func:`power`: ON pools, power and the response-time breakdown for 100 % provisioning
  against a decomposed fraction (§4.3, Fig. 4.1, Table 4.2).

>>> import storqos
>>> t = storqos.read_trace(storqos.bundled_trace())
>>> storqos.capacity_table(t, ["10ms"], [90, 100])      # doctest: +SKIP
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from storqos import _core
from storqos.base.errors import InputError, InputWarning, warn_input
from storqos.base.units import parse_duration, parse_percent, parse_rate
from storqos.model import registry

#: Table 4.1's response-time targets.
DEFAULT_DEADLINES: tuple[str, ...] = ("5ms", "10ms", "20ms", "50ms")
#: Table 4.1's workload fractions (percent).
DEFAULT_FRACTIONS: tuple[float, ...] = (90.0, 95.0, 99.0, 99.5, 99.9, 100.0)
#: ΔC as a fraction of Cmin when not given: §4.4.2 "ΔC was chosen to be a small amount
#: 1/5" (of Cmin).
DEFAULT_DELTA_C_FRACTION = 0.2
#: Plain FCFS, the thesis's baseline: the registry's default policy.
FCFS: str = registry.default().name
#: The recombiners of §3.3.2 in the thesis's order.
RECOMBINERS: tuple[str, ...] = (FCFS, "split", "fq", "miser")
#: Slack on response-time checks of simulated constant-rate servers: the device model
#: rounds 1/C to the nearest nanosecond, which can add up to 0.5 ns per queued request.
ROUNDING_SLACK_NS = 1_000
#: Pool defaults of the power model (storqos_core::shaping::power): 200 IOPS pools
#: (§3.2.3 example), 4 disks per pool (our choice; the thesis gives none).
DEFAULT_POOL_IOPS = 200.0
DEFAULT_DISKS_PER_POOL = 4


def arrivals(trace: pl.DataFrame | np.ndarray | Sequence[int]) -> np.ndarray:
    """Arrival times (ns, uint64, sorted) of a trace DataFrame or an array."""
    if isinstance(trace, pl.DataFrame):
        if "arrival_ns" not in trace.columns:
            raise InputError("trace has no arrival_ns column")
        a = trace["arrival_ns"].to_numpy()
    else:
        a = np.asarray(trace)
    if a.size == 0:
        raise InputError("the trace has no requests")
    if np.issubdtype(a.dtype, np.signedinteger) and a.min() < 0:
        raise InputError("trace has negative arrival times")
    a = np.ascontiguousarray(a, dtype=np.uint64)
    bad = np.flatnonzero(a[1:] < a[:-1])
    if bad.size:
        i = int(bad[0]) + 1
        raise InputError(f"request {i} arrives before request {i - 1}: sort the trace by time (--sort)")
    return a


def _list(values: str | Sequence[Any] | Any) -> list[Any]:
    if isinstance(values, str):
        return [v.strip() for v in values.split(",") if v.strip()]
    if isinstance(values, (list, tuple)):
        return list(values)
    return [values]


def parse_deadlines(values: str | Sequence[str | float], where: str = "--deadline") -> list[int]:
    """``"5ms,10ms"`` (bare numbers are milliseconds) → sorted unique ns, each > 0."""
    ns = sorted({parse_duration(v, where, default_unit="ms") for v in _list(values)})
    if not ns or ns[0] <= 0:
        raise InputError("deadlines must be > 0, e.g. --deadline 5ms,10ms", where)
    return ns


def parse_fractions(values: str | Sequence[str | float], where: str = "--fraction") -> list[float]:
    """``"90,99.9,100"`` (percent, also as numbers) → sorted unique fractions in (0, 1].

    A list written by a user (a string) whose values are all at most 1, none with ``%``
    (``"0.9,0.99"``), reads as fractions of one where percent is meant: a warning says
    what is taken.
    """
    given = _list(values)
    out = {parse_percent(v, where) for v in given}
    if not out:
        raise InputError("at least one fraction is needed, e.g. --fraction 90,99,100", where)
    if isinstance(values, str) and max(out) <= 0.01 and "%" not in values:
        shown = ", ".join(f"{100 * f:g} %" for f in sorted(out))
        warn_input(f"values are percent: planning for {shown} of the requests (for 90 % give 90)", where)
    return sorted(out)


def _pct(f: float) -> str:
    return f"{100 * f:.10g}%"


def capacity_table(
    trace: pl.DataFrame | np.ndarray,
    deadlines: str | Sequence[str | float] = DEFAULT_DEADLINES,
    fractions: str | Sequence[str | float] = DEFAULT_FRACTIONS,
    *,
    method: str = "fast",
    fcfs: bool = True,
) -> pl.DataFrame:
    """Cmin (IOPS) for every deadline × fraction: one row per deadline (``deadline_ms``),
    one column per fraction (``cmin_iops_90%``...), as Table 4.1; then, with ``fcfs``,
    the capacity plain FCFS needs for the same fraction and deadline (``fcfs_iops_90%``...).

    Cmin is the least capacity any schedule needs (RTT's optimum); RTT decomposition
    with Miser recombination guarantees the target on Cmin + ΔC with ΔC·δ ≥ 1 (and
    often meets it with less). FCFS needs more
    wherever a burst makes its requests wait behind each other: at 100 % the two are
    equal (RTT admitting every request is FCFS). Where FCFS meets a target below the
    search's Cmin (which is up to 0.1 % above the minimum), that capacity is Cmin
    (RTT meets whatever FCFS meets), so FCFS's column is never below Cmin's.

    ``deadlines`` accept units (``"10ms"``; bare numbers are ms); ``fractions`` are
    percentages (``99.9``). ``method="bisect"`` runs the straightforward per-cell
    bisection of Cmin instead (same result, for comparison).
    """
    a = arrivals(trace)
    ds = parse_deadlines(deadlines)
    fs = parse_fractions(fractions)
    res = _core.capacity_table(a, ds, fs, method=method, fcfs=fcfs)
    cols: dict[str, Any] = {"deadline_ms": [d / 1e6 for d in ds]}
    tables = [("cmin_iops", res.cmin_iops)] + ([("fcfs_iops", res.fcfs_iops or [])] if fcfs else [])
    for key, table in tables:
        for j, f in enumerate(fs):
            cols[f"{key}_{_pct(f)}"] = [row[j] for row in table]
    return pl.DataFrame(cols)


def table_info(
    trace: pl.DataFrame | np.ndarray,
    deadlines: str | Sequence[str | float] = DEFAULT_DEADLINES,
    fractions: str | Sequence[str | float] = DEFAULT_FRACTIONS,
    *,
    method: str = "fast",
    fcfs: bool = False,
) -> _core.CapacityTable:
    """The raw kernel answer (``cmin_iops`` rows, ``passes``, ``probes``...; with
    ``fcfs`` also ``fcfs_iops`` rows, ``fcfs_probes``, ``fcfs_steps``)."""
    a = arrivals(trace)
    return _core.capacity_table(a, parse_deadlines(deadlines), parse_fractions(fractions), method=method, fcfs=fcfs)


def cmin(trace: pl.DataFrame | np.ndarray, fraction: str | float, deadline: str | float) -> float:
    """Cmin(f, δ) in IOPS for one fraction (percent) and deadline."""
    return float(capacity_table(trace, [deadline], [fraction], fcfs=False)[0, 1])


def fcfs_capacity(trace: pl.DataFrame | np.ndarray, fraction: str | float, deadline: str | float) -> float:
    """The capacity (IOPS) at which plain FCFS lets ``fraction`` (percent) of the requests
    finish within ``deadline`` (within 0.1 % of the least)."""
    return float(capacity_table(trace, [deadline], [fraction])[0, 2])


# --- recombiners -----------------------------------------------------------------------


def recombiner_specs(name: str, cmin_iops: float, delta_c: float, deadline_ns: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Policy and device specs (the core's JSON schema) of one recombiner at Cmin + ΔC."""
    total = cmin_iops + delta_c
    one = {"kind": "constant", "iops": total}
    rtt = {"capacity_iops": cmin_iops, "deadline_ns": deadline_ns}
    if name == FCFS:
        return {"kind": registry.default().kind}, one
    if name == "split":
        dev = {
            "kind": "tiered",
            "fast": {"kind": "constant", "iops": cmin_iops},
            "slow": {"kind": "constant", "iops": delta_c},
            "depth": 2**32 - 1,
        }
        return {"kind": "rtt", **rtt, "route_target": True, "then": {"kind": registry.default().kind}}, dev
    if name == "fq":
        then = {"kind": "wf2q", "weights": [cmin_iops, delta_c], "by": "class"}
        return {"kind": "rtt", **rtt, "then": then}, one
    if name == "miser":
        return {"kind": "miser", **rtt}, one
    raise InputError(f"unknown recombiner {name!r} (known: {', '.join(RECOMBINERS)})", "--recombiner")


@dataclass
class RecombineResult:
    """Per-policy, per-class response times of the recombiners (all times in ns)."""

    #: Cmin (IOPS), ΔC (IOPS), deadline (ns), fraction
    cmin_iops: float
    delta_c_iops: float
    deadline_ns: int
    fraction: float
    #: one row per (policy, class): class "all", "primary", "secondary"
    summary: pl.DataFrame
    #: response-time CDF per (policy, class): response_ns, fraction
    cdf: pl.DataFrame


def _describe(resp: np.ndarray, deadline_ns: int) -> dict[str, Any]:
    if resp.size == 0:
        return {"requests": 0}
    return {
        "requests": int(resp.size),
        "within_deadline": float(np.mean(resp <= deadline_ns)),
        "mean_ns": float(resp.mean()),
        "p50_ns": float(np.quantile(resp, 0.5)),
        "p90_ns": float(np.quantile(resp, 0.9)),
        "p99_ns": float(np.quantile(resp, 0.99)),
        "max_ns": float(resp.max()),
        "over_1s": float(np.mean(resp > 1e9)),
    }


def recombine(
    trace: pl.DataFrame,
    fraction: str | float = 90,
    deadline: str | float = "50ms",
    *,
    delta_c: str | float | None = None,
    policies: Sequence[str] = RECOMBINERS,
    cdf_points: int = 200,
) -> RecombineResult:
    """Serve ``trace`` with each recombiner at Cmin(fraction, deadline) + ΔC (default
    ΔC = Cmin/5) and return per-class summaries and CDFs (Fig. 4.4)."""
    from storqos.model.miser import miser_slack
    from storqos.model.sim import simulate

    d = parse_deadlines([deadline])[0]
    f = parse_fractions([fraction])[0]
    c = cmin(trace, 100 * f, f"{d}ns")
    dc = c * DEFAULT_DELTA_C_FRACTION if delta_c is None else parse_rate(delta_c, "--delta-c")
    if "miser" in policies and miser_slack(c, c + dc, d) is not None:  # the lever here is ΔC, not a capacity
        warn_input(f"ΔC {dc:g} IOPS: ΔC·δ = {math.floor(dc * d / 1e6) / 1e3:g} < 1 request within the deadline "
                   f"δ = {d / 1e6:g} ms, so Miser cannot guarantee the primary class's deadline; give --delta-c ≥ "
                   f"{math.ceil(1e9 / d - 1e-6):g}", "--delta-c")
    rows: list[dict[str, Any]] = []
    cdfs: list[pl.DataFrame] = []
    qs = np.linspace(0, 1, cdf_points + 1)[1:]
    for name in policies:
        with warnings.catch_warnings():  # said above, in ΔC's words
            warnings.simplefilter("ignore", InputWarning)
            res = simulate(trace, *recombiner_specs(name, c, dc, d), keep_requests=True)
        req = res.requests
        assert req is not None
        resp = req["response_ns"].to_numpy()
        cls = req["class"].to_numpy()
        if name == FCFS:  # FCFS does not decompose: report RTT's classes for reference
            cls = np.where(_core.rtt_classify(arrivals(trace), c, d), 0, 1)[req["id"].to_numpy()]
        for label, mask in (("all", slice(None)), ("primary", cls == 0), ("secondary", cls == 1)):
            r = resp[mask]
            rows.append({"policy": name, "class": label, **_describe(r, d)})
            if r.size:
                cdfs.append(
                    pl.DataFrame({"policy": name, "class": label, "response_ns": np.quantile(r, qs), "fraction": qs})
                )
    summary = pl.DataFrame(rows)
    return RecombineResult(c, dc, d, f, summary, pl.concat(cdfs) if cdfs else pl.DataFrame())


# --- RTD -------------------------------------------------------------------------------


def parse_rtd(text: str, where: str = "--rtd") -> list[tuple[float, int]]:
    """``"90%@20ms,99%@50ms,100%@500ms"`` → [(0.9, 20_000_000), ...]."""
    tiers = []
    for part in _list(text):
        if "@" not in part:
            raise InputError(f"malformed tier {part!r} (expected FRACTION@DEADLINE, e.g. 90%@20ms)", where)
        f, d = part.split("@", 1)
        tiers.append((parse_percent(f, where), parse_duration(d, where, default_unit="ms")))
    if not tiers:
        raise InputError("an RTD needs at least one tier, e.g. 90%@20ms,100%@500ms", where)
    return tiers


@dataclass
class RtdResult:
    """An RTD's tiers: capacity per tier, requests admitted, and the simulated check."""

    tiers: pl.DataFrame
    total_iops: float
    #: capacity guaranteeing the strictest deadline to 100 % (for comparison)
    all_at_first_deadline_iops: float


def rtd(trace: pl.DataFrame, spec: str | Sequence[tuple[float, int]]) -> RtdResult:
    """Capacities of an n-tier RTD by recursive decomposition, each tier simulated on its
    own constant-rate server (FCFS) to confirm its cumulative fraction."""
    from storqos.model.sim import simulate

    tiers = parse_rtd(spec) if isinstance(spec, str) else list(spec)
    a = arrivals(trace)
    plan = _core.rtd_plan(a, [t[0] for t in tiers], [int(t[1]) for t in tiers])
    tier_of = plan.tier
    capacities = plan.capacity_iops
    n = a.size
    resp = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    for i, cap in enumerate(capacities):
        idx = np.flatnonzero(tier_of == i)
        if cap <= 0 or idx.size == 0:
            continue
        sub = trace[idx.tolist()] if isinstance(trace, pl.DataFrame) else pl.DataFrame({"arrival_ns": a[idx], "size": 4096})
        res = simulate(sub, FCFS, "constant", capacity=cap, keep_requests=True)
        req = res.requests
        assert req is not None
        resp[idx[req["id"].to_numpy()]] = req["response_ns"].to_numpy()
    rows = []
    for i, (f, d) in enumerate(tiers):
        own = resp[tier_of == i]
        rows.append(
            {
                "tier": i + 1,
                "fraction": f,
                "deadline_ms": d / 1e6,
                "capacity_iops": capacities[i],
                "admitted": plan.admitted[i],
                "tier_max_response_ms": float(own.max()) / 1e6 if own.size else 0.0,
                "achieved_fraction": float(np.mean(resp <= d + ROUNDING_SLACK_NS)),
            }
        )
    first = _core.capacity_table(a, [int(tiers[0][1])], [1.0]).cmin_iops[0][0]
    return RtdResult(pl.DataFrame(rows), float(sum(capacities)), first)


# --- consolidation ---------------------------------------------------------------------


def _rotate(a: np.ndarray, shift_ns: int) -> np.ndarray:
    """``a`` shifted by ``shift_ns`` and wrapped around its period (sorted again)."""
    a0 = int(a[0])
    rel = (a - np.uint64(a0)).astype(np.int64)
    period = int(rel[-1]) + max(1, int(rel[-1]) // max(1, a.size - 1))
    # Reduce the shift first: a shift of many periods (up to the 292 years a duration may
    # be) wraps to the same place, and rel + shift must not overflow int64.
    return (np.sort((rel + shift_ns % period) % period) + a0).astype(np.uint64)


def consolidate(
    traces: Sequence[pl.DataFrame | np.ndarray],
    *,
    names: Sequence[str] | None = None,
    shifts: Sequence[str | float] = (),
    deadline: str | float = "10ms",
    fractions: str | Sequence[str | float] = (100, 90, 95),
) -> pl.DataFrame:
    """Sum of the individual Cmin against Cmin of the merged workload (Figs. 4.5–4.6).

    With several ``traces``: they are merged as they are. With ``shifts`` (``"1s"``,
    ``"100s"``): each trace is merged with a copy of itself shifted by the amount (one
    row per trace and shift), *wrapped around* the trace's period (span + one mean gap)
    so that the copies overlap over their whole length: the thesis's traces were longer
    than 100 s, our excerpts are not, and an unwrapped 100 s shift of a 60 s excerpt
    would not overlap at all. ``error_pct`` = (sum − merged) / merged · 100.
    """
    d = parse_deadlines([deadline])[0]
    fs = parse_fractions(fractions)
    arrs = [arrivals(t) for t in traces]
    labels = list(names) if names is not None else [f"trace{i + 1}" for i in range(len(arrs))]
    # Each group: (label, [(trace index, shift ns)]).
    groups: list[tuple[str, list[tuple[int, int]]]] = []
    for s in shifts:
        sh = parse_duration(s, "--shift")
        for i, lab in enumerate(labels):
            groups.append((f"{lab} + shift {s}", [(i, 0), (i, sh)]))
    if len(arrs) > 1:
        groups.append((" + ".join(labels), [(i, 0) for i in range(len(arrs))]))
    if not groups:
        raise InputError("consolidation needs two or more traces, or --shift", "--consolidate")
    # A shifted copy needs what the original needs (RTT sees only the gaps).
    indiv_all = [_core.capacity_table(a, [d], fs).cmin_iops[0] for a in arrs]
    rows = []
    for label, members in groups:
        indiv = [indiv_all[i] for i, _ in members]
        parts = [arrs[i] if sh == 0 else _rotate(arrs[i], sh) for i, sh in members]
        merged_arr = np.sort(np.concatenate(parts), kind="stable")
        merged = _core.capacity_table(merged_arr, [d], fs).cmin_iops[0]
        for j, f in enumerate(fs):
            total = float(sum(c[j] for c in indiv))
            rows.append(
                {
                    "workload": label,
                    "fraction": f,
                    "deadline_ms": d / 1e6,
                    "sum_of_individual_iops": total,
                    "merged_iops": merged[j],
                    "merged_over_sum": merged[j] / total,
                    "error_pct": 100 * (total - merged[j]) / merged[j],
                }
            )
    return pl.DataFrame(rows)


# --- power -----------------------------------------------------------------------------


def power(
    trace: pl.DataFrame,
    fraction: str | float = 99,
    deadline: str | float = "20ms",
    *,
    pool_iops: str | float = DEFAULT_POOL_IOPS,
    disks_per_pool: int = DEFAULT_DISKS_PER_POOL,
    breakdown: Sequence[str] = ("10ms", "15ms", "20ms"),
) -> pl.DataFrame:
    """Provisioning for 100 % against the decomposed ``fraction`` at ``deadline`` (§4.3):
    ON pools, power (W), energy (J) over the trace, and the fraction of requests within
    each ``breakdown`` bound when served on the ON pools' capacity (Table 4.2): FCFS for
    the baseline, RTT at Cmin + Miser for the decomposition."""
    from storqos.model.miser import miser_slack
    from storqos.model.sim import simulate

    d = parse_deadlines([deadline])[0]
    f = parse_fractions([fraction])[0]
    pool = parse_rate(pool_iops, "--pool-iops")
    if not 1 <= disks_per_pool < 2**32:
        raise InputError(f"disks per pool must be between 1 and {2**32 - 1}, got {disks_per_pool}", "--disks-per-pool")
    a = arrivals(trace)
    span = int(a[-1] - a[0])
    caps = _core.capacity_table(a, [d], sorted({f, 1.0})).cmin_iops[0]
    bounds = [parse_duration(b, "--breakdown", default_unit="ms") for b in breakdown]
    rows = []
    for label, frac, c in (("base", 1.0, caps[-1]), ("decomposed", f, caps[0])):
        est = _core.power_estimate(c, int(a.size), span, pool_iops=pool, disks_per_pool=int(disks_per_pool))
        served = est.on_pools * pool
        if label == "base":
            res = simulate(trace, FCFS, "constant", capacity=served, keep_requests=True)
        else:
            pol = {"kind": "miser", "capacity_iops": c, "deadline_ns": d}
            with warnings.catch_warnings():  # said below, in the provisioning's words
                warnings.simplefilter("ignore", InputWarning)
                res = simulate(trace, pol, {"kind": "constant", "iops": max(served, c + 1e-3)}, keep_requests=True)
            short = miser_slack(c, max(served, c + 1e-3), d)
            if short is not None:
                warn_input(f"the decomposed provisioning's {est.on_pools} pools: {short[0]} (see its 'within' "
                           f"columns); pools adding up to {short[1]:g} IOPS would", "--power")
        assert res.requests is not None
        resp = res.requests["response_ns"].to_numpy()
        row: dict[str, Any] = {
            "provisioning": label,
            "fraction": frac,
            "deadline_ms": d / 1e6,
            "cmin_iops": c,
            "on_pools": est.on_pools,
            "on_disks": est.on_disks,
            "served_iops": served,
            "power_w": est.power_w,
            "energy_j": est.energy_j,
        }
        for b, bns in zip(breakdown, bounds, strict=True):
            row[f"within_{b}"] = float(np.mean(resp <= bns + ROUNDING_SLACK_NS))
        rows.append(row)
    df = pl.DataFrame(rows)
    return df.with_columns((pl.col("power_w") / pl.col("power_w").min()).alias("power_ratio"))
