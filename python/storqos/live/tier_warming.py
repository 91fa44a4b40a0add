"""Tier warming live (seed 002, Xue et al., ICAC'14, §3.3 Fig. 8 and §4.2): a day
of the diurnal workload replayed through ``storqos serve`` with time
compressed, a background scrub in the idle periods the day model predicts, and the
fast tier (the gateway's tiered export, its LRU) warmed with the users' working set
before their predicted return. Its simulated twin runs the very same requests.

**No policy logic here.** Every decision is the simulator's code, called once:

1. *plan* — :func:`storqos.planning.warming.policies.compare` (the per-minute planner of
   ``storqos warm`` and of Figs. 14–15) decides, for user-only / feedback / prediction
   / oracle, in which minutes of the evaluated day system work runs, from the day model
   (:class:`~storqos.planning.warming.daymodel.DayModel`, trained on the days before) and the
   warm-up time T_fast;
2. *streams* — :func:`storqos.planning.warming.multiday.build_streams` turns each schedule into
   the three tenants' requests (users, system work only in its minutes, the warm-up
   pass from every stop of system work), as for the request-level figures. Two
   adaptations, applied to both runs: the user trace is thinned to
   :attr:`DayReplay.user_fraction` (a gateway on a loopback serves a few thousand
   requests per second, not a day of them in seconds), and system work is a **scrub**:
   a sequential 4 KiB pass over the volume beyond the users' set, wrapping (seed 002's
   "much larger" working set, read end to end);
3. *serve* — the same :class:`Schedule` (one data frame per policy, arrival times
   divided by the compression) is replayed live by :func:`storqos.live.replay.replay`
   (open loop, one NBD connection per tenant) against a gateway started from the
   config file, and simulated by :func:`storqos.model.sim.simulate` with the config file's
   policy spec in front of the simulator's LRU cache device built from the same file
   (``[tiers]`` capacities, the fast file's size as C, ``depth``).

**The gateway side.** The config file's tiered export (``users`` by default) holds the
users' data; the scrub and the warm-up read the same volume through exports that
``shares`` its file and block map, each on behalf of its own tenant, so the policy
(e.g. WF2Q+ with a small weight) sees them as background classes, and their misses go
through the same LRU that evicts and refills the users' blocks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from storqos.base.errors import InputError
from storqos.planning.warming.daymodel import DayModel
from storqos.planning.warming.fasttier import FastTier
from storqos.planning.warming.intensity import DAY_MIN, per_minute
from storqos.planning.warming.multiday import build_streams, user_arrivals
from storqos.planning.warming.policies import POLICIES, compare
from storqos.planning.warming.reqlevel import BLOCK, SYSTEM, SYSTEM_SPAN_X, USER, WARM, CacheSetup
from storqos.planning.warming.workload import bimodal_days

#: Simulated nanoseconds per day.
DAY_NS = DAY_MIN * 60_000_000_000
#: The stream's tenants, by role (the ids of :mod:`storqos.planning.warming.reqlevel`).
ROLES = {"users": USER, "scrub": SYSTEM, "warm": WARM}
#: The twin's fast tier when the config does not emulate one: a 4 KiB read of the fast
#: file from the page cache through the gateway's loop (~20 µs of service). An emulated
#: tier's reply waits for the loop's millisecond timer; an un-emulated fast tier keeps
#: hits well apart from misses live.
UNEMULATED_FAST_IOPS = 50_000.0
#: Days the planner runs before the evaluated one (not replayed).
LEAD_DAYS = 1


@dataclass(frozen=True)
class DayReplay:
    """One experiment description, read by the live run and by its twin."""

    #: gateway config file (``storqos serve --config``): the tiered export, the exports
    #: sharing it, ``[tiers]``, the policy
    config: Path
    #: wall-clock seconds per simulated day (the compression is 86,400 / day_s)
    day_s: float = 4.0
    #: warm-up time T_fast (minutes of the day): C = F·T_fast sets the warm-up speed F
    t_fast_min: float = 240.0
    #: fraction of the user trace replayed (thinned at random, the same for both runs)
    user_fraction: float = 1 / 80
    #: days of the synthetic workload used for training (day 0 = Monday)
    train_days: int = 14
    #: the evaluated day (after the training days and the planner's lead-in day)
    day: int = 16
    #: seed of the workload, the thinning and the streams
    seed: int = 0
    #: export of each role (``users`` must be tiered; the others share it)
    exports: dict[str, str] = field(default_factory=lambda: {"users": "data", "scrub": "scrub", "warm": "warm"})

    def __post_init__(self) -> None:
        if not 0 < self.day_s <= 3600:
            raise InputError(f"must be in (0, 3600] seconds, got {self.day_s}", "day_s")
        if not 0 < self.t_fast_min < DAY_MIN:
            raise InputError(f"must be in (0, 1440) minutes, got {self.t_fast_min}", "t_fast_min")
        if not 0 < self.user_fraction <= 1:
            raise InputError(f"must be in (0, 1], got {self.user_fraction}", "user_fraction")
        if not 2 <= self.train_days <= self.day - LEAD_DAYS:
            raise InputError(f"need 2 <= train_days <= day - {LEAD_DAYS}, got {self.train_days} and {self.day}",
                             "train_days")
        if set(self.exports) != set(ROLES):
            raise InputError(f"give the exports of {', '.join(ROLES)}, got {', '.join(self.exports)}", "exports")

    @property
    def compression(self) -> float:
        """Simulated time per wall-clock time."""
        return DAY_NS / 1e9 / self.day_s


@dataclass
class Gateway:
    """What the twin and the driver read from the config file."""

    config: dict[str, Any]  # the gateway's JSON configuration (``merged``)
    tenants: dict[str, int]  # role -> gateway tenant id
    capacity_bytes: int  # C: the fast file's size, whole blocks
    volume_bytes: int  # the users' export size

    def device(self) -> dict[str, Any]:
        """The simulator's LRU cache device equal to the gateway's tiered export: each
        tier a constant-rate server of its ``[tiers]`` capacity (the gateway's emulation,
        one server each), C = the fast file, ``depth`` slots for both tiers. Warm-up reads
        are plain reads (the gateway copies in what a read of ≤ 256 KiB misses)."""
        tiers = self.config.get("tiers") or {}
        dev: dict[str, Any] = {"kind": "cache", "capacity_bytes": self.capacity_bytes, "block_bytes": BLOCK,
                               "depth": int(self.config.get("depth", 1))}
        for t in ("fast", "slow"):
            d = tiers.get(t) or {}
            if int(d.get("depth", 1)) != 1:
                raise InputError(f"the twin models one server per tier: give [tiers.{t}] depth = 1", "tiers")
            if d.get("iops") is None and t == "slow":
                raise InputError("the twin simulates an emulated slow tier: give [tiers.slow] iops", "tiers")
            dev[t] = {"kind": "constant", "iops": float(d.get("iops") or UNEMULATED_FAST_IOPS)}
        return dev


def read_gateway(desc: DayReplay) -> Gateway:
    """The config file, checked as ``storqos serve --config`` checks it, and the roles'
    tenants, C and the volume size."""
    from storqos.live.gateway_config import load, merged

    cfg = merged(load(desc.config))
    by_name = {str(e["name"]): e for e in cfg["exports"]}
    tenants = {}
    for role, name in desc.exports.items():
        e = by_name.get(name)
        if e is None:
            raise InputError(f"{role}: no [[export]] named {name!r} (known: {', '.join(by_name)})", str(desc.config))
        tenants[role] = int(e["tenant"])
    if len(set(tenants.values())) != len(tenants):
        raise InputError("users, scrub and warm must be tenants of their own", str(desc.config))
    users = by_name[desc.exports["users"]]
    tier = users.get("tier")
    if tier is None or not tier.get("lru", True) or tier.get("pin", 0) or int(tier.get("block_bytes", BLOCK)) != BLOCK:
        raise InputError(f"export {users['name']!r} needs an [export.tier] with lru, no pin and 4KiB blocks",
                         str(desc.config))
    for role in ("scrub", "warm"):
        if by_name[desc.exports[role]].get("shares") != users["name"]:
            raise InputError(f"export {desc.exports[role]!r} ({role}) must share {users['name']!r}'s tier "
                             f"(shares = {users['name']!r})", str(desc.config))
    cap = Path(tier["fast"]).stat().st_size // BLOCK * BLOCK
    vol = Path(users["path"]).stat().st_size
    need = cap * (1 + SYSTEM_SPAN_X)
    if cap < 4 * 16384 or vol < need:
        raise InputError(f"the fast file must hold at least 64 KiB and the volume {1 + SYSTEM_SPAN_X} times it "
                         f"({need:,} B), got {cap:,} B and {vol:,} B", str(desc.config))
    return Gateway(config=cfg, tenants=tenants, capacity_bytes=int(cap), volume_bytes=int(vol))


@dataclass
class Schedule:
    """Every policy's schedule of the evaluated day and the requests it makes (what the
    live run and the twin both replay)."""

    system_on: dict[str, np.ndarray]  # policy -> system work per minute of the day
    streams: dict[str, pl.DataFrame]  # policy -> requests (wall-clock ns, gateway tenants)
    capacity_bytes: int
    warm_rate_bps: float  # F (bytes per simulated second)

    def minutes_on(self) -> dict[str, int]:
        """Minutes of system work per policy."""
        return {p: int(on.sum()) for p, on in self.system_on.items()}


def schedule(desc: DayReplay, gw: Gateway, policies: tuple[str, ...] = POLICIES) -> Schedule:
    """Plan the evaluated day with the warming package's planner and turn each plan
    into its requests (module notes, steps 1 and 2)."""
    trace, _ = bimodal_days(desc.day + 1, seed=desc.seed)
    intensity = per_minute(trace)
    model = DayModel.fit(intensity, range(desc.train_days))
    days = range(desc.day, desc.day + 1)
    t_fast_s = 60.0 * desc.t_fast_min
    # The planner runs from the day before (LEAD_DAYS): at the evaluated day's midnight
    # it is inside the Low period that began the evening before, as in a multi-day run
    # (planned from midnight, that period would seem to start at 00:00).
    lead = range(desc.day - LEAD_DAYS, desc.day + 1)
    plans = compare(intensity, model, FastTier.from_warmup(t_fast_s), lead, None, policies)
    system_on = {p: plan.system_on[LEAD_DAYS * DAY_MIN:] for p, plan in plans.items()}
    rng = np.random.default_rng(desc.seed)
    users = user_arrivals(trace, days)
    users = users[rng.random(len(users)) < desc.user_fraction]
    setup = CacheSetup(capacity_bytes=gw.capacity_bytes, warm_rate_bps=gw.capacity_bytes / t_fast_s)
    ids = {USER: gw.tenants["users"], SYSTEM: gw.tenants["scrub"], WARM: gw.tenants["warm"]}
    streams = {}
    for p, on in system_on.items():
        s = build_streams(setup, users, on, seed=desc.seed)
        s = _scrub(s, gw.capacity_bytes).with_columns(
            (pl.col("arrival_ns").cast(pl.Float64) / desc.compression).cast(pl.Int64).alias("arrival_ns"),
            pl.col("tenant").replace_strict(ids, return_dtype=pl.UInt32),
            pl.lit(True).alias("is_read"),
        )
        streams[p] = s
    return Schedule(system_on=system_on, streams=streams,
                    capacity_bytes=gw.capacity_bytes, warm_rate_bps=setup.warm_rate_bps)


def _scrub(stream: pl.DataFrame, capacity: int) -> pl.DataFrame:
    """System work as a scrub: its requests, in order, read the blocks after the users'
    set one after another, wrapping over :data:`SYSTEM_SPAN_X` times the tier."""
    span = capacity // BLOCK * SYSTEM_SPAN_X
    k = (pl.col("tenant") == SYSTEM).cast(pl.Int64).cum_sum() - 1
    return stream.with_columns(
        pl.when(pl.col("tenant") == SYSTEM)
        .then((pl.lit(capacity, pl.Int64) + (k % span) * BLOCK).cast(pl.UInt64))
        .otherwise(pl.col("offset")).alias("offset"))


@dataclass
class DayResult:
    """One policy's day, live or simulated."""

    policy: str
    run: str  # "live" or "simulated"
    user_requests: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    scrub_requests: int
    warm_requests: int
    system_minutes: int
    late_fraction: float = 0.0  # live: requests issued > 1 ms after their time
    wall_s: float = 0.0

    def row(self) -> dict[str, Any]:
        """Table row (units in the keys)."""
        return {"policy": self.policy, "run": self.run, "user_requests": self.user_requests, "p50_ms": self.p50_ms,
                "p90_ms": self.p90_ms, "p99_ms": self.p99_ms, "scrub_requests": self.scrub_requests,
                "warm_requests": self.warm_requests, "system_minutes": self.system_minutes,
                "late_fraction": self.late_fraction, "wall_s": self.wall_s}


def _result(policy: str, run: str, log: pl.DataFrame, gw: Gateway, minutes: int, **kw: Any) -> DayResult:
    u = np.sort(log.filter(pl.col("tenant") == gw.tenants["users"])["response_ns"].to_numpy()) / 1e6
    q = np.percentile(u, [50, 90, 99]) if len(u) else np.zeros(3)
    return DayResult(policy=policy, run=run, user_requests=len(u), p50_ms=float(q[0]), p90_ms=float(q[1]),
                     p99_ms=float(q[2]), scrub_requests=int((log["tenant"] == gw.tenants["scrub"]).sum()),
                     warm_requests=int((log["tenant"] == gw.tenants["warm"]).sum()), system_minutes=minutes, **kw)


def simulated(gw: Gateway, sched: Schedule, *, seed: int = 1) -> dict[str, DayResult]:
    """The twin: each policy's requests through the config's policy spec in front of the
    cache device equal to the gateway's tiered export (:meth:`Gateway.device`)."""
    from storqos.model.sim import simulate

    out = {}
    for p, stream in sched.streams.items():
        t0 = time.perf_counter()
        res = simulate(stream, gw.config["policy"], gw.device(), seed=seed, keep_requests=True)
        assert res.requests is not None
        out[p] = _result(p, "simulated", res.requests, gw, int(sched.system_on[p].sum()),
                         wall_s=time.perf_counter() - t0)
    return out


def live(gw: Gateway, sched: Schedule, desc: DayReplay) -> dict[str, DayResult]:
    """Each policy's requests replayed open loop against a fresh gateway (the tier map
    is rebuilt at start: the LRU starts empty, and the stream's first pass warms it)."""
    from storqos.live.gateway_process import GatewayProcess
    from storqos.live.replay import replay

    cfg = dict(gw.config, listen="127.0.0.1:0")
    out = {}
    for p, stream in sched.streams.items():
        t0 = time.perf_counter()
        with GatewayProcess(cfg) as g:
            uris = {gw.tenants[r]: g.uri(desc.exports[r]) for r in ROLES}
            res = replay(stream, uris, warmup=False)
        if res.errors:
            raise InputError(f"{p}: the gateway answered {sum(res.errors.values())} request(s) with an error: "
                             f"{res.first_error}", "live")
        late = res.late / max(res.issue_error_ns.size, 1)
        out[p] = _result(p, "live", res.requests, gw, int(sched.system_on[p].sum()), late_fraction=late,
                         wall_s=time.perf_counter() - t0)
    return out


def p90_order(results: dict[str, DayResult], tie: float = 0.0) -> list[list[str]]:
    """The policies by user p90, lowest first; policies within ``tie`` (relative) of the
    previous group's first are grouped together (a tie)."""
    ranked = sorted(results.values(), key=lambda r: r.p90_ms)
    groups: list[list[str]] = []
    base = 0.0
    for r in ranked:
        if groups and r.p90_ms <= base * (1 + tie):
            groups[-1].append(r.policy)
        else:
            groups.append([r.policy])
            base = r.p90_ms
    return groups


def table(results: list[DayResult]) -> pl.DataFrame:
    """Rows of :meth:`DayResult.row`."""
    return pl.DataFrame([r.row() for r in results])


__all__ = ["DAY_NS", "ROLES", "DayReplay", "DayResult", "Gateway", "Schedule", "live", "p90_order", "read_gateway",
           "schedule", "simulated", "table"]
