"""The calibration :mod:`storqos.live.validate` makes of a file before replaying on it:
its device profile measured through a gateway by the replay's own engine, the bursts
from rest through a gateway of the profile's depth, each measured again while the host
disturbed it (:func:`least_disturbed`, which the replays use too)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from storqos.base.errors import warn_input
from storqos.base.progress import StageSink, sink
from storqos.live.calibrate import Plan as CalibrationPlan
from storqos.live.gateway_process import GatewayProcess
from storqos.live.validation_files import export_entry, gateway_direct_reads
from storqos.model.device_profile import DeviceProfile

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
#: What a gateway started and stopped around a measurement adds to it: replays of a
#: 20 s trace took 20.1-20.2 s, the 1 s check at rest 1.1 s.
GATEWAY_S = 0.2


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
    from storqos.model import registry
    from storqos.model.specs import policy_spec

    cfg = gateway_config([export_entry("cal", path, 0, direct)], policy_spec(registry.default().name), listen="127.0.0.1:0",
                         direct_reads=gateway_direct_reads(direct, direct_reads))
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
        kept, _ = least_disturbed(
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
    return kept.model_copy(update={"direct": direct, "direct_reads": gateway_direct_reads(direct, direct_reads)})


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
    from storqos.model import registry
    from storqos.model.specs import policy_spec

    stages = sink(progress)
    cfg = gateway_config([export_entry("cal", path, 0, direct)], policy_spec(registry.default().name), listen="127.0.0.1:0",
                         depth=profile.parallelism, direct_reads=gateway_direct_reads(direct, direct_reads))
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


_M = TypeVar("_M")


def least_disturbed(attempts: int, measure: Callable[[], _M], disturbed: Callable[[_M], str | None],
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


__all__ = ["ATTEMPTS", "BURST_SEED", "CALIBRATE_PASSES", "CALIBRATE_SECONDS", "CALIBRATION_BUSY_SHARE", "GATEWAY_S",
           "bursts_at_depth", "calibrate_file", "calibration_plan", "least_disturbed"]
