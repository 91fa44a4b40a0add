"""The order a sweep starts its runs in (storqos.experiments.sweep.LongestFirst): each kind's first
run early, then the kinds that took longest, so that no worker waits out another's long
last run."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from storqos.experiments.sweep import LongestFirst, map_runs


def _makespan(kinds: Sequence[str], seconds: dict[str, float], workers: int, ordered: bool) -> tuple[float, list[int]]:
    """A sweep on ``workers`` workers, each run taking its kind's time: when it ends and
    the order the runs started in (input order when not ``ordered``)."""
    order = LongestFirst(kinds) if ordered else None
    pending = list(range(len(kinds)))
    started: list[int] = []
    ends: list[tuple[float, int]] = []  # (time, run) of the runs in flight
    now = 0.0
    while pending or ends:
        while pending and len(ends) < workers:
            i = order.next() if order else pending[0]
            pending.remove(i)
            started.append(i)
            heapq.heappush(ends, (now + seconds[kinds[i]], i))
        now, i = heapq.heappop(ends)
        if order:
            order.took(i, seconds[kinds[i]])
    return now, started


def test_a_long_last_run_no_longer_ends_the_sweep_alone() -> None:
    # Four 1 s runs then one 4 s run on 2 workers: in input order the 4 s run starts at
    # 2 s, alone, and the sweep takes 6 s; started with the first, it runs beside the
    # four short ones: 4 s, the least 8 s of work can take on 2 workers.
    kinds = ["short"] * 4 + ["long"]
    seconds = {"short": 1.0, "long": 4.0}
    assert _makespan(kinds, seconds, 2, ordered=False)[0] == 6.0
    span, started = _makespan(kinds, seconds, 2, ordered=True)
    assert span == 4.0
    assert started == [0, 4, 1, 2, 3]


def test_once_timed_the_longest_kind_goes_first_and_ties_keep_input_order() -> None:
    kinds = ["a", "b", "c", "a", "b", "c", "a", "b", "c"]
    order = LongestFirst(kinds)
    assert [order.next() for _ in range(3)] == [0, 1, 2]  # each kind's first run, in input order
    order.took(0, 1.0)
    order.took(1, 5.0)
    # c started but not timed yet: it may be the longest, so it goes before b
    assert order.next() == 5
    order.took(2, 3.0)
    assert [order.next() for _ in range(len(order))] == [4, 7, 8, 3, 6]  # b (5 s), c (3 s), a (1 s)


def test_results_come_back_in_input_order_whatever_order_they_ran_in() -> None:
    items = list(range(12))
    got = map_runs(divmod, items, shared={None: 5}, kind_of=lambda i: i % 3, backend="local", workers=2)
    assert got == [divmod(i, 5) for i in items]
