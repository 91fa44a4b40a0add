"""Progress display for long work, always on stderr (stdout is the result's): a
transient rich spinner with elapsed time, shown only when the work takes longer than
:data:`SHOW_AFTER_S` and stderr is a terminal (the work runs in a worker thread, the
Rust core releasing the GIL, so the spinner keeps turning); a progress bar of steps;
and :class:`Stages`, for commands that take minutes: what they will do and about how
long it takes, said first, then a line per stage off a terminal or a bar on one.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Protocol, TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from storqos.base.console import err

T = TypeVar("T")

#: Work shorter than this shows nothing.
SHOW_AFTER_S = 2.0


def run_with_progress(label: str, work: Callable[[], T]) -> T:
    """Run ``work()``; show a spinner labelled ``label`` if it runs longer than 2 s."""
    if not sys.stderr.isatty():
        return work()
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    # The caller's context variables (how messages name things) hold in the worker too.
    th = threading.Thread(target=contextvars.copy_context().run, args=(target,), daemon=True)
    th.start()
    th.join(SHOW_AFTER_S)
    if th.is_alive():
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
            console=err, transient=True,
        ) as p:
            p.add_task(label, total=None)
            while th.is_alive():
                th.join(0.1)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


@contextmanager
def progress_bar(label: str, total: int | None) -> Iterator[Callable[[int, int], None]]:
    """A progress bar of ``total`` steps on stderr (only on a terminal); yields
    ``update(done, total)``; ``total`` None: a bar that only says it runs."""
    if not sys.stderr.isatty():
        yield lambda done, total: None
        return
    with Progress(
        TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), console=err, transient=True,
    ) as p:
        task = p.add_task(label, total=total)
        yield lambda done, total: p.update(task, completed=done, total=total)


def about(seconds: float) -> str:
    """An estimate as a person says it: ``about 40 s`` (to 5 s below 90 s), ``about 7 min``
    (whole minutes below an hour), ``about 1.5 h``."""
    if seconds < 90:
        return f"about {max(5, 5 * round(seconds / 5))} s"
    if seconds < 3600:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.2g} h"


def clock(seconds: float) -> str:
    """Elapsed time as ``m:ss`` (``h:mm:ss`` from an hour)."""
    whole = int(seconds)
    h, rest = divmod(whole, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class StageSink(Protocol):
    """What long work tells of its progress (:class:`Stages` shows it; :class:`Lines`
    hands each line to a function)."""

    def begin(self, plan: str, estimate_s: float, upper_s: float | None = None) -> None:
        """What the work will do, and about how long it takes (at most ``upper_s``)."""

    def stage(self, text: str, seconds: float = 0.0, *, keep: bool = False) -> None:
        """A stage of about ``seconds`` begins (the one before it is done); ``keep``: its
        line stays on a terminal too (a measurement made again, and why)."""

    def step(self, done: int, total: int) -> None:
        """The current stage is ``done`` of ``total`` through."""


class Lines:
    """A :class:`StageSink` that hands the plan and every stage's line to ``say``."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.say = say

    def begin(self, plan: str, estimate_s: float, upper_s: float | None = None) -> None:
        self.say(plan_line(plan, estimate_s, upper_s))

    def stage(self, text: str, seconds: float = 0.0, *, keep: bool = False) -> None:
        self.say(text)

    def step(self, done: int, total: int) -> None:
        pass


def sink(progress: StageSink | Callable[[str], None] | None) -> StageSink:
    """``progress`` as a :class:`StageSink` (a function gets the lines; None: nothing)."""
    if progress is None:
        return Lines(lambda _line: None)
    if callable(progress):
        return Lines(progress)
    return progress


def plan_line(plan: str, estimate_s: float, upper_s: float | None = None) -> str:
    """``3 policies × 1 replay, about 3 min (up to 6 min if …)``."""
    more = (f" (up to {about(upper_s).removeprefix('about ')} if measurements are made again)"
            if upper_s is not None and about(upper_s) != about(estimate_s) else "")
    return f"{plan}, {about(estimate_s)}{more}"


class Stages:
    """Progress of a command that takes minutes, in stages, on stderr. :meth:`begin`
    says what it will do and about how long it will take (``validate: 3 policies × 3
    replays, about 7 min``); each :meth:`stage` then begins a stage of about ``seconds``
    and :meth:`step` says how far the current one is. Off a terminal (a log, a pipe, CI)
    that is one line per stage, led by the time since the start (``[1:05] fcfs:
    replaying 12,345 requests live (1/3)``), steps unsaid, and a last line with the time
    it took; on a terminal, one rich bar of the estimated work done (so its time left
    follows the estimate), the stage beside it. Use it as a context manager."""

    def __init__(self, name: str, *, console: Console | None = None) -> None:
        self.name = name
        self.console = console or err
        self.terminal = self.console.is_terminal
        self.estimate_s: float | None = None
        self._done_s = 0.0  # estimated seconds of the stages finished
        self._current_s = 0.0  # the current stage's estimate
        self._position = 0.0  # estimated seconds of work done
        self._total_s = 0.0
        self._started = time.monotonic()
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> Stages:
        self._started = time.monotonic()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
        if kind is None and self.estimate_s is not None:
            self._say(f"{self.name}: done in {clock(time.monotonic() - self._started)} (expected "
                      f"{about(self.estimate_s)})")

    def _say(self, line: str) -> None:
        (self._bar.console if self._bar is not None else self.console).print(line, markup=False, highlight=False,
                                                                              soft_wrap=True)

    def begin(self, plan: str, estimate_s: float, upper_s: float | None = None) -> None:
        self.estimate_s = self._total_s = estimate_s
        self._say(f"{self.name}: {plan_line(plan, estimate_s, upper_s)}")
        if self.terminal and self._bar is None:
            self._bar = Progress(
                TextColumn("{task.description}", markup=False), BarColumn(), TimeElapsedColumn(),
                TextColumn("left"), TimeRemainingColumn(), console=self.console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task("starting", total=max(self._total_s, 1e-9))

    def _show(self, description: str | None = None) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self._position, total=self._total_s, description=description)

    def stage(self, text: str, seconds: float = 0.0, *, keep: bool = False) -> None:
        self._done_s += self._current_s
        self._current_s = max(seconds, 0.0)
        self._position = self._done_s
        # A stage the estimate did not foresee (a measurement made again) makes the work longer.
        self._total_s = max(self._total_s, self._done_s + self._current_s)
        if self._bar is None or keep:
            self._say(f"[{clock(time.monotonic() - self._started)}] {text}")
        self._show(text)

    def step(self, done: int, total: int) -> None:
        if total > 0:
            self._position = self._done_s + self._current_s * min(max(done / total, 0.0), 1.0)
            self._show()
