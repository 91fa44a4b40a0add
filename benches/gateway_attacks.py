"""One client must not freeze the other tenants: attacks on a shared gateway, each beside
a well-behaved client of another tenant, and that client's p99 under attack ÷ alone.

Each attack runs against tenant ``attacker``'s export while the victim, a client of
tenant ``victim``, reads 4 KiB at random offsets at queue depth 1 through libnbd (a real
NBD client), opening a new connection every half second, so that a gateway refusing new
clients shows as victim errors. For each attack, on a fresh gateway (WF2Q+ with equal
weights, the default ``[limits]`` unless ``--limits`` says otherwise): the victim alone,
then the victim under the attack, then the wait until the gateway has closed the
attacker's connections. Printed: the victim's p99 alone and under attack, the ratio,
the victim's errors (a request or a connection that failed, or took longer than
``--timeout``), when the gateway closed the attacker's connections (seconds after the
attack was in place), the gateway's peak RSS (``VmHWM``, with the Python interpreter
that runs it, or without with ``--gateway-bin``) and the CPU the gateway and the
attacker took.

The attacker speaks NBD from raw sockets, from 127.0.0.2 and up (Linux routes all of
127.0.0.0/8 to the loopback interface):

- ``unread-replies``: 5 connections each send 20,000 reads of 4 KiB and read no reply.
- ``slow-body``: 8 connections each send a 32 MiB write's header and 1,000 bytes of it.
- ``partial-header``: 1,024 connections each send 2 bytes of a request header.
- ``idle-connections``: 1,120 connections from 8 addresses finish the handshake and
  send nothing; one the gateway closes is opened again.
- ``slow-handshakes``: 1,100 connections from 8 addresses take the greeting and send
  nothing; one the gateway closes is opened again.
- ``protocol-errors``: one connection after another finishes the handshake and sends a
  request with a bad magic.
- ``busy-only``: the control, no attack: the attacker's process keeps a CPU busy 20 % of
  the time, about what the connection floods take of it.

The attacks that open connection after connection do so at most ``--flood-rate`` times
a second, and the attacker's process runs at ``SCHED_IDLE`` (``--attacker-cpu idle``):
on this 2-CPU machine its own CPU would otherwise be taken from the gateway and the
victim, which a remote attacker's is not (``busy-only`` measures what that does alone;
``--attacker-cpu shared`` lets it compete).

    .venv/bin/python benches/gateway_attacks.py                    # every attack, 6 s each way
    .venv/bin/python benches/gateway_attacks.py --attack slow-body --attack unread-replies --seconds 3
    .venv/bin/python benches/gateway_attacks.py --limits '{"reply_timeout_s": 5}'

tests/python/test_gateway_attacks.py runs each attack for a few seconds, with shorter
deadlines, and asserts what the gateway promises.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import resource
import select
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

MiB = 1 << 20
#: NBD's magic numbers and commands (the NBD protocol specification, "Newstyle
#: negotiation" and "Transmission").
IHAVEOPT = b"IHAVEOPT"
REQUEST_MAGIC = 0x25609513
OPT_GO = 7
REP_ACK = 1
REP_INFO = 3
CMD_READ = 0
CMD_WRITE = 1
#: The largest read or write the gateway takes (32 MiB, its NBD_INFO_BLOCK_SIZE maximum).
MAX_IO = 32 * MiB
#: Size of each export's file.
EXPORT_BYTES = 64 * MiB
#: The first address the attacker connects from; the victim uses 127.0.0.1.
ATTACKER_NET = "127.0.0.{}"
#: POLLRDHUP (Linux): the peer closed its side; the attacker sees a close without reading.
POLLRDHUP = getattr(select, "POLLRDHUP", 0x2000)
CLOSED = select.POLLHUP | select.POLLERR | POLLRDHUP


def attacker_address(i: int) -> str:
    """The attacker's ``i``-th source address (127.0.0.2, 127.0.0.3, …)."""
    return ATTACKER_NET.format(2 + i)


def attacker_cpu_idle() -> None:
    """Run this process's threads (the attacker's) only on CPU time nothing else wants
    (Linux ``SCHED_IDLE``); the gateway and the victim, its children, are put back to
    the normal policy as they start (:func:`_normal_cpu`). On this 2-CPU machine the
    attacker's own CPU would otherwise be taken from the victim and the gateway, which a
    remote attacker's is not."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def _normal_cpu() -> None:
    """A child's scheduling policy back to the normal one (see :func:`attacker_cpu_idle`)."""
    if os.sched_getscheduler(0) == os.SCHED_IDLE:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def raise_open_files() -> None:
    """Let this process hold as many sockets as its hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def nbd_connect(port: int, name: str, source: str, timeout: float = 10.0) -> socket.socket:
    """A fixed-newstyle handshake ending in NBD_OPT_GO for export ``name``, from address
    ``source``; raises OSError if the gateway refuses or closes."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        greeting = s.recv(18, socket.MSG_WAITALL)
        if greeting[:8] != b"NBDMAGIC":
            raise ConnectionError(f"no greeting: {greeting!r}")
        s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
        data = struct.pack(">I", len(name)) + name.encode() + struct.pack(">H", 0)
        s.sendall(IHAVEOPT + struct.pack(">II", OPT_GO, len(data)) + data)
        while True:
            head = s.recv(20, socket.MSG_WAITALL)
            if len(head) < 20:
                raise ConnectionError("closed during the handshake")
            _magic, _opt, kind, length = struct.unpack(">QIII", head)
            if length:
                s.recv(length, socket.MSG_WAITALL)
            if kind == REP_ACK:
                return s
            if kind != REP_INFO:
                raise ConnectionError(f"option refused: reply type {kind:#x}")
    except BaseException:
        s.close()
        raise


def request(command: int, cookie: int, offset: int, length: int, magic: int = REQUEST_MAGIC) -> bytes:
    """An NBD request header (28 bytes)."""
    return struct.pack(">IHHQQI", magic, 0, command, cookie, offset, length)


def closed(socks: Sequence[socket.socket]) -> list[bool]:
    """Which of ``socks`` the gateway has closed (seen without reading what waits)."""
    p = select.poll()
    for s in socks:
        if s.fileno() >= 0:
            p.register(s.fileno(), CLOSED)
    ready = {fd for fd, ev in p.poll(0) if ev & CLOSED}
    return [s.fileno() < 0 or s.fileno() in ready for s in socks]


@dataclass
class Attack:
    """An attack on the gateway at ``port``: ``start`` returns once it is in place;
    ``held`` are the connections the gateway took and should close; ``stop`` ends it."""

    name: str
    what: str
    held: list[socket.socket] = field(default_factory=list)
    refused: int = 0
    opened: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self, port: int) -> None:
        raise NotImplementedError

    def note(self) -> str:
        """What the gateway did with the attacker's connections."""
        return f"{self.opened:,} opened, {self.refused:,} refused"

    def spawn(self, target: Callable[[], None]) -> None:
        t = threading.Thread(target=target, daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        for s in self.held:
            s.close()

    def open_held(self, port: int, count: int, addresses: int, then: Callable[[socket.socket], None]) -> None:
        """Open ``count`` connections spread over ``addresses`` source addresses, each
        negotiated and handed to ``then``; the ones the gateway refuses are counted."""
        for i in range(count):
            try:
                s = nbd_connect(port, "attacker", attacker_address(i % addresses))
            except OSError:
                self.refused += 1
                continue
            self.opened += 1
            then(s)
            self.held.append(s)


@dataclass
class UnreadReplies(Attack):
    connections: int = 5
    reads: int = 20_000

    def start(self, port: int) -> None:
        self.open_held(port, self.connections, 1, lambda s: None)
        burst = b"".join(request(CMD_READ, i, (i * 4096) % EXPORT_BYTES, 4096) for i in range(self.reads))

        def send(s: socket.socket) -> None:
            s.settimeout(2.0)  # the gateway stopped reading: its budget for us is spent
            try:
                s.sendall(burst)
            except OSError:
                pass

        senders = [threading.Thread(target=send, args=(s,), daemon=True) for s in self.held]
        for t in senders:
            t.start()
        for t in senders:
            t.join(60)


@dataclass
class SlowBody(Attack):
    connections: int = 8
    sent: int = 1000

    def start(self, port: int) -> None:
        self.open_held(port, self.connections, 1,
                       lambda s: s.sendall(request(CMD_WRITE, 1, 0, MAX_IO) + b"\xee" * self.sent))


@dataclass
class PartialHeader(Attack):
    connections: int = 1024

    def start(self, port: int) -> None:
        self.open_held(port, self.connections, 1, lambda s: s.sendall(request(CMD_READ, 1, 0, 4096)[:2]))


@dataclass
class Reopening(Attack):
    """Connections held open from several addresses; one the gateway closes is opened
    again, at most ``rate`` a second, until stopped."""

    connections: int = 1120
    addresses: int = 8
    rate: float = 1000.0
    negotiate: bool = True
    closed_by_gateway: int = 0
    _slots: list[socket.socket | None] = field(default_factory=list)

    def _open(self, port: int, i: int) -> socket.socket | None:
        source = attacker_address(i % self.addresses)
        try:
            if self.negotiate:
                s = nbd_connect(port, "attacker", source)
            else:
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    s.settimeout(10)
                    s.bind((source, 0))
                    s.connect(("127.0.0.1", port))
                except OSError:
                    s.close()
                    raise
        except OSError:
            self.refused += 1
            return None
        self.opened += 1
        return s

    def start(self, port: int) -> None:
        self._slots = [self._open(port, i) for i in range(self.connections)]
        self.held = [s for s in self._slots if s is not None]

        def reopen() -> None:
            # One poll set for all the slots (polling a thousand sockets anew each time
            # took the attacker a CPU of this 2-CPU machine).
            gap = 1.0 / self.rate
            watch = select.poll()
            by_fd = {}
            for i, s in enumerate(self._slots):
                if s is not None:
                    watch.register(s.fileno(), CLOSED)
                    by_fd[s.fileno()] = i
            empty = [i for i, s in enumerate(self._slots) if s is None]
            while not self._stop.is_set():
                for fd, _ in watch.poll(0 if empty else 50):
                    watch.unregister(fd)
                    i = by_fd.pop(fd)
                    old = self._slots[i]
                    if old is not None:
                        self.closed_by_gateway += 1
                        old.close()
                    self._slots[i] = None
                    empty.append(i)
                if not empty:
                    continue
                i = empty.pop(0)
                t0 = time.monotonic()
                s = self._open(port, i)
                self._slots[i] = s
                if s is None:
                    empty.append(i)
                else:
                    watch.register(s.fileno(), CLOSED)
                    by_fd[s.fileno()] = i
                self._stop.wait(max(0.0, gap - (time.monotonic() - t0)))

        self.spawn(reopen)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        for s in self._slots:
            if s is not None:
                s.close()
        self.held = []

    def note(self) -> str:
        return f"{self.opened:,} opened, {self.refused:,} refused, {self.closed_by_gateway:,} closed by the gateway"


@dataclass
class ProtocolErrors(Attack):
    rate: float = 1000.0

    def start(self, port: int) -> None:
        def flood() -> None:
            gap = 1.0 / self.rate
            while not self._stop.is_set():
                t0 = time.monotonic()
                try:
                    s = nbd_connect(port, "attacker", attacker_address(0))
                except OSError:
                    self.refused += 1
                else:
                    self.opened += 1
                    with s:
                        try:
                            s.sendall(request(CMD_READ, 1, 0, 4096, magic=0xDEADBEEF))
                            s.recv(1)
                        except OSError:
                            pass
                self._stop.wait(max(0.0, gap - (time.monotonic() - t0)))

        self.spawn(flood)


@dataclass
class BusyOnly(Attack):
    """No attack: the attacker's process only keeps a CPU busy for ``duty`` of the time
    (in slices of 1 ms), as the connection floods keep it; the control for what sharing
    this 2-CPU machine with an attacker does to the victim, whatever the gateway does."""

    duty: float = 0.2

    def start(self, port: int) -> None:
        def burn() -> None:
            while not self._stop.is_set():
                end = time.perf_counter() + 0.001 * self.duty
                while time.perf_counter() < end:
                    pass
                self._stop.wait(0.001 * (1 - self.duty))

        self.spawn(burn)


def attacks(flood_rate: float) -> dict[str, Callable[[], Attack]]:
    """The attacks by name, as the issue describes them."""
    return {
        "unread-replies": lambda: UnreadReplies("unread-replies", "5 conns x 20,000 reads of 4 KiB, no reply read"),
        "slow-body": lambda: SlowBody("slow-body", "8 conns: a 32 MiB write's header + 1,000 B"),
        "partial-header": lambda: PartialHeader("partial-header", "1,024 conns: 2 bytes of a header"),
        "idle-connections": lambda: Reopening("idle-connections", "1,120 idle conns from 8 addresses", rate=flood_rate),
        "slow-handshakes": lambda: Reopening("slow-handshakes", "1,100 silent handshakes from 8 addresses",
                                             connections=1100, rate=flood_rate, negotiate=False),
        "protocol-errors": lambda: ProtocolErrors("protocol-errors", "bad magic after each handshake",
                                                  rate=flood_rate),
        "busy-only": lambda: BusyOnly("busy-only", "no attack: the attacker's process busy 20 % of a CPU"),
    }


class Gateway:
    """A gateway (``python -m storqos.live.gateway_process``) serving ``victim`` (tenant 0,
    random data) and ``attacker`` (tenant 1), its log in a file so that no pipe fills."""

    def __init__(self, workdir: Path, limits: dict[str, Any] | None = None, policy: str = "wf2q",
                 binary: Path | None = None) -> None:
        from storqos.base.core_json import core_json
        from storqos.live.gateway import gateway_config
        from storqos.model.specs import policy_spec

        victim, attacker = workdir / "victim.img", workdir / "attacker.img"
        if not victim.exists():
            with open(victim, "wb") as f:
                for _ in range(EXPORT_BYTES // MiB):
                    f.write(os.urandom(MiB))
            with open(attacker, "wb") as f:
                f.truncate(EXPORT_BYTES)
        spec = policy_spec(policy, weights=[1.0, 1.0]) if policy == "wf2q" else policy_spec(policy)
        cfg = gateway_config([f"victim={victim}:0", f"attacker={attacker}:1"], spec, listen="127.0.0.1:0",
                             limits=limits)
        path = workdir / "gateway.json"
        path.write_text(core_json(cfg, "gateway"))
        self.log_path = workdir / "gateway.log"
        self._log = open(self.log_path, "w")
        if binary is not None:
            # The gateway crate's `serve` example: it says where it listens on stderr.
            self.proc = subprocess.Popen([str(binary), str(path)], stdout=subprocess.PIPE, stderr=self._log, text=True,
                                         preexec_fn=_normal_cpu)
            deadline = time.monotonic() + 60
            while not (m := re.search(r"serving on nbd://127\.0\.0\.1:(\d+)", self.log())):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"the gateway did not start: {self.log()[-500:]}")
                time.sleep(0.05)  # waiting for the ready line, not measuring
            self.port = int(m.group(1))
            return
        self.proc = subprocess.Popen([sys.executable, "-m", "storqos.live.gateway_process", str(path)],
                                     stdout=subprocess.PIPE, stderr=self._log, text=True, preexec_fn=_normal_cpu)
        box: dict[str, str] = {}

        def first_line() -> None:
            assert self.proc.stdout is not None
            box["line"] = self.proc.stdout.readline()

        th = threading.Thread(target=first_line, daemon=True)
        th.start()
        th.join(60)
        if not box.get("line", "").strip():
            self.stop()
            raise RuntimeError(f"the gateway did not start: {self.log()[-500:]}")
        listen = json.loads(box["line"])["listen"]
        self.port = int(listen.rsplit(":", 1)[1])

    def uri(self, export: str) -> str:
        return f"nbd://127.0.0.1:{self.port}/{export}"

    def peak_rss_mib(self) -> float:
        """The gateway process's peak resident memory (MiB)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return math.nan

    def cpu_s(self) -> float:
        """The CPU time the gateway process has used (s)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class VictimRun:
    """What the victim saw in one run."""

    ops: int
    p50_us: float
    p99_us: float
    max_us: float
    connects: int
    errors: list[str]


def victim(uri: str, seconds: float, reconnect_s: float = 0.5, timeout_s: float = 5.0) -> VictimRun:
    """The victim, in a process of its own (so the attacker's threads do not share its
    interpreter): 4 KiB random reads at queue depth 1 for ``seconds``."""
    cmd = [sys.executable, __file__, "--victim-of", uri, "--seconds", str(seconds), "--reconnect", str(reconnect_s),
           "--timeout", str(timeout_s)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 10 * timeout_s + 60, check=False,
                       preexec_fn=_normal_cpu)
    if r.returncode != 0:
        raise RuntimeError(f"the victim failed: {r.stderr.strip()[-500:]}")
    return VictimRun(**json.loads(r.stdout))


def _completed(h: Any, cookie: int) -> bool:
    """Whether the command ``cookie`` of libnbd handle ``h`` is done (raises if it failed)."""
    return bool(h.aio_command_completed(cookie))


def _victim_main(uri: str, seconds: float, reconnect_s: float, timeout_s: float) -> None:
    import nbd  # type: ignore[import-not-found,import-untyped,unused-ignore]

    def wait(h: Any, done: Callable[[Any], bool], what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not done(h):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{what}: nothing within {timeout_s:g} s")
            h.poll(max(1, int(left * 1000)))

    rng = random.Random(7)
    blocks = EXPORT_BYTES // 4096
    lat: list[int] = []
    errors: list[str] = []
    connects = 0
    buf = nbd.Buffer(4096)
    h: Any = None
    opened = 0.0
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        try:
            if h is None:
                h = nbd.NBD()
                h.aio_connect_uri(uri)
                wait(h, lambda h: bool(h.aio_is_ready() or h.aio_is_dead() or h.aio_is_closed()), "connect")
                if not h.aio_is_ready():
                    raise ConnectionError("the gateway closed the connection during the handshake")
                connects += 1
                opened = time.monotonic()
            t0 = time.perf_counter_ns()
            cookie = h.aio_pread(buf, rng.randrange(blocks) * 4096)
            wait(h, partial(_completed, cookie=cookie), "read")
            lat.append(time.perf_counter_ns() - t0)
            if time.monotonic() - opened >= reconnect_s:
                h.shutdown()
                h = None
        except (nbd.Error, OSError) as e:  # TimeoutError and ConnectionError are OSErrors
            if len(errors) < 20:
                errors.append(f"{time.monotonic() - start:.2f} s: {str(e).splitlines()[0]}")
            else:
                errors.append("")
            h = None
            time.sleep(0.01)  # a client's pause before it tries again, not a measurement
    lat.sort()

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, max(0, math.ceil(q * len(lat)) - 1))] / 1e3 if lat else math.nan

    json.dump({"ops": len(lat), "p50_us": pct(0.50), "p99_us": pct(0.99), "max_us": pct(1.0),
               "connects": connects, "errors": errors}, sys.stdout)


@dataclass
class Result:
    """One attack's row."""

    attack: Attack
    alone: VictimRun
    under: VictimRun
    closed_after_s: float | None
    held: int
    rss_mib: float
    log: str
    #: CPU the gateway took during the victim's run alone, and the gateway and the
    #: attacker (this process) during the run under attack, as fractions of one CPU.
    gateway_cpu_alone: float = math.nan
    gateway_cpu: float = math.nan
    attacker_cpu: float = math.nan
    #: When the first of the attacker's connections was seen closed (s after in place).
    first_closed_s: float = math.nan

    @property
    def log_lines(self) -> int:
        return len(self.log.splitlines())

    @property
    def ratio(self) -> float:
        return self.under.p99_us / self.alone.p99_us


def _own_cpu_s() -> float:
    """The CPU time this process (the attacker's threads) has used (s)."""
    t = os.times()
    return t.user + t.system


def measure(workdir: Path, attack: Attack, seconds: float, close_wait_s: float, limits: dict[str, Any] | None = None,
            timeout_s: float = 5.0, reconnect_s: float = 0.5, binary: Path | None = None) -> Result:
    """The victim alone, then under ``attack``, then how long until the gateway closed
    every connection of the attacker that it had taken (None: not within ``close_wait_s``
    after the attack was in place; NaN: the attack holds no connection)."""
    with Gateway(workdir, limits, binary=binary) as gw:
        cpu0, t0 = gw.cpu_s(), time.monotonic()
        alone = victim(gw.uri("victim"), seconds, reconnect_s, timeout_s)
        gateway_cpu_alone = (gw.cpu_s() - cpu0) / (time.monotonic() - t0)
        attack.start(gw.port)
        in_place = time.monotonic()
        held = list(attack.held)
        # When each connection the gateway took is seen closed, from the attack in place.
        seen: list[float | None] = [None] * len(held)
        done = threading.Event()

        def watch() -> None:
            while not done.is_set() and any(t is None for t in seen):
                now = time.monotonic() - in_place
                for i, c in enumerate(closed(held)):
                    if c and seen[i] is None:
                        seen[i] = now
                done.wait(0.05)  # polling the attacker's sockets, not measuring the victim

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            cpu0, mine0, t0 = gw.cpu_s(), _own_cpu_s(), time.monotonic()
            under = victim(gw.uri("victim"), seconds, reconnect_s, timeout_s)
            took = time.monotonic() - t0
            gateway_cpu, attacker_cpu = (gw.cpu_s() - cpu0) / took, (_own_cpu_s() - mine0) / took
            watcher.join(max(0.0, close_wait_s - (time.monotonic() - in_place)))
        finally:
            done.set()
            watcher.join()
            attack.stop()
        times = [t for t in seen if t is not None]
        closed_after: float | None = math.nan
        if held:
            closed_after = max(times) if len(times) == len(held) else None
        rss = gw.peak_rss_mib()
        log = gw.log()
    return Result(attack, alone, under, closed_after, len(held), rss, log, gateway_cpu_alone, gateway_cpu,
                  attacker_cpu, min(times) if times else math.nan)


def closed_text(r: Result) -> str:
    """When the gateway closed what it had taken of the attacker's connections."""
    if r.closed_after_s is None:
        return f"{r.held:,} still open"
    if math.isnan(r.closed_after_s):
        return "none held"
    if r.closed_after_s - r.first_closed_s >= 0.5:
        return f"{r.held:,} after {r.first_closed_s:.1f}–{r.closed_after_s:.1f} s"
    return f"{r.held:,} after {r.closed_after_s:.1f} s"


def row(rounds: list[Result]) -> str:
    """One Markdown table row over the rounds of one attack: the medians of the
    victim's p99s and of the ratios (with their range), errors and connects summed,
    the latest close and the largest RSS."""
    med = statistics.median
    served = [r for r in rounds if math.isfinite(r.ratio)]
    ratios = [r.ratio for r in served]
    if not served:
        under, ratio = "no read served", "—"
    else:
        under = f"{med(r.under.p99_us for r in served):,.0f} µs"
        spread = f" ({min(ratios):.2f}–{max(ratios):.2f})" if len(served) > 1 else ""
        ratio = f"{med(ratios):.2f}×{spread}"
        if len(served) < len(rounds):
            ratio += f", {len(rounds) - len(served)} round(s) with no read served"
    errs = sum(len(r.under.errors) for r in rounds)
    connects = sum(r.under.connects for r in rounds)
    def lateness(r: Result) -> float:
        c = r.closed_after_s
        return math.inf if c is None else -1.0 if math.isnan(c) else c

    last = max(rounds, key=lateness)
    return (f"| {rounds[0].attack.name} | {med(r.alone.p99_us for r in rounds):,.0f} µs | "
            f"{under} | {ratio} | {errs} / {connects} | "
            f"{closed_text(last)} | {max(r.rss_mib for r in rounds):,.0f} MiB | "
            f"{100 * med(r.gateway_cpu_alone for r in rounds):.0f} % → {100 * med(r.gateway_cpu for r in rounds):.0f} % "
            f"/ {100 * med(r.attacker_cpu for r in rounds):.0f} % |")


HEADER = ("| attack | victim p99 alone | under attack | ratio | victim errors / connects | attacker closed | "
          "peak RSS | CPU: gateway alone → under attack / attacker |\n|---|---:|---:|---|---:|---|---:|---:|")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attack", action="append", help="an attack to run (repeatable; default: all)")
    ap.add_argument("--seconds", type=float, default=6.0, help="length of each victim run (default 6)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds per attack, each on a fresh gateway; medians printed (default 3)")
    ap.add_argument("--close-wait", type=float, default=45.0,
                    help="longest wait for the gateway to close the attacker's connections (default 45 s)")
    ap.add_argument("--flood-rate", type=float, default=1000.0,
                    help="most connections a second the reopening attacks open (default 1000)")
    ap.add_argument("--limits", default=None, help="the gateway's limits object, as JSON (default: its defaults)")
    ap.add_argument("--attacker-cpu", choices=("idle", "shared"), default="idle",
                    help="idle (default): the attacker runs only on CPU time the gateway and the victim leave (a "
                         "remote attacker's CPU is not theirs); shared: it competes with them for this machine's CPUs")
    ap.add_argument("--gateway-bin", type=Path, default=None,
                    help="serve with this build of the gateway crate's `serve` example instead (another version, "
                         "to compare; its RSS is then without the Python interpreter)")
    ap.add_argument("--victim-of", help=argparse.SUPPRESS)
    ap.add_argument("--reconnect", type=float, default=0.5, help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=5.0, help="a victim request or connect slower than this "
                    "is an error (default 5 s)")
    a = ap.parse_args()
    if a.victim_of:
        _victim_main(a.victim_of, a.seconds, a.reconnect, a.timeout)
        return
    raise_open_files()
    if a.attacker_cpu == "idle":
        attacker_cpu_idle()
    known = attacks(a.flood_rate)
    chosen = a.attack or list(known)
    for name in chosen:
        if name not in known:
            ap.error(f"--attack: unknown attack {name!r} (known: {', '.join(known)})")
    limits = json.loads(a.limits) if a.limits else None
    print(f"victim: 4 KiB random reads at QD1 (libnbd), {a.seconds:g} s alone then {a.seconds:g} s under attack; "
          f"WF2Q+, limits {json.dumps(limits) if limits else 'default'}; attacker's CPU {a.attacker_cpu}\n",
          file=sys.stderr)
    print(HEADER, flush=True)
    notes = []
    for name in chosen:
        rounds = []
        with tempfile.TemporaryDirectory(prefix="storqos-attacks-") as tmp:
            for _ in range(a.rounds):
                rounds.append(measure(Path(tmp), known[name](), a.seconds, a.close_wait, limits, a.timeout,
                                      binary=a.gateway_bin))
        print(row(rounds), flush=True)
        notes.append(f"- {name} ({rounds[0].attack.what}): " + "; ".join(
            f"{r.attack.note()}, {r.log_lines:,} log lines" for r in rounds))
        for e in [e for r in rounds for e in r.under.errors if e][:3]:
            print(f"    victim: {e}", file=sys.stderr)
    print("\nThe attacker's connections, round by round:\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
