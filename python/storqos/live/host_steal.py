"""CPU time the host took from this machine while a live measurement ran (steal time).

On a virtual machine the host runs each virtual CPU as a thread of its own and now and
then runs something else in its place. For the guest the CPU simply stops: a replay's
clock jumps, requests due meanwhile go out late, and nothing inside the machine shows
why. Linux counts that time per CPU as *steal* in ``/proc/stat`` (in clock ticks,
USER_HZ: 10 ms on most systems). A replay reads it before and after, and when it falls
behind it says how much the host took, so that a user can tell a host that stalled from a
replay or a gateway that could not keep up.

On this project's 2-CPU virtual machine a kernel trace of replays at 10k IOPS found the
replay's CPU silent (no system call, interrupt or task switch) for 0.5-14 ms six to ten
times per 3 s run, and steal counted 10-30 ms over each run (BENCHMARKS.md, "Replay
timing"). On bare metal steal stays 0.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

#: The kernel's CPU accounting.
STAT = Path("/proc/stat")


@dataclass(frozen=True)
class CpuTimes:
    """The machine's CPU time so far, summed over its CPUs (ms)."""

    #: time the host ran something else while a CPU of this machine had work (steal)
    steal_ms: float
    #: idle, waiting for I/O included
    idle_ms: float
    #: all of it: user, nice, system, idle, iowait, irq, softirq, steal (the guest
    #: columns are inside user and nice already)
    total_ms: float

    @property
    def busy_ms(self) -> float:
        """What this machine's processes and kernel ran: neither idle nor stolen."""
        return self.total_ms - self.idle_ms - self.steal_ms


def cpu_times(stat: Path = STAT) -> CpuTimes | None:
    """The machine's CPU time so far, or None where the kernel does not count steal time
    (not Linux, or no steal column)."""
    try:
        with open(stat, encoding="ascii") as f:
            first = f.readline().split()
    except (OSError, UnicodeDecodeError):
        return None
    # "cpu  user nice system idle iowait irq softirq steal ...", in clock ticks.
    if len(first) < 9 or first[0] != "cpu" or not all(v.isdigit() for v in first[1:]):
        return None
    ticks = [int(v) for v in first[1:9]]
    tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")
    return CpuTimes(steal_ms=ticks[7] * tick_ms, idle_ms=(ticks[3] + ticks[4]) * tick_ms, total_ms=sum(ticks) * tick_ms)


def steal_ms(stat: Path = STAT) -> float | None:
    """Steal time so far, summed over the machine's CPUs (ms), or None where the kernel
    does not count it."""
    t = cpu_times(stat)
    return None if t is None else t.steal_ms


def took(steal: float) -> str:
    """How a measurement says what the host took (``steal`` ms)."""
    return f"the host took {steal:,.0f} ms of CPU time from this machine"


#: Above this share of the machine's CPU time taken by the host, a measurement says so:
#: of eighteen 2 s replays at 10k IOPS on an otherwise idle machine, the thirteen that
#: kept time had 0-0.75 % of it stolen, the five that fell behind 1.25-16 %.
BUSY_SHARE = 0.01


def steal_share(steal: float, wall_s: float, cpus: int | None = None) -> float:
    """The share of the machine's CPU time the host took: ``steal`` ms over ``wall_s``
    seconds on ``cpus`` CPUs (default all)."""
    return steal / (wall_s * 1e3 * (cpus or os.cpu_count() or 1))


def host_busy(steal: float | None, wall_s: float, cpus: int | None = None) -> str | None:
    """A sentence if the host took more than :data:`BUSY_SHARE` of the machine's CPU
    time (:func:`steal_share`), else None."""
    if not steal or wall_s <= 0:
        return None
    share = steal_share(steal, wall_s, cpus)
    if share <= BUSY_SHARE:
        return None
    return f"{took(steal)} meanwhile ({100 * share:.1f} % of it)"


def steal_between(before: float | None, after: float | None) -> float | None:
    """The steal time between two readings (ms), or None if either is missing."""
    if before is None or after is None:
        return None
    return max(after - before, 0.0)


__all__ = ["BUSY_SHARE", "STAT", "CpuTimes", "cpu_times", "host_busy", "steal_between", "steal_ms", "steal_share",
           "took"]
