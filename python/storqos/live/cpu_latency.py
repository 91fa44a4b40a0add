"""Keep the CPUs awake while a live measurement runs: a CPU latency request (Linux PM QoS).

An idle CPU sleeps, and whatever wakes it (a packet, a timer) waits until it runs again:
microseconds on bare metal from a shallow sleep, far more from a deep one or for a
virtual machine's halted vCPU, which its host must schedule again. A replay against a
gateway on the same machine pays that on most requests: the request wakes the gateway's
CPU, the reply the replay's. It shows as issue times kept less closely and as response
times that depend on how long everything slept before the request (the "path at rest"
of a device profile). A trace of the kernel's scheduler and interrupts during replays at
10k IOPS on this project's 2-CPU virtual machine (a guest whose idle vCPUs halt at once)
showed the replay's send of a request spending 30-90 µs, once 1.4 ms, in the kernel
waking the gateway's sleeping CPU; with the request held, the replay's issue-time error
p99 on the wire was 123, 524 and 259 µs in the median runs of three invocations against
813, 1,141 and 1,558 µs, better in 14 rounds of 15, and its median response 22-35 µs
against 66-304 µs (alternating runs; BENCHMARKS.md, "Replay timing").

While the request is held the kernel keeps every CPU in idle states that wake at once
(it polls instead of halting), as ``cyclictest`` and tuned's latency-performance
profile do: the CPUs burn power while idle, for as long as the measurement runs and no
longer. The request is the value 0 (µs) written to ``/dev/cpu_dma_latency``; it lasts
while this process keeps the file open, and needs root (or write access to that device).

The commands ask for it only when told (``--awake-cpus``): it changes what is measured,
and a device profile predicts replays made the same way. It is not a free gain for
``storqos validate`` on files either: in paired runs the live p50s fell by a
third with it, but the profile, measured back to back on one connection, fell further,
and 2 of 24 cells came within 20 % of the prediction against 16 of 24 without
(docs/validation.md).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from storqos.base.errors import InputError

#: The kernel's CPU latency request device.
DEVICE = Path("/dev/cpu_dma_latency")
#: ``auto``: keep the CPUs awake where this process may; ``yes``: keep them awake or
#: fail; ``no``: leave them as the machine has them.
MODES = ("auto", "yes", "no")


def check_mode(mode: str, where: str = "--awake-cpus") -> str:
    """``mode`` if it is one of :data:`MODES`, else a one-line error."""
    if mode not in MODES:
        raise InputError(f"unknown value {mode!r} (auto, yes or no)", where)
    return mode


@contextmanager
def cpus_awake(mode: str = "auto", where: str = "--awake-cpus") -> Iterator[bool]:
    """Hold a request that the CPUs stay awake (see the module) for the ``with`` block;
    yields whether it is held. ``auto`` holds it where this process may, ``yes`` raises
    a one-line error where it may not, ``no`` holds nothing."""
    fd = None
    if check_mode(mode, where) != "no":
        try:
            fd = os.open(DEVICE, os.O_WRONLY | os.O_CLOEXEC)
            os.write(fd, struct.pack("=i", 0))
        except OSError as e:
            if fd is not None:
                os.close(fd)
                fd = None
            if mode == "yes":
                raise InputError(f"cannot keep the CPUs awake: {DEVICE}: {e.strerror or e} (it needs root; "
                                 "or give --awake-cpus auto or no)", where) from None
    try:
        yield fd is not None
    finally:
        if fd is not None:
            os.close(fd)


def can_keep_awake(mode: str = "auto", where: str = "--awake-cpus") -> bool:
    """Whether :func:`cpus_awake` would hold the request with ``mode`` (a ``yes`` that
    cannot is the same error)."""
    with cpus_awake(mode, where) as held:
        return held


def cpu_latency_us() -> int | None:
    """The wake-up latency the kernel keeps the CPUs to now (µs; 2,000,000,000 when
    nothing asks for less), or None where it cannot be read."""
    try:
        with open(DEVICE, "rb") as f:
            raw = f.read(4)
    except OSError:
        return None
    return int(struct.unpack("=i", raw)[0]) if len(raw) == 4 else None


__all__ = ["DEVICE", "MODES", "can_keep_awake", "check_mode", "cpu_latency_us", "cpus_awake"]
