"""Predicted beside measured (``storqos validate``): an experiment run in the simulator
and live, through the gateway and a replay of the same requests.

For each run of the experiment (each policy at each grid point) the same requests (its
traces and its generators, materialised) are

1. simulated with the run's policy in front of the run's device model (or the device
   profile's measured model), keeping every request;
2. replayed open loop (:mod:`storqos.live.replay`) against a gateway started for the run:
   one export per tenant, the run's policy spec, and either an emulated constant-rate
   device of the model's capacity (``emulated``) or real files behind a cost model and
   depth from the device profile (``file``; the prediction then adds what the profile
   measured of the live path: the path at rest, and in bursts the path's time between
   two replies and the hold of the requests issued after a request:
   :func:`predict`, the core's live path, as ``storqos simulate --device-profile`` predicts);

and each tenant's IOPS and response-time percentiles are computed the same way from
both request logs. Closed-loop tenants have no request list to replay and are refused.
The calibration and the replays keep the CPUs awake, or not, alike (``awake``,
:mod:`storqos.live.cpu_latency`); a profile given that was measured the other way is
warned of. On real files, after each replay the device's time at rest is measured
again (the calibration's lone reads 2 ms apart, :data:`REST_CHECK_S`), so that the
report shows how far the device itself moved from its profile while the experiment ran.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from storqos.base.errors import InputError, warn_input
from storqos.base.progress import StageSink, sink
from storqos.base.units import fmt_size, fmt_span
from storqos.experiments.experiment import Experiment, Run
from storqos.live.calibrate import MAX_PASSES
from storqos.live.cpu_latency import can_keep_awake
from storqos.live.gateway_process import GatewayProcess
from storqos.live.replay import ReplayResult, replay
from storqos.live.validation_calibration import (
    ATTEMPTS,
    BURST_SEED,
    CALIBRATE_PASSES,
    CALIBRATE_SECONDS,
    CALIBRATION_BUSY_SHARE,
    GATEWAY_S,
    bursts_at_depth,
    calibrate_file,
    calibration_plan,
)
from storqos.live.validation_calibration import least_disturbed as _least_disturbed
from storqos.live.validation_files import export_entry as _entry
from storqos.live.validation_files import exports as _exports
from storqos.live.validation_files import fill_file
from storqos.live.validation_files import gateway_direct_reads as _reads
from storqos.live.validation_files import into_page_cache as _into_page_cache
from storqos.model.device_profile import DeviceProfile
from storqos.model.live_path import with_path
from storqos.model.tenant_figures import PERCENTILES, per_tenant

#: Size of each tenant's export (bytes); offsets wrap into it.
DEFAULT_EXPORT_BYTES = 256 << 20
#: Connections per tenant in the replay: the gateway lets one connection have 64 MiB of
#: requests in flight (about 13,000 reads of 4 KiB, each charged its bytes and 1 KiB),
#: and a burst of a trace may hold more; past that the gateway stops reading the
#: connection, and the policy sees the requests later than the trace says.
CONNECTIONS = 4
#: The gateway's in-flight budget in a validation (the default 256 MiB would hold back
#: the same bursts).
INFLIGHT_BYTES = 2 << 30
#: Live device modes: the gateway's emulation of a constant-rate device; real files read
#: through the page cache; real files read and written with O_DIRECT (the disk under them).
MODES = ("emulated", "file", "direct")
#: Seconds of lone reads (the calibration's point at rest) measured after each replay on
#: real files. The device's own time at rest moves from minute to minute: on this
#: project's virtual disk, 12 such measurements 20 s apart spread by a best constant's
#: ±10-18 % on a quiet host and ±28-37 % on a busier one (BENCHMARKS.md), as much as a
#: p50 target of 20 %.
REST_CHECK_S = 1.0
#: Live replays of each run at most (``--repeats``).
MAX_REPEATS = 9
#: For the estimate said at the start: bytes a second the exports are written at
#: (:func:`fill_file`: 256 MiB in 0.79 s through the page cache, in 0.89 s to the disk,
#: fsync included).
FILL_BYTES_PER_S = 300e6
#: A simulation's time: 0.1 s, and 1 µs a request beside (8,940 requests kept in 0.1 s).
SIMULATE_S, SIMULATE_S_PER_REQUEST = 0.1, 1e-6
#: A lone 4 KiB read's mean time at depth 1 through a gateway, for the bursts' time in
#: the estimate made before the calibration has measured it (the bursts are spaced by
#: it, :func:`storqos.live.calibrate.burst_period_us`): page-cached files 64-105 µs, direct
#: 171-242 µs (:data:`CALIBRATION_BUSY_SHARE`'s profiles); 300 µs made direct files'
#: bursts 0.92 s a point, as measured (0.7-1.2 s).
LONE_US_GUESS = {"file": 100.0, "direct": 300.0}


@dataclass
class RunValidation:
    """One run, predicted and measured."""

    label: str
    policy: str
    point: dict[str, Any]
    #: per tenant: name, requests, then ``iops`` and ``pNN_ns`` each ``_pred`` / ``_meas``
    tenants: pl.DataFrame
    predicted: pl.DataFrame
    measured: pl.DataFrame
    schedule: dict[str, float]
    fell_behind: str | None
    errors: int
    #: replays made (the one kept is the one with the fewest late requests)
    attempts: int = 1
    #: on real files, the p50 of lone 4 KiB reads 2 ms apart measured right after the
    #: replay (µs): the device's time at rest then, beside the profile's (with repeats,
    #: the median over the replays)
    rest_p50_us: float | None = None
    #: replays counted (``repeats``): the measured figures are each tenant's medians over
    #: them; ``measured`` is the log of the replay whose p50 over all requests is the median
    repeats: int = 1
    #: each counted replay's request log, in the order made
    replays: list[pl.DataFrame] = field(default_factory=list)
    #: each counted replay's :func:`per_tenant` figures, in the same order (the measured
    #: figures are their medians)
    per_replay: list[pl.DataFrame] = field(default_factory=list)

    def spread(self, q: int = 50) -> pl.DataFrame:
        """Per tenant: the ``q``-th percentile's lowest and highest over the counted
        replays (``pNN_ns_min`` / ``_max``; the measured log's alone where none were kept)
        and half their range / the median (``pNN_spread``)."""
        figures = self.per_replay or [per_tenant(self.measured, self.tenants["name"].to_list())]
        per = pl.concat([t.select("tenant", f"p{q}_ns") for t in figures])
        col = pl.col(f"p{q}_ns")
        return per.group_by("tenant").agg(col.min().alias(f"p{q}_ns_min"), col.max().alias(f"p{q}_ns_max"),
                                          ((col.max() - col.min()) / 2 / col.median()).alias(f"p{q}_spread")
                                          ).sort("tenant")


@dataclass
class Validation:
    """Every run of an experiment, predicted and measured."""

    name: str
    mode: str
    device: str
    runs: list[RunValidation] = field(default_factory=list)
    profile: DeviceProfile | None = None

    def profile_rest_p50_us(self) -> float | None:
        """The profile's p50 of the same lone reads as :attr:`RunValidation.rest_p50_us`
        (µs), when it measured them."""
        if self.profile is None or self.profile.at_rest is None:
            return None
        return self.profile.at_rest.percentile_us(50)

    def rest_drift(self) -> list[tuple[str, float, float]]:
        """Per run that measured it: (label, the device's p50 at rest after its replay,
        that / the profile's − 1)."""
        base = self.profile_rest_p50_us()
        if not base:
            return []
        return [(r.label, r.rest_p50_us, r.rest_p50_us / base - 1) for r in self.runs if r.rest_p50_us is not None]

    def table(self) -> pl.DataFrame:
        """All runs' tenants in one table, with the relative errors (measured / predicted − 1)."""
        frames = [r.tenants.with_columns(pl.lit(r.label).alias("run"), pl.lit(r.policy).alias("policy"))
                  for r in self.runs]
        df = pl.concat(frames, how="vertical") if frames else pl.DataFrame()
        if not df.height:
            return df
        return df.with_columns(
            (pl.col("iops_meas") / pl.col("iops_pred") - 1).alias("iops_err"),
            *((pl.col(f"p{q}_ns_meas") / pl.col(f"p{q}_ns_pred") - 1).alias(f"p{q}_err") for q in PERCENTILES))


def _requests(exp: Experiment, run: Run) -> pl.DataFrame:
    from storqos.model.synth import to_frame

    if run.closed:
        names = ", ".join(run.tenants[int(c["tenant"])].name for c in run.closed)
        raise InputError(f"closed-loop tenant(s) {names} have no requests to replay live; give them as a trace or a "
                         "generator", "validate")
    parts = []
    if run.trace_key is not None:
        parts.append(exp.traces[run.trace_key].select("arrival_ns", "is_read", "offset", "size", "tenant"))
    if run.generators:
        parts.append(to_frame(run.generators).select("arrival_ns", "is_read", "offset", "size", "tenant"))
    if not parts:
        raise InputError("the experiment has no requests to replay", "validate")
    df = pl.concat([p.with_columns(pl.col("arrival_ns").cast(pl.Int64)) for p in parts], how="vertical")
    return df.sort("arrival_ns", maintain_order=True)


class Estimate:
    """About how long :func:`validate` takes, stage by stage, from what it will do: the
    exports written (real files), the calibration and the bursts (real files without a
    profile), each run simulated, each replay (its trace's time, and on real files the
    check at rest after it)."""

    def __init__(self, exp: Experiment, requests: list[pl.DataFrame], mode: str, *, calibrating: bool, repeats: int,
                 passes: int, seconds: float, export_bytes: int, tenants: int) -> None:
        from storqos.live.calibrate import POINT_OVERHEAD_S, burst_seconds

        self.exp, self.requests, self.mode, self.repeats, self.calibrating = exp, requests, mode, repeats, calibrating
        real = mode != "emulated"
        self.fill_s = tenants * export_bytes / FILL_BYTES_PER_S if real else 0.0
        self.rest_s = REST_CHECK_S + GATEWAY_S if real else 0.0
        # The calibration, then the bursts of reads and writes, random and sequential.
        lone = LONE_US_GUESS.get(mode, 0.0)
        bursts = 2 * GATEWAY_S + passes * 4 * (burst_seconds(lone) + POINT_OVERHEAD_S["replay"])
        self.calibrate_s = passes * calibration_plan(seconds).pass_seconds() + bursts if calibrating else 0.0

    def simulate_s(self, df: pl.DataFrame) -> float:
        return SIMULATE_S + df.height * SIMULATE_S_PER_REQUEST

    def replay_s(self, df: pl.DataFrame) -> float:
        """A replay's time: the trace's, from time 0 (the replay keeps to it), and its gateway's."""
        last = int(df["arrival_ns"].to_numpy().max()) if df.height else 0
        return last / 1e9 + GATEWAY_S

    def total(self, attempts: int = 1) -> float:
        """Seconds the whole takes, with ``attempts`` of every calibration and replay."""
        replays = self.repeats * sum(self.replay_s(df) + self.rest_s for df in self.requests)
        return (self.fill_s + attempts * self.calibrate_s + sum(self.simulate_s(df) for df in self.requests)
                + attempts * replays)

    def plan(self) -> str:
        """``3 policies × 1 replay of 20 s on direct-I/O files, calibrated first``."""
        n, grid = len(self.exp.runs), any(r.point for r in self.exp.runs)
        runs = f"{n} {('run' if grid else 'policy') if n == 1 else ('runs' if grid else 'policies')}"
        longest = max((self.replay_s(df) - GATEWAY_S for df in self.requests), default=0.0)
        where = {"emulated": "on an emulated device", "file": "on page-cached files",
                 "direct": "on direct-I/O files"}.get(self.mode, "")
        return (f"{runs} × {self.repeats} replay{'s' if self.repeats > 1 else ''} of {fmt_span(longest * 1e9)}"
                f"{' each' if n * self.repeats > 1 else ''} {where}{', calibrated first' if self.calibrating else ''}")


def validate(
    exp: Experiment,
    *,
    mode: str = "emulated",
    profile: DeviceProfile | None = None,
    export_bytes: int = DEFAULT_EXPORT_BYTES,
    workdir: Path | None = None,
    calibrate_seconds: float = CALIBRATE_SECONDS,
    calibrate_passes: int = CALIBRATE_PASSES,
    attempts: int = ATTEMPTS,
    repeats: int = 1,
    awake: str = "no",
    direct_reads: str = "threads",
    progress: StageSink | Callable[[str], None] | None = None,
) -> Validation:
    """Run every run of ``exp`` simulated and live (see the module's description). A run
    whose replay was disturbed (it fell behind the trace, over 1 % of requests issued more
    than 1 ms late, or the host took over 1 % of the machine's CPU time meanwhile) is
    replayed again, up to ``attempts`` replays in all; the least disturbed is kept
    (:func:`_replay_on_schedule`), and still says so when it fell behind. ``awake``
    (auto, yes or no) keeps the CPUs awake during the calibration and the replays
    (:func:`storqos.live.cpu_latency.cpus_awake`). ``direct_reads`` (``threads`` or
    ``io_uring``): how the gateways read direct files (``storqos serve --direct-reads``).
    ``repeats``: live replays counted per run, the runs taken in turn (every run once,
    then every run again), so that a device that moves from minute to minute moves under
    all of them alike; each tenant's measured IOPS and percentiles are the medians over
    its run's replays (:meth:`RunValidation.spread` gives how far they spread).
    ``progress`` hears first what it will do and about how long it takes, then of each
    stage (a function gets each as a line; a :class:`storqos.base.progress.StageSink`, such as
    :class:`storqos.base.progress.Stages`, each stage's estimate and its steps too)."""
    from storqos.live.gateway import DIRECT_READS, gateway_config
    from storqos.live.gateway_config import LimitsTable, one_of
    if mode not in MODES:
        raise InputError(f"unknown live device {mode!r} ({', '.join(MODES)})", "--live-device")
    real, direct = mode != "emulated", mode == "direct"
    one_of(DIRECT_READS, direct_reads, "--direct-reads")
    if direct_reads != "threads" and not direct:
        raise InputError(f"{direct_reads} reads direct files: give --live-device direct too", "--direct-reads")
    if not 1 <= attempts <= 20:
        raise InputError(f"must be in 1..20, got {attempts}", "--attempts")
    if not 1 <= repeats <= MAX_REPEATS:
        raise InputError(f"must be in 1..{MAX_REPEATS}, got {repeats}", "--repeats")
    if not 1 <= calibrate_passes <= MAX_PASSES:
        raise InputError(f"must be in 1..{MAX_PASSES}, got {calibrate_passes}", "--calibration-passes")
    if not 0.05 <= calibrate_seconds <= 60:
        raise InputError(f"must be 0.05 to 60 s, got {calibrate_seconds:g}", "--calibration-time")
    if export_bytes < (1 << 20):
        raise InputError(f"exports must be at least 1 MiB, got {export_bytes:,} bytes", "--export-size")
    held = can_keep_awake(awake)
    if real and profile is not None and profile.cpus_awake is not None and profile.cpus_awake != held:
        warn_input(f"the device profile was measured with the CPUs {'awake' if profile.cpus_awake else 'free to sleep'}"
                   f" and the replays keep them {'awake' if held else 'free to sleep'}: the prediction's path at rest "
                   "will not be the live one (calibrate again, or set --awake-cpus alike)")
    if real and profile is not None and profile.direct != direct:
        warn_input(f"the device profile was measured {'past' if profile.direct else 'through'} the page cache and "
                   f"the live files are served {'past' if direct else 'through'} it: the prediction will not be the "
                   f"live one (calibrate again, or give --live-device {'direct' if profile.direct else 'file'})")
    if direct and profile is not None and profile.direct_reads not in (None, direct_reads):
        warn_input(f"the device profile was measured through a gateway reading with {profile.direct_reads} and the "
                   f"live one reads with {direct_reads}: the prediction will not be the live one (calibrate again, "
                   f"or give --direct-reads {profile.direct_reads})")
    if mode == "emulated" and any(r.device.get("kind") != "constant" or r.device.get("bandwidth") for r in exp.runs):
        raise InputError("the gateway emulates a constant-rate device only: give the experiment [device] kind = "
                         "\"constant\", or --live-device file or direct", "validate")
    stages = sink(progress)
    with tempfile.TemporaryDirectory(prefix="storqos-validate-", dir=workdir) as tmp:
        work = Path(tmp)
        tenants = max(len(r.tenants) for r in exp.runs)
        requests = [_requests(exp, run) for run in exp.runs]
        took = Estimate(exp, requests, mode, calibrating=real and profile is None, repeats=repeats,
                         passes=calibrate_passes, seconds=calibrate_seconds, export_bytes=export_bytes, tenants=tenants)
        stages.begin(took.plan(), took.total(), took.total(attempts) if attempts > 1 else None)
        if real:
            stages.stage(f"writing {tenants} export{'s' if tenants > 1 else ''} of {fmt_size(export_bytes)}, "
                         f"{'to the disk' if direct else 'into the page cache'}", took.fill_s)
        files = _exports(work, tenants, export_bytes, fill=real, direct=direct)
        paths = [Path(f["path"]) for f in files]
        if real and profile is None:
            profile = calibrate_file(paths[0], seconds=calibrate_seconds, passes=calibrate_passes, awake=awake,
                                     direct=direct, direct_reads=direct_reads, attempts=attempts, progress=stages)
        result = Validation(name=exp.name, mode=mode, device="", profile=profile)
        plans: list[tuple[Run, list[str], pl.DataFrame, pl.DataFrame, dict[str, Any]]] = []
        for i, (run, df) in enumerate(zip(exp.runs, requests, strict=True)):
            names = [t.name for t in run.tenants]
            if mode == "emulated":
                device: dict[str, Any] = run.device
                iops: float | None = float(run.device["iops"])
                depth, cost = 1, None
                result.device = f"emulated constant {iops:g} IOPS"
            else:
                assert profile is not None
                device, iops, depth, cost = profile.sim_device(), None, profile.parallelism, profile.cost()
                result.device = f"{'direct-I/O ' if direct else ''}files, profile of {profile.target} ({profile.capacity_iops:,.0f} IOPS, k = {depth})"
                if direct_reads != "threads":
                    result.device += f", read through {direct_reads}"
            if held:
                result.device += ", CPUs kept awake"
            stages.stage(f"{run.label}: simulating {df.height:,} requests ({i + 1}/{len(exp.runs)})",
                         took.simulate_s(df))
            predicted = predict(df, run.policy, device, run.seed, profile if real else None)
            cfg = gateway_config(files[: len(names)], run.policy, listen="127.0.0.1:0", depth=depth, iops=iops,
                                 cost=cost, limits=LimitsTable(max_inflight=INFLIGHT_BYTES).to_json(),
                                 direct_reads=_reads(direct, direct_reads))
            plans.append((run, names, df, predicted, cfg))
        made: list[list[tuple[ReplayResult, int, float | None]]] = [[] for _ in plans]
        for rep in range(repeats):
            for i, (run, names, df, _, cfg) in enumerate(plans):
                which = f" (replay {rep + 1} of {repeats})" if repeats > 1 else ""
                stages.stage(f"{run.label}: replaying {df.height:,} requests live ({i + 1}/{len(exp.runs)}){which}",
                             took.replay_s(df) + took.rest_s)
                live, n = _replay_on_schedule(df, cfg, len(names), attempts, stages, run.label, awake,
                                              paths[: len(names)] if mode == "file" else [], took.replay_s(df))
                rest_us = (_rest_p50_us(paths[0], export_bytes, direct, direct_reads, awake, seed=i + rep * len(plans))
                           if real else None)
                made[i].append((live, n, rest_us))
        for (run, names, _, predicted, _), replays in zip(plans, made, strict=True):
            result.runs.append(_counted(run, names, predicted, replays))
        return result


def predict(requests: pl.DataFrame, policy: dict[str, Any], device: dict[str, Any], seed: int,
            profile: DeviceProfile | None = None) -> pl.DataFrame:
    """What validate compares a replay of ``requests`` with: their simulation through
    ``policy`` in front of ``device``, every request kept, and with ``profile`` (real
    files) as the client of the profile's live path sees them
    (:func:`storqos.model.live_path.with_path`, which ``storqos simulate
    --device-profile`` applies too)."""
    from storqos.model.sim import simulate

    sim = simulate(requests, policy, device, seed=seed, keep_requests=True)
    assert sim.requests is not None
    return sim.requests if profile is None else with_path(sim.requests, profile, requests["offset"].to_numpy())


def _counted(run: Run, names: list[str], predicted: pl.DataFrame,
             replays: list[tuple[ReplayResult, int, float | None]]) -> RunValidation:
    """A run's prediction beside its counted replays (each: the replay kept, replays made
    for it, the device's p50 at rest after it): each tenant's medians over the replays;
    the replay shown (log, schedule) is the one whose p50 over all requests is the median
    (the lower of the middle two of an even number)."""
    lives = [live for live, _, _ in replays]
    overall = [float(np.median(live.requests["response_ns"].to_numpy())) for live in lives]
    shown = lives[int(np.argsort(overall, kind="stable")[(len(lives) - 1) // 2])]
    stats = ["iops", *(f"p{q}_ns" for q in PERCENTILES)]
    figures = [per_tenant(live.requests, names) for live in lives]
    meas = pl.concat(figures).group_by("tenant").agg(pl.col("requests").first(), *(pl.col(c).median() for c in stats)).sort("tenant")
    pred = per_tenant(predicted, names)
    both = pred.join(meas.drop("requests"), on="tenant", suffix="_meas", how="left")
    both = both.rename({c: f"{c}_pred" for c in stats})
    behind = [(k, why) for k, live in enumerate(lives, 1) if (why := live.fell_behind())]
    rests = [us for _, _, us in replays if us is not None]
    return RunValidation(
        label=run.label, policy=run.policy_name, point=run.point, tenants=both, predicted=predicted,
        measured=shown.requests, schedule=shown.schedule(),
        fell_behind="; ".join(why if len(lives) == 1 else f"replay {k}: {why}" for k, why in behind) or None,
        errors=sum(sum(live.errors.values()) for live in lives), attempts=sum(n for _, n, _ in replays),
        rest_p50_us=float(np.median(rests)) if rests else None, repeats=len(lives),
        replays=[live.requests for live in lives], per_replay=figures)


def _rest_p50_us(path: Path, export_bytes: int, direct: bool, direct_reads: str, awake: str, seed: int) -> float:
    """The p50 (µs) of :data:`REST_CHECK_S` of the calibration's lone reads (4 KiB,
    random, 2 ms apart) through a FCFS gateway serving ``path`` as the replays were."""
    from storqos.live.calibrate import SPACED_US, replay_point
    from storqos.live.cpu_latency import cpus_awake
    from storqos.live.gateway import gateway_config
    from storqos.model import registry
    from storqos.model.specs import policy_spec

    cfg = gateway_config([_entry("rest", path, 0, direct)], policy_spec(registry.default().name), listen="127.0.0.1:0",
                         direct_reads=_reads(direct, direct_reads))
    with cpus_awake(awake), GatewayProcess(cfg) as gw:
        point = replay_point(gw.uri("rest"), export_bytes, "read", "random", 4096, 1, REST_CHECK_S, seed,
                             spaced_us=SPACED_US)
    return point.percentile_us(50)


def _replay_on_schedule(df: pl.DataFrame, cfg: dict[str, Any], tenants: int, attempts: int,
                        progress: StageSink | Callable[[str], None], label: str, awake: str,
                        warm: list[Path], seconds: float = 0.0) -> tuple[ReplayResult, int]:
    """Replay ``df`` through a fresh gateway of ``cfg`` until a replay is undisturbed
    (:meth:`ReplayResult.disturbed`: it kept to the schedule and the host left the
    machine alone) or ``attempts`` were made; the least disturbed replay (on schedule
    first, then left alone by the host, then the fewest late requests) and how many were
    made. The files ``warm`` are read into the page cache before each replay. A replay
    made again is a stage of ``progress``, of about ``seconds``."""
    stages = sink(progress)

    def once() -> ReplayResult:
        _into_page_cache(warm)
        with GatewayProcess(cfg) as gw:
            return replay(df, {t: gw.uri(f"t{t}") for t in range(tenants)}, connections=CONNECTIONS, warmup=True,
                          awake=awake, progress=stages.step)

    return _least_disturbed(attempts, once, ReplayResult.disturbed,
                            lambda r: (r.fell_behind() is not None, r.disturbed() is not None, r.late),
                            lambda why, n: stages.stage(f"{label}: {why}; replaying again ({n}/{attempts})",
                                                        seconds, keep=True))


__all__ = ["ATTEMPTS", "BURST_SEED", "CALIBRATE_PASSES", "CALIBRATE_SECONDS", "CALIBRATION_BUSY_SHARE",
           "DEFAULT_EXPORT_BYTES", "MAX_REPEATS", "MODES", "REST_CHECK_S", "Estimate", "RunValidation",
           "Validation", "bursts_at_depth", "calibrate_file", "calibration_plan", "fill_file", "predict",
           "validate"]
