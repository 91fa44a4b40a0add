"""Progress display for long work: a transient rich spinner with elapsed time, shown on
stderr only when the work takes longer than :data:`SHOW_AFTER_S` and stderr is a
terminal. The work runs in a worker thread (the Rust core releases the GIL), so the
spinner keeps turning while it runs.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from storqos.console import err

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

    th = threading.Thread(target=target, daemon=True)
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
def progress_bar(label: str, total: int) -> Iterator[Callable[[int, int], None]]:
    """A progress bar of ``total`` steps on stderr (only on a terminal); yields
    ``update(done, total)``."""
    if not sys.stderr.isatty():
        yield lambda done, total: None
        return
    with Progress(
        TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), console=err, transient=True,
    ) as p:
        task = p.add_task(label, total=total)
        yield lambda done, total: p.update(task, completed=done, total=total)
