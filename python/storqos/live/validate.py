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
   two replies and the hold of the requests issued after a request, :func:`with_path`);

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
from typing import Any, TypeVar

import numpy as np
import polars as pl

from storqos.base.errors import InputError, warn_input
from storqos.base.progress import StageSink, sink
from storqos.base.units import fmt_size, fmt_span
from storqos.experiments.experiment import Experiment, Run
from storqos.live.calibrate import MAX_PASSES
from storqos.live.calibrate import Plan as CalibrationPlan
from storqos.live.cpu_latency import can_keep_awake
from storqos.live.gateway_process import GatewayProcess
from storqos.live.replay import ReplayResult, replay
from storqos.model.device_profile import DeviceProfile, Op

#: Percentiles compared, besides IOPS.
PERCENTILES = (50, 95, 99)
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
#: Replays of a run, at most, until one keeps to the trace's schedule (a shared machine
#: may deschedule the replay or the gateway for milliseconds: measured on 2 cores, 0.2 %
#: to 19 % of requests issued over 1 ms late from one run to the next, and with it the
#: live p99 from +6 % to +100 % of the prediction).
ATTEMPTS = 3
#: Passes of the calibration validate makes of a file (each point's median kept): one
#: pass takes about 30 s on 2 CPUs.
CALIBRATE_PASSES = 3
#: Seconds per point of that calibration (the requests at rest take as long as their
#: spacings need).
CALIBRATE_SECONDS = 0.5
#: Above this share of the machine's CPU time taken by the host while validate
#: calibrated a file, it calibrates again (:func:`calibrate_file`). Twelve profiles
#: measured on this project's machine with 0.01-1.8 % taken (one to three passes) came
#: out alike (page-cached files: 54-63k IOPS, 64-105 µs per op; direct: 29-35k IOPS,
#: 171-242 µs); two one-pass ones at 10 % and 16 % (during a fresh `make test`)
#: did not: a direct one at 25k IOPS and 281 µs, a page-cached one at 45k IOPS and
#: 198 µs per op with k = 9, its predicted p50 three times the live one.
CALIBRATION_BUSY_SHARE = 0.05
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
#: What a gateway started and stopped around a measurement adds to it: replays of a
#: 20 s trace took 20.1-20.2 s, the 1 s check at rest 1.1 s.
GATEWAY_S = 0.2
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


def per_tenant(log: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """IOPS over the whole run (first arrival to last completion, as the simulator
    counts) and response-time percentiles per tenant, from a request log."""
    ends = log.select(pl.col("finish_ns").cast(pl.Int64).max() - pl.col("arrival_ns").cast(pl.Int64).min())
    span = float(ends.item() or 0) / 1e9 if log.height else 0.0
    g = log.group_by("tenant").agg(
        pl.len().alias("requests"),
        *(pl.col("response_ns").quantile(q / 100, "linear").alias(f"p{q}_ns") for q in PERCENTILES),
    ).with_columns((pl.col("requests") / span if span > 0 else pl.lit(0.0)).alias("iops")).sort("tenant")
    return g.with_columns(pl.col("tenant").map_elements(lambda t: names[int(t)] if int(t) < len(names) else str(t),
                                                        return_dtype=pl.Utf8).alias("name"))


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


def fill_file(path: Path, size: int, *, direct: bool = False) -> Path:
    """``path`` written full: ``size`` bytes of a pattern that is not zeros. ``direct``:
    then on the disk and out of the page cache, as a direct export reads it (its first
    direct reads do not wait for the written pages to go out)."""
    import os

    chunk = (np.arange(1 << 20, dtype=np.uint32) * 2654435761).tobytes()  # 4 MiB, not zeros
    with open(path, "wb") as f:
        for _ in range(size // len(chunk)):
            f.write(chunk)
        f.write(chunk[: size % len(chunk)])
        if direct:
            f.flush()
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return path


def _entry(name: str, path: Path, tenant: int, direct: bool) -> dict[str, Any]:
    """The gateway's entry of an export, served with O_DIRECT when ``direct``."""
    return {"name": name, "path": str(path), "tenant": tenant, **({"direct": True} if direct else {})}


def _exports(workdir: Path, tenants: int, size: int, fill: bool, direct: bool = False) -> list[dict[str, Any]]:
    """One export ``tN`` per tenant: its file sparse (emulated device) or written full
    (real files: :func:`fill_file`; the page cache holds them, :func:`_into_page_cache`
    before each replay, or with ``direct`` the disk, which the gateway then reads and
    writes with O_DIRECT)."""
    entries = []
    for t in range(tenants):
        p = workdir / f"tenant{t}.img"
        if fill:
            fill_file(p, size, direct=direct)
        else:
            with open(p, "wb") as f:
                f.truncate(size)
        entries.append(_entry(f"t{t}", p, t, direct))
    return entries


def _into_page_cache(paths: list[Path]) -> None:
    """Read the files through, so that a replay finds them in the page cache as the
    calibration found its own. A kernel that reclaims memory proactively drops a file's
    pages once they sit unused: on this machine class (DAMON pageout of pages idle for a
    minute) a 256 MiB export written full was 80 % in the cache a minute later, and a
    read of a dropped page took 55 µs instead of 1.5 µs, so the exports that waited out
    the calibration and the other runs' replays served part of their reads from the disk
    and the live times came out slower than predicted, by how long each file had waited."""
    import os

    for path in paths:
        with open(path, "rb", buffering=0) as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_WILLNEED)
            while f.read(4 << 20):
                pass


def calibration_plan(seconds: float = CALIBRATE_SECONDS) -> CalibrationPlan:
    """What a pass of :func:`calibrate_file`'s calibration measures (points of ``seconds``)."""
    from storqos.live.calibrate import DEFAULT_DEPTHS, DEFAULT_SIZES, IDLE_SPACINGS_US, plan

    return plan(sizes=DEFAULT_SIZES, depths=DEFAULT_DEPTHS, writes=True, seconds=seconds, engine="replay",
                idle_spacings_us=IDLE_SPACINGS_US, bursts=False)


def calibrate_file(path: Path, *, seconds: float = CALIBRATE_SECONDS, passes: int = CALIBRATE_PASSES, awake: str = "no",
                   direct: bool = False, direct_reads: str = "threads", attempts: int = ATTEMPTS,
                   progress: StageSink | Callable[[str], None] | None = None) -> DeviceProfile:
    """Profile of a file as the gateway serves it and the replay sees it: a FCFS
    gateway in front of ``path``, measured over NBD by the replay's own engine, the
    client whose times validate compares (service times, parallelism and capacity with
    the replay's per-request cost in them, the reads and writes at rest, and bursts of
    reads and of writes from rest, through a gateway of the profile's depth
    (:func:`bursts_at_depth`): the path's time per issue and per completion). On MSR
    hm_0 (bursty, quiet machine) it put the reads' predicted p50 within
    +40..+73 % of the live one and their p99 within -1..+52 %, where fio's measurement
    of the same gateway (a leaner client: twice the capacity) gave +98..+113 % and
    +106..+308 %. Writes included: the file is scratch. ``passes`` whole passes, each
    point's median kept (:func:`storqos.live.calibrate.median_point`): one pass disturbed
    for a few seconds made profiles of 11 servers where the others made 7, and doubled
    the predicted p50 of MSR hm_0's writes and FIU's tenants. ``awake`` as
    :func:`storqos.live.calibrate.calibrate`'s. The requests at rest are measured at
    0.25, 0.5, 1, 10 and 50 ms spacings too (:data:`storqos.live.calibrate.IDLE_SPACINGS_US`,
    about 10 s more per pass): a lone request's path grows with the time the threads
    slept before it, a trace's lone requests come up to seconds apart, and those of a
    bursty trace mostly soon after the last reply. ``direct``: the gateway reads and
    writes the file with O_DIRECT (the disk's times, not the page cache's), reading it
    as ``direct_reads`` says (``threads`` or ``io_uring``, the gateway's setting); the
    profile's ``direct`` and ``direct_reads`` say which. A calibration during which the
    host took more than :data:`CALIBRATION_BUSY_SHARE` of the machine's CPU time is made
    again, up to ``attempts`` in all, and the least disturbed profile kept (warned of if
    the host took over 1 % of it). ``progress`` is told of each stage (a line of
    text, or a :class:`storqos.base.progress.StageSink` that hears of the steps too)."""
    from storqos.live.calibrate import IDLE_SPACINGS_US, busy_warning, calibrate, stolen_share
    from storqos.live.gateway import gateway_config
    from storqos.live.host_steal import host_busy
    from storqos.model.specs import policy_spec

    cfg = gateway_config([_entry("cal", path, 0, direct)], policy_spec("fcfs"), listen="127.0.0.1:0",
                         direct_reads=_reads(direct, direct_reads))
    stages = sink(progress)
    todo = calibration_plan(seconds)

    def disturbed(p: DeviceProfile) -> str | None:
        share = stolen_share(p)
        if share <= CALIBRATION_BUSY_SHARE:
            return None
        return (f"the host took {p.steal_ms:,.0f} ms of CPU time from this machine meanwhile "
                f"({100 * share:.1f} % of it): a profile measured so comes out slower than the device")

    took = passes * todo.pass_seconds() + GATEWAY_S
    stages.stage(f"calibrating: {passes} pass{'es' if passes > 1 else ''} of {todo.points} points through a "
                 "gateway, as the replays will find the file", took)
    with GatewayProcess(cfg) as gw:
        kept, _ = _least_disturbed(
            attempts,
            lambda: calibrate(gw.uri("cal"), writes=True, seconds=seconds, passes=passes, engine="replay",
                              awake=awake, idle_spacings_us=IDLE_SPACINGS_US, warn_busy=False, bursts=False,
                              progress=(lambda i, n, _what: stages.step(i, n))),
            disturbed, stolen_share,
            lambda why, n: stages.stage(f"calibrating: {why}; calibrating again ({n}/{attempts})", took, keep=True))
    busy = host_busy(kept.steal_ms, kept.measured_s or 0.0)
    if busy:
        warn_input(busy_warning(busy))
    kept = bursts_at_depth(kept, path, direct=direct, direct_reads=direct_reads, awake=awake, passes=passes,
                           progress=stages)
    # An NBD target's profile says nothing of the page cache; this one went past it or not.
    return kept.model_copy(update={"direct": direct, "direct_reads": _reads(direct, direct_reads)})


#: Seed of the first burst measured through a gateway of the profile's depth
#: (:func:`bursts_at_depth`), apart from the calibration's seeds.
BURST_SEED = 1_000_003


def bursts_at_depth(profile: DeviceProfile, path: Path, *, direct: bool = False, direct_reads: str = "threads",
                    awake: str = "no", passes: int = CALIBRATE_PASSES,
                    progress: StageSink | Callable[[str], None] | None = None) -> DeviceProfile:
    """``profile`` with its bursts from rest measured through a FCFS gateway of depth k
    (the profile's parallelism) in front of ``path``, the depth a validation's gateways
    serve at (``burst_depth`` says so): random and sequential, of each op the profile
    measured, each ``passes`` times, the median kept; one burst every
    :func:`storqos.live.calibrate.burst_period_us` of the class's smallest requests' mean
    time. The calibration's gateway lets :data:`storqos.live.gateway.DEFAULT_DEPTH` requests
    through to the device at once, and a queue drains faster the more the device serves
    together: on direct I/O bursts through it had their replies 17-22 µs apart, through
    4 slots 26-34 µs (four calibrations). A model that drains the trace's
    bursts at the first rate put the live p50s of FIU mail (swap-ins in trains of ten
    reads 38 µs apart) 27-87 % above the prediction in three rounds of four, at the
    second rate 1-49 % (docs/validation.md)."""
    from storqos.live.calibrate import BURST_REQUESTS, POINT_OVERHEAD_S, burst_period_us, burst_point, burst_seconds, median_point
    from storqos.live.cpu_latency import cpus_awake
    from storqos.live.gateway import gateway_config
    from storqos.live.replay import export_size
    from storqos.model.specs import policy_spec

    stages = sink(progress)
    cfg = gateway_config([_entry("cal", path, 0, direct)], policy_spec("fcfs"), listen="127.0.0.1:0",
                         depth=profile.parallelism, direct_reads=_reads(direct, direct_reads))
    classes = sorted({(p.op, p.pattern) for p in profile.service})  # reads before writes, random first
    lones = [min((p for p in profile.service if (p.op, p.pattern) == c), key=lambda p: p.size) for c in classes]
    stages.stage(f"calibrating: bursts of {BURST_REQUESTS} 4 KiB requests from rest through {profile.parallelism} "
                 f"slots ({len(classes)} kinds, {passes} pass{'es' if passes > 1 else ''})",
                 GATEWAY_S + passes * sum(burst_seconds(lone.mean_us) + POINT_OVERHEAD_S["replay"] for lone in lones))
    got = []
    with cpus_awake(awake), GatewayProcess(cfg) as gw:
        uri = gw.uri("cal")
        export_bytes = export_size(uri, "calibrate")
        for b, ((op, pattern), lone) in enumerate(zip(classes, lones, strict=True)):
            points = []
            for k in range(passes):
                stages.step(b * passes + k, len(classes) * passes)
                points.append(burst_point(uri, export_bytes, op, seed=BURST_SEED + passes * b + k,
                                          period_us=burst_period_us(lone.mean_us), pattern=pattern))
            got.append(median_point(points))
    return profile.model_copy(update={"burst": got, "burst_depth": profile.parallelism})


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


def _reads(direct: bool, direct_reads: str) -> str | None:
    """The gateway's ``direct_reads`` for files served directly or not (None: none are)."""
    return direct_reads if direct else None


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
    from storqos.model.sim import simulate

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
            sim = simulate(df, run.policy, device, seed=run.seed, keep_requests=True)
            assert sim.requests is not None
            predicted = (sim.requests if profile is None or not real else
                         with_path(sim.requests, profile, df["offset"].to_numpy()))
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
    from storqos.model.specs import policy_spec

    cfg = gateway_config([_entry("rest", path, 0, direct)], policy_spec("fcfs"), listen="127.0.0.1:0",
                         direct_reads=_reads(direct, direct_reads))
    with cpus_awake(awake), GatewayProcess(cfg) as gw:
        point = replay_point(gw.uri("rest"), export_bytes, "read", "random", 4096, 1, REST_CHECK_S, seed,
                             spaced_us=SPACED_US)
    return point.percentile_us(50)


def burst_delay_ns(arrival_ns: np.ndarray, own_ns: np.ndarray, is_read: np.ndarray,
                   costs: dict[Op, tuple[float, float]], *, issued: Issued | None = None,
                   serve_ns: np.ndarray | None = None) -> np.ndarray:
    """How much later than its own response time (``own_ns``, from its issue) each
    request's reply comes, because the live path answers one request at a time (ns):
    the replay issues a request at its time or, in a burst, one issue after the previous
    one (``costs[op][0]`` ns per issue of ``op``); the path then answers it no sooner
    than its own time after its issue and no sooner than ``costs[op][1]`` ns after the
    reply before it (the time between two completions in a burst). Both per-op times are
    what :func:`storqos.live.calibrate.burst_point` measures on bursts from rest; on such a
    burst this gives back what it measured: the first reply at its own time, each next
    one a completion time later. ``arrival_ns`` in time order; ``issued``, when given,
    is what :func:`_issue_times` makes of them; ``serve_ns``, when given, each
    request's time between completions instead of its op's in ``costs``
    (:func:`serve_times_ns`)."""
    n = len(arrival_ns)
    delay = np.zeros(n, dtype=np.int64)
    if not n:
        return delay
    at, _ = issued if issued is not None else _issue_times(arrival_ns, is_read, costs)
    if serve_ns is None:
        serve_ns = serve_times_ns(is_read, costs)
    own = np.asarray(own_ns, dtype=np.float64)
    last_reply = -np.inf
    for i in range(n):
        alone = at[i] + own[i]
        reply = max(alone, last_reply + serve_ns[i])
        delay[i] = round(reply - alone)
        last_reply = reply
    return delay


def continues(tenant: np.ndarray, is_read: np.ndarray, offset: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Which requests continue their tenant's previous request of the same op (start
    where it ended): the sequential ones, in the order given."""
    start = np.asarray(offset, dtype=np.uint64)
    df = pl.DataFrame({"t": tenant, "r": is_read, "o": start, "e": start + np.asarray(size, dtype=np.uint64)})
    prev_end = df.select(pl.col("e").shift(1).over("t", "r"))["e"]
    return (prev_end == df["o"]).fill_null(False).to_numpy()


def serve_times_ns(is_read: np.ndarray, costs: dict[Op, tuple[float, float]], sequential: np.ndarray | None = None,
                   sequential_costs: dict[Op, tuple[float, float]] | None = None) -> np.ndarray:
    """Each request's time between completions in the path (ns; :func:`burst_delay_ns`):
    its op's in the random bursts (``costs``, :meth:`DeviceProfile.burst_costs_ns`), or
    in the sequential bursts (``sequential_costs``) for a request that continues its
    tenant's previous one of the op (``sequential``, :func:`continues`). Without either
    of the last two (profiles made before sequential bursts were measured), every
    request takes the random bursts'."""
    serve = _per_op(is_read, costs, 1)
    if sequential is None or sequential_costs is None:
        return serve
    return np.where(sequential, _per_op(is_read, sequential_costs, 1), serve)


def _per_op(is_read: np.ndarray, costs: dict[Op, tuple[float, float]], which: int) -> np.ndarray:
    """Each request's ``costs[op][which]`` (0: the time per issue, 1: per completion)."""
    return np.where(is_read, costs["read"][which], costs["write"][which])


#: When the replay issues each request and what issuing it takes, ns (:func:`_issue_times`).
Issued = tuple[np.ndarray, np.ndarray]


def _issue_times(arrival_ns: np.ndarray, is_read: np.ndarray, costs: dict[Op, tuple[float, float]]) -> Issued:
    """When the replay issues each request (ns), and what issuing it takes: at its
    time, or one issue (``costs[op][0]``) after the previous one while it is still
    issuing. ``arrival_ns`` in time order."""
    issue_ns = _per_op(is_read, costs, 0)
    arrival = np.asarray(arrival_ns, dtype=np.float64)
    issued = np.empty(len(arrival), dtype=np.float64)
    free_at = -np.inf  # the replay can issue again
    for i in range(len(arrival)):
        issued[i] = max(arrival[i], free_at)
        free_at = issued[i] + issue_ns[i]
    return issued, issue_ns


def burst_hold_ns(arrival_ns: np.ndarray, own_ns: np.ndarray, is_read: np.ndarray,
                  costs: dict[Op, tuple[float, float]], hold: dict[Op, float], *,
                  issued: Issued | None = None) -> np.ndarray:
    """How much later than its own response time (``own_ns``, from its issue) each
    request's reply comes because the requests issued after it, while it is in flight,
    hold the CPUs (ns): the replay issuing them (``costs[op][0]`` ns each, one after
    another as in :func:`burst_delay_ns`) and the gateway's loop parsing them keep the
    request's own work (a write's I/O thread) from a CPU. Each request issued before the
    reply puts it off by ``hold[op]`` × that request's time to issue (``op`` the waiting
    request's), the reply's new time letting in the requests issued until then.
    ``hold[op]`` is what :func:`burst_hold` reads off calibrate's bursts from rest
    (measured: a write mostly 1.0-1.6, a read mostly 0, its first position being within
    its spread at rest), so that on such a burst the first request is answered at the
    time measured at its position. The wait does not push the replies after it
    (:func:`burst_delay_ns` spaces those): measured, the later requests' replies come
    no later for it. ``arrival_ns`` in time order; ``issued`` as for
    :func:`burst_delay_ns`."""
    n = len(arrival_ns)
    delay = np.zeros(n, dtype=np.int64)
    if not n:
        return delay
    is_read = np.asarray(is_read, dtype=bool)
    at, issue_ns = issued if issued is not None else _issue_times(arrival_ns, is_read, costs)
    share = np.where(is_read, hold.get("read", 0.0), hold.get("write", 0.0))
    own = np.asarray(own_ns, dtype=np.float64)
    for i in range(n):
        if share[i] <= 0:
            continue
        reply = at[i] + own[i]
        j = i + 1
        while j < n and at[j] < reply:
            reply += share[i] * issue_ns[j]
            j += 1
        delay[i] = round(reply - at[i] - own[i])
    return delay


#: Quantile of an op's times at rest that the first position of its bursts must pass
#: for the requests issued after it to count as holding it (:func:`burst_hold`).
HOLD_EVIDENCE = 0.9


def burst_hold(profile: DeviceProfile) -> dict[Op, float]:
    """Per op, the share of the time to issue each request issued while a request is
    in flight by which its reply comes later (:func:`burst_hold_ns`), read off the
    burst's first position: the share with which that model, applied to
    the measured burst from rest (the first request taking the op's median time at
    rest, the others issued ``issue_us`` apart after it), answers the first request at
    its measured response (``response_us[0]``). 0 when that response is within the
    op's spread at rest (at or below its :data:`HOLD_EVIDENCE` quantile): a first
    position no later than many a request at rest is no evidence that the requests
    after it held it (reads, mostly: 4-70 µs over their median at rest; both ops on
    a loaded machine, whose times at rest spread to milliseconds). Nothing for an op
    without a time at rest measured; writes take the reads' when only reads were
    measured in bursts."""
    got: dict[Op, float] = {}
    random_bursts = [b for b in profile.burst or [] if b.pattern == "random"]
    for b in random_bursts:
        rest = profile.at_rest_write if b.op == "write" and profile.at_rest_write is not None else profile.at_rest
        if rest is None or b.issue_us <= 0:
            continue
        table = rest.quantile_table_us()
        own_us, spread_us = (float(x) for x in np.interp([0.5, HOLD_EVIDENCE], [q for q, _ in table],
                                                          [us for _, us in table]))
        late_ns = (b.response_us[0] - own_us) * 1e3
        if b.response_us[0] <= spread_us:  # as late as many a request at rest: no evidence
            got[b.op] = 0.0
            continue
        got[b.op] = _head_share(b.op, b.requests, b.issue_us * 1e3, own_us * 1e3, late_ns)
    if "read" in got and not any(b.op == "write" for b in random_bursts):
        got["write"] = got["read"]
    return got


def _head_share(op: Op, requests: int, issue_ns: float, own_ns: float, late_ns: float) -> float:
    """The share (:func:`burst_hold_ns`) with which the first of ``requests`` of ``op``
    due at once, issued ``issue_ns`` apart and ``own_ns`` long on
    its own, is answered ``late_ns`` later than on its own; 0 when nothing is issued
    while it is in flight. The wait rises with the share: bisection."""
    costs: dict[Op, tuple[float, float]] = {"read": (issue_ns, 0.0), "write": (issue_ns, 0.0)}
    arrival, own = np.zeros(requests, dtype=np.int64), np.full(requests, round(own_ns), dtype=np.int64)
    reads = np.full(requests, op == "read")

    def head(share: float) -> float:
        return float(burst_hold_ns(arrival, own, reads, costs, {op: share})[0])

    lo, hi = 0.0, late_ns / issue_ns  # at hi, the one request issued after it is enough
    if head(hi) < late_ns:
        return 0.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if head(mid) < late_ns else (lo, mid)
    return hi


def with_path(requests: pl.DataFrame, profile: DeviceProfile, offsets: np.ndarray | None = None) -> pl.DataFrame:
    """Simulated requests as a client sees them: a request that arrives when nothing is
    in flight (every earlier request finished) finds the client's and the gateway's
    threads asleep and pays the profile's path at rest on top (see
    :mod:`storqos.model.device_profile`), by how long they slept: the time from the last
    completion before it (the first request: the longest spacing measured), between the
    profile's spacings on a log scale when it measured several; one that arrives while
    others are in flight finds them awake and pays nothing more. Among the requests at
    rest the path goes by rank
    (the quickest simulated response gets the path's least quantile), as the
    measurement it comes from paired them: their responses then follow the measured
    reads at rest. Reads and writes are ranked apart, each op with its own path (the
    writes' when the profile measured writes at rest).

    With the profile's bursts measured, the times count from when the replay issues
    each request, as the replay's own log does: one request at a time, one issue
    (the profile's time per issue) after the one before it while it is still issuing
    (:func:`_issue_times`), and the log's ``arrival_ns`` becomes that time. A request
    issued late has spent that time waiting in the replay instead of in the device's
    queue: its simulated wait counts only for what is left of it once issued (in a
    burst of 101 reads of MSR hm_0 on a direct file, the replay issued the last one
    1.9 ms after its trace time and the gateway answered it 1.8 ms later; simulated,
    the same read waited 3.1 ms from its trace time). A reply also comes
    no sooner than the path's time between two completions after the reply before it
    (:func:`burst_delay_ns`): the simulated device's k servers may answer a burst k at
    a time, the live path answers one at a time, and a request waits for the slower of
    the two; with ``offsets`` (each request's offset by its ``id``, the row of the trace
    simulated) and sequential bursts measured, a request that continues its tenant's
    previous one of the op is spaced by the sequential bursts' time
    (:func:`serve_times_ns`). And no sooner than its own time put off by the requests issued while it is
    in flight (:func:`burst_hold_ns`, with the profile's :func:`burst_hold`): it comes
    at the later of the two."""
    if not requests.height:
        return requests
    req = requests.sort("arrival_ns", maintain_order=True)
    arrival = req["arrival_ns"].to_numpy().astype(np.int64)
    finish = req["finish_ns"].to_numpy().astype(np.int64)
    busy_until = np.maximum.accumulate(finish)
    # How long the target was idle before each request (the first: ever); at rest: >= 0.
    idle = np.full(len(arrival), np.inf)
    idle[1:] = arrival[1:] - busy_until[:-1]
    rest = idle >= 0
    extra = np.zeros(len(arrival), dtype=np.int64)
    reads = req["is_read"].to_numpy() if "is_read" in req.columns else np.ones(len(arrival), dtype=bool)
    resp_all = req["response_ns"].to_numpy()
    ops: tuple[tuple[Op, np.ndarray], ...] = (("read", rest & reads), ("write", rest & ~reads))
    for op, mask in ops:
        n = int(mask.sum())
        if n:
            rank = np.empty(n, dtype=np.float64)
            rank[np.argsort(resp_all[mask], kind="stable")] = (np.arange(n) + 0.5) / n
            extra[mask] = profile.path_at_rest_ns(rank, op, idle[mask])
    costs = profile.burst_costs_ns()
    if costs is None:
        add = pl.Series(extra).cast(pl.UInt64)
        return req.with_columns(pl.col("response_ns") + add, pl.col("finish_ns") + add)
    issued = _issue_times(arrival, reads, costs)
    issued_ns = np.round(issued[0]).astype(np.int64)
    # The wait the replay's own lag stands in for: at most the simulated queue wait.
    wait = req["wait_ns"].to_numpy().astype(np.int64) if "wait_ns" in req.columns else np.zeros_like(arrival)
    waited = np.minimum(issued_ns - arrival, wait)
    own = resp_all.astype(np.int64) + extra - waited
    seq_costs = profile.burst_costs_ns("sequential") if offsets is not None else None
    sequential = (continues(req["tenant"].to_numpy(), reads, np.asarray(offsets)[req["id"].to_numpy()],
                            req["size"].to_numpy()) if seq_costs is not None else None)
    serve = serve_times_ns(reads, costs, sequential, seq_costs)
    response = own + np.maximum(burst_delay_ns(arrival, own, reads, costs, issued=issued, serve_ns=serve),
                                burst_hold_ns(arrival, own, reads, costs, burst_hold(profile), issued=issued))
    out = req.with_columns(pl.Series("arrival_ns", issued_ns).cast(pl.UInt64),
                           pl.Series("response_ns", response).cast(pl.UInt64),
                           pl.Series("finish_ns", issued_ns + response).cast(pl.UInt64))
    if "wait_ns" in req.columns and "dispatch_ns" in req.columns:  # dispatched once issued, after what is left
        out = out.with_columns(pl.Series("wait_ns", wait - waited).cast(pl.UInt64),
                               pl.Series("dispatch_ns", issued_ns + wait - waited).cast(pl.UInt64))
    return out


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


_M = TypeVar("_M")


def _least_disturbed(attempts: int, measure: Callable[[], _M], disturbed: Callable[[_M], str | None],
                     rank: Callable[[_M], Any], again: Callable[[str, int], None]) -> tuple[_M, int]:
    """``measure()`` until a measurement is undisturbed (``disturbed`` says why one
    was, None when it was not) or ``attempts`` were made; the measurement of the least
    ``rank`` (the first of equals) and how many were made. ``again(why, n)`` is told
    before measurement ``n`` is made, from the 2nd on."""
    made: list[_M] = []
    for n in range(1, attempts + 1):
        made.append(measure())
        why = disturbed(made[-1])
        if why is None:
            break
        if n < attempts:
            again(why, n + 1)
    return min(made, key=rank), len(made)


__all__ = ["ATTEMPTS", "BURST_SEED", "CALIBRATE_PASSES", "CALIBRATE_SECONDS", "CALIBRATION_BUSY_SHARE", "DEFAULT_EXPORT_BYTES", "MAX_REPEATS", "MODES", "PERCENTILES", "REST_CHECK_S", "Estimate", "RunValidation", "Validation", "burst_delay_ns",
           "burst_hold", "burst_hold_ns", "bursts_at_depth", "calibrate_file", "calibration_plan", "continues", "fill_file", "per_tenant", "serve_times_ns", "validate",
           "with_path"]
