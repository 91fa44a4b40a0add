"""TLS and Unix sockets on the gateway (issue 15, points 5 and 7), with real clients:
qemu-io with ``--object tls-creds-x509``, libnbd's nbdinfo and nbdcopy with
``nbds://`` and ``nbd+unix://``. A plain client is refused under ``--tls require``;
client certificates are checked against ``--tls-client-ca``. The certificates are made
here, with openssl, in the test's temporary folder."""

from __future__ import annotations

import os
import signal
import socket
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
