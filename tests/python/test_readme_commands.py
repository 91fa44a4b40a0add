"""Every command in README.md's code blocks runs clean as written: exit status 0, no
``warning:`` line, no traceback.

The commands are read from the README itself (every ``sh`` block, a command's
backslash-continued lines joined, comment lines left out; every ``python`` block as one
script) and run in order, as a reader would, in a prepared folder standing for the
checkout: ``.venv`` and ``examples`` link to the repository's, ``../shared`` to the
shared traces (commands that read them skip cleanly when the traces are absent), and
outputs land there, never in the tree. A block's variable assignments and ``.``
(source) lines hold for the commands after them, as in one shell.

The gateway of "Serve" runs as written but on a free loopback port (the README's
10809 is replaced in the commands that follow, so that tests running beside it cannot
collide); the commands after it in that block and the whole "Simulation and live agree"
block run against it, the test waiting for its ready line; then Ctrl-C stops it and its
summary must come out clean too.

A command the test cannot run is marked in the README by an HTML comment just above its
block: ``<!-- not run by the README test (…): `PREFIX`, `PREFIX`: why -->``; commands
starting with a listed prefix are not run there (make's own targets, the validations of
minutes each). The markers, like the commands, are read from the README.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import REPO, free_port, shared_traces

README = REPO / "README.md"

#: The marker of commands the test does not run (see the module's docstring).
MARKER = re.compile(r"<!--\s*not run by the README test[^:]*:(.*?)-->", re.S)
#: The port the README's gateway listens on (storqos serve's default).
README_PORT = "10809"
#: A command's time limit: the slowest the README runs are the calibration (about 30 s)
#: and the 60 s WebSearch replay.
TIMEOUT_S = 300


@dataclass
class Block:
    """One fenced code block: its language, the line its fence is on, its commands
    (with their line numbers) and the command prefixes its marker leaves out."""

    lang: str
    line: int
    commands: list[tuple[int, str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    source: str = ""


def readme_blocks(text: str) -> list[Block]:
    """The README's ``sh`` and ``python`` blocks, in order."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)", lines[i])
        if not m:
            i += 1
            continue
        lang, start = m.group(1), i
        body = []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append((i + 1, lines[i]))
            i += 1
        i += 1
        if lang not in ("sh", "python"):
            continue
        above = next((ln for ln in reversed(lines[:start]) if ln.strip()), "")
        marker = MARKER.search(above)
        block = Block(lang, start + 1, skipped=re.findall(r"`([^`]+)`", marker.group(1)) if marker else [],
                      source="\n".join(t for _, t in body) + "\n")
        pending: tuple[int, str] | None = None
        for n, t in body:
            if pending is None and (not t.strip() or t.lstrip().startswith("#")):
                continue
            if pending is None:
                pending = (n, t)
            else:
                pending = (pending[0], pending[1] + "\n" + t)
            if not t.rstrip().endswith("\\"):
                block.commands.append(pending)
                pending = None
        blocks.append(block)
    return blocks


def _is_state(command: str) -> bool:
    """An assignment or a ``.``/``source`` line: it sets the shell for what follows."""
    return bool(re.match(r"^\s*([A-Za-z_][A-Za-z0-9_]*=\S*|\.\s|source\s)", command))


def _needs_shared(command: str) -> bool:
    """Whether ``command`` reads the shared traces: through ``$T`` / ``../shared``, or an
    example file that names ``shared:`` paths."""
    if "$T" in command or "../shared" in command:
        return True
    for arg in re.findall(r"(examples/\S+\.toml)", command):
        f = REPO / arg
        if f.is_file() and "shared:" in f.read_text(encoding="utf-8"):
            return True
    return False


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A folder standing for the checkout (see the module's docstring)."""
    root = tmp_path / "checkout"
    root.mkdir()
    for name in (".venv", "examples"):
        (root / name).symlink_to(REPO / name)
    traces = shared_traces()
    if traces is not None:
        (tmp_path / "shared").symlink_to(traces.parent.resolve())
    return root


class Shell:
    """The README's commands run one by one, each in bash, with the assignments and
    ``.`` lines seen so far before it."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.state: list[str] = []
        self.ran: list[str] = []
        self.left: list[str] = []  # not run: the shared traces are absent
        self.env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "STORQOS_SHARED")}
        self.env.update({"COLUMNS": "100", "NO_COLOR": "1"})

    def script(self, command: str) -> str:
        return "set -e -o pipefail\n" + "\n".join(self.state) + "\n" + command + "\n"

    def should_run(self, command: str) -> bool:
        """Whether to run ``command``: not when it reads the shared traces and they are
        absent, nor when it reads what such a command would have written (``out/…``)."""
        unmade = {p for c in self.left for p in re.findall(r"\bout/\S+", c)}
        if (_needs_shared(command) and shared_traces() is None) or any(p in command for p in unmade):
            self.left.append(command)
            return False
        return True

    def run(self, line: int, command: str, allowed_warnings: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        p = subprocess.run(["bash", "-c", self.script(command)], cwd=self.cwd, env=self.env, capture_output=True,
                           text=True, timeout=TIMEOUT_S)
        assert_clean(line, command, p.returncode, p.stdout, p.stderr, allowed_warnings)
        if _is_state(command):
            self.state.append(command)
        self.ran.append(command)
        return p


def assert_clean(line: int, command: str, code: int, out: str, err: str, allowed: tuple[str, ...] = ()) -> None:
    where = f"README.md:{line}: {command}"
    assert code == 0, f"{where}\nexit status {code}\n{err[-3000:]}"
    warnings = [ln for ln in err.splitlines() if ln.lower().startswith("warning:") and not any(a in ln for a in allowed)]
    assert not warnings, f"{where}\n" + "\n".join(warnings)
    assert "Traceback" not in out + err and "error:" not in err, f"{where}\n{err[-3000:]}"


def _live(block: Block) -> bool:
    """A block that needs the README's gateway: it starts it, or talks NBD to it."""
    return any(c.startswith("storqos serve") or f":{README_PORT}" in c for _, c in block.commands)


def _runnable(block: Block) -> list[tuple[int, str]]:
    return [(n, c) for n, c in block.commands if not any(c.startswith(p) for p in block.skipped)]


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))


def test_the_readme_is_read_whole() -> None:
    # The reader finds the tour, the Python example, the gateway and the live
    # comparison; the markers leave out only what they name.
    sh = [c for b in BLOCKS if b.lang == "sh" for _, c in b.commands]
    assert len([b for b in BLOCKS if b.lang == "python"]) == 1
    for start in ("storqos trace info", "storqos simulate", "storqos plan", "storqos advise", "storqos run",
                  "storqos serve", "qemu-io", "storqos calibrate", "storqos replay", "storqos validate"):
        assert any(c.startswith(start) for c in sh), start
    skipped = [c for b in BLOCKS for _, c in b.commands if any(c.startswith(p) for p in b.skipped)]
    assert skipped and all(c.startswith(("make ", "storqos validate ")) for c in skipped), skipped
    joined = [c for b in BLOCKS for _, c in b.commands if "\n" in c]
    assert joined and all("\\\n" in c for c in joined)  # continued lines read as one command


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "sh" and not _live(b)],
                         ids=lambda b: f"line{b.line}")
def test_every_command_of_a_block_runs_clean(block: Block, checkout: Path) -> None:
    commands = _runnable(block)
    if not commands:
        pytest.skip(f"README.md:{block.line}: every command of this block is marked as not run")
    shell = Shell(checkout)
    for n, c in commands:
        if shell.should_run(c):
            shell.run(n, c)
    if not [c for c in shell.ran if not _is_state(c)]:
        pytest.skip(f"README.md:{block.line}: needs the shared traces (../shared), absent")


def test_the_python_example_runs_clean(checkout: Path) -> None:
    (block,) = [b for b in BLOCKS if b.lang == "python"]
    if "../shared" in block.source and shared_traces() is None:
        pytest.skip("the Python example reads the shared traces (../shared), absent")
    script = checkout / "example.py"
    script.write_text(block.source, encoding="utf-8")
    shell = Shell(checkout)
    p = subprocess.run([str(checkout / ".venv" / "bin" / "python"), str(script)], cwd=checkout,
                       env=shell.env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Warning" not in p.stderr and "warning:" not in p.stderr.lower(), p.stderr


@pytest.mark.alone
def test_the_gateway_and_the_live_comparison_run_clean(checkout: Path) -> None:
    live = [b for b in BLOCKS if b.lang == "sh" and _live(b)]
    assert len(live) == 2 and any(c.startswith("storqos serve") for _, c in live[0].commands), live
    shell = Shell(checkout)
    # What the live blocks build on from the tour: its assignments, and the traces it
    # converts that they read (out/web.parquet).
    used = " ".join(c for b in live for _, c in b.commands)
    for block in (b for b in BLOCKS if b.lang == "sh" and not _live(b)):
        for n, c in _runnable(block):
            converted = re.match(r"storqos trace convert\s+\S+\s+(\S+)", c)
            if (_is_state(c) or (converted and converted.group(1) in used)) and shell.should_run(c):
                shell.run(n, c)
    if shell.left:
        pytest.skip("the live comparison replays WebSearch from the shared traces (../shared), absent")
    port = str(free_port())
    server: subprocess.Popen[str] | None = None
    lines: queue.Queue[str | None] = queue.Queue()
    serve_line = 0
    serve_cmd = ""
    try:
        for block in live:
            for n, c in _runnable(block):
                c = c.replace(f":{README_PORT}", f":{port}")
                if not c.startswith("storqos serve"):
                    shell.run(n, c, allowed_warnings=_ALLOWED.get(c.split()[1] if c.startswith("storqos") else "", ()))
                    continue
                assert server is None, "a second gateway"
                serve_line, serve_cmd = n, c
                listen = c.replace("storqos serve", f"storqos serve --listen 127.0.0.1:{port}", 1)
                server = subprocess.Popen(["bash", "-c", shell.script(f"exec {listen}")],
                                          cwd=checkout, env=shell.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True)
                threading.Thread(target=_pump, args=(server, lines), daemon=True).start()
                ready = lines.get(timeout=60)  # the ready line: "serving 2 exports on nbd://…"
                assert ready is not None and ready.startswith("serving "), (ready, server.wait(), _stderr(server))
        assert server is not None, "the README's gateway did not start"
    finally:
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGINT)  # Ctrl-C, as the README says
    code = server.wait(timeout=30)
    rest = []
    while (ln := lines.get(timeout=10)) is not None:
        rest.append(ln)
    out = "".join(rest)
    assert_clean(serve_line, serve_cmd, code, out, _stderr(server))
    assert "storqos serve: wf2q+" in out and "response time per tenant" in out, out


#: Warnings a live command may rightly give on a busy machine, whatever the README
#: says: the replay keeps to the trace's times with the CPU time it is left, and the
#: calibration measures with it, and each says so when the machine took too much of it
#: (make test's other jobs, or a virtual machine's host: steal time). Nothing else is
#: let through.
_ALLOWED: dict[str, tuple[str, ...]] = {"replay": ("the replay fell behind the trace",),
                                        "calibrate": ("a profile measured while the host is busy",)}


def _pump(p: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
    assert p.stdout is not None
    for line in p.stdout:
        lines.put(line)
    lines.put(None)


def _stderr(p: subprocess.Popen[str]) -> str:
    return p.stderr.read() if p.stderr else ""
