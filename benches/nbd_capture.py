"""NBD traffic on loopback as tcpdump captured it: when each request and each reply
crossed the wire (for benches/replay_timing.py and benches/replay_path.py).

A capture holds TCP segments; a segment may carry several NBD messages or part of one.
Each direction of each connection is put back together into its byte stream, walked
message by message (the transmission phase's headers, NBD protocol: request magic
0x25609513, simple reply 0x67446698, structured reply chunk 0x668e33ef), and a
message's time is the capture time of the segment that holds its first byte. Where
tcpdump dropped a segment, the walk picks up at the next header it finds.

Needs tcpdump (Debian's package) and root or CAP_NET_RAW.
"""

from __future__ import annotations

import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

REQUEST_MAGIC = b"\x25\x60\x95\x13"
SIMPLE_REPLY_MAGIC = b"\x67\x44\x66\x98"
STRUCTURED_REPLY_MAGIC = b"\x66\x8e\x33\xef"
#: NBD_CMD_READ and NBD_CMD_WRITE (a write request carries its data after the header).
CMD_READ, CMD_WRITE = 0, 1


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


@contextmanager
def capture(port: int, out: Path, *, both: bool = False) -> Iterator[None]:
    """tcpdump on loopback for the ``with`` block, writing nanosecond-stamped packets to
    ``out``: the traffic to ``port`` (the server), or with ``both`` both directions. It
    listens before the block starts and is stopped (SIGINT) half a second after the
    block ends, once the last packets are through."""
    flt = f"tcp port {port}" if both else f"tcp dst port {port}"
    if shutil.which("tcpdump") is None:
        _fail("tcpdump not found: install Debian's tcpdump package (make bench does)")
    p = subprocess.Popen(["tcpdump", "-i", "lo", "-w", str(out), "-B", "65536", "--time-stamp-precision=nano",
                          "-s", "0", flt], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # tcpdump is listening
    if p.poll() is not None:
        err = (p.stderr.read() if p.stderr else b"").decode(errors="replace").strip().splitlines()
        _fail(f"tcpdump could not capture on lo: {err[-1] if err else f'exit {p.returncode}'} "
              "(it needs root or CAP_NET_RAW)")
    try:
        yield
    finally:
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        p.wait(10)


@dataclass
class _Stream:
    data: bytearray = field(default_factory=bytearray)
    starts: list[tuple[int, int]] = field(default_factory=list)  # (offset in data, capture time ns)

    def time_at(self, offset: int, hint: int) -> tuple[int, int]:
        """Capture time of the segment holding byte ``offset`` (``hint``: where the
        last search ended, offsets only grow), and the new hint."""
        k = hint
        while k + 1 < len(self.starts) and self.starts[k + 1][0] <= offset:
            k += 1
        return self.starts[k][1], k


#: Each direction of each TCP connection of a capture, keyed (source port, destination port).
Streams = dict[tuple[int, int], _Stream]


def read(pcap: Path) -> Streams:
    """The capture ``pcap`` put back together into its byte streams (read it once, then
    ask :func:`request_times` and :func:`reply_times`)."""
    data = pcap.read_bytes()
    magic = struct.unpack("<I", data[:4])[0]
    nano = magic == 0xA1B23C4D
    link = struct.unpack("<I", data[20:24])[0]
    pos = 24
    streams: Streams = {}
    while pos + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack("<IIII", data[pos:pos + 16])
        pkt = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        t = sec * 1_000_000_000 + (frac if nano else frac * 1000)
        ip = pkt[14:] if link == 1 else pkt[16:]  # Ethernet, else Linux cooked
        if not ip or ip[0] >> 4 != 4:
            continue
        tcp = ip[(ip[0] & 15) * 4:]
        ports = struct.unpack(">HH", tcp[:4])
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload:
            s = streams.setdefault(ports, _Stream())
            s.starts.append((len(s.data), t))
            s.data += payload
    return streams


def request_times(streams: Streams, port: int) -> list[tuple[int, int, int]]:
    """``(capture time ns, cookie, command type)`` of every NBD request sent to
    ``port``, in the order sent (per connection, connections one after the other)."""
    out = []
    for (_src, dst), s in streams.items():
        if dst != port:
            continue
        i, hint = s.data.find(REQUEST_MAGIC), 0
        while 0 <= i and i + 28 <= len(s.data):
            if s.data[i:i + 4] != REQUEST_MAGIC:  # bytes tcpdump lost: find the next header
                i = s.data.find(REQUEST_MAGIC, i + 1)
                continue
            kind, cookie, _offset, length = struct.unpack(">HQQI", s.data[i + 6:i + 28])
            t, hint = s.time_at(i, hint)
            out.append((t, cookie, kind))
            i += 28 + (length if kind == CMD_WRITE else 0)
    return out


def _next_reply(data: bytearray, start: int) -> int:
    found = [x for x in (data.find(SIMPLE_REPLY_MAGIC, start), data.find(STRUCTURED_REPLY_MAGIC, start)) if x >= 0]
    return min(found) if found else len(data)


def reply_times(streams: Streams, port: int, read_lengths: dict[int, int]) -> dict[int, int]:
    """Capture time (ns) of the first reply message (simple reply, or a structured
    reply's first chunk) to each cookie, from ``port``; ``read_lengths`` maps the cookies
    of reads to their lengths (a simple reply to a read carries that much data)."""
    out: dict[int, int] = {}
    for (src, _dst), s in streams.items():
        if src != port:
            continue
        i, hint = _next_reply(s.data, 0), 0
        while i + 16 <= len(s.data):
            head = bytes(s.data[i:i + 4])
            if head == SIMPLE_REPLY_MAGIC:
                cookie = struct.unpack(">Q", s.data[i + 8:i + 16])[0]
                size = 16 + read_lengths.get(cookie, 0)
            elif head == STRUCTURED_REPLY_MAGIC and i + 20 <= len(s.data):
                cookie, length = struct.unpack(">QI", s.data[i + 8:i + 20])
                size = 20 + length
            else:  # bytes tcpdump lost: find the next header
                i = _next_reply(s.data, i + 1)
                continue
            t, hint = s.time_at(i, hint)
            out.setdefault(cookie, t)
            i += size
    return out


__all__ = ["CMD_READ", "CMD_WRITE", "Streams", "capture", "read", "reply_times", "request_times"]
