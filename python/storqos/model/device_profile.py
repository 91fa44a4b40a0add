"""A device profile: what ``storqos calibrate`` measured on a storage target, and the
models fitted to it (a TOML file).

It holds, per class of request (read / write, random / sequential, size), the response
time at queue depth 1 as a quantile table, and the throughput of 4 KiB random reads
against the queue depth (the parallelism curve). From them:

- the **capacity** is the best 4 KiB random-read IOPS over the queue depths;
- the **parallelism** k is the number of requests the target serves at once:
  Little's law at saturation, k = round(capacity × mean time of a 4 KiB random read at
  depth 1), at least 1 (of the two measurements of that time, the quicker);
- the **simulator model** is an array of k servers, each request's service time drawn
  from its class's measured quantiles, scaled so that k servers of 4 KiB random reads
  give the capacity (the time a lone request spends in the client and the network, which
  does not occupy the device, is scaled out);
- the **gateway's cost model** is a time per operation (k / capacity) and a bandwidth
  (the largest sequential read's);
- the **path at rest** is what a request arriving at an idle target pays on top of the
  model's service: 4 KiB random reads one at a time, spaced 2 ms apart, against the same
  reads back to back. Spaced out, the client's and the server's threads sleep between
  requests and each one wakes them up again (tens of µs here); back to back, nothing
  sleeps. ``storqos validate`` adds it to the simulated response times of the requests
  that arrive when nothing is in flight, which then predict what a client measures
  (the simulator's device model holds only the part that occupies the device). With
  writes measured, 4 KiB random writes at rest give writes their own path. The longer
  the threads slept, the more waking them costs (one 4 KiB read every 2, 10 and 50 ms
  through a gateway on this 2-vCPU machine: p50 69-97, 125-189 and 191-250 µs), and
  the sooner a request follows the last reply, the less it pays (a page-cached file:
  p50 37-44 µs one every 100-200 µs, as back to back, 66-104 every 400 µs, 103-176
  every 2 ms; O_DIRECT: 118-123 every 300 µs, 106 back to back, 155-168 every 500,
  277-311 every 2 ms): with requests measured at other spacings too
  (:class:`RestPoint`), a request's path goes by the time the target was idle before
  it, between the spacings on a log scale;
- the **path in a burst** (profiles measured by the replay engine): bursts of 4 KiB
  random requests due at the same time, issued from rest by the replay engine, reads
  and (with writes) writes apart. The replay issues one request at a time (the time
  between two issues) and the path behind it (the replay's reaping, loopback, the
  gateway's loop and I/O threads, all on the same CPUs) answers one at a time (the time
  between two completions). ``storqos validate`` gives each simulated request's reply
  no sooner than that time after the reply before it
  (:mod:`storqos.model.live_path`): the device model's k servers may answer a
  burst k at a time, the live path answers it one request after another. How fast the
  path answers a queue depends on how many requests the gateway lets through to the
  device at once: ``storqos validate`` measures the bursts through a gateway of depth k
  (``burst_depth``), as its gateways serve (direct I/O: replies 26-34 µs
  apart at depth 4, 17-22 µs through the calibration's gateway of depth 8). The first
  request of a burst is also answered later than at rest (a write: 370-920 µs against
  210-305 µs), the requests issued after it holding the CPUs: the **hold**
  (:meth:`DeviceProfile.hold_evidence`, fitted by the core, not stored) is the share of each later
  request's time to issue that puts a reply off, read off the burst's first position
  (:mod:`storqos.model.live_path`). Bursts of sequential requests (each
  continuing the one before it) are measured too: on a page-cached file a sequential
  write costs the path far less than a random one (replies 21-28 µs apart in a burst
  against 73-83 µs), and a
  trace's writes are often sequential (FIU mail's journal: 98 %). A request that
  continues its tenant's previous request of its op takes the sequential bursts' time
  between completions, any other the random bursts'.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from storqos.base.errors import InputError
from storqos.base.toml_schema import Table, read_toml, validate

#: Version of the profile format; a profile of another version is refused.
PROFILE_VERSION = 1
#: The first key of every profile.
PROFILE_FORMAT = "storqos-device-profile"
#: Spacing of the requests "at rest" (µs) of a profile's ``at_rest`` points: long
#: enough for the client's and the server's threads to go to sleep between requests.
AT_REST_SPACING_US = 2000
#: Quantile of an op's times at rest that the first position of its bursts must pass for
#: the requests issued after it to count as holding it (:meth:`DeviceProfile.hold_evidence`,
#: which hands the core this quantile with the burst, ``storqos_core::sim::live_path``): a
#: first position no later than many a request at rest is no evidence (reads mostly: 4-70
#: µs over their median at rest; both ops on a loaded machine, whose times at rest spread
#: to milliseconds).
HOLD_EVIDENCE = 0.9
#: Percentiles measured for each class (fio takes at most 20), besides the minimum.
PERCENTILES = (1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.9, 99.99)


Op = Literal["read", "write"]
Pattern = Literal["random", "sequential"]


class ServicePoint(Table):
    """One measured class at queue depth 1."""

    op: Op
    pattern: Pattern
    size: int = Field(gt=0, description="request size (bytes)")
    iops: float = Field(ge=0)
    mean_us: float = Field(gt=0)
    min_us: float = Field(gt=0)
    #: [percentile, µs] pairs, percentiles rising
    percentiles_us: list[tuple[float, float]]

    def quantile_table_us(self) -> list[tuple[float, float]]:
        """The service-time quantile function the simulator draws from, in µs: the
        minimum at 0, the measured percentiles, the top one closing at 1; rising."""
        pts = [(0.0, self.min_us)] + [(q / 100, us) for q, us in self.percentiles_us]
        pts[-1] = (1.0, pts[-1][1])
        table: list[tuple[float, float]] = []
        for q, us in pts:
            if table and q <= table[-1][0]:
                continue
            table.append((q, max(us, table[-1][1]) if table else us))
        return table

    def percentile_us(self, q: float) -> float:
        """The measured response time at percentile ``q`` (0-100), linear between
        the measured percentiles (µs)."""
        import numpy as np

        return float(np.interp(q, [p for p, _ in self.percentiles_us], [us for _, us in self.percentiles_us]))

    def table_mean_us(self) -> float:
        """Mean of :meth:`quantile_table_us` under linear interpolation, as the
        simulator's measured service computes it (not fio's ``mean_us``: the table
        stops at the top percentile)."""
        t = self.quantile_table_us()
        return sum((q1 - q0) * (a + b) / 2 for (q0, a), (q1, b) in zip(t, t[1:], strict=False))


class RestPoint(ServicePoint):
    """4 KiB random requests of one op at queue depth 1, one every ``spacing_us``."""

    spacing_us: float = Field(gt=0)


class DepthPoint(Table):
    """Throughput and response time of 4 KiB random reads at one queue depth."""

    qd: int = Field(ge=1)
    iops: float = Field(ge=0)
    mean_us: float = Field(gt=0)
    p50_us: float = Field(gt=0)
    p99_us: float = Field(gt=0)


class BurstPoint(Table):
    """Bursts of 4 KiB requests of one op and pattern, each burst's ``requests`` due at
    the same time and issued from rest by the replay engine (one burst every
    ``period_us``); times are medians over the bursts. Sequential: every request
    continues the one before it, from one burst to the next too."""

    op: Op
    #: random offsets, or each request continuing the one before it (absent from
    #: profiles made before sequential bursts were measured: random)
    pattern: Pattern = "random"
    requests: int = Field(ge=2)
    bursts: int = Field(ge=1)
    period_us: float = Field(gt=0)
    #: time from one issue to the next within a burst (the replay's cost of an issue)
    issue_us: float = Field(ge=0)
    #: time from one completion to the next within a burst (first to last over the
    #: burst's requests − 1): the time the path takes per request when they queue
    finish_us: float = Field(ge=0)
    #: response time (issue to reply) at each position of the burst, µs
    response_us: list[float] = Field(min_length=2)


class DeviceProfile(Table):
    """A device profile (see the module's description)."""

    format: Literal["storqos-device-profile"] = "storqos-device-profile"
    version: int
    storqos_version: str
    target: str
    engine: str
    direct: bool
    #: How the measured gateway read the direct file (``storqos serve --direct-reads``:
    #: threads or io_uring), for a profile `storqos validate` made of its own gateway;
    #: absent otherwise (and from profiles made before it was recorded)
    direct_reads: Literal["threads", "io_uring"] | None = None
    created: str
    time_per_point_s: float = Field(gt=0)
    #: Whole passes measured, each point's median kept (profiles made before passes
    #: were counted made one)
    passes: int = Field(default=1, ge=1)
    #: Whether the CPUs were kept out of their sleep states while measuring
    #: (:mod:`storqos.live.cpu_latency`; absent from profiles made before it was recorded)
    cpus_awake: bool | None = None
    #: How long the measurement took (s) and the CPU time the host took from the
    #: machine meanwhile (ms, all CPUs; :mod:`storqos.live.host_steal`): absent from profiles
    #: made before they were recorded, and the latter where the kernel does not count it
    measured_s: float | None = Field(default=None, gt=0)
    steal_ms: float | None = Field(default=None, ge=0)
    capacity_iops: float = Field(gt=0)
    parallelism: int = Field(ge=1)
    op_time_us: float = Field(gt=0)
    bandwidth_bytes_per_s: float = Field(gt=0)
    service: list[ServicePoint] = Field(min_length=1)
    queue_depth: list[DepthPoint] = Field(min_length=1)
    #: 4 KiB random reads at queue depth 1, spaced 2 ms apart (profiles made before it
    #: was measured have none: their path at rest is taken as nothing)
    at_rest: ServicePoint | None = None
    #: The same for 4 KiB random writes, measured when writes are (a write at rest may
    #: also wake a thread that a read served from the page cache does not: the
    #: gateway's I/O thread); without it writes take the reads' path
    at_rest_write: ServicePoint | None = None
    #: The same at other spacings, per op: longer ones (a request at rest pays more
    #: the longer the threads slept before it) and shorter ones (one that comes soon
    #: after the last reply finds them still awake, and pays less); absent from
    #: profiles made before they were measured, and by default: every request at rest
    #: then pays the 2 ms path
    at_rest_idle: list[RestPoint] | None = None
    #: Bursts from rest, per op (replay engine; absent from profiles made before they
    #: were measured, and from fio's: then no request waits in the path)
    burst: list[BurstPoint] | None = None
    #: The depth of the gateway the bursts went through, when the calibration chose it:
    #: ``storqos validate`` measures them through a gateway of the profile's
    #: parallelism, the depth its gateways then serve at. Absent: through the target
    #: as it was measured (``storqos calibrate``), or from profiles made before it was
    #: recorded
    burst_depth: int | None = Field(default=None, ge=1)

    def scale(self) -> float:
        """Factor from a class's measured response time at depth 1 to its service time
        in the model: k / capacity over the mean of the 4 KiB random read's table, so
        that k servers drawing from it serve the measured capacity."""
        return (self.parallelism / self.capacity_iops * 1e6) / self._base().table_mean_us()

    def _base(self, op: Op = "read") -> ServicePoint:
        """The 4 KiB random class of ``op`` (the read's if ``op`` was not measured),
        or the nearest size."""
        same = [p for p in self.service if p.op == op and p.pattern == "random"]
        if not same and op != "read":
            return self._base("read")
        return min(same or self.service, key=lambda p: abs(p.size - 4096))

    def sim_device(self, capacity_iops: float | None = None) -> dict[str, Any]:
        """The simulator's device spec: k servers of measured service times, each
        slowed by the requests in service beside it as the depth curve says
        (:meth:`slowdown`). With ``capacity_iops``, the same device scaled to that
        capacity: every service time × measured / wanted capacity, still k servers
        (``storqos advise`` searches it)."""
        s = self.scale() * (1.0 if capacity_iops is None else self.capacity_iops / capacity_iops)
        classes = []
        for p in self.service:
            qs = [[q, max(us * s * 1e3, 1.0)] for q, us in p.quantile_table_us()]
            classes.append({"op": p.op, "pattern": p.pattern, "bytes": p.size, "quantiles_ns": qs})
        spec: dict[str, Any] = {"kind": "array", "servers": self.parallelism, "assign": "shared",
                                "depth": self.parallelism, "service": {"kind": "measured", "classes": classes}}
        slow = self.slowdown()
        if any(f > 1.0 for f in slow):
            spec["slowdown"] = slow
        return spec

    def slowdown(self) -> list[float]:
        """Per number of requests in service n = 1 … k, the factor by which each one's
        time grows: the measured 4 KiB random reads' mean response time at depth n over
        their time at depth 1 (linear between the measured depths), never below 1.
        A disk behind the gateway's I/O threads answers 200 µs at depth 1, 280 µs at
        depths 2 and 4 and 390 µs at depth 8 (direct I/O): k servers of the
        depth-1 time would serve a train of requests almost twice as fast as it does.
        Not below 1: the k servers of :meth:`scale` already serve the best throughput
        measured at any depth (a page-cached file, quicker at depth 4 than at depth 1
        while its CPUs stay awake, keeps the plain k servers).

        With bursts measured (:class:`BurstPoint`), no factor goes above what lets the
        k servers answer queued reads as fast as the bursts' replies came: capacity ×
        the reads' time between two replies, at least 1 (:meth:`burst_cap`). The depth
        curve is a closed loop, each request issued once the reply before it came back,
        so at each depth it holds the client's turn-around too; a queue in the gateway
        does not wait for it. On direct files (one profile, the same
        gateway of depth 8): 19,900 reads/s in the closed loop at depth 8, replies 30-32
        µs apart (31,000-33,000/s) in its bursts, and 28,870 reads/s through the same 8
        slots with 32 in flight (the gateway's queue never empty); the curve's factors
        made MSR hm_0's bursts of reads 1.5-1.8× slower in the simulator than live."""
        import numpy as np

        pts = sorted(self.queue_depth, key=lambda p: p.qd)
        qd = [float(p.qd) for p in pts]
        mean = [p.mean_us for p in pts]
        one = float(np.interp(1.0, qd, mean))
        cap = self.burst_cap()
        return [min(cap, max(1.0, float(np.interp(float(n), qd, mean)) / one)) for n in range(1, self.parallelism + 1)]

    def burst_cap(self) -> float:
        """The largest slowdown factor the reads' bursts allow (:meth:`slowdown`):
        k servers slowed by f answer queued 4 KiB reads capacity / f per second, which
        is no slower than the bursts' 1 / ``finish_us`` while f ≤ capacity ×
        ``finish_us``; at least 1. Infinite without burst measurements."""
        costs = self.burst_costs_ns()
        if costs is None:
            return float("inf")
        return max(1.0, self.capacity_iops * costs["read"][1] / 1e9)

    def _writes_measured(self) -> bool:
        return any(p.op == "write" for p in self.service)

    def _rest_point(self, op: Op) -> ServicePoint | None:
        """The 2 ms point at rest of ``op``: the writes' when both they and the writes
        back to back were measured, else the reads'."""
        if op == "write" and self.at_rest_write is not None and self._writes_measured():
            return self.at_rest_write
        return self.at_rest

    def path_at_rest_us(self, op: Op = "read", measured: ServicePoint | None = None) -> list[tuple[float, float]]:
        """Table (fraction, µs) of the time a request at rest pays outside the model's
        service, by rank: at each quantile, the spaced reads' time less the model's
        service time of the same reads back to back, never below 0. It need not rise:
        added by rank to the model's service (:func:`storqos.model.live_path.with_path`), it
        gives back the spaced reads' own times, and a rising path would not (the
        back-to-back times of a page-cached file are bimodal, 16 µs or 70 µs, on 2 vCPUs:
        the gap at the low quantiles is not the gap at the median). For ``op = "write"``,
        the writes at rest less the 4 KiB random writes back to back, when both were
        measured (else the reads'). Empty without an ``at_rest`` measurement.
        ``measured``: another spacing's point of ``op`` (:attr:`at_rest_idle`) instead
        of the 2 ms one."""
        measured = measured or self._rest_point(op)
        if measured is None:
            return []
        base_op: Op = "write" if measured.op == "write" and self._writes_measured() else "read"
        # On the knots of both tables, so that the difference of the two piecewise-linear
        # quantile functions is exact between knots too.
        base, rest = self._base(base_op).quantile_table_us(), measured.quantile_table_us()
        import numpy as np

        qs = sorted({q for q, _ in base} | {q for q, _ in rest})
        hot = np.interp(qs, [q for q, _ in base], [us for _, us in base]) * self.scale()
        spaced = np.interp(qs, [q for q, _ in rest], [us for _, us in rest])
        return [(q, max(float(a - b), 0.0)) for q, a, b in zip(qs, spaced, hot, strict=True)]

    def rest_levels(self, op: Op = "read") -> list[tuple[float, list[tuple[float, float]]]]:
        """The paths at rest of ``op`` by the time the target was idle before the
        request (µs: a point's spacing less its mean response), the idle times rising:
        the 2 ms point's and :attr:`at_rest_idle`'s of ``op`` (the reads' where ``op``
        has none), shorter spacings and longer ones, but those that more than a tenth
        of their requests outlasted (their p90 at or over the spacing: the requests
        queued). Empty without an ``at_rest`` measurement."""
        first = self.path_at_rest_us(op)
        if not first:
            return []
        base = self._rest_point(op)
        assert base is not None
        spaced = [p for p in self.at_rest_idle or [] if p.op == op] or [
            p for p in self.at_rest_idle or [] if p.op == "read"]
        # A spacing that more than a tenth of its requests outlasted (its p90) left them
        # queueing, not at rest (O_DIRECT reads 250 µs apart on a slow minute: mean 250);
        # so did one its mean outlasts (a tail so heavy that the mean is past the p90, on
        # a busy host): it has no idle time to place on the log scale.
        found = [(max(AT_REST_SPACING_US - base.mean_us, 1.0), first)] + [
            (p.spacing_us - p.mean_us, self.path_at_rest_us(op, p)) for p in spaced
            if p.spacing_us > p.percentile_us(90.0) and p.spacing_us - p.mean_us >= 1.0]
        levels: list[tuple[float, list[tuple[float, float]]]] = []
        for idle, path in sorted(found, key=lambda x: x[0]):  # stable: the 2 ms point first on a tie
            if not levels or idle > levels[-1][0]:
                levels.append((idle, path))
        return levels

    def rest_p50s_us(self, op: Op = "read") -> list[tuple[float, float]]:
        """(idle µs, the path's p50 µs) at each level of :meth:`rest_levels`: the
        paths at rest in a line of a report."""
        return [(idle, dict(path).get(0.5, 0.0)) for idle, path in self.rest_levels(op)]

    def burst_costs_ns(self, pattern: Pattern = "random") -> dict[Op, tuple[float, float]] | None:
        """Per op, the replay's time per issue and the path's time per request in a
        burst of ``pattern`` (ns; :class:`BurstPoint`); writes take the reads' when only
        reads were measured. None without burst measurements of that pattern."""
        points = [b for b in self.burst or [] if b.pattern == pattern]
        if not points:
            return None
        got: dict[Op, tuple[float, float]] = {b.op: (b.issue_us * 1e3, b.finish_us * 1e3) for b in points}
        if "read" not in got:
            got["read"] = next(iter(got.values()))
        got.setdefault("write", got["read"])
        return got

    def hold_evidence(self) -> dict[Op, dict[str, float]]:
        """Per op, what its random burst from rest says of a hold
        (:mod:`storqos.model.live_path`): the burst's first position against the op's
        median time at rest and its :data:`HOLD_EVIDENCE` quantile (the writes' at rest
        when measured, else the reads'). Nothing for an op without a time at rest or
        a time per issue; writes take the reads' when only reads were measured in
        bursts."""
        import numpy as np

        got: dict[Op, dict[str, float]] = {}
        random_bursts = [b for b in self.burst or [] if b.pattern == "random"]
        for b in random_bursts:
            rest = self.at_rest_write if b.op == "write" and self.at_rest_write is not None else self.at_rest
            if rest is None or b.issue_us <= 0:
                continue
            table = rest.quantile_table_us()
            own_us, spread_us = (float(x) for x in np.interp([0.5, HOLD_EVIDENCE], [q for q, _ in table],
                                                              [us for _, us in table]))
            got[b.op] = {"requests": b.requests, "issue_ns": b.issue_us * 1e3, "rest_p50_us": own_us,
                         "rest_spread_us": spread_us, "first_us": b.response_us[0]}
        if "read" in got and not any(b.op == "write" for b in random_bursts):
            got["write"] = got["read"]
        return got

    def live_path(self) -> dict[str, Any]:
        """The live path's spec (:class:`storqos._core.LivePath`): per op, the paths at
        rest by idle time (:meth:`rest_levels`) and, with bursts measured, the time per
        issue and between completions (:meth:`burst_costs_ns`, random and sequential)
        and the evidence of a hold (:meth:`hold_evidence`)."""
        costs, seq, holds = self.burst_costs_ns(), self.burst_costs_ns("sequential"), self.hold_evidence()
        spec: dict[str, Any] = {}
        for op in ("read", "write"):
            burst = None if costs is None else {
                "issue_ns": costs[op][0], "finish_ns": costs[op][1],
                "sequential_finish_ns": None if seq is None else seq[op][1], "hold": holds.get(op)}
            spec[op] = {"rest": [{"idle_us": idle, "path_us": path} for idle, path in self.rest_levels(op)],
                        "burst": burst}
        return spec

    def cost(self) -> dict[str, Any]:
        """The gateway's cost model (``[cost]``)."""
        return {"enabled": True, "op_time_s": self.op_time_us / 1e6, "bytes_per_s": self.bandwidth_bytes_per_s}


def fit(points: list[ServicePoint], depths: list[DepthPoint]) -> dict[str, Any]:
    """The fitted numbers of a profile: capacity, parallelism, time per op, bandwidth."""
    if not depths:
        raise InputError("no queue-depth measurements to fit", "calibrate")
    capacity = max(d.iops for d in depths)
    if capacity <= 0:
        raise InputError("the target completed no request", "calibrate")
    # The time of a lone 4 KiB random read: measured twice (the depth sweep's depth 1 and
    # the service sweep's), the quicker one taken. On a shared machine interference only
    # adds time, and one slow measurement (threads that slept between requests: 130 µs
    # against 60 µs in the other, seen on 2 vCPUs) would double k and, with it, every
    # service time of the model.
    qd1 = min(depths, key=lambda d: d.qd)
    lone_us = qd1.mean_us
    if qd1.qd == 1:
        same = [p.mean_us for p in points if p.op == "read" and p.pattern == "random" and p.size == 4096]
        lone_us = min([lone_us, *same])
    k = max(1, round(capacity * lone_us / 1e6))
    op_time = k / capacity
    seq = [p for p in points if p.op == "read" and p.pattern == "sequential"] or [
        p for p in points if p.op == "read"]
    big = max(seq, key=lambda p: p.size)
    scale = (op_time * 1e6) / lone_us
    transfer = big.mean_us * scale / 1e6 - op_time
    bandwidth = big.size / transfer if transfer > 0 and big.size > 4096 else float(1 << 30)
    return {"capacity_iops": capacity, "parallelism": k, "op_time_us": op_time * 1e6,
            "bandwidth_bytes_per_s": bandwidth}


def load_profile(path: Path, where: str = "--device-profile") -> DeviceProfile:
    """Read and check a profile; one error line naming the file for anything wrong,
    including a profile of another format version."""
    text, raw = read_toml(path)
    if raw.get("format") != PROFILE_FORMAT:
        raise InputError(f"{path}: not a storqos device profile (no format = \"{PROFILE_FORMAT}\"); "
                         "make one with `storqos calibrate`", where)
    version = raw.get("version")
    if version != PROFILE_VERSION:
        raise InputError(f"{path}: a device profile of format version {version!r} (made by storqos "
                         f"{raw.get('storqos_version', '?')}); this storqos reads version {PROFILE_VERSION}: "
                         "run `storqos calibrate` again", where)
    return validate(DeviceProfile, raw, str(path), text)


def dump_profile(profile: DeviceProfile) -> str:
    """The profile as TOML text (with a header saying what it is)."""
    import tomli_w

    body = tomli_w.dumps(profile.model_dump(exclude_none=True), multiline_strings=False)
    head = ("# storqos device profile: measured by `storqos calibrate`, read by\n"
            "# `storqos simulate --device-profile` and `storqos serve --device-profile`.\n")
    tomllib.loads(body)  # what we write must read back
    return head + body


__all__ = ["AT_REST_SPACING_US", "HOLD_EVIDENCE", "PERCENTILES", "PROFILE_VERSION", "BurstPoint", "DepthPoint", "DeviceProfile", "Op",
           "Pattern", "RestPoint", "ServicePoint", "dump_profile", "fit", "load_profile"]
