"""Acknowledged writes survive a crash: a client writes numbered
4 KiB blocks through the gateway, flushing every 64 writes and setting FUA on every 16th;
the gateway is SIGKILLed in the middle; after a restart every write acknowledged before
the last completed flush, and every acknowledged FUA write, reads back intact through
the gateway."""

from __future__ import annotations

import signal
import socket
import struct
import threading
from pathlib import Path

import pytest
from test_gateway_limits import REQUEST_MAGIC, _negotiate
from test_serve import Server, _image

BLOCK = 4096
BLOCKS = 4096  # a 16 MiB export


def _pattern(seq: int) -> bytes:
    """Block contents that name the write (its sequence number) all through."""
    return struct.pack(">Q", seq + 1) * (BLOCK // 8)


def _reply(c: socket.socket) -> tuple[int, int]:
    magic, error, cookie = struct.unpack(">IIQ", c.recv(16, socket.MSG_WAITALL))
    assert magic == 0x67446698, hex(magic)
    return error, cookie


@pytest.mark.untimed
def test_writes_acknowledged_before_a_flush_survive_sigkill(tmp_path: Path) -> None:
    img = _image(tmp_path / "a.img", BLOCK * BLOCKS)
    s = Server("-e", f"a={img}", "--listen", "127.0.0.1:0")
    _, port = s.ready()
    c = _negotiate(port, "a")
    c.settimeout(10)
    threading.Timer(1.0, lambda: s.p.send_signal(signal.SIGKILL)).start()
    acked: dict[int, int] = {}  # block -> last write acknowledged to it (seq)
    durable: dict[int, int] = {}  # the same, as of the last completed flush
    fua: dict[int, int] = {}  # block -> an acknowledged FUA write's seq (later writes may overwrite it)
    seq = 0
    pending = (-1, -1)  # (block, seq) of the write sent and not acknowledged when the gateway died
    try:
        while True:
            block = (seq * 7919) % BLOCKS
            flags = 1 if seq % 16 == 15 else 0  # NBD_CMD_FLAG_FUA
            pending = (block, seq)
            c.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, flags, 1, seq, block * BLOCK, BLOCK) + _pattern(seq))
            error, cookie = _reply(c)
            assert error == 0 and cookie == seq
            pending = (-1, -1)
            acked[block] = seq
            fua.pop(block, None)
            if flags:
                fua[block] = seq
            seq += 1
            if seq % 64 == 0:
                c.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, 3, 1 << 40, 0, 0))
                assert _reply(c) == (0, 1 << 40)
                durable = dict(acked)
    except (OSError, struct.error, AssertionError):
        pass  # the gateway is gone
    finally:
        c.close()
    assert s.p.wait(timeout=10) == -signal.SIGKILL
    assert len(durable) > 100, f"only {len(durable)} blocks flushed before the kill"
    # Restart on the same file and read everything back through the gateway.
    s2 = Server("-e", f"a={img}", "--listen", "127.0.0.1:0")
    _, port = s2.ready()
    try:
        r = _negotiate(port, "a")
        r.settimeout(10)
        expected = {**durable, **fua}
        for block, want in expected.items():
            r.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, 0, block, block * BLOCK, BLOCK))
            assert _reply(r) == (0, block)
            got = r.recv(BLOCK, socket.MSG_WAITALL)
            # The block holds the write it was durable with, or a later acknowledged one,
            # or the one write in flight when the gateway died (NBD: an unacknowledged
            # write may or may not have reached the file).
            got_seq = struct.unpack(">Q", got[:8])[0] - 1
            newest = pending[1] if pending[0] == block else acked[block]
            assert got == _pattern(got_seq) and want <= got_seq <= newest, (block, want, got_seq, newest)
            assert (got_seq * 7919) % BLOCKS == block  # a write to this block, not another's
        r.close()
    finally:
        s2.finish(signal.SIGTERM)
    print(f"crash: {seq} writes sent, {len(durable)} blocks durable at the last flush, {len(fua)} FUA blocks: all intact")
