"""A fork server for the tests' ``storqos`` runs: the CLI in a process of its own, as a
user runs it, without paying Python's imports of the scientific stack on every run.

A run of `python -m storqos.cli` takes 0.7-0.9 s even to report a missing file, most of
it importing polars, numpy, typer and rich (and for some commands pyarrow, plotly,
matplotlib and scikit-learn); the tests run the CLI several hundred times. The server is
a Python that has imported those third-party modules once (and nothing of storqos, so
every run imports and configures storqos itself, its consoles reading the run's
``COLUMNS``); each run is a child forked from it, with its own arguments, working
directory, environment, stdout/stderr files and exit status, which ends as Python ends a
process (threads joined, atexit handlers, flushed streams, a traceback and status 1 for
an uncaught exception) but for tearing down every module, 0.5 s with all that loaded.
Such a run takes 0.3 s.

A fork keeps only the thread that called it. polars starts its thread pool on first use,
so in the child; at import it starts only jemalloc's background threads and a cleaner of
spilled data, which the child does without. A module that cannot be imported is skipped:
the child imports it as a plain run would, or fails as one would.

Protocol (one JSON line each way over the server's stdin/stdout): the test process
sends ``{"argv", "cwd", "env", "out", "err"}``; the server answers ``{"pid"}`` once the
child runs, then ``{"status"}`` (the exit status, or -N for a signal N) when it ends.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

#: Imported once by the server, before any fork (the CLI imports them lazily per command).
PRELOAD = (
    "numpy", "polars", "pyarrow", "pyarrow.parquet", "typer", "rich.console", "rich.progress", "rich.table",
    "pydantic", "plotly.graph_objects", "plotly.subplots", "plotly.io", "matplotlib", "matplotlib.pyplot",
    "matplotlib.ticker", "sklearn.cluster", "sklearn.metrics",
)


def _child(req: dict[str, Any]) -> None:
    """In the forked child: become ``python -m storqos.cli ARGV`` and exit as it would."""
    import runpy
    import traceback

    os.chdir(req["cwd"])
    sys.path[0] = os.getcwd()  # as `python -m` has it (the server's own is this file's folder)
    os.environ.clear()
    os.environ.update(req["env"])
    null = os.open(os.devnull, os.O_RDONLY)
    if null != 0:
        os.dup2(null, 0)
        os.close(null)
    for fd, path in ((1, req["out"]), (2, req["err"])):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own streams, closed at exit
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    sys.argv = ["storqos", *req["argv"]]
    code: Any = 0
    try:
        runpy.run_module("storqos.cli", run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code
    except BaseException:  # an uncaught exception: Python prints it and exits with 1
        traceback.print_exc()
        code = 1
    # Python's exit, but for tearing down every module (0.5 s with the preloaded stack):
    # wait for the threads, run the atexit handlers, print a non-integer exit code,
    # flush the streams.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code & 0xFF)


def serve() -> None:
    """The server's loop (``python cli_forkserver.py``): requests in, a child each."""
    for name in PRELOAD:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a module this machine lacks: the child imports it or fails as a run would
            pass
    gc.freeze()  # the preloaded objects stay out of the children's collections: no copy-on-write of them
    requests, replies = sys.stdin, sys.stdout
    for line in requests:
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            requests.close()
            _child(req)
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        replies.write(json.dumps({"status": code}) + "\n")
        replies.flush()


def _answer(proc: subprocess.Popen[str], key: str) -> Any:
    """The server's next answer, its ``key``."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError("the CLI fork server died")
    return json.loads(line)[key]


class ForkServer:
    """The test process's handle on one server (started on first use)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    def _server(self) -> subprocess.Popen[str]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve())], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, text=True, bufsize=1)
        return self._proc

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], out: Path, err: Path, timeout: float) -> int:
        """Run ``storqos ARGV`` in a forked child; its exit status (-N for signal N)."""
        with self._lock:
            proc = self._server()
            assert proc.stdin is not None
            proc.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd), "env": env, "out": str(out),
                                         "err": str(err)}) + "\n")
            proc.stdin.flush()
            pid = int(_answer(proc, "pid"))
            timer = threading.Timer(timeout, lambda: os.kill(pid, signal.SIGKILL))
            timer.start()
            try:
                return int(_answer(proc, "status"))
            finally:
                timer.cancel()

    def close(self) -> None:
        """Stop the server (its running child, if any, finishes first)."""
        if self._proc is not None and self._proc.poll() is None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            self._proc.wait(timeout=60)
        self._proc = None


if __name__ == "__main__":
    serve()
