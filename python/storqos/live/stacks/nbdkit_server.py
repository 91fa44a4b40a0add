"""nbdkit with its rate filter in front of an emulated device, one nbdkit per tenant,
for the live check of the ``nbdkit_rate`` model.

Each tenant's nbdkit serves the ``null`` plugin through the ``delay`` filter (every read
and write answered after the same delay: a device of fixed latency, parallel up to
nbdkit's threads) behind the ``rate`` filter. nbdkit forks into the background once its
socket listens, so its first process exiting is the ready signal; it is stopped by the
pid in its ``-P`` file."""

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
from storqos.planning.targets.nbdkit import command_line

#: How long one nbdkit has to start listening (s).
START_TIMEOUT_S = 20.0


def require() -> str:
    """nbdkit's path, or an :class:`InputError` that says what to install."""
    path = shutil.which("nbdkit")
    if path is None:
        raise InputError("nbdkit is not installed (Debian: apt-get install nbdkit)", "nbdkit")
    return path


class NbdkitServers(NbdServed):
    """``with NbdkitServers(spec, tenants, latency_ns) as s: s.uris`` — each tenant's NBD
    URI, its own nbdkit with ``spec``'s rate over a null device of ``latency_ns``."""

    def __init__(self, spec: dict[str, Any], tenants: int, latency_ns: int, *, size_bytes: int = 1 << 30) -> None:
        self.spec, self.tenants, self.latency_ns, self.size_bytes = spec, tenants, latency_ns, size_bytes
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._pids: list[Path] = []
        self.uris: dict[int, str] = {}
        #: connections per tenant the check opens: one (nbdkit's threads serve it)
        self.connections = 1

    def __enter__(self) -> NbdkitServers:
        require()
        if self.latency_ns % 1_000_000 or self.latency_ns <= 0:
            raise InputError(f"nbdkit's delay filter takes whole milliseconds, got {self.latency_ns / 1e6:g} ms",
                             "--latency")
        self._dir = tempfile.TemporaryDirectory(prefix="storqos-nbdkit-")
        d = Path(self._dir.name)
        ms = f"{self.latency_ns // 1_000_000}ms"
        plugin = ["null", f"size={self.size_bytes}", f"delay-read={ms}", f"delay-write={ms}"]
        try:
            for t in range(self.tenants):
                sock, pidfile = d / f"t{t}.sock", d / f"t{t}.pid"
                argv = command_line(self.spec, t, plugin, socket=str(sock), filters=("delay",))
                argv[1:1] = ["-P", str(pidfile)]
                self._pids.append(pidfile)
                done = subprocess.run(argv, capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False)
                if done.returncode != 0:
                    said = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
                    raise InputError(f"nbdkit refused the settings of tenant {t}: {said}", "nbdkit")
                self.uris[t] = f"nbd+unix:///?socket={sock}"
        except BaseException:
            self._cleanup()
            raise
        return self

    def _cleanup(self) -> None:
        for pidfile in self._pids:
            try:
                pid = int(pidfile.read_text().strip())
            except (OSError, ValueError):
                continue
            try:
                os.kill(pid, signal.SIGTERM)
                for _ in range(200):
                    os.kill(pid, 0)
                    time.sleep(0.01)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._pids = []
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._cleanup()


__all__ = ["NbdkitServers", "require"]
