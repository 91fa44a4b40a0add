"""Each candidate policy's parameters, derived from the tenants' SLOs.
advise implements no policy: every one it tries is a core ``Scheduler`` built by
:func:`storqos.model.specs.policy_spec`; this module only says how each is configured.

A tenant's contracted rate is its reservation, else what its SLO needs alone
(``need_i = Cmin_i(P_i, D_i)``, seed 000's planner, :mod:`.bounds`), else (best effort)
its mean arrival rate, each at the load planned for (the headroom's: a policy whose
rates fit only today's load cannot hold at more, whatever the capacity). Then, per policy:

- **FCFS**: nothing to derive (the baseline).
- **WF2Q+ / SFQ / YFQ**: weights ∝ rates (or the file's ``weight``).
- **EDF**: deadlines = D_i.
- **mClock** (Gulati et al., OSDI'10): reservations = rates (at most the cap), limits = caps.
- **SARC+AVATAR** (seed 001): ⟨R_i, D_i⟩ = ⟨rate_i, D_i⟩ at the strictest percentile; its
  control window :data:`AVATAR_WINDOW_DEADLINES` × the largest D_i and T_SARC a tenth of
  it (seed 001's 1 s window held 2.5 of its 400 ms deadline; E1 on the WebSearch trace,
  docs/results/twolevel.md, shows a window of many deadlines throws AVATAR into overload).
- **RTT+Miser** (seed 000, Algorithm 2): Cmin of the merged stream at the strictest SLO
  (``Cmin(merged, max P_i, min D_i)``, at the planned load), δ = min D_i; provisioned from Cmin + 1/δ up
  (ΔC·δ ≥ 1), so that is the least capacity it is tried at (:func:`policy_floor`).
- **FCLB+YFQ** (seed 003): ⟨IOPS_i, RT_i⟩ = ⟨rate_i, D_i⟩ over YFQ weighted by rate.
- **The models of real systems** (QEMU, blk-cgroup, nbdkit, SPDK, Ceph, librbd;
  ``--target``): their settings from the rates, :mod:`storqos.planning.targets.derive`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from storqos.base.errors import InputError
from storqos.model import registry
from storqos.model.specs import canonical_policy, policy_spec
from storqos.planning.advise.bounds import cmin
from storqos.planning.advise.problem import Problem, scaled_trace

#: The policies tried when none are named: one per seed plus the two baselines.
DEFAULT_POLICIES: tuple[str, ...] = ("fcfs", "wf2q", "mclock", "sarc+avatar", "miser", "fclb")
#: Policies whose parameters advise knows how to derive from SLOs.
SUPPORTED_POLICIES: tuple[str, ...] = ("fcfs", "edf", "wf2q", "sfq", "mclock", "sarc+avatar", "miser", "fclb", "yfq")
#: How the tables name the policies.
DISPLAY: dict[str, str] = {"fcfs": "FCFS", "edf": "EDF", "wf2q": "WF2Q+", "sfq": "SFQ(D)", "mclock": "mClock",
                           "sarc+avatar": "SARC+AVATAR", "miser": "RTT+Miser", "fclb": "FCLB+YFQ", "yfq": "YFQ"}
#: Names advise accepts besides the specs' own (how its tables print two composites).
ALIASES: dict[str, str] = {"fclb+yfq": "fclb", "rtt+miser": "miser"}
#: SARC+AVATAR's control window as a multiple of the largest deadline: seed 001's 1 s
#: window held 2.5 of its 400 ms deadline (E1); a window of many deadlines throws
#: AVATAR into overload (docs/results/twolevel.md, "E1 on the WebSearch trace").
AVATAR_WINDOW_DEADLINES = 2.5
#: ... within these bounds (ns); T_SARC is a tenth of it (seed 001: 100 ms in 1 s).
AVATAR_WINDOW_MIN_NS, AVATAR_WINDOW_MAX_NS = 10_000_000, 1_000_000_000
SARC_PERIODS_PER_WINDOW = 10
#: A best-effort tenant's stand-in deadline, as a multiple of the loosest SLO's (it is
#: not judged; deadline-driven policies need some deadline for it).
BEST_EFFORT_DEADLINES = 10



def rates(p: Problem) -> list[float]:
    """Each tenant's contracted rate (IOPS): its reservation, else what its SLO needs
    alone (Cmin_i), else (best effort) its mean arrival rate; at the planned load
    (× (1 + headroom))."""
    out = []
    for t, need in zip(p.tenants, p.need_planned, strict=True):
        out.append(float(t.reservation) if t.reservation else (need if need > 0 else max(t.mean_iops * p.load, 1.0)))
    return out


def avatar_timing(p: Problem) -> tuple[int, int]:
    """SARC+AVATAR's control window and T_SARC (ns) for the tenants' deadlines."""
    d_max = max(t.slo.latency_ns for t in p.tenants if t.slo is not None)
    window = int(min(max(AVATAR_WINDOW_DEADLINES * d_max, AVATAR_WINDOW_MIN_NS), AVATAR_WINDOW_MAX_NS))
    return window, window // SARC_PERIODS_PER_WINDOW


def miser_point(p: Problem) -> tuple[float, int]:
    """RTT+Miser's Cmin (IOPS) and δ (ns): the merged stream at the strictest SLO, at the
    planned load."""
    judged = [t.slo for t in p.tenants if t.slo is not None]
    f = max(s.percentile for s in judged)
    d = min(s.latency_ns for s in judged)
    arrivals = scaled_trace(p.trace, p.load)["arrival_ns"].to_numpy().astype(np.uint64)
    return cmin(arrivals, f, d), d


def policy_for(p: Problem, kind: str, capacity: float) -> dict[str, Any]:
    """The core spec of ``kind`` with its parameters derived from the SLOs (see the module
    docs). ``capacity`` is the device's (some policies need it)."""
    r = rates(p)
    top = max(r)
    weights = [t.weight if t.weight else x / top for t, x in zip(p.tenants, r, strict=True)]
    # Best-effort tenants: their SLO stand-in is a loose bound (they are not judged).
    loose = max(t.slo.latency_ns for t in p.tenants if t.slo is not None) * BEST_EFFORT_DEADLINES
    deadlines = [t.slo.latency_ns if t.slo else loose for t in p.tenants]
    if kind == "fcfs":
        return {"kind": "fcfs"}
    if kind in ("wf2q", "sfq", "yfq"):
        return policy_spec(kind, weights=weights)
    if kind == "edf":
        return policy_spec("edf", deadlines=[f"{d}ns" for d in deadlines])
    if kind == "mclock":
        limits = [t.limit for t in p.tenants]
        # A reservation never above the cap (the planned load's rate may pass a cap that
        # the trace's own does not: then the cap is what the tenant gets).
        reserved = [x if cap is None else min(x, cap) for x, cap in zip(r, limits, strict=True)]
        return policy_spec("mclock", reservations=reserved, weights=weights,
                           limits=limits if any(x is not None for x in limits) else None)
    if kind == "sarc+avatar":
        window, period = avatar_timing(p)
        pct = max(t.slo.percentile for t in p.tenants if t.slo is not None)
        slo = ",".join(f"t{i}:{x}iops@{d}ns" for i, (x, d) in enumerate(zip(r, deadlines, strict=True)))
        return policy_spec("sarc+avatar", slo=slo, percentile=100 * pct, period=f"{period}ns",
                           control_window=f"{window}ns")
    if kind == "miser":
        c_min, delta = miser_point(p)
        return policy_spec("miser", cmin=c_min, deadlines=[f"{delta}ns"])
    if kind == "fclb":
        return policy_spec("fclb", workloads=[{"iops": x, "rt_ns": d} for x, d in zip(r, deadlines, strict=True)],
                           weights=weights)
    entry = registry.lookup(kind)
    if entry is not None and entry.targets:  # a model of a system operators run
        from storqos.planning.targets.derive import stack_spec

        return stack_spec(p, entry.name, capacity, r)
    raise InputError(f"advise cannot derive the parameters of {kind!r} (it can: {', '.join(SUPPORTED_POLICIES)})",
                     "--policy")


def policy_floor(p: Problem, kind: str) -> float:
    """The least capacity (IOPS) the policy runs at as derived: Miser is provisioned at
    Cmin + ΔC with ΔC·δ ≥ 1 (seed 000; below it Miser cannot guarantee the primary
    class's deadline, :func:`storqos.model.miser.miser_slack`), so the search allows no less."""
    if kind == "miser" and not p.family.integer:
        c_min, delta = miser_point(p)
        return c_min + 1e9 / delta
    return 0.0


def parse_policies(text: str | Sequence[str] | None) -> list[str]:
    """``"fcfs,wf2q"`` → canonical names (unknown or unsupported: InputError on --policy)."""
    if text is None:
        return list(DEFAULT_POLICIES)
    items = [s.strip() for s in (text.split(",") if isinstance(text, str) else text) if s.strip()]
    if not items:
        raise InputError("give at least one policy, e.g. --policy fcfs,wf2q", "--policy")
    out: list[str] = []
    for s in items:
        s = ALIASES.get(s.lower(), s)
        k = canonical_policy(s)
        if k not in SUPPORTED_POLICIES and not registry.policy(k).targets:
            raise InputError(f"advise cannot derive the parameters of {s!r} from SLOs (it can: "
                             f"{', '.join(SUPPORTED_POLICIES)})", "--policy")
        if k not in out:
            out.append(k)
    return out


__all__ = ["DEFAULT_POLICIES", "DISPLAY", "SUPPORTED_POLICIES", "avatar_timing", "miser_point", "parse_policies",
           "policy_floor", "policy_for", "rates"]
