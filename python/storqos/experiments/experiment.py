"""Experiment files: one TOML file describes the workload (traces, synthetic and
closed-loop tenants, their SLOs), the device, the policies to compare and a parameter
grid; :func:`run_experiment` runs every (policy × grid point) simulation on a local
process pool or a Dask cluster (:mod:`storqos.experiments.sweep`) and writes Parquet tables, a JSON
summary and one self-contained HTML report (:mod:`storqos.experiments.report`).

A complete file (paths are relative to the file; ``bundled:websearch`` is the excerpt
shipped with the package)::

    name = "compare"
    seed = 1                 # the run seed (devices, closed clients); generators derive theirs
    duration = "30s"         # keep trace requests before this time; generators and closed clients stop here
    window = "1s"            # time-series window
    percentile = 95          # SLO percentile

    [device]                 # storqos.model.specs.device_spec: kind + capacity, servers, ...
    kind = "constant"
    capacity = "1.2k"

    [[trace]]                # a trace file; `split` makes one tenant per key
    path = "shared:traces/msr-cambridge/hm_0_excerpt.csv"   # or a path relative to this file
    fallback = "bundled:websearch"   # used when `path` does not exist
    split = "device"                  # device | host | process | op | a column
    max_requests = 20000              # read only the first requests of the file
    rate_scale = 1.0                  # 2.0 = twice the request rate
    weight = 1                        # QoS parameters for every tenant of the trace

    [[tenant]]               # one tenant: exactly one of trace / generator / closed
    name = "batch"
    generator = { kind = "onoff", rate_on = "1.2k", rate_off = 0, mean_on = "200ms", mean_off = "2.8s" }
    # (a [[tenant]] trace may instead give a generator table as its fallback)
    weight = 1
    reservation = "100"      # IOPS (mclock; sarc+avatar's R_i)
    limit = "600"            # IOPS (mclock)
    slo = "20ms"             # latency target (reported; sarc+avatar's D_i)

    [[tenant]]
    name = "backup"
    closed = { outstanding = 8, size = "64KiB" }

    [[policy]]               # storqos.model.specs.policy_spec: kind + parameters
    kind = "mclock"          # weights / reservations / limits default to the tenants'
    [[policy]]
    kind = "wf2q"
    [[policy]]
    kind = "fcfs"

    [grid]                   # dotted keys → lists; every combination is a grid point
    "device.capacity" = ["1k", "1.2k", "1.5k"]
    "tenant.batch.generator.rate_on" = ["800", "1.6k"]

Grid keys name a place in the file: ``seed``, ``duration``, ``device.KEY``, ``cluster.KEY``,
``tenant.NAME.KEY[.SUBKEY]``, ``trace.NAME.KEY``, ``policy.NAME.KEY``. Errors are one
line naming the file and the key (``compare.toml: [[tenant]] 2 (batch): unknown key
'rate'``).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel

from storqos.base.errors import InputError, warn_input
from storqos.base.toml_schema import entry_where, line_of, one_or_many, read_toml
from storqos.base.units import parse_duration
from storqos.experiments.experiment_schema import ExperimentFile, Policy, Qos, TraceReading, check_grid, validate
from storqos.model.specs import check, check_tenant_lists, device_spec, param_of_flag, policy_for_tenants

#: Seed spacing between tenants' generators (distinct, reproducible streams).
GENERATOR_SEED_STRIDE = 7919


# ----------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Tenant:
    """One tenant of an experiment (index = position)."""

    name: str
    source: str  # "trace", "generator" or "closed"
    weight: float | None = None
    reservation: float | None = None
    limit: float | None = None
    slo_ns: int | None = None


@dataclass(frozen=True)
class Run:
    """One simulation: a policy at a grid point. Everything a worker needs but the trace."""

    index: int
    label: str
    policy_name: str
    point: dict[str, Any]
    policy: dict[str, Any]
    device: dict[str, Any]
    trace_key: str | None
    generators: list[dict[str, Any]]
    closed: list[dict[str, Any]]
    seed: int
    window_ns: int
    tenants: list[Tenant]
    percentile: float
    #: the [cluster] table's fields (storqos.model.cluster.Cluster), or None for one server
    cluster: dict[str, Any] | None = None


@dataclass
class Experiment:
    """A parsed experiment: its runs and the trace frames they share (by key)."""

    name: str
    description: str
    path: Path | None
    runs: list[Run]
    traces: dict[str, pl.DataFrame]
    grid: dict[str, list[Any]]
    policies: list[str]

    @property
    def points(self) -> list[dict[str, Any]]:
        """The distinct grid points, in run order (one pass: a list search per run made a
        grid of 90,000 points take hours)."""
        seen: dict[str, dict[str, Any]] = {}
        for r in self.runs:
            seen.setdefault(json.dumps(r.point, sort_keys=True, default=str), r.point)
        return list(seen.values())


@dataclass
class RunOutput:
    """What one run returns (small: summaries, windows, CDFs)."""

    index: int
    label: str
    policy_name: str
    policy_display: str
    device_display: str
    point: dict[str, Any]
    tenants: pl.DataFrame
    windows: pl.DataFrame
    cdf: pl.DataFrame
    gauges: pl.DataFrame
    arrived: int
    unfinished: int
    end_ns: int
    wall_s: float


@dataclass
class ExperimentResult:
    """All runs of an experiment, as long tables (one row per run × tenant …)."""

    experiment: Experiment
    outputs: list[RunOutput]
    backend: str
    wall_s: float
    files: dict[str, str] = field(default_factory=dict)

    def _tag(self, o: RunOutput, df: pl.DataFrame) -> pl.DataFrame:
        cols = [pl.lit(o.index, pl.UInt32).alias("run"), pl.lit(o.policy_name).alias("policy")]
        cols += [pl.lit(_display(v)).alias(k) for k, v in o.point.items()]
        return df.with_columns(cols).select(["run", "policy", *o.point, *df.columns])

    @property
    def tenants(self) -> pl.DataFrame:
        """Per run and tenant: completions, IOPS, response-time percentiles (ns), SLO."""
        return pl.concat([self._tag(o, o.tenants) for o in self.outputs], how="diagonal_relaxed")

    @property
    def windows(self) -> pl.DataFrame:
        """Per run, window and tenant: arrivals, completions, IOPS, percentiles (ns)."""
        return pl.concat([self._tag(o, o.windows) for o in self.outputs], how="diagonal_relaxed")

    @property
    def cdf(self) -> pl.DataFrame:
        """Per run and tenant: the response-time CDF (response_ns, fraction)."""
        return pl.concat([self._tag(o, o.cdf) for o in self.outputs], how="diagonal_relaxed")

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary: the experiment, its grid, and every run's per-tenant rows."""
        exp = self.experiment
        return {
            "experiment": exp.name,
            "description": exp.description,
            "file": str(exp.path) if exp.path else None,
            "backend": self.backend,
            "wall_s": self.wall_s,
            "policies": exp.policies,
            "grid": {k: [_display(v) for v in vs] for k, vs in exp.grid.items()},
            "tenants": [t.name for t in exp.runs[0].tenants] if exp.runs else [],
            "runs": [
                {
                    "run": o.index,
                    "label": o.label,
                    "policy": o.policy_name,
                    "policy_display": o.policy_display,
                    "device": o.device_display,
                    "point": {k: _display(v) for k, v in o.point.items()},
                    "arrived": o.arrived,
                    "unfinished": o.unfinished,
                    "simulated_s": o.end_ns / 1e9,
                    "wall_s": o.wall_s,
                    "tenants": o.tenants.to_dicts(),
                }
                for o in self.outputs
            ],
            "files": self.files,
        }


def _display(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


# ----------------------------------------------------------------------------- parsing


def load(path: str | Path) -> Experiment:
    """Read and validate an experiment file (InputError naming the file and key)."""
    path = Path(path)
    text, raw = read_toml(path)
    return from_dict(raw, base=path.parent, where=path.name, path=path, text=text)


def from_dict(raw: dict[str, Any], *, base: Path = Path("."), where: str = "experiment", path: Path | None = None,
              text: str | None = None) -> Experiment:
    """Validate an experiment given as a dict (the parsed TOML; its ``text`` puts line
    numbers in the errors) and expand its grid."""
    file = validate(raw, where, text)
    grid = file.grid
    check_grid(grid, where)
    # Check every grid key names something before expanding.
    for k in grid:
        _set_path(copy.deepcopy(raw), k, grid[k][0], file, where)
    runs: list[Run] = []
    traces: dict[str, pl.DataFrame] = {}
    keys = list(grid)
    if keys:  # the values the grid replaces are never run, but a wrong one is still wrong
        written = copy.deepcopy({k: v for k, v in raw.items() if k != "grid"})
        for k in keys:  # what the file leaves to the grid, the grid's first value gives
            _set_path(written, k, grid[k][0], file, where, keep=True)
        _point_runs(validate(written, where), {}, base, where, traces, 0, text)
    for values in itertools.product(*(grid[k] for k in keys)) if keys else [()]:
        point = dict(zip(keys, values, strict=True))
        cfg = copy.deepcopy({k: v for k, v in raw.items() if k != "grid"})  # a point is not a grid
        for k, v in point.items():
            _set_path(cfg, k, v, file, where)
        runs.extend(_point_runs(validate(cfg, where) if point else file, point, base, where, traces, len(runs), text))
    name = file.name if file.name is not None else (path.stem if path else "experiment")
    return Experiment(name=name, description=file.description, path=path, runs=runs, traces=traces,
                      grid=grid, policies=[p.label for p in file.policy])


def _set_path(cfg: dict[str, Any], key: str, value: Any, file: ExperimentFile, where: str, keep: bool = False) -> None:
    """Set ``tenant.NAME.KEY`` / ``policy.NAME.KEY`` / ``device.KEY`` / ``seed`` in ``cfg``
    (with ``keep``, only where ``cfg`` does not set it already)."""
    parts = key.split(".")
    bad = InputError(
        f"[grid] key {key!r} names nothing (expected seed, duration, window, device.KEY, cluster.KEY, "
        "tenant.NAME.KEY, trace.NAME.KEY or policy.NAME.KEY)", where)
    if len(parts) == 1:
        if parts[0] not in ("seed", "duration", "window", "percentile"):
            raise bad
        if not (keep and parts[0] in cfg):
            cfg[parts[0]] = value
        return
    head, rest = parts[0], parts[1:]
    if head in ("device", "cluster"):
        target = cfg.setdefault(head, {})
    elif head in ("trace", "tenant", "policy"):
        if len(rest) < 2:
            raise bad
        names = {"trace": [t.label for t in file.trace], "tenant": [t.name for t in file.tenant],
                 "policy": [p.label for p in file.policy]}[head]
        if rest[0] not in names:
            raise InputError(f"[grid] key {key!r}: no [[{head}]] named {rest[0]!r} (known: {', '.join(names)})", where)
        cfg[head] = one_or_many(cfg[head])
        target = cfg[head][names.index(rest[0])]
        rest = rest[1:]
    else:
        raise bad
    for p in rest[:-1]:
        nxt = target.setdefault(p, {})
        if not isinstance(nxt, dict):
            raise InputError(f"[grid] key {key!r}: {p!r} is not a table", where)
        target = nxt
    if not (keep and rest[-1] in target):
        target[rest[-1]] = value


def _resolve_path(p: str, base: Path) -> Path:
    """``bundled:NAME`` (a trace shipped in the package), ``shared:PATH`` (inside the
    shared folder: $STORQOS_SHARED, else ../shared), else a path relative to the file."""
    if p.startswith("bundled:"):
        from storqos.traces import bundled

        return bundled(p.split(":", 1)[1])
    if p.startswith("shared:"):
        from storqos.base.shared import shared_dir, where

        root = shared_dir()
        if root is None:
            return Path(where()) / p.split(":", 1)[1]  # does not exist: the caller says so
        return root / p.split(":", 1)[1]
    q = Path(p).expanduser()
    return q if q.is_absolute() else (base / q)


def _trace_path(given: str, fallback: str | None, base: Path, where: str) -> Path:
    p = _resolve_path(given, base)
    if p.exists():
        return p
    if fallback is not None:
        fb = _resolve_path(fallback, base)
        if fb.exists():
            warn_input(f"{given!r} not found (looked at {p}): using the fallback {fallback!r}", where)
            return fb
        raise InputError(f"neither {given!r} nor the fallback {fallback!r} exists", where)
    raise InputError(f"trace file {given!r} not found (looked at {p})", where)


@functools.lru_cache(maxsize=32)
def _read(path: str, fmt: str | None, time_unit: str | None, sort: bool, limit: int | None) -> pl.DataFrame:
    from storqos.traces import read_trace

    return read_trace(path, format=fmt, time_unit=time_unit, sort=sort, limit=limit)


def _load_trace(e: TraceReading, given: str, fallback: str | None, base: Path, where: str) -> pl.DataFrame:
    from storqos.traces import scale_rate, time_window

    path = _trace_path(given, fallback, base, where)
    df = _read(str(path), e.format, e.time_unit, e.sort, e.max_requests)
    if e.start is not None or e.end is not None:
        df = time_window(df, e.start or 0, e.end)
    if e.rate_scale is not None:
        df = scale_rate(df, 1.0 / e.rate_scale)
    return df


def _qos(e: Qos) -> dict[str, Any]:
    """A [[trace]]'s or [[tenant]]'s QoS keys as :class:`Tenant` fields."""
    return {"weight": e.weight, "reservation": e.reservation, "limit": e.limit, "slo_ns": e.slo}


def _file_key(flag: str | None) -> str:
    """The experiment file's key for the flag a parser names (``--capacity`` →
    ``capacity``, ``--device-depth`` → ``depth``, ``--deadline`` → ``deadlines``); empty for none."""
    return {"--device": "kind", "--device-depth": "depth"}.get(flag or "", param_of_flag(flag or ""))


def _as_key(e: InputError, where: str, prefix: str = "") -> InputError:
    """An error a flag's parser raised (``where`` = ``--capacity``) about a file's key:
    the key's name (after ``prefix``) in the message, the file's place as ``where``."""
    key = prefix + _file_key(e.where)
    return InputError(f"{key + ': ' if key else ''}{e.message}", where)


def _point_runs(file: ExperimentFile, point: dict[str, Any], base: Path, where: str,
                traces: dict[str, pl.DataFrame], first_index: int, text: str | None = None) -> list[Run]:
    seed, duration_ns, window_ns, percentile = file.seed, file.duration, file.window, file.percentile
    tenants: list[Tenant] = []
    frames: list[pl.DataFrame] = []
    generators: list[dict[str, Any]] = []
    closed: list[dict[str, Any]] = []
    closed_where: list[str] = []  # each closed client's [[tenant]], for its errors
    pending_gen: list[tuple[int, dict[str, Any], str]] = []

    for i, t in enumerate(file.trace):
        w = entry_where(where, "trace", i, t.name)
        df = _load_trace(t, t.path, t.fallback, base, w)
        if t.split is not None:
            from storqos.traces import split_tenants

            try:
                df, mapping = split_tenants(df, by=t.split)
            except InputError as bad:
                raise InputError(f"split: {bad.message}", w) from None
            keys = [str(k) for k in mapping["key"].to_list()]
            ids = list(range(len(keys)))
            if t.keys is not None:
                want = [str(k) for k in t.keys]
                missing = [k for k in want if k not in keys]
                if missing:
                    raise InputError(f"split keys {', '.join(missing)} not in the trace (has {', '.join(keys)})", w)
                ids = [keys.index(k) for k in want]
                keys = want
            for local, key in zip(ids, keys, strict=True):
                part = df.filter(pl.col("tenant") == local)
                frames.append(_canon(part, len(tenants)))
                tenants.append(Tenant(name=f"{t.label}/{key}", source="trace", **_qos(t)))
        else:
            frames.append(_canon(df, len(tenants)))
            tenants.append(Tenant(name=t.label, source="trace", **_qos(t)))

    for i, e in enumerate(file.tenant):
        w = entry_where(where, "tenant", i, e.name)
        tid = len(tenants)
        src = e.source
        if src == "trace" and isinstance(e.fallback, BaseModel) and not _resolve_path(str(e.trace), base).exists():
            # The file's own synthetic stand-in when the real trace is absent (e.g. no ../shared): said.
            warn_input(f"trace {e.trace!r} not found: using the fallback generator {e.fallback.kind!r}", w)
            src = "generator"
        if src == "trace":
            fallback = e.fallback if isinstance(e.fallback, str) else None
            frames.append(_canon(_load_trace(e, str(e.trace), fallback, base, w), tid))
        elif src == "generator":
            gen = e.generator if e.generator is not None else e.fallback
            assert isinstance(gen, BaseModel)
            pending_gen.append((tid, gen.model_dump(exclude_unset=True, exclude_none=True), w))
        else:
            assert e.closed is not None
            closed.append({"tenant": tid, **e.closed.given()})
            closed_where.append(w)
        tenants.append(Tenant(name=e.name, source=src, **_qos(e)))

    names = [t.name for t in tenants]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"tenant name(s) {', '.join(dup)} given twice", where)

    trace_key = None
    if frames:
        df = pl.concat(frames, how="vertical_relaxed").sort("arrival_ns", maintain_order=True)
        if duration_ns is not None:
            df = df.filter(pl.col("arrival_ns") < duration_ns)
        trace_key = hashlib.sha1(df.hash_rows().to_numpy().tobytes()).hexdigest()[:16]
        traces.setdefault(trace_key, df)
        span_ns = int(df.select(pl.col("arrival_ns").max()).item() or 0) + 1
    else:
        span_ns = 0
    run_ns = duration_ns if duration_ns is not None else (span_ns or None)

    from storqos.model import synth

    for tid, g, w in pending_gen:
        params = {k: v for k, v in g.items() if k != "kind"}
        params.setdefault("seed", (seed + GENERATOR_SEED_STRIDE * (tid + 1)) % 2**64)
        if duration_ns is not None and g["kind"] != "diurnal":
            # The experiment's duration ends the run for generators too (a count or a
            # duration of their own may end them sooner).
            own = parse_duration(params["duration"], f"{w}: generator: duration") if "duration" in params else None
            params["duration"] = f"{duration_ns if own is None else min(own, duration_ns)}ns"
        elif g["kind"] != "diurnal" and "count" not in params and "duration" not in params:
            if run_ns is None:
                raise InputError("generator needs a count or duration (or give the experiment a duration)", w)
            params["duration"] = f"{run_ns}ns"
        fn = getattr(synth, str(g["kind"]))
        try:
            generators.append(fn(tenant=tid, materialize=False, **params))
        except TypeError as e:
            raise InputError(f"generator: {e}", w) from None
        except InputError as e:  # where = the synth parameter's flag name: say the file's key
            raise InputError(f"generator: {_as_key(e, w).message}", w) from None
    for c, cw in zip(closed, closed_where, strict=True):
        if "stop" not in c:
            if run_ns is None:
                raise InputError("closed-loop tenants need a stop time or an experiment duration", where)
            c["stop"] = f"{run_ns}ns"
        _closed_client(c, cw)  # validate now

    dev = file.device.given()
    if "spec" in dev:
        dspec = dev["spec"]
    else:
        if "kind" not in dev:
            raise InputError("[device] needs a kind (constant, exponential, array, disk, tiered)", where)
        try:
            dspec = device_spec(str(dev.pop("kind")), **dev)
        except InputError as bad:
            line = line_of(text, ["device", _file_key(bad.where)]) if text is not None and not point else None
            raise _as_key(bad, f"{where}:{line}" if line else where, "[device] ") from None

    runs: list[Run] = []
    for pi, p in enumerate(file.policy):
        label = p.label
        w = entry_where(where, "policy", pi, label)
        pspec = _policy(p, tenants, percentile, w)
        try:
            check_tenant_lists(pspec, len(tenants), flags=False)
            check(pspec, dspec)
        except InputError as e:
            raise InputError(str(e), w) from None
        shown = ", ".join(f"{k}={_display(v)}" for k, v in point.items())
        runs.append(Run(
            index=first_index + len(runs),
            label=f"{label} ({shown})" if shown else label,
            policy_name=label,
            point=dict(point),
            policy=pspec,
            device=dspec,
            trace_key=trace_key,
            generators=generators,
            closed=closed,
            seed=seed,
            window_ns=window_ns,
            tenants=tenants,
            percentile=percentile,
            cluster=None if file.cluster is None else file.cluster.model_dump(),
        ))
    return runs


def _canon(df: pl.DataFrame, tenant: int) -> pl.DataFrame:
    """The columns the simulator reads, with the experiment's tenant id."""
    n = df.height
    return pl.DataFrame({
        "arrival_ns": df["arrival_ns"].cast(pl.Int64),
        "size": df["size"].cast(pl.UInt32),
        "offset": df["offset"].cast(pl.UInt64) if "offset" in df.columns else pl.Series([0] * n, dtype=pl.UInt64),
        "is_read": df["is_read"] if "is_read" in df.columns else pl.Series([True] * n),
        "tenant": pl.Series([tenant] * n, dtype=pl.UInt32),
    })


def _closed_client(c: dict[str, Any], where: str) -> Any:
    from storqos.model.sim import ClosedClient

    try:
        cc = ClosedClient(**c)
        cc.to_spec()
    except TypeError as e:
        raise InputError(f"closed: {e}", where) from None
    except InputError as e:
        raise InputError(f"closed: {e}", where) from None
    return cc


def _policy(p: Policy, tenants: list[Tenant], percentile: float, where: str) -> dict[str, Any]:
    """A [[policy]] table → core spec, filling per-tenant parameters from the tenants."""
    if p.spec is not None:
        return dict(p.spec)
    if p.kind is None:
        raise InputError("needs a kind (one of storqos.model.specs.POLICIES)", where)
    try:
        return policy_for_tenants(p.kind, p.params, tenants, percentile)
    except InputError as e:  # where = the flag the parser names: say the file's key
        raise _as_key(e, where) from None


# ----------------------------------------------------------------------------- running


def run_one(run: Run, trace: pl.DataFrame | None) -> RunOutput:
    """Simulate one run (in a worker process). Pure: same run ⇒ same output."""
    from storqos.model.cluster import Cluster, ClusterResult, simulate_cluster
    from storqos.model.sim import CAPACITY_NAME, RESERVATIONS_NAME, SimResult, simulate

    closed = [_closed_client(dict(c), run.label) for c in run.closed]
    t0 = time.perf_counter()
    # The file's keys, in the run's warnings.
    name, reserved = CAPACITY_NAME.set("[device] capacity"), RESERVATIONS_NAME.set(f"{run.label}: reservations")
    try:
        if run.cluster is None:
            res: SimResult | ClusterResult = simulate(trace, run.policy, run.device, generators=run.generators,
                                                      closed=closed, seed=run.seed, window=f"{run.window_ns}ns")
        else:
            shape = {**run.cluster, "period": f"{run.cluster['period']}ns"}
            res = simulate_cluster(trace, run.policy, run.device, cluster=Cluster(**shape), generators=run.generators,
                                   closed=closed, seed=run.seed, window=f"{run.window_ns}ns")
    finally:
        CAPACITY_NAME.reset(name)
        RESERVATIONS_NAME.reset(reserved)
    wall = time.perf_counter() - t0
    names = pl.DataFrame({
        "tenant": pl.Series(range(len(run.tenants)), dtype=pl.UInt32),
        "name": [t.name for t in run.tenants],
        "slo_ns": pl.Series([t.slo_ns for t in run.tenants], dtype=pl.Int64),
    })
    tenants = names.join(res.tenants.with_columns(pl.col("tenant").cast(pl.UInt32)), on="tenant", how="left")
    tenants = tenants.with_columns(pl.col("completed").fill_null(0))
    cdf = res.cdf.with_columns(pl.col("tenant").cast(pl.UInt32))
    within: list[float | None] = []
    for t in run.tenants:
        if t.slo_ns is None:
            within.append(None)
            continue
        tid = run.tenants.index(t)
        sub = cdf.filter((pl.col("tenant") == tid) & (pl.col("response_ns") <= t.slo_ns))
        within.append(float(sub["fraction"].to_numpy().max(initial=0.0)))
    tenants = tenants.with_columns(pl.Series("within_slo", within, dtype=pl.Float64))
    tenants = tenants.with_columns(
        pl.when(pl.col("slo_ns").is_null()).then(None).otherwise(pl.col("within_slo") >= run.percentile).alias("slo_met")
    )
    return RunOutput(
        index=run.index,
        label=run.label,
        policy_name=run.policy_name,
        policy_display=res.policy,
        device_display=res.device,
        point=run.point,
        tenants=tenants,
        windows=res.windows.with_columns(pl.col("tenant").cast(pl.UInt32)),
        cdf=cdf,
        gauges=res.gauges,
        arrived=res.arrived,
        unfinished=res.unfinished,
        end_ns=res.end_ns,
        wall_s=wall,
    )


def _trace_key(run: Run) -> str | None:
    return run.trace_key


def _kind(run: Run) -> tuple[str, str]:
    """Runs that differ only by seed: about as long as each other (the sweep starts the
    longest kinds first)."""
    return run.policy_name, repr(sorted((k, repr(v)) for k, v in run.point.items() if k != "seed"))


def run_experiment(
    exp: Experiment,
    *,
    backend: str | None = "local",
    workers: int | None = None,
    on_done: Any = None,
) -> ExperimentResult:
    """Run every run of ``exp`` on ``backend`` (see :mod:`storqos.experiments.sweep`); write the
    results with :func:`storqos.experiments.outputs.write_outputs`."""
    from storqos.experiments.sweep import map_runs, parse_backend

    backend = parse_backend(backend)
    t0 = time.perf_counter()
    outputs = map_runs(run_one, exp.runs, shared=dict(exp.traces), key_of=_trace_key, kind_of=_kind,
                       backend=backend, workers=workers, on_done=on_done)
    return ExperimentResult(experiment=exp, outputs=outputs, backend=backend, wall_s=time.perf_counter() - t0)


__all__ = [
    "Experiment",
    "ExperimentResult",
    "Run",
    "RunOutput",
    "Tenant",
    "from_dict",
    "load",
    "run_experiment",
    "run_one",
]
