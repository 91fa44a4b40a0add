"""``storqos advise``: from tenants' traces and SLOs to the cheapest (policy, capacity)
pair, proven by simulation (issue 19). It composes the seed papers rather than
implementing a new policy: every policy it tries is a core ``Scheduler`` built by
:func:`storqos.specs.policy_spec`; this module only derives their parameters from the
SLOs and searches the capacity.

1. **Problem.** Tenants (trace files, splits of a trace, synthetic generators: the
   ``[[trace]]`` / ``[[tenant]]`` tables of an experiment file, read by
   :mod:`storqos.experiment`), each with an SLO ``pP<=D`` (a fraction P of its requests
   finish within D of their *arrival*: end to end, what a client sees), an optional
   reservation and cap (IOPS); a device family (:class:`DeviceFamily`: constant,
   exponential, an array of N servers, N striped disk models, tiered SSD+HDD) whose
   capacity is the unknown; candidate policies (:data:`DEFAULT_POLICIES`).
2. **Bounds (seed 000, the planner's Cmin).** RTT admits the most requests of a stream
   that any schedule can finish within δ on a server of rate C (Lemmas 1–3), so tenant
   i cannot meet ``pP_i<=D_i`` under *any* policy below ``need_i = Cmin_i(P_i, D_i)`` of
   its own stream, and all tenants together not below ``Cmin(merged, ΣP_i·n_i/N,
   max D_i)``: their maximum is a lower bound on the capacity (a proof, on the
   constant-rate device; elsewhere a first guess the search checks). FCFS meets every
   SLO on a constant server of ``Cmin(merged, 100 %, min D_i)``: the first upper guess.
3. **Parameters from the SLOs** (:func:`policy_for`): a tenant's contracted rate is its
   reservation, else ``need_i``. WF2Q+ weights ∝ rates; mClock reservations = rates,
   limits = caps; SARC+AVATAR ⟨R_i, D_i⟩ = ⟨rate_i, D_i⟩ at the strictest percentile,
   its control window a few deadlines long (seed 001's E1 lesson,
   docs/results/twolevel.md); RTT+Miser at ``Cmin(merged, max P_i, min D_i)`` with
   δ = min D_i; FCLB ⟨IOPS_i, RT_i⟩ = ⟨rate_i, D_i⟩ over YFQ weighted by rate.
4. **Search** (:func:`search`): bracket [lo fails, hi meets], then interpolate the
   worst tenant's ``achieved percentile / bound`` in log–log between the bracket's
   ends and probe just above the estimate, then just below the new top: two
   simulations close a good estimate to :data:`TOLERANCE`; bisection when the
   interpolation stalls. :func:`plain_bisection` is the reference the benchmark counts
   against.
5. **Proof** (:func:`prove`): every SLO holds at the reported capacity (the search's
   last meeting run); at :data:`PROOF_FACTOR` × it (one disk fewer for disks) at least
   one fails, simulated; and the SLOs at :data:`ROBUST_LOAD` × the load (the trace
   time-compressed) at the reported capacity.

The searches of different policies are independent and run on :mod:`storqos.sweep`'s
back ends (process pool or Dask), one task per policy.
"""

from __future__ import annotations

import json
import math
import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from . import _core
from .errors import InputError
from .specs import canonical_policy, policy_spec
from .units import fmt_duration, parse_duration, parse_percent, parse_rate

#: The policies tried when none are named: one per seed plus the two baselines.
DEFAULT_POLICIES: tuple[str, ...] = ("fcfs", "wf2q", "mclock", "sarc+avatar", "miser", "fclb")
#: Policies whose parameters advise knows how to derive from SLOs.
SUPPORTED_POLICIES: tuple[str, ...] = ("fcfs", "edf", "wf2q", "sfq", "mclock", "sarc+avatar", "miser", "fclb", "yfq")
#: How the tables name the policies.
DISPLAY: dict[str, str] = {"fcfs": "FCFS", "edf": "EDF", "wf2q": "WF2Q+", "sfq": "SFQ(D)", "mclock": "mClock",
                           "sarc+avatar": "SARC+AVATAR", "miser": "RTT+Miser", "fclb": "FCLB+YFQ", "yfq": "YFQ"}
#: The search stops when the smallest capacity that met every SLO is within this of the
#: largest that did not (issue 19: "to 0.5 %").
TOLERANCE = 0.005
#: The minimality check: at this fraction of the reported capacity some SLO must fail
#: (issue 19: "at 0.98× of it at least one fails").
PROOF_FACTOR = 0.98
#: The robustness check: the load (request rate) the reported capacity is also tried at
#: (issue 19: "+10 % load").
ROBUST_LOAD = 1.10
#: Default largest capacity the search allows, as a multiple of the tenants' total mean
#: arrival rate: a device a hundred times the load is not a plan but a sign of an SLO the
#: device cannot meet. ``--max-capacity`` overrides it.
MAX_CAPACITY_OVER_LOAD = 100.0
#: The planner's Cmin is within 0.1 % above the true minimum (storqos_core::shaping::cmin):
#: the lower bound divides it by this.
CMIN_SLACK = 1.001
#: SARC+AVATAR's control window as a multiple of the largest deadline: seed 001's 1 s
#: window held 2.5 of its 400 ms deadline (E1); a window of many deadlines throws
#: AVATAR into overload (docs/results/twolevel.md, "E1 on the WebSearch trace").
AVATAR_WINDOW_DEADLINES = 2.5
#: ... within these bounds (ns); T_SARC is a tenth of it (seed 001: 100 ms in 1 s).
AVATAR_WINDOW_MIN_NS, AVATAR_WINDOW_MAX_NS = 10_000_000, 1_000_000_000
SARC_PERIODS_PER_WINDOW = 10
#: Where the search aims above its interpolated crossing, in tolerances (a meeting run
#: just above the crossing, then one a tolerance below it, close the bracket).
INITIAL_BIAS = 0.4
#: Largest number of restarts when a capacity below the reported one meets every SLO
#: (a policy whose compliance is not monotone in capacity).
MAX_RESTARTS = 3
#: Device families (``[device] kind``) and what their capacity is.
FAMILIES: dict[str, str] = {
    "constant": "one server of C IOPS (1/C per request)",
    "exponential": "one server, Exp(1/C) service",
    "array": "N servers (servers = N) sharing C IOPS, exponential service",
    "disk": "N striped disk models (profile, queue); N is searched",
    "tiered": "SSD + HDD; capacity = FAST,SLOW gives the ratio, both scale; hit_ratio",
}

_SLO = re.compile(r"^\s*(?:p(?P<p>[0-9.]+)|(?P<pc>[0-9.]+)\s*%)\s*(?:<=|≤)\s*(?P<d>.+?)\s*$", re.I)


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Slo:
    """A fraction ``percentile`` of a tenant's requests finish within ``latency_ns`` of
    their arrival."""

    percentile: float
    latency_ns: int

    @property
    def text(self) -> str:
        """``p99≤10ms``."""
        return f"p{100 * self.percentile:g}≤{fmt_duration(self.latency_ns).replace(' ', '')}"


def parse_slo(text: str | int | float, default_percentile: float, where: str = "slo") -> Slo:
    """``"p99<=10ms"``, ``"99.9%<=5ms"`` or a bare latency (``"10ms"``, judged at
    ``default_percentile``) → :class:`Slo`."""
    if isinstance(text, str):
        m = _SLO.match(text)
        if m:
            p = parse_percent(m.group("p") or m.group("pc"), where)
            d = parse_duration(m.group("d"), where, default_unit="ms")
            if d <= 0:
                raise InputError(f"the latency bound must be > 0, got {text!r}", where)
            return Slo(p, d)
        if "<" in text or "≤" in text:
            raise InputError(f"malformed SLO {text!r} (expected e.g. p99<=10ms)", where)
    d = parse_duration(text, where, default_unit="ms")
    if d <= 0:
        raise InputError(f"the latency bound must be > 0, got {text!r}", where)
    return Slo(default_percentile, d)


@dataclass(frozen=True)
class TenantInfo:
    """One tenant: its name, SLO (None: best effort, not judged), reservation and cap
    (IOPS), weight, requests and mean rate over the run."""

    name: str
    slo: Slo | None
    reservation: float | None
    limit: float | None
    weight: float | None
    requests: int
    mean_iops: float


@dataclass(frozen=True)
class DeviceFamily:
    """A device model whose capacity is the unknown: :meth:`spec` builds the core's device
    spec at a capacity (IOPS; for ``disk`` a number of disks)."""

    kind: str
    servers: int = 1
    profile: str = "enterprise-10k"
    queue: str = "sptf"
    fast_share: float = 0.9
    hit_ratio: float | None = None

    @property
    def integer(self) -> bool:
        """Whether the capacity is a count (disks)."""
        return self.kind == "disk"

    def spec(self, capacity: float) -> dict[str, Any]:
        """The core device spec at ``capacity``."""
        c = float(capacity)
        if self.kind == "constant":
            return {"kind": "constant", "iops": c}
        if self.kind == "exponential":
            return {"kind": "exponential", "iops": c}
        if self.kind == "array":
            return {"kind": "array", "servers": self.servers, "assign": "shared",
                    "service": {"kind": "exponential", "iops": c / self.servers}}
        if self.kind == "disk":
            return {"kind": "array", "servers": max(1, int(round(c))), "assign": "striped", "stripe_bytes": 65536,
                    "service": {"kind": "disk", "profile": self.profile, "queue": self.queue}}
        spec: dict[str, Any] = {"kind": "tiered", "fast": {"kind": "exponential", "iops": c * self.fast_share},
                                "slow": {"kind": "exponential", "iops": c * (1 - self.fast_share)}}
        if self.hit_ratio is not None:
            spec["hit_ratio"] = self.hit_ratio
        return spec

    def unit(self, capacity: float) -> str:
        """The capacity as a reader wants it: ``12,340 IOPS`` or ``6 disks``."""
        if self.integer:
            n = int(round(capacity))
            return f"{n} disk" + ("s" if n != 1 else "")
        return f"{capacity:,.0f} IOPS"

    def describe(self) -> str:
        """One line: what is searched."""
        if self.kind == "array":
            return f"array of {self.servers} servers"
        if self.kind == "disk":
            return f"striped {self.profile} disks ({self.queue})"
        if self.kind == "tiered":
            return f"tiered, {100 * self.fast_share:g} % of the IOPS in the fast tier"
        return f"{self.kind} server"


def device_family(table: dict[str, Any], where: str = "[device]") -> DeviceFamily:
    """An advise file's ``[device]`` table → :class:`DeviceFamily` (its ``capacity`` is
    what advise searches; for ``tiered`` it gives the fast : slow ratio)."""
    t = dict(table)
    kind = str(t.pop("kind", "constant")).strip().lower()
    if kind not in FAMILIES:
        raise InputError(f"kind: unknown device family {kind!r} (known: {', '.join(FAMILIES)})", where)
    known = {"constant": {"capacity"}, "exponential": {"capacity"}, "array": {"capacity", "servers"},
             "disk": {"profile", "queue"}, "tiered": {"capacity", "hit_ratio"}}[kind]
    extra = sorted(set(t) - known)
    if extra:
        raise InputError(f"{kind} does not take {', '.join(extra)} (it takes {', '.join(sorted(known)) or 'nothing'})",
                         where)
    if kind == "array":
        servers = t.get("servers", 1)
        if not isinstance(servers, int) or not 1 <= servers <= _core.MAX_SERVERS:
            raise InputError(f"servers: expected a whole number 1-{_core.MAX_SERVERS}, got {servers!r}", where)
        return DeviceFamily("array", servers=servers)
    if kind == "disk":
        profile = str(t.get("profile", "enterprise-10k"))
        queue = str(t.get("queue", "sptf"))
        fam = DeviceFamily("disk", profile=profile, queue=queue)
        from .specs import check

        try:
            check({"kind": "fcfs"}, fam.spec(1))
        except InputError as e:
            raise InputError(e.message, where) from None
        return fam
    if kind == "tiered":
        share = 0.9
        if "capacity" in t:
            parts = [p for p in str(t["capacity"]).split(",") if p.strip()]
            if len(parts) != 2:
                raise InputError("capacity: a tiered device takes FAST,SLOW (e.g. \"5k,200\") for the ratio", where)
            fast, slow = (parse_rate(p, f"{where} capacity") for p in parts)
            share = fast / (fast + slow)
        hit = t.get("hit_ratio")
        if hit is not None and not (isinstance(hit, (int, float)) and 0 <= hit <= 1):
            raise InputError(f"hit_ratio: must be in [0, 1], got {hit!r}", where)
        return DeviceFamily("tiered", fast_share=share, hit_ratio=None if hit is None else float(hit))
    return DeviceFamily(kind)


@dataclass
class Problem:
    """What the search needs: one trace of every tenant's requests (``tenant`` column),
    the tenants, the device family, the seed and the largest capacity allowed."""

    name: str
    trace: pl.DataFrame
    tenants: list[TenantInfo]
    family: DeviceFamily
    seed: int = 1
    max_capacity: float = 0.0
    span_ns: int = 0
    #: the capacity each tenant needs alone for its SLO, Cmin_i(P_i, D_i) (IOPS; 0 without SLO)
    need: list[float] = field(default_factory=list)
    #: lower bound on the capacity of any policy on a constant server (IOPS)
    lower: float = 0.0
    #: capacity at which FCFS meets every SLO on a constant server (IOPS)
    upper: float = 0.0
    #: a single disk's random IOPS at depth 1 (disk family only)
    disk_iops: float = 0.0

    @property
    def total_iops(self) -> float:
        """The tenants' total mean arrival rate."""
        return sum(t.mean_iops for t in self.tenants)


def load_problem(path: str | Path, *, max_capacity: str | float | None = None) -> Problem:
    """Read an advise file (an experiment file whose tenants' ``slo`` may read
    ``p99<=10ms``, whose ``[device]`` names a family without a capacity, and whose
    ``[[policy]]`` tables are optional) and check it (one-line :class:`InputError`)."""
    from .toml_schema import read_toml

    path = Path(path)
    text, raw = read_toml(path)
    return problem_from_dict(raw, base=path.parent, where=path.name, text=text, name=path.stem,
                             max_capacity=max_capacity)


def problem_from_dict(raw: dict[str, Any], *, base: Path = Path("."), where: str = "advise", text: str | None = None,
                      name: str = "advise", max_capacity: str | float | None = None) -> Problem:
    """:func:`load_problem` on a parsed file."""
    from . import experiment
    from .toml_schema import entry_where, one_or_many

    raw = dict(raw)
    family = device_family(raw.pop("device", {}) or {}, f"{where}: [device]")
    raw.pop("policy", None)  # advise chooses the policies (--policy)
    default_p = parse_percent(raw["percentile"], f"{where}: percentile") if "percentile" in raw else 0.95
    # Each entry's SLO: "pP<=D" is read here (per-tenant percentiles); the experiment
    # reader gets the latency alone.
    slos: dict[tuple[str, int], Slo | None] = {}
    for table in ("trace", "tenant"):
        if table not in raw:
            continue
        entries = [dict(e) if isinstance(e, dict) else e for e in one_or_many(raw[table])]
        for i, e in enumerate(entries):
            if not isinstance(e, dict):
                continue
            w = entry_where(where, table, i, e.get("name"))
            s = parse_slo(e["slo"], default_p, f"{w}: slo") if "slo" in e else None
            slos[(table, i)] = s
            if s is not None:
                e["slo"] = f"{s.latency_ns}ns"
        raw[table] = entries
    raw["device"] = {"kind": "constant", "capacity": "1"}
    raw["policy"] = [{"kind": "fcfs"}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        exp = experiment.from_dict(raw, base=base, where=where, text=text)
    run = exp.runs[0]
    if run.closed:
        raise InputError("advise needs open-loop tenants (traces or generators): a closed-loop client's load "
                         "follows the capacity, so it has no capacity to plan for", where)
    # Tenants → their entry's SLO: [[trace]] entries first (one or, split, several tenants each), then [[tenant]].
    file_slos: list[Slo | None] = []
    traces = one_or_many(raw.get("trace", []))
    names = [t.name for t in run.tenants]
    k = 0
    for i, e in enumerate(traces):
        label = e.get("name") or str(e["path"]).rsplit("/", 1)[-1].rsplit(".", 1)[0]
        while k < len(names) and (names[k] == label or names[k].startswith(label + "/")):
            file_slos.append(slos.get(("trace", i)))
            k += 1
    for i, _ in enumerate(one_or_many(raw.get("tenant", []))):
        file_slos.append(slos.get(("tenant", i)))
    frames = []
    if run.trace_key is not None:
        frames.append(exp.traces[run.trace_key])
    if run.generators:
        from .synth import to_frame

        g = to_frame(run.generators)
        frames.append(g.select("arrival_ns", "size", "offset", "is_read", "tenant"))
    if not frames:
        raise InputError("no tenant has any request", where)
    df = pl.concat(frames, how="vertical_relaxed").sort("arrival_ns", maintain_order=True)
    df = df.select(pl.col("arrival_ns").cast(pl.Int64), pl.col("size").cast(pl.UInt32),
                   pl.col("offset").cast(pl.UInt64), pl.col("is_read").cast(pl.Boolean), pl.col("tenant").cast(pl.UInt32))
    span_ns = int(df.select(pl.col("arrival_ns").max()).item() or 0) + 1
    counts = dict(df.group_by("tenant").len().iter_rows())
    tenants: list[TenantInfo] = []
    for tid, (t, s) in enumerate(zip(run.tenants, file_slos, strict=True)):
        n = int(counts.get(tid, 0))
        if n == 0:
            raise InputError(f"tenant {t.name!r} has no requests (an empty trace, or none within the duration)", where)
        tenants.append(TenantInfo(name=t.name, slo=s, reservation=t.reservation or None, limit=t.limit,
                                  weight=t.weight, requests=n, mean_iops=n / (span_ns / 1e9)))
    p = Problem(name=str(raw.get("name", name)), trace=df, tenants=tenants, family=family,
                seed=int(raw.get("seed", 1)), span_ns=span_ns)
    cap = None if max_capacity is None else parse_rate(max_capacity, "--max-capacity")
    prepare(p, cap, where)
    return p


# ----------------------------------------------------------------------------- bounds


def _cmin(arrivals: np.ndarray, fraction: float, deadline_ns: int) -> float:
    """Cmin(f, δ) of one stream (IOPS), by the planner kernel (seed 000)."""
    res = _core.capacity_table(arrivals, [int(deadline_ns)], [float(min(1.0, fraction))])
    return float(res["cmin_iops"][0][0])


def prepare(p: Problem, max_capacity: float | None = None, where: str = "advise") -> None:
    """Compute the planner's bounds and check the SLOs against the device: an SLO no
    allowed capacity can meet, contradictory reservations or caps are an InputError."""
    judged = [t for t in p.tenants if t.slo is not None]
    if not judged:
        raise InputError("no tenant has an SLO (give e.g. slo = \"p99<=10ms\" to at least one)", where)
    p.max_capacity = max_capacity if max_capacity is not None else MAX_CAPACITY_OVER_LOAD * p.total_iops
    arrivals = p.trace["arrival_ns"].to_numpy().astype(np.uint64)
    tenant = p.trace["tenant"].to_numpy()
    p.need = []
    for i, t in enumerate(p.tenants):
        if t.slo is None:
            p.need.append(0.0)
            continue
        p.need.append(_cmin(np.ascontiguousarray(arrivals[tenant == i]), t.slo.percentile, t.slo.latency_ns))
    n = sum(t.requests for t in p.tenants)
    f_all = sum(t.slo.percentile * t.requests for t in judged if t.slo is not None) / n
    d_max = max(t.slo.latency_ns for t in judged)  # type: ignore[union-attr]
    d_min = min(t.slo.latency_ns for t in judged)  # type: ignore[union-attr]
    merged = _cmin(arrivals, f_all, d_max)
    p.lower = max(max(p.need), merged) / CMIN_SLACK
    p.upper = _cmin(arrivals, 1.0, d_min)
    if p.family.integer:
        p.disk_iops = _disk_iops(p.family)
    _check_feasible(p, where)


def to_capacity(p: Problem, iops: float) -> float:
    """An IOPS figure in the family's capacity unit (disks for ``disk``)."""
    return iops / p.disk_iops if p.family.integer and p.disk_iops > 0 else iops


def _max_units(p: Problem) -> float:
    return to_capacity(p, p.max_capacity)


def _disk_iops(fam: DeviceFamily) -> float:
    """One disk's random 4 KiB IOPS at depth 1 (a closed client for 10 simulated s)."""
    from .sim import ClosedClient, simulate

    res = simulate(None, "fcfs", fam.spec(1), closed=[ClosedClient(outstanding=1, span="16GiB", stop="10s")], seed=1)
    return float(res.tenants["completed"][0]) / 10.0


def _check_feasible(p: Problem, where: str) -> None:
    """The bad-input rules of issue 19: an SLO below the device's service time at the
    largest capacity allowed, a reservation sum above it, a cap below a reservation or
    below what the tenant's SLO needs."""
    top = _max_units(p)
    # A lone request of each tenant's median size, one second apart, on the largest device allowed.
    sizes = p.trace.group_by("tenant").agg(pl.col("size").median().cast(pl.UInt32)).sort("tenant")
    k = sizes.height
    lone = pl.DataFrame({"arrival_ns": [i * 1_000_000_000 for i in range(k)], "size": sizes["size"],
                         "offset": pl.Series([0] * k, dtype=pl.UInt64), "is_read": [True] * k,
                         "tenant": sizes["tenant"]})
    from .sim import simulate

    res = simulate(lone, "fcfs", p.family.spec(max(top, 1.0) if not p.family.integer else max(1, math.floor(top))),
                   seed=p.seed)
    service = dict(zip(res.tenants["tenant"].to_list(), res.tenants["max_ns"].to_list(), strict=True))
    allowed = p.family.unit(top if not p.family.integer else max(1, math.floor(top)))
    for i, t in enumerate(p.tenants):
        if t.slo is None:
            continue
        s = float(service.get(i, 0))
        if t.slo.latency_ns < s:
            raise InputError(
                f"tenant {t.name!r}: {t.slo.text} is below the device's service time ({fmt_duration(s)} for one "
                f"request at {allowed}, the most the search allows: --max-capacity)", where)
        if not p.family.integer and p.need[i] > p.max_capacity:
            raise InputError(
                f"tenant {t.name!r}: {t.slo.text} needs at least {p.need[i]:,.0f} IOPS even alone (Cmin), above "
                f"the most the search allows ({p.max_capacity:,.0f} IOPS: --max-capacity)", where)
        if t.limit is not None and t.reservation is not None and t.limit < t.reservation:
            raise InputError(f"tenant {t.name!r}: its cap ({t.limit:,.0f} IOPS) is below its reservation "
                             f"({t.reservation:,.0f} IOPS)", where)
        if t.limit is not None and t.limit < p.need[i] / CMIN_SLACK:
            raise InputError(f"tenant {t.name!r}: its cap ({t.limit:,.0f} IOPS) is below the {p.need[i]:,.0f} IOPS "
                             f"its SLO {t.slo.text} needs even alone (Cmin)", where)
    res_sum = sum(t.reservation or 0.0 for t in p.tenants)
    if res_sum > p.max_capacity:
        raise InputError(f"the reservations add up to {res_sum:,.0f} IOPS, above the most the search allows "
                         f"({p.max_capacity:,.0f} IOPS: --max-capacity)", where)


# ----------------------------------------------------------------------------- policies


def rates(p: Problem) -> list[float]:
    """Each tenant's contracted rate (IOPS): its reservation, else what its SLO needs
    alone (Cmin_i), else (best effort) its mean arrival rate."""
    out = []
    for t, need in zip(p.tenants, p.need, strict=True):
        out.append(float(t.reservation) if t.reservation else (need if need > 0 else max(t.mean_iops, 1.0)))
    return out


def avatar_timing(p: Problem) -> tuple[int, int]:
    """SARC+AVATAR's control window and T_SARC (ns) for the tenants' deadlines."""
    d_max = max(t.slo.latency_ns for t in p.tenants if t.slo is not None)
    window = int(min(max(AVATAR_WINDOW_DEADLINES * d_max, AVATAR_WINDOW_MIN_NS), AVATAR_WINDOW_MAX_NS))
    return window, window // SARC_PERIODS_PER_WINDOW


def miser_point(p: Problem) -> tuple[float, int]:
    """RTT+Miser's Cmin (IOPS) and δ (ns): the merged stream at the strictest SLO."""
    judged = [t.slo for t in p.tenants if t.slo is not None]
    f = max(s.percentile for s in judged)
    d = min(s.latency_ns for s in judged)
    arrivals = p.trace["arrival_ns"].to_numpy().astype(np.uint64)
    return _cmin(arrivals, f, d), d


def policy_for(p: Problem, kind: str, capacity: float) -> dict[str, Any]:
    """The core spec of ``kind`` with its parameters derived from the SLOs (see the module
    docs, point 3). ``capacity`` is the device's (some policies need it)."""
    r = rates(p)
    top = max(r)
    weights = [t.weight if t.weight else x / top for t, x in zip(p.tenants, r, strict=True)]
    # Best-effort tenants: their SLO stand-in is a loose bound (they are not judged).
    loose = max(t.slo.latency_ns for t in p.tenants if t.slo is not None) * 10
    deadlines = [t.slo.latency_ns if t.slo else loose for t in p.tenants]
    if kind == "fcfs":
        return {"kind": "fcfs"}
    if kind in ("wf2q", "sfq", "yfq"):
        return policy_spec(kind, weights=weights)
    if kind == "edf":
        return policy_spec("edf", deadlines=[f"{d}ns" for d in deadlines])
    if kind == "mclock":
        limits = [t.limit for t in p.tenants]
        return policy_spec("mclock", reservations=r, weights=weights,
                           limits=limits if any(x is not None for x in limits) else None)
    if kind == "sarc+avatar":
        window, period = avatar_timing(p)
        pct = max(t.slo.percentile for t in p.tenants if t.slo is not None)
        slo = ",".join(f"t{i}:{x}iops@{d}ns" for i, (x, d) in enumerate(zip(r, deadlines, strict=True)))
        return policy_spec("sarc+avatar", slo=slo, percentile=100 * pct, period=f"{period}ns",
                           control_window=f"{window}ns")
    if kind == "miser":
        cmin, delta = miser_point(p)
        return policy_spec("miser", cmin=cmin, deadlines=[f"{delta}ns"])
    if kind == "fclb":
        return policy_spec("fclb", workloads=[{"iops": x, "rt_ns": d} for x, d in zip(r, deadlines, strict=True)],
                           weights=weights)
    raise InputError(f"advise cannot derive the parameters of {kind!r} (it can: {', '.join(SUPPORTED_POLICIES)})",
                     "--policy")


def policy_floor(p: Problem, kind: str) -> float:
    """The least capacity (IOPS) the policy runs at as derived: Miser is provisioned at
    Cmin + ΔC with ΔC·δ ≥ 1 (seed 000; below it Miser cannot guarantee the primary
    class's deadline, :func:`storqos.sim.miser_slack`), so the search allows no less."""
    if kind == "miser" and not p.family.integer:
        cmin, delta = miser_point(p)
        return cmin + 1e9 / delta
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
        if s.lower() in ("fclb+yfq", "rtt+miser"):
            s = {"fclb+yfq": "fclb", "rtt+miser": "miser"}[s.lower()]
        k = canonical_policy(s)
        if k not in SUPPORTED_POLICIES:
            raise InputError(f"advise cannot derive the parameters of {s!r} from SLOs (it can: "
                             f"{', '.join(SUPPORTED_POLICIES)})", "--policy")
        if k not in out:
            out.append(k)
    return out


# ----------------------------------------------------------------------------- one simulation


@dataclass
class Evaluation:
    """One simulation at a capacity: per tenant the achieved percentile (ns), the fraction
    within its bound, the margin (1 − achieved / bound) and, for SARC+AVATAR, the paper's
    miss ratio (after SARC releases a request) beside the end-to-end one."""

    capacity: float
    load: float
    met: bool
    achieved_ns: list[float | None]
    within: list[float | None]
    margin: list[float | None]
    paper_miss: list[float | None]
    wall_s: float
    cdf: pl.DataFrame | None = None

    @property
    def worst(self) -> float:
        """The worst tenant's achieved / bound (> 1: an SLO fails)."""
        m = [x for x in self.margin if x is not None]
        return 1.0 - min(m) if m else 0.0


def _scaled(trace: pl.DataFrame, load: float) -> pl.DataFrame:
    if load == 1.0:
        return trace
    return trace.with_columns((pl.col("arrival_ns").cast(pl.Float64) / load).round().cast(pl.Int64))


def evaluate(p: Problem, kind: str, capacity: float, *, load: float = 1.0, keep_cdf: bool = False) -> Evaluation:
    """Simulate ``kind`` (parameters from the SLOs) at ``capacity`` with the load × ``load``
    and judge every tenant end to end (arrival to completion)."""
    from .sim import simulate

    pspec = policy_for(p, kind, capacity)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = simulate(_scaled(p.trace, load), pspec, p.family.spec(capacity), seed=p.seed)
    wall = time.perf_counter() - t0
    cdf = res.cdf
    achieved: list[float | None] = []
    within: list[float | None] = []
    margin: list[float | None] = []
    for i, t in enumerate(p.tenants):
        c = cdf.filter(pl.col("tenant") == i).sort("response_ns")
        if t.slo is None:
            achieved.append(None if c.height == 0 else float(c["response_ns"][-1]))
            within.append(None)
            margin.append(None)
            continue
        x = c["response_ns"].to_numpy()
        f = c["fraction"].to_numpy()
        done = float(res.tenants.filter(pl.col("tenant") == i)["completed"].sum()) if res.tenants.height else 0.0
        scale = done / t.requests if t.requests else 0.0  # unfinished requests count as misses
        f = f * scale
        ok = x <= t.slo.latency_ns
        w = float(f[ok].max()) if ok.any() else 0.0
        reach = np.flatnonzero(f >= t.slo.percentile - 1e-12)
        q = float(x[reach[0]]) if reach.size else float("inf")
        achieved.append(q)
        within.append(w)
        margin.append(1.0 - q / t.slo.latency_ns)
    paper: list[float | None] = [None] * len(p.tenants)
    if kind == "sarc+avatar" and res.gauges.height:
        g = res.gauges.group_by("name").agg(pl.col("value").last())
        vals = dict(g.iter_rows())
        for i in range(len(p.tenants)):
            done_i, missed_i = vals.get(f"low_done.{i}"), vals.get(f"low_missed.{i}")
            if done_i:
                paper[i] = float(missed_i or 0.0) / float(done_i)
    met = all(m is None or w is None or w >= t.slo.percentile - 1e-12
              for t, w, m in zip(p.tenants, within, margin, strict=True) if t.slo is not None)
    return Evaluation(capacity=capacity, load=load, met=met, achieved_ns=achieved, within=within, margin=margin,
                      paper_miss=paper, wall_s=wall, cdf=cdf if keep_cdf else None)


# ----------------------------------------------------------------------------- search


@dataclass
class PolicyAdvice:
    """One policy's answer: ``status`` ``"ok"`` (minimum capacity found), ``"never"``
    (some SLO fails at every capacity the search allows) or ``"any"`` (every SLO holds at
    the least capacity the search tries); the evaluation at the answer, the minimality
    check below it, the robustness check at +10 % load, and how many simulations."""

    policy: str
    status: str
    capacity: float
    at: Evaluation
    below: Evaluation | None
    robust: Evaluation | None
    simulations: int
    #: the simulations of the search alone (without the two proof runs), for the benchmark
    search_simulations: int
    history: list[tuple[float, bool, float]]
    wall_s: float
    notes: list[str] = field(default_factory=list)


class _Runner:
    """Counts and remembers the simulations of one search."""

    def __init__(self, p: Problem, kind: str, load: float = 1.0) -> None:
        self.p, self.kind, self.load = p, kind, load
        self.history: list[tuple[float, bool, float]] = []
        self.cache: dict[float, Evaluation] = {}

    def __call__(self, c: float) -> Evaluation:
        c = self.quantize(c)
        if c not in self.cache:
            e = evaluate(self.p, self.kind, c, load=self.load, keep_cdf=True)
            self.cache[c] = e
            self.history.append((c, e.met, e.worst))
        return self.cache[c]

    def quantize(self, c: float) -> float:
        if self.p.family.integer:
            return float(max(1, math.ceil(c - 1e-9)))
        return float(f"{c:.6g}")


def _close(p: Problem, lo: float, hi: float, tol: float) -> bool:
    if p.family.integer:
        return hi - lo <= 1
    return hi <= lo * (1 + tol) + 1e-9


def _interpolate(lo: float, r_lo: float | None, hi: float, r_hi: float | None) -> float:
    """Where log(worst) crosses 0 on the line through the bracket's ends in log capacity;
    the geometric midpoint when an end's ratio is unknown or not on both sides."""
    mid = math.sqrt(lo * hi) if lo > 0 else hi / 2
    if r_lo is None or r_hi is None or not (r_lo > 1 >= r_hi) or r_hi <= 0 or lo <= 0:
        return mid
    a, b = math.log(min(r_lo, 1e6)), math.log(r_hi)
    if a == b:
        return mid
    return math.exp(math.log(lo) + (0 - a) * (math.log(hi) - math.log(lo)) / (b - a))


def search(p: Problem, kind: str, *, tol: float = TOLERANCE) -> PolicyAdvice:
    """The minimum capacity at which every SLO holds under ``kind`` (module docs, point 4),
    then its proof (point 5)."""
    t0 = time.perf_counter()
    run = _Runner(p, kind)
    notes: list[str] = []
    floor = to_capacity(p, policy_floor(p, kind))
    top = _max_units(p)
    constant = p.family.kind == "constant"
    lower = max(to_capacity(p, p.lower), floor)
    lower = run.quantize(lower) if not p.family.integer else max(1.0, math.floor(lower))
    # hi: the planner's FCFS point, doubled until every SLO holds.
    hi = run.quantize(min(max(to_capacity(p, p.upper), lower * (1 + 2 * tol)), top))
    e_hi = run(hi)
    while not e_hi.met:
        if hi >= top:
            return _finish(p, kind, run, "never", hi, e_hi, notes, t0)
        hi = run.quantize(min(hi * 2, top))
        e_hi = run(hi)
    # lo: a proven failure below Cmin on the constant server; elsewhere checked.
    lo = lower
    r_lo: float | None = None
    lo_proven = constant and floor <= to_capacity(p, p.lower)
    if lo >= hi:
        lo = hi / 2
        lo_proven = False
    if not lo_proven:
        e_lo = run(lo)
        bottom = max(floor, to_capacity(p, p.total_iops) / 64, 1.0 if p.family.integer else 1e-3)
        while e_lo.met:
            hi, e_hi = lo, e_lo
            if run.quantize(max(lo / 2, bottom)) >= lo:  # at the bottom (quantized): nothing lower to try
                if floor > 0 and lo <= floor * 1.0001:
                    notes.append(f"every SLO holds at {p.family.unit(lo)}, the least capacity the policy runs at as "
                                 "derived (Miser: Cmin + 1/δ)")
                return _finish(p, kind, run, "any", hi, e_hi, notes, t0)
            lo = run.quantize(max(lo / 2, bottom))
            e_lo = run(lo)
        r_lo = e_lo.worst
    for _ in range(MAX_RESTARTS + 1):
        lo, hi = _refine(p, run, lo, r_lo, hi, tol)
        # Minimality: just below the answer some SLO must fail.
        searched = len(run.history)
        below_c = hi - 1 if p.family.integer else hi * PROOF_FACTOR
        if below_c < (1 if p.family.integer else floor) or below_c <= 0:
            break
        e_below = run(below_c)
        if not e_below.met:
            break
        notes.append(f"every SLO also held at {p.family.unit(below_c)}, below the bracket: searched again below it")
        hi, r_lo = run.quantize(below_c), None
        lo = min(lo, hi / 2)
        if p.family.integer:
            lo = max(1.0, math.floor(lo))
        e = run(lo)
        while e.met:
            nxt = run.quantize(max(lo / 2, floor, 1.0 if p.family.integer else 1e-3))
            if nxt >= lo:
                break
            hi, lo = lo, nxt
            e = run(lo)
        if e.met:
            return _finish(p, kind, run, "any", lo, e, notes, t0)
        r_lo = e.worst
    return _finish(p, kind, run, "ok", hi, run(hi), notes, t0, searched)


def _refine(p: Problem, run: _Runner, lo: float, r_lo: float | None, hi: float, tol: float) -> tuple[float, float]:
    """Shrink [lo fails, hi meets] to ``tol`` (module docs, point 4). Each round aims just
    above the interpolated crossing (``bias`` × tol); a meeting run is followed by one at
    the new top / (1 + tol), which closes the bracket when the estimate was good. A
    failing aim doubles the bias (Illinois-like: the interpolation, from a convex ratio,
    tends to fall short from below); a round that does not halve the bracket's log width
    makes the next a bisection."""
    r_hi: float | None = run(hi).worst
    bias = INITIAL_BIAS
    stall = 0
    while not _close(p, lo, hi, tol):
        interpolated = r_lo is not None and stall < 2
        width = math.log(hi / lo) if lo > 0 else 1.0
        if p.family.integer:
            est = _interpolate(lo, r_lo, hi, r_hi) if interpolated else (lo + hi) / 2
            c = float(min(max(math.ceil(est), lo + 1), hi - 1))
        else:
            est = _interpolate(lo, r_lo, hi, r_hi) if interpolated else math.sqrt(lo * hi)
            c = est * (1 + bias * tol) if interpolated else est
            c = min(max(c, lo * (1 + 0.2 * tol)), hi / (1 + 0.2 * tol))
        e = run(c)
        c = run.quantize(c)
        if e.met:
            hi, r_hi = c, e.worst
            bias = INITIAL_BIAS
            if interpolated and not p.family.integer and not _close(p, lo, hi, tol):
                c2 = run.quantize(hi / (1 + tol))
                if c2 > lo:
                    e2 = run(c2)
                    if e2.met:
                        hi, r_hi = c2, e2.worst
                    else:
                        lo, r_lo = c2, e2.worst
        else:
            lo, r_lo = c, e.worst
            if interpolated:
                bias *= 2
        new_width = math.log(hi / lo) if lo > 0 else 1.0
        stall = stall + 1 if new_width > 0.5 * width else 0
    return lo, hi


def _finish(p: Problem, kind: str, run: _Runner, status: str, capacity: float, at: Evaluation, notes: list[str],
            t0: float, searched: int | None = None) -> PolicyAdvice:
    searched = len(run.history) if searched is None else searched
    below: Evaluation | None = None
    robust: Evaluation | None = None
    if status == "ok":
        below_c = run.quantize(capacity - 1 if p.family.integer else capacity * PROOF_FACTOR)
        below = run(below_c)
    if status != "never":
        robust = evaluate(p, kind, capacity, load=ROBUST_LOAD)
    sims = len(run.history) + (robust is not None)
    return PolicyAdvice(policy=kind, status=status, capacity=capacity, at=at, below=below, robust=robust,
                        simulations=sims, search_simulations=searched, history=list(run.history), wall_s=time.perf_counter() - t0, notes=notes)


def plain_bisection(p: Problem, kind: str, *, tol: float = TOLERANCE) -> tuple[float | None, int]:
    """The reference for the benchmark: bisection from zero with no planner bounds. The
    top starts at the tenants' total mean rate and doubles until every SLO holds; then
    [0, top] is halved until it is within ``tol``. Returns (capacity or None, simulations)."""
    run = _Runner(p, kind)
    top = _max_units(p)
    hi = run.quantize(max(to_capacity(p, p.total_iops), 1.0))
    while not run(hi).met:
        if hi >= top:
            return None, len(run.history)
        hi = run.quantize(min(hi * 2, top))
    lo = 0.0
    while (hi - lo > 1) if p.family.integer else (hi - lo > tol * hi):
        mid = run.quantize((lo + hi) / 2)
        if mid >= hi or mid <= lo:
            break
        if run(mid).met:
            hi = mid
        else:
            lo = mid
    return hi, len(run.history)


# ----------------------------------------------------------------------------- advice


@dataclass
class Advice:
    """Every policy's answer, ranked (cheapest first; policies that never meet the SLOs
    last), with the recommendation in words."""

    problem: Problem
    results: list[PolicyAdvice]
    backend: str
    wall_s: float

    @property
    def ranked(self) -> list[PolicyAdvice]:
        """Cheapest first; ``never`` last."""
        order = {"any": 0, "ok": 0, "never": 1}
        return sorted(self.results, key=lambda r: (order[r.status], r.capacity if r.status != "never" else 0.0))

    def explanation(self) -> str:
        """One or two sentences: the cheapest policy, by how much, and why."""
        return explain(self)

    def rows(self) -> pl.DataFrame:
        """One row per (policy, tenant), ranked: capacity, SLO, achieved, margin, +10 %."""
        p = self.problem
        out = []
        for rank, r in enumerate(self.ranked, 1):
            for i, t in enumerate(p.tenants):
                out.append({
                    "rank": rank, "policy": r.policy, "status": r.status,
                    "capacity": r.capacity if r.status != "never" else None,
                    "capacity_iops": _iops(p, r.capacity) if r.status != "never" else None,
                    "tenant": t.name,
                    "slo": t.slo.text if t.slo else "best effort",
                    "slo_percentile": t.slo.percentile if t.slo else None,
                    "slo_latency_ns": t.slo.latency_ns if t.slo else None,
                    "achieved_ns": r.at.achieved_ns[i],
                    "within_slo": r.at.within[i],
                    "margin": r.at.margin[i],
                    "paper_miss_ratio": r.at.paper_miss[i],
                    "below_capacity": r.below.capacity if r.below else None,
                    "below_met": (r.below.within[i] is None or r.below.within[i] >= t.slo.percentile - 1e-12)  # type: ignore[operator, union-attr]
                    if r.below and t.slo else None,
                    "robust_achieved_ns": r.robust.achieved_ns[i] if r.robust else None,
                    "robust_margin": r.robust.margin[i] if r.robust else None,
                    "simulations": r.simulations,
                })
        return pl.DataFrame(out, infer_schema_length=None)

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the problem, each policy's answer with its proof, the explanation."""
        p = self.problem
        return {
            "name": p.name,
            "device": p.family.describe(),
            "tenants": [{"name": t.name, "slo": t.slo.text if t.slo else None,
                         "percentile": t.slo.percentile if t.slo else None,
                         "latency_ns": t.slo.latency_ns if t.slo else None,
                         "reservation_iops": t.reservation, "limit_iops": t.limit, "requests": t.requests,
                         "mean_iops": t.mean_iops, "needs_alone_iops": need}
                        for t, need in zip(p.tenants, p.need, strict=True)],
            "bounds_iops": {"lower": p.lower, "fcfs_upper": p.upper, "max": p.max_capacity},
            "tolerance": TOLERANCE,
            "backend": self.backend,
            "wall_s": self.wall_s,
            "recommendation": self.explanation(),
            "policies": [
                {"policy": r.policy, "status": r.status,
                 "capacity": r.capacity if r.status != "never" else None,
                 "capacity_unit": "disks" if p.family.integer else "IOPS",
                 "capacity_iops": _iops(p, r.capacity) if r.status != "never" else None,
                 "simulations": r.simulations, "search_simulations": r.search_simulations, "wall_s": r.wall_s, "notes": r.notes,
                 "search": [{"capacity": c, "met": m, "worst_ratio": w} for c, m, w in r.history],
                 "tenants": [_tenant_json(p, r, i) for i in range(len(p.tenants))],
                 "below": {"capacity": r.below.capacity, "met": r.below.met} if r.below else None,
                 "robust": {"load": ROBUST_LOAD, "met": r.robust.met} if r.robust else None}
                for r in self.ranked
            ],
        }


def _tenant_json(p: Problem, r: PolicyAdvice, i: int) -> dict[str, Any]:
    t = p.tenants[i]
    return {
        "tenant": t.name,
        "achieved_ns": _finite(r.at.achieved_ns[i]),
        "within_slo": r.at.within[i],
        "margin": _finite(r.at.margin[i]),
        "end_to_end_miss_ratio": None if r.at.within[i] is None else 1 - r.at.within[i],  # type: ignore[operator]
        "paper_miss_ratio": r.at.paper_miss[i],
        "below_achieved_ns": _finite(r.below.achieved_ns[i]) if r.below else None,
        "robust_achieved_ns": _finite(r.robust.achieved_ns[i]) if r.robust else None,
        "robust_margin": _finite(r.robust.margin[i]) if r.robust else None,
    }


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else v


def _iops(p: Problem, capacity: float) -> float:
    return capacity * p.disk_iops if p.family.integer else capacity


def _binding(p: Problem, e: Evaluation) -> int | None:
    """The tenant with the least margin."""
    best: tuple[float, int] | None = None
    for i, m in enumerate(e.margin):
        if m is not None and (best is None or m < best[0]):
            best = (m, i)
    return None if best is None else best[1]


#: What a policy does that can save capacity, in words (said of the cheapest policy).
WHY: dict[str, str] = {
    "fcfs": "lets any tenant's burst use the whole device: no share caps a bursty tenant",
    "edf": "serves requests by deadline, so tenants with tight bounds overtake those with loose ones",
    "wf2q": "gives each tenant its weighted share, so a tenant's requests do not queue behind another's burst",
    "sfq": "gives each tenant its weighted share",
    "yfq": "gives each tenant its weighted share in batches",
    "mclock": "reserves each tenant the rate its SLO needs, so another tenant's burst cannot take it",
    "sarc+avatar": "serves requests by deadline (AVATAR's EDF) and each tenant at its contracted rate, so tenants "
                   "with tight bounds go first and a loose one absorbs the wait",
    "miser": "lets only an overflow fraction of the requests wait",
    "fclb": "shares the device between tenants by rate (YFQ) and meters bursts through token buckets",
}
#: Why a policy never meets the SLOs, in words.
WHY_NOT: dict[str, str] = {
    "sarc+avatar": "SARC holds each tenant's bursts above its contracted rate, a wait the end-to-end latency counts",
    "fclb": "the token buckets hold bursts above each tenant's rate, a wait the end-to-end latency counts",
    "mclock": "a tenant's cap holds its bursts back",
    "fcfs": "a tenant queues behind every other tenant's burst",
}


def explain(a: Advice) -> str:
    """One or two sentences: the cheapest policy, against FCFS (or the runner-up), and why."""
    p = a.problem
    ranked = a.ranked
    ok = [r for r in ranked if r.status != "never"]
    if not ok:
        return (f"No policy meets every SLO at any capacity up to {p.family.unit(_max_units(p))}: relax the SLOs, "
                "or raise --max-capacity.")
    best = ok[0]
    name = DISPLAY.get(best.policy, best.policy)
    others = [r for r in ranked if r is not best]
    ref = next((r for r in others if r.policy == "fcfs"), others[0] if others else None)
    if ref is None:
        return f"{name} meets every SLO at {p.family.unit(best.capacity)}."
    rname = DISPLAY.get(ref.policy, ref.policy)
    b = _binding(p, best.at)
    tb = p.tenants[b] if b is not None else None
    if ref.status == "never":
        rb = _binding(p, ref.at)
        who = f"{p.tenants[rb].name} misses {p.tenants[rb].slo.text}" if rb is not None and p.tenants[rb].slo else "an SLO fails"  # type: ignore[union-attr]
        why = WHY_NOT.get(ref.policy, "its parameters, derived from the SLOs, do not fit this workload")
        return (f"{name} meets every SLO at {p.family.unit(best.capacity)}; under {rname} {who} at every capacity "
                f"up to {p.family.unit(ref.capacity)}: {why}.")
    if ref.capacity <= best.capacity * (1 + TOLERANCE):
        return (f"{name} and {rname} need the same capacity ({p.family.unit(best.capacity)}) within 0.5 %: "
                f"the binding tenant {tb.name if tb else '?'} is limited by the device, not by the schedule.")
    saving = 100 * (1 - best.capacity / ref.capacity)
    rb = _binding(p, ref.at)
    tr = p.tenants[rb] if rb is not None else None
    because = f"it {WHY.get(best.policy, 'schedules differently')}"
    if tr is not None and tr.slo is not None:
        because += f"; under {rname} it is {tr.name} ({tr.slo.text}) that sets the capacity"
    return f"{name} needs {saving:.0f} % less capacity than {rname} ({p.family.unit(best.capacity)} vs {p.family.unit(ref.capacity)}) because {because}."


# ----------------------------------------------------------------------------- parallel runs


def _search_task(kind: str, p: Problem) -> PolicyAdvice:
    return search(p, kind)


def advise(p: Problem, policies: Sequence[str] = DEFAULT_POLICIES, *, backend: str | None = "local",
           workers: int | None = None, on_done: Callable[[int], None] | None = None) -> Advice:
    """Search every policy (one task each, on ``backend``: :func:`storqos.sweep.map_runs`)."""
    from .sweep import map_runs, parse_backend

    backend = parse_backend(backend)
    kinds = parse_policies(list(policies))
    t0 = time.perf_counter()
    results = map_runs(_search_task, kinds, shared={None: p}, backend=backend,
                       workers=workers if workers is not None else (min(len(kinds), 2) if backend == "local" else None),
                       on_done=on_done)
    return Advice(problem=p, results=results, backend=backend, wall_s=time.perf_counter() - t0)


# ----------------------------------------------------------------------------- report


def html_report(a: Advice) -> str:
    """A self-contained HTML page: the ranked table, the recommendation, and per tenant
    the response-time CDF of every policy at its reported capacity (plotly, offline)."""
    import html as _html

    from plotly.offline import get_plotlyjs
    from plotly.subplots import make_subplots

    from .report import grid_shape, thin

    p = a.problem
    judged = list(range(len(p.tenants)))
    rows, cols = grid_shape(len(judged))
    titles = []
    for i in judged:
        s = p.tenants[i].slo
        titles.append(f"{p.tenants[i].name} ({s.text if s is not None else 'best effort'})")
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles)
    from .report import PALETTE

    for k, r in enumerate(a.ranked):
        if r.at.cdf is None:
            continue
        label = f"{DISPLAY.get(r.policy, r.policy)} @ {p.family.unit(r.capacity)}" + (" (never)" if r.status == "never" else "")
        for j, i in enumerate(judged):
            c = thin(r.at.cdf.filter(pl.col("tenant") == i).sort("response_ns"), 300)
            fig.add_scatter(x=(c["response_ns"] / 1e6).to_list(), y=c["fraction"].to_list(), mode="lines",
                            name=label, legendgroup=r.policy, showlegend=j == 0,
                            line={"color": PALETTE[k % len(PALETTE)], "shape": "hv"},
                            row=j // cols + 1, col=j % cols + 1)
    for j, i in enumerate(judged):
        t = p.tenants[i]
        fig.update_xaxes(type="log", title_text="response time, arrival to completion (ms)", row=j // cols + 1,
                         col=j % cols + 1)
        if t.slo is not None:
            fig.add_vline(x=math.log10(t.slo.latency_ns / 1e6), line_dash="dash", line_color="grey",
                          row=j // cols + 1, col=j % cols + 1)
    fig.update_yaxes(title_text="fraction ≤ x", range=[0, 1.02], col=1)
    fig.update_layout(title="Response-time CDF per tenant, each policy at its reported capacity",
                      height=330 * rows + 80, template="plotly_white", legend_title_text="policy")
    table = a.rows()
    head = ["rank", "policy", "capacity", "tenant", "SLO", "achieved (ms)", "margin", f"at +{100 * (ROBUST_LOAD - 1):.0f} % load (ms)",
            "simulations"]
    body = []
    for row in table.iter_rows(named=True):
        body.append("<tr>" + "".join(f"<td>{_html.escape(str(v))}</td>" for v in (
            row["rank"], DISPLAY.get(row["policy"], row["policy"]),
            "never" if row["capacity"] is None else p.family.unit(row["capacity"]), row["tenant"], row["slo"],
            _ms(row["achieved_ns"]), _pct(row["margin"]), _ms(row["robust_achieved_ns"]), row["simulations"])) + "</tr>")
    return (
        "<!doctype html><html><head><meta charset='utf-8'><meta name='storqos-figures' content='1'>"
        f"<title>storqos advise: {_html.escape(p.name)}</title><script>{get_plotlyjs()}</script>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:2px 8px;"
        "border-bottom:1px solid #ddd;text-align:right}</style></head><body>"
        f"<h1>storqos advise: {_html.escape(p.name)}</h1><p>{_html.escape(a.explanation())}</p>"
        f"<p>Device: {_html.escape(p.family.describe())}. SLOs judged end to end (arrival to completion). "
        f"Capacity to within {100 * TOLERANCE:g} %; at {PROOF_FACTOR:g}× it some SLO fails.</p>"
        "<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(body) + "</table>"
        f"<div class='storqos-figure'>{fig.to_html(full_html=False, include_plotlyjs=False)}</div></body></html>"
    )


def _ms(ns: float | None) -> str:
    if ns is None:
        return "–"
    if not math.isfinite(ns):
        return "∞"
    return f"{ns / 1e6:.3g}"


def _pct(m: float | None) -> str:
    if m is None or not math.isfinite(m):
        return "–"
    return f"{100 * m:+.1f} %"


def write_outputs(a: Advice, out_dir: Path) -> dict[str, str]:
    """``advice.json``, ``advice.parquet`` (the rows) and ``report.html`` into ``out_dir``."""
    from .paths import replacing

    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"json": out_dir / "advice.json", "table": out_dir / "advice.parquet", "report": out_dir / "report.html"}
    with replacing(files["json"]) as part:
        part.write_text(json.dumps(a.summary(), indent=2) + "\n")
    with replacing(files["table"]) as part:
        a.rows().write_parquet(part)
    with replacing(files["report"]) as part:
        part.write_text(html_report(a))
    return {k: str(v) for k, v in files.items()}


__all__ = [
    "DEFAULT_POLICIES",
    "Advice",
    "DeviceFamily",
    "Evaluation",
    "PolicyAdvice",
    "Problem",
    "Slo",
    "advise",
    "evaluate",
    "load_problem",
    "parse_policies",
    "parse_slo",
    "plain_bisection",
    "policy_for",
    "problem_from_dict",
    "search",
]
