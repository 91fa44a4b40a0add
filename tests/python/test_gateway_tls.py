"""TLS and Unix sockets on the gateway, with real clients:
qemu-io with ``--object tls-creds-x509``, libnbd's nbdinfo and nbdcopy with
``nbds://`` and ``nbd+unix://``. A plain client is refused under ``--tls require``;
client certificates are checked against ``--tls-client-ca``. The certificates are made
here, with openssl, in the test's temporary folder."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import struct
import subprocess
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from test_serve import QEMU_IO, Server, _image, _tool

IHAVEOPT = b"IHAVEOPT"


def _openssl(*args: str) -> None:
    subprocess.run([_tool("openssl", "openssl"), *args], check=True, capture_output=True, timeout=60)


def _ca(d: Path, name: str) -> None:
    """A CA in d: ca-cert.pem, ca-key.pem."""
    d.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
             "-subj", f"/CN={name}", "-keyout", str(d / "ca-key.pem"), "-out", str(d / "ca-cert.pem"),
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")


def _leaf(ca: Path, out: Path, role: str, usage: str, san: str = "") -> None:
    """out/ROLE-cert.pem and out/ROLE-key.pem, signed by the CA in `ca` (qemu's file names)."""
    out.mkdir(parents=True, exist_ok=True)
    key, csr, ext = out / f"{role}-key.pem", out / f"{role}.csr", out / f"{role}.ext"
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={role}",
             "-keyout", str(key), "-out", str(csr))
    ext.write_text((f"subjectAltName={san}\n" if san else "") + "basicConstraints=CA:FALSE\n"
                   f"keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage={usage}\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca / "ca-cert.pem"), "-CAkey", str(ca / "ca-key.pem"),
             "-CAcreateserial", "-days", "2", "-extfile", str(ext), "-out", str(out / f"{role}-cert.pem"))


def _pki(tmp: Path) -> dict[str, Path]:
    """A CA; the server's certificate (localhost, 127.0.0.1); a client directory for qemu and
    libnbd (ca-cert.pem, client-cert.pem, client-key.pem); a client of another CA."""
    ca, server, client, rogue = tmp / "ca", tmp / "server", tmp / "client", tmp / "rogue"
    _ca(ca, "storqos test CA")
    _leaf(ca, server, "server", "serverAuth", "DNS:localhost,IP:127.0.0.1")
    _leaf(ca, client, "client", "clientAuth")
    (client / "ca-cert.pem").write_bytes((ca / "ca-cert.pem").read_bytes())
    _ca(tmp / "rogue-ca", "another CA")
    _leaf(tmp / "rogue-ca", rogue, "client", "clientAuth")
    (rogue / "ca-cert.pem").write_bytes((ca / "ca-cert.pem").read_bytes())
    trust = tmp / "trust"  # the CA only: a client without a certificate of its own
    trust.mkdir()
    (trust / "ca-cert.pem").write_bytes((ca / "ca-cert.pem").read_bytes())
    return {"ca": ca / "ca-cert.pem", "cert": server / "server-cert.pem", "key": server / "server-key.pem",
            "client": client, "rogue": rogue, "trust": trust}


def _qemu_tls(port: int, name: str, creds: Path, *cmds: str) -> subprocess.CompletedProcess[str]:
    assert QEMU_IO, "qemu-io (Debian qemu-utils) is required: `make test` installs it"
    args = [QEMU_IO, "--object", f"tls-creds-x509,id=tls0,endpoint=client,dir={creds}", "--image-opts",
            f"driver=nbd,host=127.0.0.1,port={port},export={name},tls-creds=tls0"]
    for c in cmds:
        args += ["-c", c]
    return subprocess.run(args, capture_output=True, text=True, timeout=30)


def _qemu_plain(uri: str, *cmds: str) -> subprocess.CompletedProcess[str]:
    assert QEMU_IO, "qemu-io (Debian qemu-utils) is required: `make test` installs it"
    args = [QEMU_IO, "-f", "raw", uri]
    for c in cmds:
        args += ["-c", c]
    return subprocess.run(args, capture_output=True, text=True, timeout=30)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60)


def _tls_flags(pki: dict[str, Path]) -> list[str]:
    return ["--tls-cert", str(pki["cert"]), "--tls-key", str(pki["key"])]


@pytest.mark.untimed
def test_tls_required_real_clients_and_plain_ones_refused(tmp_path: Path) -> None:
    pki = _pki(tmp_path / "pki")
    a = _image(tmp_path / "a.img", 8 << 20)
    src = tmp_path / "src.img"
    src.write_bytes(os.urandom(4 << 20) + bytes(4 << 20))
    s = Server("--export", f"a={a}:0", "--listen", "127.0.0.1:0", *_tls_flags(pki), "--for", "60s")
    line, port = s.ready()
    try:
        assert "nbds://127.0.0.1:" in line and "TLS required" in line, line
        # qemu-io over TLS: a pattern written and read back.
        r = _qemu_tls(port, "a", pki["trust"], "write -P 0x3c 0 64k", "read -P 0x3c 0 64k")
        assert r.returncode == 0 and "Pattern verification failed" not in r.stdout, r.stdout + r.stderr
        # libnbd: nbdinfo says TLS is on; nbdcopy copies 8 MiB in and out unchanged.
        uri = f"nbds://127.0.0.1:{port}/a?tls-certificates={pki['trust']}"
        info = _run(_tool("nbdinfo", "libnbd-bin"), uri)
        assert info.returncode == 0 and "with TLS" in info.stdout, info.stdout + info.stderr
        assert _run(_tool("nbdcopy", "libnbd-bin"), str(src), uri).returncode == 0
        back = tmp_path / "back.img"
        cp = _run(_tool("nbdcopy", "libnbd-bin"), uri, str(back))
        assert cp.returncode == 0, cp.stderr
        assert back.read_bytes() == src.read_bytes()
        # Plain clients are refused: qemu-io is told TLS is required, nbdinfo fails.
        plain = _qemu_plain(f"nbd://127.0.0.1:{port}/a", "read 0 4k")
        assert plain.returncode != 0 and "requires TLS" in plain.stdout + plain.stderr, plain.stdout + plain.stderr
        assert _run(_tool("nbdinfo", "libnbd-bin"), f"nbd://127.0.0.1:{port}/a").returncode != 0
        # NBD_OPT_EXPORT_NAME has no error reply: without TLS the gateway closes.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            assert c.recv(18, socket.MSG_WAITALL)[:8] == b"NBDMAGIC"
            c.sendall(struct.pack(">I", 3) + IHAVEOPT + struct.pack(">II", 1, 1) + b"a")
            assert c.recv(200) == b"", "export served over plain NBD_OPT_EXPORT_NAME"
    finally:
        code, out, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    assert "NBD_OPT_EXPORT_NAME without TLS" in err, err
    assert "tenant" in out and "0" in out


@pytest.mark.untimed
def test_tls_on_serves_both_and_client_certificates_are_checked(tmp_path: Path) -> None:
    pki = _pki(tmp_path / "pki")
    a = _image(tmp_path / "a.img", 1 << 20)
    s = Server("--export", f"a={a}:0", "--listen", "127.0.0.1:0", "--tls", "on", *_tls_flags(pki), "--for", "60s")
    _, port = s.ready()
    try:
        assert _qemu_plain(f"nbd://127.0.0.1:{port}/a", "write -P 0x11 0 4k").returncode == 0
        r = _qemu_tls(port, "a", pki["trust"], "read -P 0x11 0 4k")
        assert r.returncode == 0 and "Pattern verification failed" not in r.stdout, r.stdout + r.stderr
    finally:
        assert s.finish(signal.SIGTERM)[0] == 0
    s = Server("--export", f"a={a}:0", "--listen", "127.0.0.1:0", *_tls_flags(pki),
               "--tls-client-ca", str(pki["ca"]), "--for", "60s")
    _, port = s.ready()
    try:
        ok = _qemu_tls(port, "a", pki["client"], "read -P 0x11 0 4k")
        assert ok.returncode == 0 and "Pattern verification failed" not in ok.stdout, ok.stdout + ok.stderr
        assert _qemu_tls(port, "a", pki["trust"], "read 0 4k").returncode != 0, "served without a client certificate"
        assert _qemu_tls(port, "a", pki["rogue"], "read 0 4k").returncode != 0, "served another CA's client"
    finally:
        code, _, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    assert "TLS handshake failed" in err, err


@pytest.mark.untimed
def test_unix_socket_with_real_clients(tmp_path: Path) -> None:
    a = _image(tmp_path / "a.img", 4 << 20)
    sock = tmp_path / "nbd.sock"
    s = Server("--export", f"a={a}:0", "--listen", f"unix:{sock}", "--for", "60s")
    line = s.lines.get(timeout=30)
    try:
        assert line is not None and f"the Unix socket {sock}" in line, line
        uri = f"nbd+unix:///a?socket={sock}"
        export_line = s.lines.get(timeout=5)
        assert export_line is not None and uri in export_line, export_line
        r = _qemu_plain(uri, "write -P 0x77 0 1M", "read -P 0x77 0 1M")
        assert r.returncode == 0 and "Pattern verification failed" not in r.stdout, r.stdout + r.stderr
        info = _run(_tool("nbdinfo", "libnbd-bin"), "--size", uri)
        assert info.stdout.strip() == str(4 << 20), info.stdout + info.stderr
    finally:
        code, out, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    assert not sock.exists(), "the socket file stays after the gateway stopped"
    # A socket left by a killed gateway is taken over; any other file there is not touched.
    left = socket.socket(socket.AF_UNIX)
    left.bind(str(sock))
    left.close()
    s = Server("--export", f"a={a}:0", "--listen", f"unix:{sock}", "--for", "60s")
    try:
        assert s.lines.get(timeout=30) is not None
        assert _qemu_plain(f"nbd+unix:///a?socket={sock}", "read -P 0x77 0 4k").returncode == 0
    finally:
        assert s.finish(signal.SIGTERM)[0] == 0
    other = tmp_path / "notes.txt"
    other.write_text("keep me")
    r = run_cli("serve", "--export", f"a={a}:0", "--listen", f"unix:{other}", "--for", "1s")
    assert_one_line_error(r, "listen", "not a socket")
    assert other.read_text() == "keep me"


@pytest.mark.untimed
def test_bad_tls_settings_are_one_line_errors(tmp_path: Path) -> None:
    pki = _pki(tmp_path / "pki")
    a = _image(tmp_path / "a.img")
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    big = tmp_path / "big.pem"
    with open(big, "wb") as f:
        f.truncate(5 << 20)
    other_key = tmp_path / "other"
    _leaf(tmp_path / "pki" / "ca", other_key, "server", "serverAuth", "DNS:localhost")
    base = ("serve", "--export", f"a={a}:0", "--listen", "127.0.0.1:0", "--for", "1s")
    cases = [
        (("--tls-cert", str(junk), "--tls-key", str(pki["key"])), ("tls.cert", "no certificate in the file")),
        (("--tls-cert", str(pki["cert"]), "--tls-key", str(junk)), ("tls.key", "not a PEM private key")),
        (("--tls-cert", str(pki["cert"]), "--tls-key", str(other_key / "server-key.pem")),
         ("does not go with the certificate",)),
        (("--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(pki["key"])), ("tls.cert", "missing.pem")),
        # Read until memory ran out: files that are not regular, or too large, are refused.
        (("--tls-cert", "/dev/zero", "--tls-key", str(pki["key"])), ("tls.cert: /dev/zero: not a regular file",)),
        (("--tls-cert", str(pki["cert"]), "--tls-key", "/dev/zero"), ("tls.key: /dev/zero: not a regular file",)),
        (("--tls-cert", str(big), "--tls-key", str(pki["key"])), ("tls.cert", "larger than 4 MiB: not a PEM file")),
        (("--tls", "require",), ("--tls-cert", "give the server's cert")),
        (("--tls", "maybe",), ("--tls", "expected one of off, on, require")),
        ((*_tls_flags(pki), "--tls-client-ca", str(junk)), ("tls.client_ca", "no certificate")),
        # Certificates that TLS off would not use were dropped: a client CA alone left
        # every client in, unchecked, in the clear.
        (("--tls-client-ca", str(pki["ca"])), ("--tls-cert", "TLS is require (a client ca was given)")),
        (("--tls", "off", *_tls_flags(pki)), ("--tls-cert", "TLS is off: the cert would not be used")),
    ]
    for extra, needles in cases:
        assert_one_line_error(run_cli(*base, *extra), *needles)
    # A config file's [tls] is checked with --check, paths relative to the file.
    cfg = tmp_path / "gw.toml"
    cfg.write_text(f'listen = "127.0.0.1:0"\n[[export]]\nname = "a"\npath = "a.img"\n'
                   f'[tls]\nmode = "require"\ncert = "{pki["cert"]}"\nkey = "junk.pem"\n')
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"), "tls.key", "junk.pem")
    cfg.write_text('listen = "127.0.0.1:0"\n[[export]]\nname = "a"\npath = "a.img"\n'
                   '[tls]\nmode = "sometimes"\n')
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"), "gw.toml:6", "tls", "mode")


def _exactly(s: socket.socket | ssl.SSLSocket, n: int) -> bytes:
    """``n`` bytes from ``s`` (an SSL socket takes no MSG_WAITALL)."""
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, f"the gateway closed after {len(out)} of {n} bytes"
        out += chunk
    return out


def _option(s: socket.socket | ssl.SSLSocket, option: int, data: bytes = b"") -> list[tuple[int, bytes]]:
    """Send an option; its replies (type, data) up to the final one (an ACK or an error)."""
    s.sendall(IHAVEOPT + struct.pack(">II", option, len(data)) + data)
    replies = []
    while True:
        magic, opt, kind, length = struct.unpack(">QIII", _exactly(s, 20))
        assert (magic, opt) == (0x3E889045565A9, option), (hex(magic), opt)
        replies.append((kind, _exactly(s, length)))
        if kind == 1 or kind & 0x8000_0000:
            return replies


def _greet(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    assert _exactly(s, 18)[:16] == b"NBDMAGIC" + IHAVEOPT
    s.sendall(struct.pack(">I", 3))  # FIXED_NEWSTYLE | NO_ZEROES
    return s


def _read_reply(s: ssl.SSLSocket, command: int, length: int) -> tuple[int, int, bytes]:
    """Send a request (cookie 7, offset 0), return (reply magic, error, data of a simple reply)."""
    s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, command, 7, 0, length))
    magic = struct.unpack(">I", _exactly(s, 4))[0]
    if magic != 0x67446698:  # a structured chunk: its header's rest and payload
        _flags, _type, _cookie, n = struct.unpack(">HHQI", _exactly(s, 16))
        return magic, 0, _exactly(s, n)
    error, cookie = struct.unpack(">IQ", _exactly(s, 12))
    assert cookie == 7
    return magic, error, _exactly(s, length) if error == 0 and command == 0 else b""


@pytest.mark.untimed
def test_what_was_negotiated_before_starttls_is_forgotten(tmp_path: Path) -> None:
    """The class of nbdkit's CVE-2021-3716: someone on the path injects
    NBD_OPT_STRUCTURED_REPLY and NBD_OPT_SET_META_CONTEXT in the clear before the
    client's STARTTLS; the gateway used to keep them, and answered the encrypted client
    (which asked for neither) in structured chunks it cannot read. After STARTTLS the
    client is answered as it negotiated over TLS."""
    pki = _pki(tmp_path / "pki")
    a = _image(tmp_path / "a.img", 1 << 20)  # sparse: 4 KiB of data, then a hole
    with open(a, "r+b") as f:
        f.write(b"\x5a" * 4096)
    s = Server("--export", f"a={a}:0", "--listen", "127.0.0.1:0", "--tls", "on", *_tls_flags(pki), "--for", "60s")
    _, port = s.ready()
    tls = ssl.create_default_context(cafile=str(pki["ca"]))
    try:
        plain = _greet(port)
        assert _option(plain, 8) == [(1, b"")]  # NBD_OPT_STRUCTURED_REPLY: ACK
        query = struct.pack(">I", 1) + b"a" + struct.pack(">II", 1, 15) + b"base:allocation"
        assert [k for k, _ in _option(plain, 10, query)] == [4, 1]  # SET_META_CONTEXT: the context, ACK
        assert _option(plain, 5) == [(1, b"")]  # NBD_OPT_STARTTLS: ACK
        with tls.wrap_socket(plain, server_hostname="localhost") as c:
            go = _option(c, 7, struct.pack(">I", 1) + b"a" + struct.pack(">H", 0))
            assert go[-1] == (1, b""), go
            magic, error, data = _read_reply(c, 0, 4096)  # NBD_CMD_READ
            assert (hex(magic), error) == ("0x67446698", 0), "a structured reply the client never asked for"
            assert data == b"\x5a" * 4096
            magic, error, _ = _read_reply(c, 7, 4096)  # NBD_CMD_BLOCK_STATUS: no context selected over TLS
            assert (hex(magic), error) == ("0x67446698", 22)
            c.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 2, 8, 0, 0))  # NBD_CMD_DISC
        # A client that asks for structured replies over TLS gets them.
        plain = _greet(port)
        assert _option(plain, 5) == [(1, b"")]
        with tls.wrap_socket(plain, server_hostname="localhost") as c:
            assert _option(c, 8) == [(1, b"")]
            assert _option(c, 7, struct.pack(">I", 1) + b"a" + struct.pack(">H", 0))[-1] == (1, b"")
            magic, _, data = _read_reply(c, 0, 4096)
            assert hex(magic) == "0x668e33ef" and data[8:] == b"\x5a" * 4096  # an offset-data chunk
        # libnbd negotiates everything after STARTTLS: nbdinfo maps the export over nbds://.
        m = _run(_tool("nbdinfo", "libnbd-bin"), "--map", f"nbds://127.0.0.1:{port}/a?tls-certificates={pki['trust']}")
        assert m.returncode == 0, m.stdout + m.stderr
        assert m.stdout.split()[:4] == ["0", "4096", "0", "data"], m.stdout
    finally:
        code, _, err = s.finish(signal.SIGTERM)
    assert code == 0, err
