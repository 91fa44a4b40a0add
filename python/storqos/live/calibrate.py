"""Measure a storage target and make its device profile (``storqos calibrate``).

The target is an NBD URI, a regular file or a block device. Each point is one short
run: every class of request (read / write, random / sequential, each size) at queue
depth 1, then 4 KiB random reads at each queue depth, then 4 KiB random reads at rest
(one every :data:`SPACED_US` µs, so that every thread sleeps between them), and writes
at rest too when writes are measured, then, if asked, the same at other spacings
(``idle_spacings_us``: waking threads that slept longer costs more, and a request
soon after the last reply finds them awake), and with the
replay engine, bursts from rest
(:data:`BURST_REQUESTS` requests due at once, reads and, with writes, writes, random and
sequential). Two engines
measure (the reads at rest may take the other one: ``rest_engine``):

- ``fio`` (the default): fio's ``nbd`` engine (through libnbd) for a URI, its
  ``libaio`` engine for a file or a device (``O_DIRECT`` unless asked for the page
  cache). This is the storage's own time, seen by the leanest client there is.
- ``replay`` (NBD URIs only): ``storqos replay``'s engine in closed loop, the client of
  ``storqos validate``. Its times include the replay's own per-request path (Python and
  libnbd, tens of µs), so a simulation with this profile predicts what a replay
  measures, not what fio measures.

Asked to (``awake``), it keeps the CPUs out of their sleep states while it measures
(:mod:`storqos.live.cpu_latency`), and the profile records whether they were: a profile
measured with sleeping CPUs has a slower path at rest than a replay with awake ones
meets, and the other way round.

The fitted models are :mod:`storqos.model.device_profile`'s.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from storqos.base.errors import InputError, warn_input
from storqos.base.uri import NBD_SCHEMES, split
from storqos.live.cpu_latency import check_mode, cpus_awake
from storqos.live.host_steal import host_busy, steal_between, steal_ms, steal_share
from storqos.model.device_profile import (
    AT_REST_SPACING_US,
    PERCENTILES,
    PROFILE_VERSION,
    BurstPoint,
    DepthPoint,
    DeviceProfile,
    Op,
    Pattern,
    RestPoint,
    ServicePoint,
    fit,
)

if TYPE_CHECKING:
    import polars as pl

#: Sizes measured by default (bytes).
DEFAULT_SIZES = (4096, 16384, 65536, 262144, 1048576)
#: Queue depths of the parallelism curve.
DEFAULT_DEPTHS = (1, 2, 4, 8, 16, 32, 64)
#: What measures: fio, or storqos's replay engine (NBD only).
ENGINES = ("fio", "replay")
#: Requests given to the replay engine per second of a point (an upper bound on what one
#: Python thread issues; a point that runs out of them is just shorter).
REPLAY_SUPPLY_PER_S = 100_000
#: Spacing of the reads "at rest" (µs): long enough for the client's and the server's
#: threads to go to sleep between requests (seen: 1 ms and 2 ms give p50s within 10 %
#: of each other, 2 ms nearer a replay of a few hundred IOPS).
SPACED_US = AT_REST_SPACING_US
#: Reads at rest measured at least (the point lasts at least this many spacings).
AT_REST_SAMPLES = 500
#: Other spacings (µs) :func:`storqos.live.validate.calibrate_file` measures requests at
#: rest at too. Longer: one 4 KiB read every 10 and 50 ms took p50 125-189 and 191-250
#: µs through a gateway on this machine, where one every 2 ms took 69-97. Shorter: a
#: request that follows the last reply closely finds the threads still awake (a
#: page-cached file: p50 37-44 µs one every 100-200 µs, as back to back, 66-104 every
#: 400 µs, 103-176 every 2 ms; O_DIRECT: 118-123 every 300 µs, 106 back to back,
#: 155-168 every 500 µs, 277-311 every 2 ms), and the requests of bursty
#: traces mostly come so.
IDLE_SPACINGS_US = (250, 500, 1_000, 10_000, 50_000)
#: Shortest spacing measured at rest (µs): the replay issues a request within tens of
#: µs of its time.
MIN_SPACING_US = 100
#: Requests measured at least at each of those spacings (fewer than at 2 ms: at 50 ms
#: these take 3 s per op).
IDLE_SAMPLES = 60
#: Requests per burst from rest (replay engine): all due at the same time.
BURST_REQUESTS = 32
#: Most passes :func:`calibrate` makes (each measures every point once).
MAX_PASSES = 9
#: Bursts measured per op (the first two are not counted: the connections warm up).
BURSTS = 32
#: One burst every this many µs at least (3 × the burst's requests × the op's mean
#: time at depth 1 on a slower target): the previous burst is answered and every thread
#: asleep again (a burst of 32 writes took up to 7 ms on 2 CPUs shared with two
#: benchmarks).
BURST_PERIOD_US = 10_000


#: What a point takes besides its measuring time, by engine: fio started, its
#: ``ramp_time`` of 0.1 s and its report (0.34 s a point: 15 points of 0.2 s on a
#: file took 6.1 s more than 4); a replay's connection and warm-up (0.03 s:
#: validate's calibration of direct files took 26.9 s a pass of 39 points measuring
#: 25.7 s).
POINT_OVERHEAD_S = {"fio": 0.34, "replay": 0.03}


def rest_seconds(seconds: float) -> float:
    """How long the requests at rest (one every :data:`SPACED_US`) are measured."""
    return max(seconds, AT_REST_SAMPLES * SPACED_US / 1e6)


def idle_seconds(seconds: float, spacing_us: int) -> float:
    """How long the requests at rest one every ``spacing_us`` are measured."""
    return max(seconds, IDLE_SAMPLES * spacing_us / 1e6)


def burst_seconds(lone_us: float) -> float:
    """How long a burst point of requests that take ``lone_us`` alone lasts (its
    :data:`BURSTS` bursts, one every :func:`burst_period_us`), its replay's start aside."""
    return BURSTS * burst_period_us(lone_us) / 1e6


@dataclass(frozen=True)
class Plan:
    """What one pass of :func:`calibrate` measures, in this order: each request class
    at depth 1, the 4 KiB random reads at each depth, the requests at rest (reads, and
    writes with writes), at the other spacings, then the bursts."""

    service: tuple[tuple[Op, Pattern, int], ...]
    depths: tuple[int, ...]
    rest: tuple[Op, ...]
    idles: tuple[tuple[Op, int], ...]
    bursts: tuple[tuple[Op, Pattern], ...]
    seconds: float
    engine: str
    rest_engine: str

    @property
    def points(self) -> int:
        """Points a pass measures."""
        return len(self.service) + len(self.depths) + len(self.rest) + len(self.bursts) + len(self.idles)

    def pass_seconds(self, lone_us: float = 0.0) -> float:
        """About how long a pass takes (the bursts of requests that take ``lone_us`` alone)."""
        by_engine = (len(self.service) + len(self.depths)) * (self.seconds + POINT_OVERHEAD_S[self.engine])
        at_rest = len(self.rest) * (rest_seconds(self.seconds) + POINT_OVERHEAD_S[self.rest_engine])
        idle = sum(idle_seconds(self.seconds, sp) + POINT_OVERHEAD_S[self.rest_engine] for _, sp in self.idles)
        return by_engine + at_rest + idle + len(self.bursts) * (burst_seconds(lone_us) + POINT_OVERHEAD_S["replay"])


def plan(*, sizes: Sequence[int] = (), depths: Sequence[int] = (), writes: bool = False, seconds: float = 1.0,
         engine: str = "fio", rest_engine: str | None = None, idle_spacings_us: Sequence[int] = (),
         bursts: bool = True) -> Plan:
    """The :class:`Plan` of a pass of :func:`calibrate` with these settings."""
    rest = rest_engine or engine
    ops: tuple[Op, ...] = ("read", "write") if writes else ("read",)
    pats: tuple[Pattern, ...] = ("random", "sequential")
    return Plan(
        service=tuple((op, pat, s) for op in ops for pat in pats for s in sorted(set(sizes))),
        depths=tuple(sorted(set(depths))), rest=ops,
        idles=tuple((op, sp) for sp in sorted(set(idle_spacings_us)) for op in ops),
        bursts=tuple((op, pat) for op in ops for pat in pats) if bursts and "replay" in (engine, rest) else (),
        seconds=seconds, engine=engine if engine in POINT_OVERHEAD_S else "fio",
        rest_engine=rest if rest in POINT_OVERHEAD_S else "fio")


@dataclass(frozen=True)
class Target:
    """What fio is pointed at."""

    text: str
    engine: str
    args: tuple[str, ...]

    @property
    def is_nbd(self) -> bool:
        return self.engine == "nbd"


def target(text: str, direct: bool) -> Target:
    """The fio arguments for ``text`` (an NBD URI, a file or a block device)."""
    if "://" in text:
        if split(text, "TARGET").scheme not in NBD_SCHEMES:
            raise InputError(f"not an NBD URI, file or block device: {text!r}", "TARGET")
        return Target(text, "nbd", ("--ioengine=nbd", f"--uri={text}"))
    path = Path(text)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{text}: no such file or device", "TARGET") from None
    if stat.S_ISREG(st.st_mode):
        if st.st_size < (64 << 20):
            raise InputError(f"{text}: {st.st_size:,} bytes; give a file of at least 64 MiB "
                             "(e.g. truncate -s 1G FILE, or write it full for real reads)", "TARGET")
        size = [f"--size={st.st_size}"]
    elif stat.S_ISBLK(st.st_mode):
        size = []
    else:
        raise InputError(f"{text}: not a regular file or a block device", "TARGET")
    return Target(text, "libaio", ("--ioengine=libaio", f"--filename={text}", f"--direct={int(direct)}", *size))


#: fio is given this long at least (and 10 × a point's time) before it is taken for hung:
#: on a target that stops answering, fio waits for ever.
FIO_MIN_TIMEOUT_S = 60.0


def _fio() -> str:
    exe = shutil.which("fio")
    if exe is None:
        raise InputError("fio is not installed (Debian: apt-get install fio)", "calibrate")
    return exe


def run_point(tgt: Target, op: str, pattern: str, size: int, qd: int, seconds: float, workdir: Path,
              spaced_us: int = 0) -> dict[str, Any]:
    """One fio run; returns fio's statistics of the op (``read`` or ``write``). With
    ``spaced_us``, each request waits that long after the previous one completed."""
    rw = {("read", "random"): "randread", ("read", "sequential"): "read",
          ("write", "random"): "randwrite", ("write", "sequential"): "write"}[(op, pattern)]
    out = workdir / "fio.json"
    cmd = [
        _fio(), "--name=calibrate", "--output-format=json", f"--output={out}", *tgt.args,
        f"--rw={rw}", f"--bs={size}", f"--iodepth={qd}", "--time_based", f"--runtime={max(round(seconds * 1000), 50)}ms",
        "--ramp_time=0.1s", "--lat_percentiles=1", "--randrepeat=0", "--norandommap",
        "--percentile_list=" + ":".join(f"{p:g}" for p in PERCENTILES),
        *([f"--thinktime={spaced_us}"] if spaced_us else []),
    ]
    limit = max(FIO_MIN_TIMEOUT_S, 10 * seconds)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, timeout=limit)
    except subprocess.TimeoutExpired:  # fio itself waits for ever on a target that stopped answering
        raise InputError(f"fio did not finish within {limit:g} s on {tgt.text} ({rw}, {size} B, depth {qd}): "
                         "the target stopped answering", "calibrate") from None
    text = out.read_text() if out.exists() else ""
    if proc.returncode != 0 or "{" not in text:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        why = next((ln for ln in lines if "error" in ln.lower() or "fail" in ln.lower()), lines[-1] if lines else "")
        hint = (" (O_DIRECT may be unsupported here: try --buffered)"
                if "Invalid argument" in why and not tgt.is_nbd else "")
        raise InputError(f"fio failed on {tgt.text} ({rw}, {size} B, depth {qd}): {why.strip()}{hint}", "calibrate")
    job = json.loads(text[text.index("{"):])["jobs"][0]
    if job.get("error"):
        raise InputError(f"fio failed on {tgt.text} ({rw}, {size} B): error {job['error']}", "calibrate")
    return dict(job[op])


#: A closed-loop point with fewer requests than this after its ramp is measured again,
#: for twice as long each time (:data:`POINT_RETRIES` times at most): direct writes of a
#: file on this project's virtual disk now and then take 0.1-0.2 s, and one such stall
#: left a 0.5 s point of validate's calibration without a request after its ramp.
POINT_MIN_REQUESTS = 5
POINT_RETRIES = 2


def replay_point(uri: str, export_bytes: int, op: Op, pattern: Pattern, size: int, qd: int,
                 seconds: float, seed: int, spaced_us: int = 0) -> ServicePoint:
    """One point measured by the replay engine: ``qd`` requests in flight for
    ``seconds`` (the first fifth, at most 0.1 s, is a ramp and not counted), or with
    ``spaced_us``, one request every that many µs (open loop). A closed loop that a
    stall left with fewer than :data:`POINT_MIN_REQUESTS` requests after its ramp is
    measured again for twice as long, up to :data:`POINT_RETRIES` times."""
    import polars as pl

    from storqos.live.replay import replay

    if size > export_bytes:
        raise InputError(f"{uri}: the export ({export_bytes:,} bytes) is smaller than a {size:,}-byte request",
                         "calibrate")
    for retry in range(POINT_RETRIES + 1):
        n = int(seconds * 1e6 / spaced_us) + 1 if spaced_us else int(seconds * REPLAY_SUPPLY_PER_S) + qd
        slots = export_bytes // size
        if pattern == "random":
            off = np.random.default_rng(seed).integers(0, slots, n, dtype=np.uint64) * np.uint64(size)
        else:
            off = (np.arange(n, dtype=np.uint64) % np.uint64(slots)) * np.uint64(size)
        trace = pl.DataFrame({"arrival_ns": np.arange(n, dtype=np.int64) * spaced_us * 1000,
                              "tenant": np.zeros(n, dtype=np.uint32), "offset": off,
                              "size": np.full(n, size, dtype=np.uint32), "is_read": np.full(n, op == "read")})
        res = (replay(trace, {0: uri}, warmup=True) if spaced_us else
               replay(trace, {0: uri}, closed=qd, until_s=seconds, warmup=True))
        if res.errors:
            raise InputError(f"{uri}: {sum(res.errors.values()):,} {op}s failed: {res.first_error}", "calibrate")
        req = res.requests
        ramp = int(min(0.1, seconds / 5) * 1e9)
        kept = req.filter(pl.col("arrival_ns") >= ramp)
        if spaced_us or kept.height >= POINT_MIN_REQUESTS or retry == POINT_RETRIES:
            break
        seconds *= 2
    if not kept.height:
        raise InputError(f"the target completed no {pattern} {op} of {size} B in the time given (raise --time)",
                         "calibrate")
    lat_us = kept["response_ns"].to_numpy().astype(np.float64) / 1e3
    span_ns = int(kept["finish_ns"].to_numpy().max()) - ramp
    pcts = np.percentile(lat_us, PERCENTILES)
    fixed: list[tuple[float, float]] = []
    for q, us in zip(PERCENTILES, pcts.tolist(), strict=True):
        fixed.append((q, max(us, fixed[-1][1] if fixed else 0.0)))
    return ServicePoint(op=op, pattern=pattern, size=size, iops=kept.height / max(span_ns / 1e9, 1e-9),
                        mean_us=float(lat_us.mean()), min_us=max(float(lat_us.min()), 1e-3), percentiles_us=fixed)


def train_trace(requests: int, trains: int, export_bytes: int, *, spacing_us: float = 0.0,
                period_us: float = BURST_PERIOD_US, is_read: bool = True, seed: int = 0,
                pattern: Pattern = "random") -> pl.DataFrame:
    """The replay's input for ``trains`` trains of ``requests`` 4 KiB requests (reads,
    or writes if not ``is_read``) ``spacing_us`` apart (0: a burst, all due at once),
    one train every ``period_us``, at 4 KiB-aligned offsets within ``export_bytes``:
    drawn from ``seed``, or with ``pattern = "sequential"`` each one continuing the one
    before it (across trains too, wrapping at the end) from a start drawn from ``seed``."""
    import polars as pl

    n = requests * trains
    arrival = (np.repeat(np.arange(trains, dtype=np.int64) * round(period_us * 1000), requests)
               + np.tile(np.arange(requests, dtype=np.int64), trains) * round(spacing_us * 1000))
    slots = export_bytes // 4096
    rng = np.random.default_rng(seed)
    pages = ((rng.integers(0, slots, dtype=np.uint64) + np.arange(n, dtype=np.uint64)) % np.uint64(slots)
             if pattern == "sequential" else rng.integers(0, slots, n, dtype=np.uint64))
    off = pages * np.uint64(4096)
    return pl.DataFrame({"arrival_ns": arrival, "tenant": np.zeros(n, dtype=np.uint32), "offset": off,
                         "size": np.full(n, 4096, dtype=np.uint32), "is_read": np.full(n, is_read)})


def burst_period_us(lone_us: float) -> float:
    """Time from one burst to the next (µs) for requests that take ``lone_us`` alone:
    :data:`BURST_PERIOD_US`, or 3 × a burst's requests × that time on a slower target."""
    return max(BURST_PERIOD_US, 3 * BURST_REQUESTS * lone_us)


def burst_point(uri: str, export_bytes: int, op: Op, requests: int = BURST_REQUESTS, bursts: int = BURSTS,
                seed: int = 0, period_us: float = BURST_PERIOD_US, pattern: Pattern = "random") -> BurstPoint:
    """Bursts of ``requests`` 4 KiB ``pattern`` ``op``s due at the same time, one burst every
    ``period_us``, replayed open loop by the replay engine: per burst, the
    time between issues (first to last over ``requests`` − 1) and between completions
    (the same over the sorted completion times), and each position's response time;
    medians over the bursts, the first two left out."""
    from storqos.live.replay import replay

    if 4096 > export_bytes:
        raise InputError(f"{uri}: the export ({export_bytes:,} bytes) is smaller than a 4,096-byte request",
                         "calibrate")
    n = requests * bursts
    trace = train_trace(requests, bursts, export_bytes, period_us=period_us, is_read=op == "read", seed=seed,
                        pattern=pattern)
    res = replay(trace, {0: uri}, warmup=True)
    if res.errors:
        raise InputError(f"{uri}: {sum(res.errors.values()):,} {op}s failed: {res.first_error}", "calibrate")
    req = res.requests.sort("id")
    if req.height != n:
        raise InputError(f"{uri}: {n - req.height:,} of {n:,} {op}s in bursts did not complete", "calibrate")
    skip = min(2, bursts - 1)
    issued = req["arrival_ns"].to_numpy().astype(np.int64).reshape(bursts, requests)[skip:]
    done = np.sort(req["finish_ns"].to_numpy().astype(np.int64).reshape(bursts, requests)[skip:], axis=1)
    resp = req["response_ns"].to_numpy().astype(np.float64).reshape(bursts, requests)[skip:] / 1e3
    issue_us = float(np.median((issued[:, -1] - issued[:, 0]) / (requests - 1))) / 1e3
    finish_us = float(np.median((done[:, -1] - done[:, 0]) / (requests - 1))) / 1e3
    return BurstPoint(op=op, pattern=pattern, requests=requests, bursts=bursts - skip, period_us=period_us, issue_us=issue_us,
                      finish_us=finish_us, response_us=[round(float(x), 2) for x in np.median(resp, axis=0)])


def _service(op: Op, pattern: Pattern, size: int, st: dict[str, Any]) -> ServicePoint:
    lat = st["lat_ns"]
    pct = lat.get("percentile") or {}
    pts = sorted((float(k), v / 1e3) for k, v in pct.items())
    if not st.get("total_ios") or not pts:
        raise InputError(f"the target completed no {pattern} {op} of {size} B in the time given (raise --time)",
                         "calibrate")
    fixed: list[tuple[float, float]] = []
    for q, us in pts:  # fio's buckets can tie; keep the table rising
        fixed.append((q, max(us, fixed[-1][1] if fixed else 0.0, lat["min"] / 1e3)))
    return ServicePoint(op=op, pattern=pattern, size=size, iops=float(st["iops"]), mean_us=lat["mean"] / 1e3,
                        min_us=max(lat["min"] / 1e3, 1e-3), percentiles_us=fixed)


_Point = TypeVar("_Point", ServicePoint, DepthPoint, BurstPoint)


def median_point(points: Sequence[_Point]) -> _Point:
    """One measurement from several passes of the same point: every number the median
    of the passes' (a percentile table and a burst's positions element by element; the
    element-wise median of rising tables still rises). A pass that a disturbance slowed
    (another process on the CPUs for part of a second) is outvoted instead of becoming
    the profile."""
    if len(points) == 1:
        return points[0]
    dumps = [p.model_dump() for p in points]
    merged: dict[str, Any] = {}
    for key, first in dumps[0].items():
        values = [d[key] for d in dumps]
        if key == "percentiles_us":  # [percentile, µs] pairs: the µs at the first pass's percentiles
            merged[key] = [(q, float(np.median([np.interp(q, [a for a, _ in v], [b for _, b in v]) for v in values])))
                           for q, _ in first]
        elif isinstance(first, list):
            merged[key] = [float(x) for x in np.median(np.array(values, dtype=np.float64), axis=0)]
        elif isinstance(first, float) or (isinstance(first, int) and any(v != first for v in values)):
            merged[key] = type(first)(np.median(values))
        else:
            merged[key] = first
    return type(points[0]).model_validate(merged)


def busy_warning(busy: str) -> str:
    """The warning for a profile measured while the host took time from the machine
    (``busy``: :func:`storqos.live.host_steal.host_busy`'s sentence)."""
    return (f"{busy}: a profile measured while the host is busy may come out slower than the device; "
            "calibrate again when it is quieter")


def stolen_share(profile: DeviceProfile) -> float:
    """The share of the machine's CPU time the host took while ``profile`` was measured
    (0 where it was not counted)."""
    if not profile.steal_ms or not profile.measured_s:
        return 0.0
    return steal_share(profile.steal_ms, profile.measured_s)


def calibrate(
    text: str,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    depths: Sequence[int] = DEFAULT_DEPTHS,
    writes: bool = False,
    direct: bool = True,
    seconds: float = 1.0,
    passes: int = 1,
    engine: str = "fio",
    rest_engine: str | None = None,
    idle_spacings_us: Sequence[int] = (),
    awake: str = "no",
    progress: Callable[[int, int, str], None] | None = None,
    warn_busy: bool = True,
    bursts: bool = True,
) -> DeviceProfile:
    """Measure ``text`` with ``engine`` (see the module) and return its profile; the
    reads at rest with ``rest_engine`` (default: ``engine``), e.g. fio for the storage
    and the replay for what its client pays at rest; with ``idle_spacings_us``
    (each :data:`MIN_SPACING_US` µs to 10 s, other than :data:`SPACED_US`), the
    requests at rest at those spacings too.
    Writes are measured only with ``writes`` (they overwrite the target's data);
    without, the profile has reads only and the simulator serves writes with read
    times. With ``passes`` > 1 every point is measured that many times, one whole pass
    after another, and the profile keeps each point's median (:func:`median_point`).
    ``awake`` (auto, yes or no) keeps the CPUs awake while measuring
    (:func:`storqos.live.cpu_latency.cpus_awake`); the profile says whether they were.
    ``warn_busy``: warn when the host took time from the machine meanwhile
    (:func:`busy_warning`); a caller that measures again and keeps the least disturbed
    profile warns of the one it keeps. ``bursts``: measure the bursts from rest (replay
    engine); a caller that measures them elsewhere (``storqos validate``, through a
    gateway of the profile's depth) leaves them out."""
    from storqos.base.version import __version__
    from storqos.live.replay import export_size

    rest = rest_engine or engine
    if engine not in ENGINES or rest not in ENGINES:
        raise InputError(f"unknown engine {engine if engine not in ENGINES else rest!r} (fio or replay)", "--engine")
    if "replay" in (engine, rest) and "://" not in text:
        raise InputError(f"the replay engine measures NBD URIs only, not {text!r} (use --engine fio)", "--engine")
    tgt = target(text, direct)
    if not direct and tgt.is_nbd:
        raise InputError(f"{text} is served over NBD: there is no page cache of this host to go through "
                         "(--buffered is for files and block devices)", "--buffered")
    if not sizes or any(s <= 0 or s % 512 for s in sizes):
        raise InputError(f"sizes must be positive multiples of 512 bytes, got {list(sizes)}", "--sizes")
    if not depths or any(d < 1 or d > 1024 for d in depths):
        raise InputError(f"queue depths must be in 1..1024, got {list(depths)}", "--queue-depths")
    if not 1 <= passes <= MAX_PASSES:
        raise InputError(f"must be 1..{MAX_PASSES}, got {passes}", "--passes")
    if any(sp < MIN_SPACING_US or sp == SPACED_US or sp > 10_000_000 for sp in idle_spacings_us):
        raise InputError(f"spacings must be {MIN_SPACING_US} µs to 10 s, other than the {SPACED_US / 1000:g} ms "
                         "measured always, got " + ", ".join(f"{sp / 1000:g} ms" for sp in idle_spacings_us),
                         "--idle-spacings")
    check_mode(awake)
    todo = plan(sizes=sizes, depths=depths, writes=writes, seconds=seconds, engine=engine, rest_engine=rest,
                idle_spacings_us=idle_spacings_us, bursts=bursts)
    ops, classes, qds, plan_bursts, idles = todo.rest, todo.service, todo.depths, todo.bursts, todo.idles
    per_pass = todo.points
    total = per_pass * passes
    # Per point, its measurement in each pass (in the order of the plan).
    service: list[list[ServicePoint]] = [[] for _ in classes]
    curve: list[list[DepthPoint]] = [[] for _ in qds]
    at_rest: list[list[ServicePoint]] = [[] for _ in range(2 if writes else 1)]
    at_idle: list[list[ServicePoint]] = [[] for _ in idles]
    burst: list[list[BurstPoint]] = [[] for _ in plan_bursts]
    # Held (or not) for the whole measurement; the replays inside hold none of their own.
    started, stolen = time.monotonic(), steal_ms()
    with cpus_awake(awake) as held, tempfile.TemporaryDirectory(prefix="storqos-calibrate-") as tmp:
        work = Path(tmp)
        export_bytes = export_size(text, "calibrate") if "replay" in (engine, rest) else 0

        def measure(op: Op, pat: Pattern, size: int, qd: int, seed: int, spaced_us: int = 0,
                    by: str = engine, secs: float = seconds) -> ServicePoint:
            if by == "replay":
                return replay_point(text, export_bytes, op, pat, size, qd, secs, seed, spaced_us)
            return _service(op, pat, size, run_point(tgt, op, pat, size, qd, secs, work, spaced_us))

        step = 0

        def say(what: str) -> None:
            nonlocal step
            if progress:
                progress(step, total, what + (f", pass {step // per_pass + 1} of {passes}" if passes > 1 else ""))
            step += 1

        # Seeds within a pass: the classes, the depths, from per_pass the two points at
        # rest, then the bursts, then (from idle_base) the spacings at rest.
        idle_base = per_pass + 2 + len(plan_bursts)
        for k in range(passes):
            seed = k * (idle_base + len(idles))  # each pass its own offsets
            for i, (op, pat, s) in enumerate(classes):
                say(f"{pat} {op} {s // 1024} KiB")
                service[i].append(measure(op, pat, s, 1, seed + i))
            for j, qd in enumerate(qds):
                say(f"4 KiB random read, depth {qd}")
                pt = measure("read", "random", 4096, qd, seed + len(classes) + j)
                p = dict(pt.percentiles_us)
                curve[j].append(DepthPoint(qd=qd, iops=pt.iops, mean_us=pt.mean_us, p50_us=p.get(50.0, pt.mean_us),
                                           p99_us=p.get(99.0, pt.mean_us)))
            rest_secs = rest_seconds(seconds)
            for r, op in enumerate(ops):
                say(f"4 KiB random {op} at rest (one every {SPACED_US / 1000:g} ms)")
                at_rest[r].append(measure(op, "random", 4096, 1, seed + per_pass + r, SPACED_US, by=rest,
                                          secs=rest_secs))
            for x, (op, sp) in enumerate(idles):
                say(f"4 KiB random {op} at rest (one every {sp / 1000:g} ms)")
                at_idle[x].append(measure(op, "random", 4096, 1, seed + idle_base + x, sp, by=rest,
                                          secs=idle_seconds(seconds, sp)))
            for b, (op, pattern) in enumerate(plan_bursts):
                say(f"bursts of {BURST_REQUESTS} 4 KiB {pattern} {op}s from rest")
                lone = float(np.median([p.mean_us for pts, (o, pat, s) in zip(service, classes, strict=True)
                                        if o == op and pat == pattern and s == min(sizes) for p in pts]))
                burst[b].append(burst_point(text, export_bytes, op, seed=seed + per_pass + 2 + b,
                                            period_us=burst_period_us(lone), pattern=pattern))
        if progress:
            progress(total, total, "done")
    measured_s = time.monotonic() - started
    stolen = steal_between(stolen, steal_ms())
    busy = host_busy(stolen, measured_s)
    if busy and warn_busy:
        warn_input(busy_warning(busy))
    points = [median_point(pts) for pts in service]
    depth_curve = [median_point(pts) for pts in curve]
    rests = [median_point(pts) for pts in at_rest]
    return DeviceProfile(
        version=PROFILE_VERSION, storqos_version=__version__, target=text,
        engine=("replay" if engine == "replay" else tgt.engine) + (f", at rest {rest}" if rest != engine else ""),
        direct=direct if not tgt.is_nbd else False,
        created=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        time_per_point_s=seconds, passes=passes, cpus_awake=held, measured_s=measured_s, steal_ms=stolen, service=points, queue_depth=depth_curve, at_rest=rests[0],
        at_rest_write=rests[1] if writes else None,
        at_rest_idle=[RestPoint(**median_point(pts).model_dump(), spacing_us=sp)
                      for pts, (_, sp) in zip(at_idle, idles, strict=True)] or None,
        burst=[median_point(pts) for pts in burst] or None,
        **fit(points, depth_curve),
    )


__all__ = ["BURST_REQUESTS", "DEFAULT_DEPTHS", "DEFAULT_SIZES", "ENGINES", "IDLE_SPACINGS_US", "MAX_PASSES", "MIN_SPACING_US", "POINT_OVERHEAD_S", "Plan", "Target", "burst_period_us", "burst_point",
           "burst_seconds", "busy_warning", "calibrate", "idle_seconds", "median_point", "plan", "replay_point", "rest_seconds",
           "run_point", "stolen_share", "target", "train_trace"]
