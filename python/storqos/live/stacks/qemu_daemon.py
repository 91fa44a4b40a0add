"""A ``qemu-storage-daemon`` with QEMU's I/O throttling in front of an emulated device,
one NBD export per tenant, for the live check of the ``qemu_throttle`` model.

Each tenant's export is a throttle filter node (in its throttle group) over its own
``null-co`` node that answers every request after ``latency-ns``: a device of fixed
latency and unlimited parallelism, which the simulator models exactly. The null nodes
return data (``read-zeroes=off``): over zeroes, QEMU's NBD server answers a read from
the block status (a hole in a structured reply) without reading, so the throttle never
sees it and reads pass unthrottled, while writes are throttled.

The daemon is started with ``--daemonize``, whose first process exits once the exports
listen (the ready signal), and stopped by the pid in its ``--pidfile``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from storqos.base.errors import InputError
from storqos.live.stacks.check import NbdServed
from storqos.planning.targets.qemu import daemon_args

#: The program, from Debian's qemu-utils (7.2 in bookworm, 10.0 in its backports).
PROGRAM = "qemu-storage-daemon"
#: How long the daemon has to start listening (s).
START_TIMEOUT_S = 20.0


def require() -> str:
    """The daemon's path, or an :class:`InputError` that says what to install."""
    path = shutil.which(PROGRAM)
    if path is None:
        raise InputError(f"{PROGRAM} is not installed (Debian: apt-get install qemu-utils)", "qemu")
    return path


class QemuDaemon(NbdServed):
    """``with QemuDaemon(spec, tenants, latency_ns) as d: d.uris`` — each tenant's NBD
    URI, served by a throttle node with ``spec``'s limits over a null device of
    ``latency_ns``, open to ``connections`` clients per tenant."""

    def __init__(self, spec: dict[str, Any], tenants: int, latency_ns: int, *, size_bytes: int = 1 << 30,
                 connections: int = 64) -> None:
        if tenants < 1:
            raise InputError("the trace has no tenants", "qemu")
        self.spec, self.tenants, self.latency_ns, self.size_bytes = spec, tenants, latency_ns, size_bytes
        self.connections = connections
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self.uris: dict[int, str] = {}
        self.args: list[str] = []

    def __enter__(self) -> QemuDaemon:
        program = require()
        self._dir = tempfile.TemporaryDirectory(prefix="storqos-qemu-")
        d = Path(self._dir.name)
        sock, pidfile = d / "nbd.sock", d / "qsd.pid"
        backing = [["driver=null-co", f"size={self.size_bytes}", "read-zeroes=off", f"latency-ns={self.latency_ns}"]
                   for _ in range(self.tenants)]
        names = [f"t{i}" for i in range(self.tenants)]
        # Room for every tenant's connections (QEMU 10 takes 100 clients by default).
        self.args = daemon_args(self.spec, backing, names, socket=str(sock),
                                max_connections=self.tenants * self.connections + 1)
        self._pidfile = pidfile
        try:
            done = subprocess.run([program, *self.args, "--daemonize", "--pidfile", str(pidfile)],
                                  capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            self._cleanup()
            raise InputError(f"{PROGRAM} did not start within {START_TIMEOUT_S:g} s", "qemu") from None
        if done.returncode != 0:
            self._cleanup()
            said = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise InputError(f"{PROGRAM} refused the settings: {said}", "qemu")
        self.uris = {i: f"nbd+unix:///{name}?socket={sock}" for i, name in enumerate(names)}
        return self

    def _cleanup(self) -> None:
        try:
            pid = int(self._pidfile.read_text().strip())
        except (OSError, ValueError, AttributeError):
            pid = None
        if pid is not None:
            try:
                os.kill(pid, signal.SIGTERM)
                for _ in range(200):  # up to 2 s for it to go
                    os.kill(pid, 0)
                    time.sleep(0.01)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._cleanup()


__all__ = ["PROGRAM", "QemuDaemon", "require"]
