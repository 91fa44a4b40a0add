"""Replay a trace over NBD against live storage (``storqos replay``), with libnbd.

Open loop (the default): every request is issued at its trace time divided by the
speed-up, whatever the storage does, up to a bound on requests in flight; a replay that
cannot keep to the schedule says so. Closed loop: each tenant keeps N requests in
flight, the next one issued when one completes (the trace gives only the requests).

Each tenant has its own NBD connection (libnbd handle), to its own export when a tenant
map says so: the gateway tells tenants apart by export. All connections are driven from
one thread: between issues the loop waits in ``select`` on the sockets and spins the last
:data:`SPIN_NS` before an issue time, yielding its CPU at every turn, which keeps the
issue-time error to tens of microseconds without keeping the storage's threads from a
CPU. Asked to (``awake``), it keeps the CPUs out of their sleep states while it
runs (:mod:`storqos.live.cpu_latency`): a sleeping CPU takes tens of µs or more to wake, which
the issue times and the response times otherwise carry. Offsets wrap into the export;
requests above 32 MiB (NBD's usual maximum) are split into pieces, each its own request.

The request log has the columns and types of ``storqos simulate --out``'s, so one
analysis reads both. The client cannot see the gateway's queue: ``dispatch_ns`` is the
issue time and ``wait_ns`` is 0 (the wait is part of ``response_ns``).
"""

from __future__ import annotations

import gc
import os
import select
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np
import polars as pl

from storqos.base.errors import InputError, warn_input
from storqos.live.cpu_latency import check_mode, cpus_awake
from storqos.live.host_steal import host_busy, steal_between, steal_ms, took

#: Largest request sent as one NBD command; larger ones are split.
MAX_REQUEST = 32 << 20
#: The loop spins (instead of sleeping in ``select``) this long before an issue time: a
#: thread woken from ``select`` may wait for a CPU for hundreds of µs when another
#: process runs there (measured: issue-time error p99 0.3-0.7 ms with a 60 µs spin,
#: 30-130 µs with 300 µs, at 10k IOPS beside the gateway on 2 cores).
#: While it spins the loop yields its CPU at each turn (``os.sched_yield``): the spin
#: keeps it runnable, and a thread that a completion wakes on the same CPU (the
#: gateway's, the disk's) would otherwise wait for the loop's time slice, milliseconds.
#: Measured on 2 vCPUs without the yield (benches/direct_trains.py): trains
#: of 4 KiB reads 80 µs apart through a direct-I/O gateway had their first reply at
#: 1.6-1.7 ms, against 0.55-0.66 ms with the loop not spinning.
SPIN_NS = 300_000
#: In a burst (requests due at once), replies are read at least this often (50 µs).
REAP_NS = 50_000
#: Longest single sleep in select() (20 ms; see ``pump``).
MAX_SLEEP_S = 0.02
#: A request issued later than this after its trace time counts as late.
LATE_NS = 1_000_000
#: Default of how long the replay waits for the storage before it gives up: for the
#: NBD handshake, and with requests in flight for a reply (a stopped or hung server,
#: one that accepts connections and says nothing, kept the replay waiting for ever).
STALL_S = 60.0
#: Schema of the request log (``storqos simulate --out``'s).
REQUEST_SCHEMA: dict[str, Any] = {
    "id": pl.UInt64, "tenant": pl.UInt32, "class": pl.UInt32, "arrival_ns": pl.UInt64,
    "dispatch_ns": pl.UInt64, "finish_ns": pl.UInt64, "target": pl.UInt8, "size": pl.UInt32,
    "is_read": pl.Boolean, "response_ns": pl.UInt64, "wait_ns": pl.UInt64,
}


def yield_cpu() -> None:
    """Let another runnable thread on this CPU run (``sched_yield``; nothing where the
    platform has none)."""
    if hasattr(os, "sched_yield"):
        os.sched_yield()


def _precise_timers() -> None:
    """Set this thread's timer slack to 1 µs (Linux; elsewhere nothing): sleeps in
    ``select`` then end within microseconds of their timeout, not 50 µs later."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(29, 1000, 0, 0, 0)  # PR_SET_TIMERSLACK
    except (OSError, AttributeError):
        pass


def nbd_module() -> Any:
    """libnbd's Python module, or a clear error saying how to get it."""
    try:
        import nbd  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise InputError("libnbd's Python bindings are not installed (Debian: apt-get install python3-libnbd; "
                         "`make setup` links them into .venv)", "replay") from None
    return nbd


@dataclass
class ReplayResult:
    """What a replay did."""

    #: one row per completed request, in ``storqos simulate --out``'s schema
    requests: pl.DataFrame
    #: issue time minus scheduled time, per issued request (ns; open loop only)
    issue_error_ns: np.ndarray
    #: requests that failed (NBD error), by tenant
    errors: dict[int, int]
    #: the first error message, if any
    first_error: str | None
    #: wall-clock seconds from the first issue to the last completion
    span_s: float
    #: the trace's span divided by the speed-up (s; open loop)
    scheduled_span_s: float
    #: export size (bytes) per tenant
    export_bytes: dict[int, int]
    #: ``open`` or ``closed:N``
    mode: str
    #: requests whose offset was wrapped into the export
    wrapped: int = 0
    #: pieces made by splitting requests above 32 MiB
    split: int = 0
    #: whether the CPUs were kept awake while it ran (:mod:`storqos.live.cpu_latency`)
    cpus_awake: bool = False
    #: CPU time the host took from this machine while it ran (ms, all CPUs; None where
    #: the kernel does not count it; :mod:`storqos.live.host_steal`)
    steal_ms: float | None = None

    @property
    def late(self) -> int:
        """Requests issued more than 1 ms after their trace time."""
        return int((self.issue_error_ns > LATE_NS).sum())

    def schedule(self) -> dict[str, float]:
        """The achieved schedule: issue-time error quantiles (µs), late requests and,
        where the kernel counts it, the CPU time the host took meanwhile (``steal_ms``)."""
        e = self.issue_error_ns
        if not e.size:
            return {}
        p50, p99, p999 = np.percentile(e, [50, 99, 99.9]) / 1e3
        out = {"issue_error_p50_us": float(p50), "issue_error_p99_us": float(p99),
               "issue_error_p999_us": float(p999), "issue_error_max_us": float(e.max() / 1e3),
               "late": self.late, "late_fraction": self.late / e.size}
        if self.steal_ms is not None:
            out["steal_ms"] = self.steal_ms
        return out

    def fell_behind(self) -> str | None:
        """A sentence if the replay could not keep to the trace's timing, else None."""
        e = self.issue_error_ns
        if not e.size:
            return None
        frac = self.late / e.size
        if frac > 0.01:
            return (f"the replay fell behind the trace: {100 * frac:.1f} % of requests issued more than 1 ms late "
                    f"(p99 {np.percentile(e, 99) / 1e6:.3g} ms)" + self.host_took())
        return None

    def disturbed(self) -> str | None:
        """Why the replay met another workload than the trace's, if it did: it fell
        behind (:meth:`fell_behind`), or the host took more than 1 % of the machine's CPU
        time while it ran (:func:`storqos.live.host_steal.host_busy`: the machine stopped now
        and then, and the requests answered meanwhile waited); else None."""
        return self.fell_behind() or host_busy(self.steal_ms, self.span_s)

    def host_took(self) -> str:
        """``", while the host took N ms ..."`` when the host took CPU time from this
        machine during the replay (steal time), else empty."""
        if not self.steal_ms:
            return ""
        return f", while {took(self.steal_ms)} (steal time)"

    def tenants(self) -> pl.DataFrame:
        """Per tenant: completed requests, IOPS over the replay's span, response-time
        mean and percentiles (ns), errors."""
        span = max(self.span_s, 1e-9)
        g = (self.requests.group_by("tenant").agg(
            pl.len().alias("completed"),
            pl.col("size").cast(pl.UInt64).sum().alias("bytes"),
            pl.col("response_ns").mean().alias("mean_ns"),
            *(pl.col("response_ns").quantile(q / 100, "linear").alias(f"p{q}_ns") for q in (50, 95, 99)),
            pl.col("response_ns").max().alias("max_ns"),
        ).with_columns((pl.col("completed") / span).alias("iops")).sort("tenant"))
        return g.with_columns(pl.col("tenant").map_elements(lambda t: self.errors.get(int(t), 0),
                                                            return_dtype=pl.Int64).alias("errors"))


def request_log(tenant: np.ndarray, size: np.ndarray, is_read: np.ndarray, issue: np.ndarray, finish: np.ndarray,
                ok: np.ndarray, start: int, target: np.ndarray | None = None) -> pl.DataFrame:
    """The requests that completed (``ok``; request ``i`` issued at ``issue[i]``, answered
    at ``finish[i]``, in ns) in ``storqos simulate --out``'s schema, times from ``start``;
    ``target`` is each request's device (0 when None)."""
    k = int(ok.sum())
    issued = (issue - start)[ok].astype(np.uint64)
    return pl.DataFrame({
        "id": np.flatnonzero(ok).astype(np.uint64), "tenant": tenant[ok].astype(np.uint32),
        "class": tenant[ok].astype(np.uint32), "arrival_ns": issued, "dispatch_ns": issued,
        "finish_ns": (finish - start)[ok].astype(np.uint64),
        "target": np.zeros(k, dtype=np.uint8) if target is None else target[ok].astype(np.uint8),
        "size": size[ok].astype(np.uint32), "is_read": is_read[ok],
        "response_ns": (finish - issue)[ok].astype(np.uint64), "wait_ns": np.zeros(k, dtype=np.uint64),
    }, schema=REQUEST_SCHEMA)


def failures(tenant: np.ndarray, ok: np.ndarray) -> tuple[dict[int, int], int | None]:
    """Failed requests per tenant, and the first failed request's index (None: none failed)."""
    if ok.all():
        return {}, None
    bad = np.flatnonzero(~ok)
    return {int(t): int(c) for t, c in zip(*np.unique(tenant[bad], return_counts=True), strict=True)}, int(bad[0])


def split_large(trace: pl.DataFrame, limit: int = MAX_REQUEST) -> tuple[pl.DataFrame, int]:
    """Requests above ``limit`` bytes as several of at most ``limit`` (same arrival,
    consecutive offsets); returns the trace and how many pieces were added."""
    big = trace.filter(pl.col("size") > limit)
    if not big.height:
        return trace, 0
    pieces = (big.with_columns(((pl.col("size").cast(pl.UInt64) + limit - 1) // limit).alias("_n"))
              .with_columns(pl.int_ranges(0, pl.col("_n")).alias("_k")).explode("_k")
              .with_columns(
                  (pl.col("offset") + pl.col("_k").cast(pl.UInt64) * limit).alias("offset"),
                  pl.min_horizontal(pl.col("size").cast(pl.Int64) - pl.col("_k") * limit, pl.lit(limit))
                  .cast(pl.UInt32).alias("size"))
              .drop("_n", "_k"))
    out = pl.concat([trace.filter(pl.col("size") <= limit), pieces.select(trace.columns)], how="vertical")
    return out.sort("arrival_ns", maintain_order=True), pieces.height - big.height


def place(offsets: np.ndarray, sizes: np.ndarray, export_bytes: int, *, wrap: bool, where: str) -> tuple[np.ndarray, int]:
    """Offsets inside an export of ``export_bytes``: wrapped modulo its size (and moved
    back so the request ends inside, 512-byte aligned) or, without ``wrap``, checked.
    Returns the offsets and how many were moved."""
    if sizes.size and int(sizes.max()) > export_bytes:
        raise InputError(f"a request of {int(sizes.max()):,} bytes is larger than the export "
                         f"({export_bytes:,} bytes)", where)
    ends = offsets + sizes
    outside = ends > export_bytes
    n = int(outside.sum())
    if not n:
        return offsets, 0
    if not wrap:
        raise InputError(f"the trace reaches byte {int(ends.max()):,}, beyond the export's {export_bytes:,} "
                         f"({n:,} requests); give --offsets wrap to fold them into it", where)
    off = offsets % np.uint64(export_bytes)
    over = off + sizes > export_bytes
    off[over] = ((np.uint64(export_bytes) - sizes[over]) // np.uint64(512)) * np.uint64(512)
    return np.where(outside, off, offsets), n


class _Conn:
    """One tenant's NBD connection and what it has in flight."""

    def __init__(self, nbd: Any, uri: str, tenant: int, where: str = "replay", timeout_s: float = STALL_S) -> None:
        self.h = nbd.NBD()
        self.uri = uri
        self.tenant = tenant
        try:
            self.h.aio_connect_uri(uri)
            end = time.monotonic() + timeout_s
            while self.h.aio_is_connecting() or self.h.aio_is_created():
                left = end - time.monotonic()
                if left <= 0:
                    raise InputError(f"cannot open {uri}: no NBD handshake within {timeout_s:g} s (the server "
                                     "took the connection and said nothing)", where)
                self.h.poll(max(1, int(min(left, 1.0) * 1000)))
        except nbd.Error as e:
            raise InputError(f"cannot open {uri}: {_nbd_message(e)}", where) from None
        if not (self.h.aio_is_ready() or self.h.aio_is_processing()):
            raise InputError(f"cannot open {uri}: the server closed the connection in the handshake", where)
        self.size = int(self.h.get_size())
        self.read_only = bool(self.h.is_read_only())
        self.fd = int(self.h.aio_get_fd())
        self.inflight: dict[int, tuple[int, Any]] = {}  # cookie -> (request index, buffer)

    def close(self) -> None:
        try:
            if not self.inflight:
                self.h.shutdown()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass
        self.h = None  # libnbd closes the handle when it is freed


def _nbd_message(e: Any) -> str:
    msg = str(getattr(e, "string", None) or e)
    return msg.splitlines()[0] if msg else type(e).__name__


def export_size(uri: str, where: str = "replay", timeout_s: float = STALL_S) -> int:
    """The size in bytes of the export behind ``uri`` (one line naming ``where`` if it
    cannot be opened within ``timeout_s``)."""
    c = _Conn(nbd_module(), uri, 0, where, timeout_s)
    try:
        return c.size
    finally:
        c.close()


def replay(
    trace: pl.DataFrame,
    uris: dict[int, str],
    *,
    speed: float = 1.0,
    max_outstanding: int = 16384,
    closed: int | None = None,
    connections: int = 1,
    wrap: bool = True,
    warmup: bool = False,
    until_s: float | None = None,
    awake: str = "no",
    stall_s: float = STALL_S,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replay ``trace`` (storqos's trace schema) over NBD; ``uris`` gives each tenant's
    export (every tenant of the trace must have one). Open loop at ``speed`` times the
    trace's rate with at most ``max_outstanding`` requests in flight in all, or closed
    loop with ``closed`` requests in flight per tenant. Each tenant's requests go round
    robin over ``connections`` connections to its export (a gateway bounds what one
    connection has in flight). With ``warmup``, each connection first reads one 4 KiB
    block (not logged), so that the first requests of the trace do not pay for a cold
    server. With ``until_s`` (closed loop only), no request is issued after that many
    seconds: the trace is then a supply, of which only what was issued is logged.
    ``awake`` (auto, yes or no) keeps the CPUs out of their sleep states while the
    requests go (:func:`storqos.live.cpu_latency.cpus_awake`). With no NBD handshake, or with
    requests in flight and no reply, for ``stall_s`` seconds, the storage has stopped
    answering: an :class:`InputError` (no result). ``progress(done, total)`` is called
    now and then."""
    nbd = nbd_module()
    if not (speed > 0 and np.isfinite(speed)):
        raise InputError(f"must be a finite number > 0, got {speed}", "--speed")
    if max_outstanding < 1:
        raise InputError(f"must be >= 1, got {max_outstanding}", "--max-outstanding")
    if closed is not None and closed < 1:
        raise InputError(f"must be >= 1, got {closed}", "--closed")
    if until_s is not None and (closed is None or not until_s > 0):
        raise InputError("a time bound needs closed loop and > 0 seconds", "replay")
    if not 1 <= connections <= 64:
        raise InputError(f"must be in 1..64, got {connections}", "--connections")
    if not (stall_s > 0 and np.isfinite(stall_s)):
        raise InputError(f"must be > 0 s and finite, got {stall_s:g} s", "--timeout")
    check_mode(awake)
    if not trace.height:
        raise InputError("the trace has no requests", "replay")
    trace, pieces = split_large(trace)
    tenants = sorted(int(t) for t in trace["tenant"].unique())
    missing = [t for t in tenants if t not in uris]
    if missing:
        raise InputError(f"tenant(s) {', '.join(map(str, missing))} of the trace have no export "
                         "(give --tenant-map TENANT=EXPORT)", "--tenant-map")
    conns: dict[int, list[_Conn]] = {}
    try:
        for t in tenants:
            conns[t] = [_Conn(nbd, uris[t], t, timeout_s=stall_s) for _ in range(connections)]
        arrival = trace["arrival_ns"].to_numpy().astype(np.int64)
        arrival = arrival - arrival.min()
        sched = (arrival / speed).astype(np.int64)
        tenant = trace["tenant"].to_numpy().astype(np.int64)
        size = trace["size"].to_numpy().astype(np.uint64)
        is_read = trace["is_read"].to_numpy().astype(bool)
        offset = trace["offset"].to_numpy().astype(np.uint64).copy()
        wrapped = 0
        for t, cs in conns.items():
            c = cs[0]
            m = tenant == t
            if c.read_only and not is_read[m].all():
                raise InputError(f"{c.uri}: the export is read-only and the trace writes to it", "replay")
            offset[m], w = place(offset[m], size[m], c.size, wrap=wrap, where=c.uri)
            wrapped += w
        if warmup:
            for cs in conns.values():
                for c in cs:
                    c.h.pread(min(4096, c.size), 0)
        with cpus_awake(awake) as held:
            before = steal_ms()
            res = _run(nbd, conns, sched, tenant, size, is_read, offset, max_outstanding, closed, until_s, progress,
                       wrapped, pieces, speed, stall_s)
            res.steal_ms = steal_between(before, steal_ms())
        res.cpus_awake = held
        return res
    finally:
        for cs in conns.values():
            for c in cs:
                c.close()


def _run(nbd: Any, conns: dict[int, list[_Conn]], sched: np.ndarray, tenant: np.ndarray, size: np.ndarray,
         is_read: np.ndarray, offset: np.ndarray, max_outstanding: int, closed: int | None, until_s: float | None,
         progress: Callable[[int, int], None] | None, wrapped: int, pieces: int, speed: float,
         stall_s: float) -> ReplayResult:
    n = sched.size
    issued = np.zeros(n, dtype=np.int64)
    finished = np.zeros(n, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    errors: dict[int, int] = {}
    first_error: list[str] = []
    read_bufs: dict[int, Any] = {}
    write_bufs: dict[int, Any] = {}
    clist = [c for cs in conns.values() for c in cs]
    by_fd = {c.fd: c for c in clist}
    # Each request's connection: its tenant's, round robin over the tenant's requests.
    which: list[_Conn] = [clist[0]] * n
    for t, cs in conns.items():
        for j, k in enumerate(np.flatnonzero(tenant == t).tolist()):
            which[k] = cs[j % len(cs)]
    # quiet_since: the last reply, or when requests went in flight after none were
    state = {"inflight": 0, "done": 0, "quiet_since": 0}
    stall_ns = int(stall_s * 1e9)
    now = time.perf_counter_ns

    def buffer(pool: dict[int, Any], nbytes: int) -> Any:
        b = pool.get(nbytes)
        if b is None:
            if len(pool) >= 64:
                pool.pop(next(iter(pool)))
            b = pool[nbytes] = nbd.Buffer(nbytes)
        return b

    def retire(c: _Conn) -> None:
        h = c.h
        while c.inflight:
            cookie = h.aio_peek_command_completed()
            if cookie <= 0:
                return
            t = now()
            i, _buf = c.inflight.pop(cookie)
            try:
                h.aio_command_completed(cookie)
                ok[i] = True
            except nbd.Error as e:
                errors[c.tenant] = errors.get(c.tenant, 0) + 1
                if not first_error:
                    first_error.append(f"{c.uri}: {'read' if is_read[i] else 'write'} of {int(size[i]):,} bytes at "
                                       f"{int(offset[i]):,}: {_nbd_message(e)}")
            finished[i] = t
            state["quiet_since"] = t
            state["inflight"] -= 1
            state["done"] += 1
            if on_done is not None:
                on_done(c)

    def pump(timeout_s: float) -> None:
        rd, wr = [], []
        for c in clist:
            d = c.h.aio_get_direction()
            if d & 1:
                rd.append(c.fd)
            if d & 2:
                wr.append(c.fd)
        try:
            # Linux lets select() oversleep by 0.1 % of its timeout (1 ms in a second):
            # short sleeps keep that under the timer slack (50 µs).
            r, w, _ = select.select(rd, wr, [], min(max(timeout_s, 0.0), MAX_SLEEP_S))
        except InterruptedError:
            return
        if not r and not w and state["inflight"] and now() - state["quiet_since"] > stall_ns:
            stalled()
        for fd in w:
            by_fd[fd].h.aio_notify_write()
        for fd in r:
            c = by_fd[fd]
            c.h.aio_notify_read()
            retire(c)
        for c in clist:  # a command may also complete while libnbd writes
            if c.inflight:
                retire(c)

    def stalled() -> NoReturn:
        waiting = sorted({c.uri for c in clist if c.inflight})
        raise InputError(f"no reply for {stall_s:g} s with {state['inflight']:,} request(s) in flight to "
                         f"{', '.join(waiting)}: the storage stopped answering (wait longer with --timeout)",
                         "replay")

    def issue(i: int) -> None:
        c = which[i]
        nbytes = int(size[i])
        issued[i] = now()
        if not state["inflight"]:
            state["quiet_since"] = issued[i]
        try:
            if is_read[i]:
                buf = buffer(read_bufs, nbytes)
                cookie = c.h.aio_pread(buf, int(offset[i]))
            else:
                buf = buffer(write_bufs, nbytes)
                cookie = c.h.aio_pwrite(buf, int(offset[i]))
        except nbd.Error as e:
            raise InputError(f"{c.uri}: the connection failed: {_nbd_message(e)}", "replay") from None
        c.inflight[cookie] = (i, buf)
        state["inflight"] += 1

    on_done: Callable[[_Conn], None] | None = None
    last_report = 0
    gc_was = gc.isenabled()
    gc.disable()
    _precise_timers()
    try:
        t0 = now() + 2_000_000  # a moment to settle
        if closed is None:
            last_pump = now()
            for i in range(n):
                due = t0 + int(sched[i])
                while True:
                    t = now()
                    if state["inflight"] >= max_outstanding:
                        pump(0.01)
                        continue
                    wait = due - t
                    if wait <= 0:
                        break
                    if wait > SPIN_NS:
                        pump((wait - SPIN_NS) / 1e9)
                    else:
                        pump(0.0)
                        # Spinning, hand the CPU to whatever else is runnable on it: the
                        # storage's threads woken by a completion would otherwise wait
                        # for this loop's time slice (see SPIN_NS).
                        yield_cpu()
                    last_pump = now()
                if state["inflight"] and t - last_pump > REAP_NS:
                    # In a burst, replies are still taken in now and then: a reply
                    # counts when it is read.
                    pump(0.0)
                    last_pump = now()
                issue(i)
                if progress is not None and i - last_report >= 1024:
                    last_report = i
                    progress(state["done"], n)
        else:
            queues = {t: list(np.flatnonzero(tenant == t)[::-1]) for t in conns}
            stop = now() + int(until_s * 1e9) if until_s is not None else None

            def refill(c: _Conn) -> None:
                q = queues[c.tenant]
                if stop is not None and now() >= stop:
                    q.clear()
                while q and sum(len(x.inflight) for x in conns[c.tenant]) < closed:
                    issue(int(q.pop()))

            on_done = refill
            for c in clist:
                refill(c)
        while state["inflight"]:
            pump(0.01)
            if progress is not None and state["done"] - last_report >= 1024:
                last_report = state["done"]
                progress(state["done"], n)
        if progress is not None:
            progress(state["done"], n)
    finally:
        if gc_was:
            gc.enable()
    went = issued > 0  # with a time bound, the rest of the trace was never issued
    start = int(issued[went].min())
    req = request_log(tenant, size, is_read, issued, finished, ok, start)
    err = (issued - (t0 + sched)) if closed is None else np.zeros(0, dtype=np.int64)
    return ReplayResult(
        requests=req, issue_error_ns=err, errors=errors, first_error=first_error[0] if first_error else None,
        span_s=(int(finished[went].max()) - start) / 1e9, scheduled_span_s=float(sched.max()) / 1e9,
        export_bytes={t: cs[0].size for t, cs in conns.items()},
        mode="open" if closed is None else f"closed:{closed}", wrapped=wrapped, split=pieces)


def warn_behind(res: ReplayResult) -> None:
    """Print the falling-behind warning, if any."""
    msg = res.fell_behind()
    if msg:
        warn_input(f"{msg}; lower --speed or raise --max-outstanding")


__all__ = ["LATE_NS", "MAX_REQUEST", "REQUEST_SCHEMA", "ReplayResult", "export_size", "failures", "place", "replay",
           "request_log", "split_large",
           "warn_behind"]
