"""Every policy's search at once: one task per policy on
:mod:`storqos.experiments.sweep`'s back ends, a local process pool (default 2 processes) or Dask;
the problem (its trace) is sent once per worker. A policy's search is sequential by
nature (each simulation decides the next), so the policies are what runs in parallel.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from storqos.planning.advise.advice import Advice
from storqos.planning.advise.capacity_search import search
from storqos.planning.advise.policies import DEFAULT_POLICIES, parse_policies
from storqos.planning.advise.problem import Problem
from storqos.planning.advise.proof import PolicyAdvice

#: Local processes when none are asked for (the machine advise is sized for: 2 cores).
DEFAULT_WORKERS = 2


def _search_task(kind: str, p: Problem) -> PolicyAdvice:
    return search(p, kind)


def advise(p: Problem, policies: Sequence[str] = DEFAULT_POLICIES, *, backend: str | None = "local",
           workers: int | None = None, on_done: Callable[[int], None] | None = None) -> Advice:
    """Search every policy (one task each, on ``backend``: :func:`storqos.experiments.sweep.map_runs`)."""
    from storqos.experiments.sweep import map_runs, parse_backend

    backend = parse_backend(backend)
    kinds = parse_policies(list(policies))
    t0 = time.perf_counter()
    if workers is None and backend == "local":
        workers = min(len(kinds), DEFAULT_WORKERS)
    results = map_runs(_search_task, kinds, shared={None: p}, backend=backend, workers=workers, on_done=on_done)
    return Advice(problem=p, results=results, backend=backend, wall_s=time.perf_counter() - t0)


__all__ = ["advise"]
