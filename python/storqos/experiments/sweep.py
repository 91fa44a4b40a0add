"""Run many independent simulations: a local process pool by default, or a Dask cluster.

Every run is a pure function of its description (its seed included), so the backend
changes only where the runs execute, never their results: a sweep on a 2-worker Dask
``LocalCluster`` returns exactly what the local pool returns (the tests check it).

Backends (the ``--dask`` / ``--workers`` options of ``storqos run``):

- ``"local"`` (default): :class:`concurrent.futures.ProcessPoolExecutor` with the
  ``spawn`` start method (forking a process that holds polars' thread pool can
  deadlock); ``workers`` processes (default: the CPU count, at most the number of runs).
- ``"serial"``: in this process, one run after the other (debugging, tiny sweeps).
- ``"tcp://HOST:8786"``: a running Dask scheduler (``dask.distributed.Client``), e.g.
  ``dask scheduler`` and ``dask worker tcp://HOST:8786 --nthreads 1`` on each machine;
  the workers need the same storqos installed (runs are sent by reference to
  :func:`storqos.experiments.experiment.run_one`). tests/python/test_sweep_dask.py runs a sweep on
  such a cluster (a scheduler and 2 workers on 127.0.0.1) against a serial run.
- ``"local:N"``: a Dask ``LocalCluster`` of N single-threaded worker processes, started
  for the sweep (forked from a fork server that outlives it, for the next sweeps of the
  process) and closed after it, without the housekeeping a sweep does not use
  (:data:`LOCAL_CLUSTER_CONFIG`).

Runs start longest first, as far as the sweep can tell (``kind_of``): runs of one kind
(the same policy and grid point, another seed) take about as long as each other, so
every kind's first run starts early, in input order, and after that the next run is
one of the kind that has taken longest so far. The last runs to start are then the
short ones, and the workers finish together instead of one waiting out another's long
last run. Only as many runs as there are workers are in flight; results come back in
input order whatever the order they ran in.

Large inputs every run needs (a trace DataFrame) are passed once per worker, not once
per run: ``shared[key]`` is sent to each pool worker by its initializer, or scattered to
the Dask workers, and ``fn(item, shared[key_of(item)])`` runs there. Warnings a run
raises in a worker are shown by this process, as if the run had been local.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
import uuid
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, TypeVar

from storqos.base.errors import InputError

T = TypeVar("T")
R = TypeVar("R")

#: Dask settings of the ``local:N`` clusters, whose workers run one run each at a time
#: and whose only data is the shared inputs broadcast to all of them:
#:
#: - no sampling profiler in the workers (every 10 ms it takes the GIL to walk the
#:   running thread's stack, for a dashboard these clusters do not have), and the event
#:   loops' health tick every 500 ms instead of 20 (it only warns of a blocked loop).
#:   With these two, a run went 4-14 % faster beside another on 2 CPUs (8 paired rounds
#:   of 8 runs; benches/sweep.py, BENCHMARKS.md);
#: - the memory monitors (a nanny's and its worker's, which spill, pause or restart a
#:   worker near its memory limit) every second instead of every 100 ms, the system
#:   monitor (CPU, memory and network figures for the dashboard) every 5 s instead of
#:   500 ms, and no work stealing (the sweep gives each worker thread one run at a time,
#:   so no queue is ever there to steal from). An idle 2-worker cluster then takes
#:   1.9-2.0 % of one core in all its processes instead of 4.7-4.9 % (over 30 s);
#:   in a sweep that is CPU time taken from the runs;
#: - no active memory manager: every 2 s it drops all replicas of a key but one where no
#:   queued task needs it, so the inputs broadcast to every worker were dropped from all
#:   but one between runs (within 5 s of the broadcast), to be fetched again
#:   by the next run on each other worker;
#: - the worker processes forked from a fork server (``forkserver``) instead of each
#:   spawned afresh: the server, started at the first cluster of the process, imports
#:   distributed and its optional packages once (the nannies' default of ``spawn`` has
#:   every worker import them itself), and a worker forked from it also shuts down
#:   sooner. A sweep's start and tear-down on a 2-worker cluster (two runs of 0.5 s):
#:   0.76-0.85 s over the runs in a fresh process against 1.04-1.16 s
#:   spawned, 0.19-0.20 s for the next sweeps of the same process against 0.74-0.95 s.
#:   Only the server imports those packages before forking (polars, whose thread pool
#:   must not be forked, is not among them); storqos is imported by each worker at its
#:   first run, as before.
LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "500ms",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.scheduler.work-stealing": False,
    "distributed.scheduler.active-memory-manager.start": False,
    "distributed.worker.multiprocessing-method": "forkserver",
}

#: What a pool worker received from its initializer: the shared inputs by key.
_SHARED: dict[Hashable, Any] = {}


def _init_worker(shared: Mapping[Any, Any]) -> None:
    _SHARED.clear()
    _SHARED.update(shared)


def _call_shared(fn: Callable[[Any, Any], Any], item: Any, key: Hashable) -> tuple[Any, list[tuple[type[Warning], str]]]:
    return _recorded(fn, item, _SHARED.get(key))


def _recorded(fn: Callable[[Any, Any], Any], item: Any, shared: Any) -> tuple[Any, list[tuple[type[Warning], str]]]:
    """``fn(item, shared)`` in a worker, with the warnings it raised (to be shown by the
    parent, as the parent shows warnings: one ``warning:`` line each, repeats once)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn(item, shared)
    return result, [(w.category, str(w.message)) for w in caught]


def _unwrap(recorded: tuple[Any, list[tuple[type[Warning], str]]]) -> Any:
    result, caught = recorded
    for category, message in caught:
        warnings.warn(message, category, stacklevel=1)
    return result


class LongestFirst:
    """The order runs start in: each kind's first run in input order, then the pending
    run whose kind has taken longest on average (a kind started but not yet timed counts
    as longest: it may be). Ties go to input order. ``kinds[i]`` is run ``i``'s kind."""

    def __init__(self, kinds: Sequence[Hashable]) -> None:
        self._kinds = list(kinds)
        self._pending = list(range(len(self._kinds)))
        self._started: set[Hashable] = set()
        self._took: dict[Hashable, tuple[float, int]] = {}  # kind -> (seconds summed, runs)

    def __len__(self) -> int:
        return len(self._pending)

    def _guess(self, i: int) -> float:
        total, n = self._took.get(self._kinds[i], (math.inf, 1))
        return total / n

    def next(self) -> int:
        """The run to start now (there must be one pending)."""
        new = next((pos for pos, i in enumerate(self._pending) if self._kinds[i] not in self._started), None)
        if new is None:
            new = max(range(len(self._pending)), key=lambda pos: (self._guess(self._pending[pos]), -pos))
        i = self._pending.pop(new)
        self._started.add(self._kinds[i])
        return i

    def took(self, i: int, seconds: float) -> None:
        """Run ``i`` finished after ``seconds``."""
        total, n = self._took.get(self._kinds[i], (0.0, 0))
        self._took[self._kinds[i]] = (total + seconds, n + 1)


def _collect(f: Any, running: dict[Any, tuple[int, float]], order: LongestFirst, results: list[Any],
             on_done: Callable[[int], None] | None) -> None:
    """A run's future ``f`` is done (pool or Dask): its time goes to ``order``, its result
    (and the warnings it raised) to ``results``, its index to ``on_done``."""
    i, started = running.pop(f)
    order.took(i, time.perf_counter() - started)
    results[i] = _unwrap(f.result())
    if on_done:
        on_done(i)


def parse_backend(value: str | None) -> str:
    """Check a backend string (``local``, ``serial``, ``local:N``, ``tcp://HOST:PORT``)."""
    if value is None or value in ("local", "serial"):
        return value or "local"
    if value.startswith("local:"):
        n = value.split(":", 1)[1]
        if not n.isdigit() or int(n) < 1:
            raise InputError(f"expected local:N with N >= 1 workers, got {value!r}", "--dask")
        return value
    if value.startswith(("tcp://", "tls://", "ucx://")) and ":" in value.split("://", 1)[1]:
        return value
    raise InputError(f"expected tcp://HOST:PORT or local:N, got {value!r}", "--dask")


def backend_from_flags(dask: str | None, workers: int | None, pool: str) -> str:
    """The back end a command's ``--dask`` and ``--workers`` name (``local`` without
    ``--dask``), both checked: ``--workers`` >= 1, and not beside ``--dask``, whose
    cluster has workers of its own (``pool`` says what --workers sizes)."""
    if workers is not None and workers < 1:
        raise InputError(f"must be >= 1, got {workers}", "--workers")
    if workers is not None and dask:  # the Dask cluster has its own workers: this one would do nothing
        raise InputError(f"give --workers ({pool}) or --dask (a Dask cluster), not both", "--workers")
    return parse_backend(dask) if dask else "local"


def map_runs(
    fn: Callable[[T, Any], R],
    items: Sequence[T],
    *,
    shared: Mapping[Any, Any] | None = None,
    key_of: Callable[[T], Hashable] = lambda _item: None,
    kind_of: Callable[[T], Hashable] | None = None,
    backend: str | None = "local",
    workers: int | None = None,
    on_done: Callable[[int], None] | None = None,
) -> list[R]:
    """``[fn(item, shared[key_of(item)]) for item in items]`` on ``backend``, in input
    order. ``fn`` must be a module-level function (it is pickled). ``kind_of(item)``:
    items of one kind take about as long as each other (:class:`LongestFirst`; without
    it, they start in input order). ``on_done(i)`` is called in this process as run
    ``i`` finishes (for a progress bar)."""
    backend = parse_backend(backend)
    shared = shared or {}
    n = len(items)
    results: list[Any] = [None] * n
    if n == 0:
        return []
    if backend == "serial" or (backend == "local" and (workers or 0) == 1):
        for i, item in enumerate(items):
            results[i] = fn(item, shared.get(key_of(item)))
            if on_done:
                on_done(i)
        return results
    order = LongestFirst([kind_of(item) for item in items] if kind_of else list(range(n)))
    if backend == "local":
        k = max(1, min(workers or os.cpu_count() or 1, n))
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=k, mp_context=ctx, initializer=_init_worker, initargs=(shared,)) as ex:
            running: dict[Future[Any], tuple[int, float]] = {}
            while order or running:
                while order and len(running) < k:
                    i = order.next()
                    running[ex.submit(_call_shared, fn, items[i], key_of(items[i]))] = (i, time.perf_counter())
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in done:
                    _collect(f, running, order, results, on_done)
        return results
    return _map_dask(fn, items, shared, key_of, order, backend, on_done)


#: How long a scheduler given by address has to greet a connection.
SCHEDULER_GREETING_S = 10.0


def _probe_scheduler(address: str) -> None:
    """Fail at once, in one line, when nothing listens at a ``tcp://HOST:PORT`` scheduler
    address (distributed itself retries until its 10 s timeout), and within
    :data:`SCHEDULER_GREETING_S` when what listens there says nothing: a Dask scheduler
    sends its handshake as soon as it takes a connection, and distributed's ``Client``
    waited for one for ever, whatever its timeout."""
    import socket

    from storqos.base.uri import split

    u = split(address, "--dask")
    if u.scheme != "tcp" or not u.hostname or u.port is None:
        return
    try:
        with socket.create_connection((u.hostname, u.port), timeout=3.0) as s:
            s.settimeout(SCHEDULER_GREETING_S)
            try:
                greeted = bool(s.recv(1))
            except TimeoutError:
                raise InputError(f"{address} took the connection but said nothing within "
                                 f"{SCHEDULER_GREETING_S:g} s: not a Dask scheduler, or a hung one",
                                 "--dask") from None
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__
        raise InputError(f"cannot reach the Dask scheduler at {address}: {reason}", "--dask") from None
    if not greeted:
        raise InputError(f"{address} closed the connection without a word: not a Dask scheduler", "--dask")


def _map_dask(
    fn: Callable[[Any, Any], Any],
    items: Sequence[Any],
    shared: Mapping[Any, Any],
    key_of: Callable[[Any], Hashable],
    order: LongestFirst,
    backend: str,
    on_done: Callable[[int], None] | None,
) -> list[Any]:
    import logging

    import dask
    from dask.distributed import Client, LocalCluster
    from dask.distributed import as_completed as dask_completed

    # Keep distributed's informational logging off the user's terminal.
    logging.getLogger("distributed").setLevel(logging.ERROR)
    cluster = None
    try:
        if backend.startswith("local:"):
            # The nannies pass the settings in force now on to their workers, and the
            # scheduler reads its own at start; a scheduler given by address keeps its
            # workers' own.
            with dask.config.set(LOCAL_CLUSTER_CONFIG), warnings.catch_warnings():
                # Its scheduler's HTTP server (health and metrics, on 127.0.0.1) takes
                # another port when 8787 is taken, in a four-line warning that leaves
                # the user nothing to do.
                warnings.filterwarnings("ignore", message=r"Port \d+ is already in use", category=UserWarning)
                cluster = LocalCluster(
                    n_workers=int(backend.split(":", 1)[1]),
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
            client = Client(cluster)
        else:
            _probe_scheduler(backend)
            try:
                client = Client(backend, timeout="10s")
            except OSError as e:
                raise InputError(f"cannot reach the Dask scheduler at {backend}: {e}", "--dask") from None
        with client:
            remote = {k: client.scatter(v, broadcast=True) for k, v in shared.items()}
            token = uuid.uuid4().hex[:12]

            def slots() -> int:  # worker threads now (workers may join or leave a cluster)
                return max(1, sum(w.get("nthreads", 1) for w in client.scheduler_info()["workers"].values()))

            results: list[Any] = [None] * len(items)
            running: dict[Any, tuple[int, float]] = {}
            pool = dask_completed()

            def start() -> None:
                i = order.next()
                f = client.submit(_recorded, fn, items[i], remote.get(key_of(items[i])), pure=False,
                                  key=f"storqos-run-{token}-{i}")
                running[f] = (i, time.perf_counter())
                pool.add(f)

            k = slots()
            while order and len(running) < k:
                start()
            for f in pool:
                _collect(f, running, order, results, on_done)
                k = slots() if order else k
                while order and len(running) < k:
                    start()
            return results
    finally:
        if cluster is not None:
            cluster.close()


__all__ = ["LOCAL_CLUSTER_CONFIG", "LongestFirst", "backend_from_flags", "map_runs", "parse_backend"]
