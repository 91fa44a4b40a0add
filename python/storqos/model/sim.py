"""Simulation from Python: a trace DataFrame (and/or synthetic generators and
closed-loop clients) through a policy in front of a device model, in simulated time.

The event loop is the Rust core's (``storqos_core::sim``); this module converts
columns in and DataFrames out. Every column name carries its unit.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypedDict, TypeVar, Unpack

import numpy as np
import polars as pl

from storqos import _core
from storqos.base.core_json import core_json
from storqos.base.errors import InputError, warn_input
from storqos.base.units import check_seed, parse_count, parse_duration, parse_rate, parse_size
from storqos.model import registry
from storqos.model.miser import spec_slack
from storqos.model.specs import (
    PolicyParams,
    check,
    check_keywords,
    check_reservations,
    check_tenant_lists,
    device_capacity_iops,
    device_spec,
    in_python_names,
    policy_spec,
    python_names,
    with_keywords,
)


@dataclass
class ClosedClient:
    """A closed-loop client: keeps ``outstanding`` requests in flight, thinks between a
    completion and its next request (``think``, constant or exponential).

    Durations accept units (``"10ms"``); ``on``/``off`` make a pulse workload.
    """

    tenant: int = 0
    outstanding: int = 1
    think: str | float = 0
    think_exponential: bool = False
    size: str | int = 4096
    read_fraction: float = 1.0
    span: str | int | None = None
    start: str | float = 0
    stop: str | float | None = None
    on: str | float | None = None
    off: str | float | None = None
    target: int | None = None

    def to_spec(self) -> dict[str, Any]:
        """The core's JSON form."""
        where = f"closed client of tenant {self.tenant}"
        spec: dict[str, Any] = {
            "tenant": parse_count(self.tenant, f"{where}: tenant", maximum=_core.MAX_TENANTS - 1),
            "outstanding": parse_count(self.outstanding, f"{where}: outstanding", minimum=1,
                                       maximum=_core.MAX_OUTSTANDING),
            "think_ns": parse_duration(self.think, where),
            "think_exponential": bool(self.think_exponential),
            "bytes": parse_size(self.size, where),
            "read_fraction": float(self.read_fraction),
            "span_bytes": 0 if self.span is None else parse_size(self.span, where),
            "start_ns": parse_duration(self.start, where),
        }
        if self.stop is not None:
            spec["stop_ns"] = parse_duration(self.stop, where)
        if self.on is not None:
            spec["on_ns"] = parse_duration(self.on, where)
            spec["off_ns"] = parse_duration(self.off or 0, where)
        if self.target is not None:
            spec["target"] = parse_count(self.target, f"{where}: target", maximum=254)
        return spec


@dataclass
class SimResult:
    """What a simulation returns. All times in nanoseconds unless a column says ``_s``."""

    policy: str
    device: str
    #: per-tenant summary: completed, mean/p50/p90/p95/p99/p999/max response (ns), the
    #: tenant's own span (``span_s``, first arrival to last completion) and its rate over
    #: it (``iops_active``), its completions over the whole run's span (``iops``)
    tenants: pl.DataFrame
    #: per-class summary (classes assigned by the policy), same columns
    classes: pl.DataFrame
    #: one-row summary over all requests
    total: pl.DataFrame
    #: per-window, per-tenant series: arrivals, completed, iops, mean/p95 response
    windows: pl.DataFrame
    #: scheduler gauges per window (long format: start_ns, name, value)
    gauges: pl.DataFrame
    #: response-time CDF per tenant from the histograms (response_ns, fraction)
    cdf: pl.DataFrame
    #: per-request log (only with keep_requests=True)
    requests: pl.DataFrame | None
    arrived: int
    unfinished: int
    end_ns: int
    events: int
    wall_s: float
    params: dict[str, Any] = field(default_factory=dict)
    #: requests the policy refused at arrival, by tenant (mclock ``at_limit = reject``);
    #: also the ``rejected`` column of ``tenants`` when any was
    rejected: dict[int, int] = field(default_factory=dict)

    @property
    def sim_rate(self) -> float:
        """Simulated requests per wall-clock second."""
        return self.arrived / self.wall_s if self.wall_s > 0 else float("inf")

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (units in every key)."""
        return {
            "policy": self.policy,
            "device": self.device,
            "arrived": self.arrived,
            "rejected": sum(self.rejected.values()),
            "unfinished": self.unfinished,
            "simulated_s": self.end_ns / 1e9,
            "wall_s": self.wall_s,
            "total": self.total.to_dicts()[0] if self.total.height else {},
            "tenants": self.tenants.to_dicts(),
            "classes": self.classes.to_dicts(),
        }


_EMPTY_U64 = np.zeros(0, dtype=np.uint64)


#: The trace columns the core takes: arrival_ns, tenant, size, offset, is_read, target.
_Columns = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, "np.ndarray | None"]



def gauge_frame(g: _core.GaugeSamples) -> pl.DataFrame:
    """The core's gauge samples (each name kept once, samples holding its index) as a
    long frame: ``start_ns``, ``name``, ``value``."""
    names = pl.Series("name", g.names, dtype=pl.Utf8)
    ids = pl.Series(np.asarray(g.name_id, dtype=np.uint32))
    return pl.DataFrame({"start_ns": pl.Series(g.start_ns, dtype=pl.UInt64), "name": names.gather(ids),
                         "value": pl.Series(g.value, dtype=pl.Float64)})


def window_frame(w: _core.SimWindows) -> pl.DataFrame:
    """The core's per-window, per-tenant series as a frame (one row per window and
    tenant with activity)."""
    return pl.DataFrame({"start_ns": w.start_ns, "tenant": w.tenant, "arrivals": w.arrivals, "completed": w.completed,
                         "bytes": w.bytes, "mean_ns": w.mean_ns, "p50_ns": w.p50_ns, "p95_ns": w.p95_ns,
                         "p99_ns": w.p99_ns, "max_ns": w.max_ns})

def _columns(trace: pl.DataFrame | None) -> _Columns:
    if trace is None or trace.height == 0:
        return (_EMPTY_U64, np.zeros(0, np.uint32), np.zeros(0, np.uint32), _EMPTY_U64, np.zeros(0, bool), None)
    missing = [c for c in ("arrival_ns", "size") if c not in trace.columns]
    if missing:
        raise InputError(f"trace is missing column(s) {', '.join(missing)}")
    arrival = trace["arrival_ns"].to_numpy()
    if arrival.min() < 0:
        raise InputError("trace has negative arrival times")
    n = trace.height
    tenant = trace["tenant"].cast(pl.UInt32).to_numpy() if "tenant" in trace.columns else np.zeros(n, np.uint32)
    offset = trace["offset"].cast(pl.UInt64).to_numpy() if "offset" in trace.columns else np.zeros(n, np.uint64)
    is_read = trace["is_read"].to_numpy() if "is_read" in trace.columns else np.ones(n, bool)
    target = trace["target"].cast(pl.UInt8).to_numpy() if "target" in trace.columns else None
    return (
        np.ascontiguousarray(arrival, dtype=np.uint64),
        np.ascontiguousarray(tenant, dtype=np.uint32),
        np.ascontiguousarray(trace["size"].cast(pl.UInt32).to_numpy(), dtype=np.uint32),
        np.ascontiguousarray(offset, dtype=np.uint64),
        np.ascontiguousarray(is_read, dtype=bool),
        None if target is None else np.ascontiguousarray(target, dtype=np.uint8),
    )


#: How warnings name the capacity a run was given: the flag, or an experiment file's key.
CAPACITY_NAME: ContextVar[str] = ContextVar("capacity_name", default="--capacity")
#: How warnings name the reservations a run was given: the flag, or an experiment file's key.
RESERVATIONS_NAME: ContextVar[str] = ContextVar("reservations_name", default="--reservations")
#: Whether the run's errors and warnings name :func:`simulate`'s keyword arguments
#: (``reservations=``: called from Python) or the command line's options
#: (``--reservations``: :func:`simulate_cli`).
_PYTHON_NAMES: ContextVar[bool] = ContextVar("python_names", default=True)


#: The policy a run without one gets: the registry's default.
DEFAULT_POLICY: str = registry.registry().default_policy


def _named(text: str) -> str:
    """``text`` (naming options) as the caller of the run names them."""
    return python_names(text) if _PYTHON_NAMES.get() else text


def _warn_miser_slack(pspec: dict[str, Any], dspec: dict[str, Any]) -> None:
    """Warn (the run goes on) when a Miser run has less than ΔC·δ = 1 of slack
    (:func:`storqos.model.miser.miser_slack`)."""
    short = spec_slack(pspec, dspec)
    if short is not None:
        name = _named(CAPACITY_NAME.get())
        warn_input(f"{short[0]}; give {name} ≥ {short[1]:g}", name)


def _tenant_count(trace_tenants: np.ndarray, generators: list[dict[str, Any]] | None,
                  closed: list[dict[str, Any]]) -> int:
    """Tenants of a run: one more than the highest id of the trace, generators and clients."""
    ids = [int(trace_tenants.max())] if trace_tenants.size else []
    ids += [int(g.get("tenant", 0)) for g in generators or []]
    ids += [int(c["tenant"]) for c in closed]
    return max(ids) + 1 if ids else 0


class DeviceParams(TypedDict, total=False):
    """The device model's parameters, as :func:`simulate`'s keyword arguments (a device
    kind that does not take one given it is an error, not ignored):

    - ``servers``: an array's servers k (default 1).
    - ``profile``: the disk model of ``disk`` and of a striped ``array``
      (``enterprise-10k``, ``desktop-7200``).
    - ``queue``: the disk model's queue order, ``fifo``, ``scan`` or ``sptf``.
    - ``hit_ratio``: the share of a ``tiered`` device's requests served by its fast tier.
    - ``bandwidth``: a ``constant`` server's media rate (bytes/s, or ``"200MB/s"``): a
      request of b bytes takes 1/C + b / bandwidth.
    - ``device_depth``: requests the device takes at once (``array``, ``tiered``).
    """

    servers: int | None
    profile: str | None
    queue: str | None
    hit_ratio: float | None
    bandwidth: float | str | None
    device_depth: int | None


class SimParams(PolicyParams, DeviceParams, total=False):
    """:func:`simulate`'s policy and device keyword arguments: those of
    :class:`storqos.model.specs.PolicyParams` and of :class:`DeviceParams`."""


@with_keywords(PolicyParams, DeviceParams)
def simulate(
    trace: pl.DataFrame | None = None,
    policy: str | dict[str, Any] = DEFAULT_POLICY,
    device: str | dict[str, Any] = "constant",
    *,
    capacity: str | float | None = None,
    generators: list[dict[str, Any]] | None = None,
    closed: list[ClosedClient] | None = None,
    seed: int = 1,
    window: str | float = "1s",
    keep_requests: bool = False,
    until: str | float | None = None,
    **params: Unpack[SimParams],
) -> SimResult:
    """Simulate ``trace`` through ``policy`` in front of ``device``.

    ``policy``/``device`` are names (``storqos.POLICIES``, their aliases
    ``storqos.model.specs.POLICY_ALIASES``, and ``storqos.DEVICES``) or ready spec dicts. The
    policy's parameters are keyword arguments, those of
    :class:`storqos.model.specs.PolicyParams` (``weights=[2, 1]``, ``depth=4``,
    ``deadlines=["10ms", "50ms"]``, ``cmin="400"``, ``reservations=[300, 0]``,
    ``limits=[None, "1k"]``, ``slo="web:160iops@400ms"``...; :data:`storqos.model.specs.POLICY_PARAMS`
    says which each policy takes), the device's those of :class:`DeviceParams`
    (``servers=4``, ``hit_ratio=0.9``...). A keyword neither knows is a
    :class:`TypeError` suggesting the nearest; per-tenant lists must have one entry per
    tenant. ``capacity`` accepts units (``"1.5k"``). ``generators`` streams synthetic
    arrivals (``storqos.model.synth`` specs) without materialising them. Errors
    (:class:`storqos.InputError`, a :class:`ValueError`) and warnings name the keyword
    argument at fault (``reservations=``). Returns a :class:`SimResult`.

    >>> simulate(None, "mclock", capacity=500, reservation=[100])
    Traceback (most recent call last):
    ...
    storqos.base.errors.UnknownKeyword: simulate() got an unexpected keyword argument 'reservation'; did you mean 'reservations'?
    """
    check_keywords("simulate", params, PolicyParams, DeviceParams)
    try:
        return _simulate(trace, policy, device, capacity=capacity, generators=generators, closed=closed, seed=seed,
                         window=window, keep_requests=keep_requests, until=until, params=dict(params))
    except InputError as e:
        if not _PYTHON_NAMES.get():
            raise
        raise in_python_names(e) from None


def in_callers_names(e: InputError) -> InputError:
    """``e`` as the caller of a run names its settings: the options on the command line
    (:func:`naming_options`), the keyword arguments from Python."""
    return e if not _PYTHON_NAMES.get() else in_python_names(e)


_P = ParamSpec("_P")
_R = TypeVar("_R")


def naming_options(f: Callable[_P, _R]) -> Callable[_P, _R]:
    """``f`` with its errors and warnings naming the command line's options."""
    @functools.wraps(f)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        token = _PYTHON_NAMES.set(False)
        try:
            return f(*args, **kwargs)
        finally:
            _PYTHON_NAMES.reset(token)

    run.__doc__ = (":func:`simulate` for ``storqos simulate``: its errors and warnings name the command line's "
                   "options (``--reservations``) instead of its keyword arguments.")
    return run


#: :func:`simulate` for ``storqos simulate``: errors and warnings name the options.
simulate_cli = naming_options(simulate)


@dataclass
class PreparedRun:
    """A run's inputs, checked and in the core's form: the specs and their names, the
    window and end, the seed, the trace's columns, the clients' and generators' specs."""

    pspec: dict[str, Any]
    dspec: dict[str, Any]
    pname: str
    dname: str
    window_ns: int
    until_ns: int | None
    seed: int
    cols: _Columns
    closed_specs: list[dict[str, Any]]
    generators: list[dict[str, Any]]


def prepare_run(trace: pl.DataFrame | None, policy: str | dict[str, Any], device: str | dict[str, Any], *,
                capacity: str | float | None, generators: list[dict[str, Any]] | None,
                closed: list[ClosedClient] | None, seed: int, window: str | float, until: str | float | None,
                params: dict[str, Any], copies: int = 1) -> PreparedRun:
    """Check a run's inputs and build its specs (errors naming the options). ``copies``:
    how many copies of the device serve the tenants (a cluster's servers), for the check
    that the reservations fit the capacity."""
    dkeys = DeviceParams.__annotations__.keys()
    pparams = {k: v for k, v in params.items() if k not in dkeys and v is not None}
    if capacity is not None:
        pparams.setdefault("total_capacity", capacity)
    pspec = policy_spec(policy, **pparams)
    dparams = {k: v for k, v in params.items() if k in dkeys and k != "device_depth"}
    if "device_depth" in params:
        dparams["depth"] = params["device_depth"]
    dspec = device_spec(device, capacity=capacity, **dparams)
    pname, dname = check(pspec, dspec)
    _warn_miser_slack(pspec, dspec)
    window_ns = parse_duration(window, "--window")
    if window_ns <= 0:
        raise InputError("summary window must be > 0", "--window")
    until_ns = None if until is None else parse_duration(until, "--until")
    seed = check_seed(seed)
    cols = _columns(trace)
    closed_specs = [c.to_spec() for c in closed or []]
    check_tenant_lists(pspec, _tenant_count(cols[1], generators, closed_specs))
    # A device given as a spec (a device profile's) has its capacity beside it.
    served = device_capacity_iops(dspec) if not isinstance(device, dict) or capacity is None else \
        parse_rate(capacity, "--capacity")
    check_reservations(pspec, None if served is None else served * copies, reservations=_named(RESERVATIONS_NAME.get()),
                       capacity=_named(CAPACITY_NAME.get()))
    return PreparedRun(pspec, dspec, pname, dname, window_ns, until_ns, seed, cols, closed_specs, generators or [])


def _simulate(trace: pl.DataFrame | None, policy: str | dict[str, Any], device: str | dict[str, Any], *,
              capacity: str | float | None, generators: list[dict[str, Any]] | None, closed: list[ClosedClient] | None,
              seed: int, window: str | float, keep_requests: bool, until: str | float | None,
              params: dict[str, Any]) -> SimResult:
    """:func:`simulate`'s run, its errors naming the options."""
    run = prepare_run(trace, policy, device, capacity=capacity, generators=generators, closed=closed, seed=seed,
                      window=window, until=until, params=params)
    t0 = time.perf_counter()
    arrival, tenant, size, offset, is_read, target = run.cols
    out = _core.simulate(
        arrival, tenant, size, offset, is_read, target,
        core_json(run.pspec, "policy"),
        core_json(run.dspec, "device"),
        closed_json=core_json(run.closed_specs, "closed"),
        generators_json=core_json(run.generators, "generator"),
        seed=run.seed,
        window_ns=run.window_ns,
        keep_requests=keep_requests,
        until_ns=run.until_ns,
    )
    wall = time.perf_counter() - t0
    return _result(out, run.pname, run.dname, wall, {"policy": run.pspec, "device": run.dspec, "seed": run.seed})


def group_frame(g: _core.GroupSummaries, key: str | None, run_span_s: float) -> pl.DataFrame:
    """Per-group summaries (the group's id in column ``key``; none for the whole run)
    with two rates: ``iops_active``, completions over the group's
    own span (``span_s``: its first arrival to its last completion, so a backlog served
    after its last arrival counts as time it took), the rate a tenant had while it ran;
    and ``iops``, completions over the whole run's span, its share of the run (beside a
    longer tenant, diluted by the time it was not there)."""
    cols = {"completed": g.completed, "bytes": g.bytes, "mean_ns": g.mean_ns, "mean_wait_ns": g.mean_wait_ns,
            "p50_ns": g.p50_ns, "p90_ns": g.p90_ns, "p95_ns": g.p95_ns, "p99_ns": g.p99_ns, "p999_ns": g.p999_ns,
            "max_ns": g.max_ns, "span_s": g.span_s}
    df = pl.DataFrame({key: g.id, **cols} if key is not None else cols)
    if not df.height:
        return df
    own = pl.when(pl.col("span_s") > 0).then(pl.col("completed") / pl.col("span_s")).otherwise(0.0)
    return df.with_columns((pl.col("completed") / run_span_s if run_span_s > 0 else pl.lit(0.0)).alias("iops"),
                           own.alias("iops_active"))


def _requests(r: _core.RequestRecords) -> pl.DataFrame:
    """The core's per-request log as a frame, with each request's response and wait."""
    return pl.DataFrame({"id": r.id, "tenant": r.tenant, "class": r.class_, "arrival_ns": r.arrival_ns,
                         "dispatch_ns": r.dispatch_ns, "finish_ns": r.finish_ns, "target": r.target, "size": r.size,
                         "is_read": r.is_read}).with_columns(
        (pl.col("finish_ns") - pl.col("arrival_ns")).alias("response_ns"),
        (pl.col("dispatch_ns") - pl.col("arrival_ns")).alias("wait_ns"),
    )


def _result(out: _core.SimOutput, pname: str, dname: str, wall: float, params: dict[str, Any]) -> SimResult:
    spans = out.total.span_s
    run_span = float(spans[0]) if len(spans) else 0.0  # first arrival to last completion
    windows = window_frame(out.windows)
    if windows.height:
        # IOPS in the window = completions / window length.
        span = (windows["start_ns"].unique().sort().diff().drop_nulls().min() or 1e9) if windows.height > 1 else 1e9
        windows = windows.with_columns((pl.col("completed") * 1e9 / span).alias("iops"))
    requests = None if out.requests is None else _requests(out.requests)
    rejected = {t: int(n) for t, n in enumerate(out.rejected) if n}
    tenants = group_frame(out.tenants, "tenant", run_span)
    if rejected and tenants.height:
        tenants = tenants.with_columns(
            pl.col("tenant").map_elements(lambda t: rejected.get(int(t), 0), return_dtype=pl.UInt64).alias("rejected"))
    return SimResult(
        policy=pname,
        device=dname,
        rejected=rejected,
        tenants=tenants,
        classes=group_frame(out.classes, "class", run_span),
        total=group_frame(out.total, None, run_span),
        windows=windows,
        gauges=gauge_frame(out.gauges),
        cdf=pl.DataFrame({"tenant": out.cdf.tenant, "response_ns": out.cdf.response_ns, "fraction": out.cdf.fraction}),
        requests=requests,
        arrived=out.arrived,
        unfinished=out.unfinished,
        end_ns=out.end_ns,
        events=out.events,
        wall_s=wall,
        params=params,
    )
