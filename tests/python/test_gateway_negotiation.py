"""The gateway's handshake as other clients and a hostile one see it: an export a
client may not use is answered as one that does not exist (raw options, nbdinfo), and
a client that sends garbage on connection after connection gets a bounded number of
log lines, then a count of the ones held back."""

from __future__ import annotations

import re
import signal
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest
from test_serve import Server, _image, _qemu_io, _tool

IHAVEOPT = b"IHAVEOPT"
#: NBD_REP_ERR_UNKNOWN
ERR_UNKNOWN = 0x8000_0006


def _greet(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    assert s.recv(18, socket.MSG_WAITALL)[:8] == b"NBDMAGIC"
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    return s


def _final_reply(s: socket.socket, option: int, data: bytes) -> tuple[int, bytes]:
    """Send an option; its last reply (an ACK or an error): type and data."""
    s.sendall(IHAVEOPT + struct.pack(">II", option, len(data)) + data)
    while True:
        _magic, opt, kind, length = struct.unpack(">QIII", s.recv(20, socket.MSG_WAITALL))
        body = s.recv(length, socket.MSG_WAITALL) if length else b""
        assert opt == option
        if kind == 1 or kind & 0x8000_0000:
            return kind, body


def _name(name: str) -> bytes:
    """NBD_OPT_GO / NBD_OPT_INFO data: the name, no information requests."""
    return struct.pack(">I", len(name)) + name.encode() + struct.pack(">H", 0)


def _closed_after_export_name(port: int, name: str) -> bool:
    """NBD_OPT_EXPORT_NAME has no error reply: whether the gateway closed without a byte."""
    with _greet(port) as s:
        s.sendall(IHAVEOPT + struct.pack(">II", 1, len(name)) + name.encode())
        return s.recv(200) == b""


def _nbdinfo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_tool("nbdinfo", "libnbd-bin"), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.untimed
def test_an_export_the_client_may_not_use_is_answered_as_a_missing_one(tmp_path: Path) -> None:
    """`secret` allows only 10.9.9.9: to this loopback client it must look exactly like
    an export that does not exist (it answered NBD_REP_ERR_POLICY, which told a scanner
    the name was served to someone)."""
    shown, secret = _image(tmp_path / "shown.img"), _image(tmp_path / "secret.img")
    cfg = tmp_path / "gw.toml"
    cfg.write_text(f'listen = "127.0.0.1:0"\n[[export]]\nname = "shown"\npath = "{shown}"\n'
                   f'[[export]]\nname = "secret"\npath = "{secret}"\nallow = ["10.9.9.9"]\n')
    s = Server("--config", str(cfg), "--for", "60s")
    _, port = s.ready()
    try:
        for option in (7, 6):  # NBD_OPT_GO, NBD_OPT_INFO
            with _greet(port) as c:
                hidden = _final_reply(c, option, _name("secret"))
                missing = _final_reply(c, option, _name("nothere"))
                served = _final_reply(c, option, _name("shown"))
            assert hidden[0] == missing[0] == ERR_UNKNOWN, (option, hidden, missing)
            assert hidden[1].replace(b"secret", b"NAME") == missing[1].replace(b"nothere", b"NAME"), (hidden, missing)
            assert served[0] == 1, served
        assert _closed_after_export_name(port, "secret") and _closed_after_export_name(port, "nothere")
        # libnbd's nbdinfo: the listing names the export served to this client only, and
        # opening the hidden one fails as opening a missing one does.
        listed = _nbdinfo("--list", "--json", f"nbd://127.0.0.1:{port}")
        assert listed.returncode == 0, listed.stderr
        assert re.findall(r'"export-name": "([^"]*)"', listed.stdout) == ["shown"], listed.stdout
        h, m = _nbdinfo(f"nbd://127.0.0.1:{port}/secret"), _nbdinfo(f"nbd://127.0.0.1:{port}/nothere")
        assert h.returncode == m.returncode != 0
        assert h.stderr.replace("secret", "NAME") == m.stderr.replace("nothere", "NAME"), (h.stderr, m.stderr)
        assert _nbdinfo(f"nbd://127.0.0.1:{port}/shown").returncode == 0
    finally:
        code, _, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    # The operator's log says what happened.
    assert 'address 127.0.0.1 is not allowed to use export "secret"; answered as an unknown export' in err, err


#: At most this many lines about one address per interval (the gateway's notices::PEER_LINES, the
#: Linux kernel's printk_ratelimit burst), over intervals of this many seconds.
PEER_LINES, PEER_INTERVAL_S = 10, 5.0


def test_a_client_flooding_protocol_errors_gets_a_bounded_log_and_a_count(tmp_path: Path) -> None:
    """300 connections from one address, each sending a bad option header: each used to
    be a line of the log (one client wrote 1 MB/s of it). At most PEER_LINES lines an
    interval now, then one line counting the rest; every error is said or counted, and
    the gateway serves a real client meanwhile."""
    a = _image(tmp_path / "a.img")
    s = Server("-e", f"a={a}:0", "--listen", "127.0.0.1:0", "--for", "120s")
    _, port = s.ready()
    flood = 300
    t0 = time.monotonic()
    try:
        for _ in range(flood):
            with _greet(port) as c:
                c.sendall(b"NOTANOPT" + struct.pack(">II", 3, 0))
                assert c.recv(100) == b"", "the gateway answered a bad option header"
        assert _qemu_io(port, "a", "read 0 4k").returncode == 0
        elapsed = time.monotonic() - t0
    finally:
        code, _, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    said = [ln for ln in err.splitlines() if "bad option request magic" in ln]
    held = [int(m.group(1)) for m in re.finditer(r"(\d+) line\(s\) about clients held back", err)]
    intervals = int(elapsed // PEER_INTERVAL_S) + 1
    assert 0 < len(said) <= PEER_LINES * intervals, (len(said), elapsed)
    assert len(said) + sum(held) == flood, (len(said), held)
    assert "about 1 address(es) (the most" in err and "about 127.0.0.1)" in err, err
    assert len(err.splitlines()) <= (PEER_LINES + 1) * intervals + 5, err
    print(f"{flood} protocol errors in {elapsed:.2f} s: {len(said)} lines, {sum(held)} counted in {len(held)} line(s)")
