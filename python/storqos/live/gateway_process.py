"""A gateway in a child process, for commands that drive one (``storqos validate``):
started with a JSON configuration, ready once it says where it listens, stopped with
SIGTERM (it drains and exits).

``python -m storqos.live.gateway_process CONFIG.json`` serves the configuration and prints
one JSON line (the gateway's ready information) on stdout when it listens.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storqos.base.core_json import core_json
from storqos.base.errors import InputError

if TYPE_CHECKING:
    from storqos import _core


class GatewayProcess:
    """``storqos.live.gateway.serve(config)`` in a child process."""

    def __init__(self, config: dict[str, Any], timeout_s: float = 60.0) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="storqos-gateway-")
        path = Path(self._dir.name) / "config.json"
        path.write_text(core_json(config, "gateway"))
        self.proc = subprocess.Popen([sys.executable, "-m", "storqos.live.gateway_process", str(path)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        box: dict[str, str] = {}

        def first_line() -> None:
            assert self.proc.stdout is not None
            box["line"] = self.proc.stdout.readline()

        th = threading.Thread(target=first_line, daemon=True)
        th.start()
        th.join(timeout_s)
        line = box.get("line", "")
        if not line.strip():
            self.stop()
            err = (self.proc.stderr.read() if self.proc.stderr else "").strip().splitlines()
            raise InputError(f"the gateway did not start: {err[-1] if err else f'no answer within {timeout_s:g} s'}",
                             "gateway")
        self.info: dict[str, Any] = json.loads(line)

    def uri(self, export: str) -> str:
        """The NBD URI of ``export``."""
        from storqos.live.gateway import nbd_uri

        return nbd_uri(str(self.info["listen"]), str(self.info.get("tls", "off")), export)

    def stop(self) -> None:
        """SIGTERM, then wait (SIGKILL after 30 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()
        self._dir.cleanup()

    def __enter__(self) -> GatewayProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str]) -> int:
    """Serve the configuration in ``argv[0]``; print the ready line as JSON."""
    from storqos.live.gateway import serve

    config = json.loads(Path(argv[0]).read_text())

    def ready(info: _core.GatewayInfo) -> None:
        sys.stdout.write(info.to_json() + "\n")
        sys.stdout.flush()

    try:
        serve(config, on_ready=ready)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
