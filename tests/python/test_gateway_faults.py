"""A failing backend: the requests it fails get NBD errors — EIO,
a short write, ENOSPC — while the connection, the export's other requests and the
other tenants go on being served. EIO and the short write come from the export's fault
rules (`[[export.fault]]`); ENOSPC is the kernel's own, from a write past the gateway's
file-size limit (RLIMIT_FSIZE: EFBIG, answered ENOSPC), which must not kill it."""

from __future__ import annotations

import resource
import signal
import threading
from pathlib import Path

import pytest
from test_serve import Server, _fio, _image, _qemu_io

MiB = 1 << 20


def _limit_file_size() -> None:
    # In the gateway's process only: writes at or past 8 MiB fail with EFBIG.
    resource.setrlimit(resource.RLIMIT_FSIZE, (8 * MiB, 8 * MiB))


@pytest.mark.untimed
def test_failed_requests_get_nbd_errors_and_the_others_are_served(tmp_path: Path) -> None:
    flaky = _image(tmp_path / "flaky.img", 16 * MiB)
    _image(tmp_path / "steady.img", 4 * MiB)
    cfg = tmp_path / "gw.toml"
    cfg.write_text("""
listen = "127.0.0.1:0"
depth = 4
[[export]]
name = "flaky"
path = "flaky.img"
tenant = 0
[[export.fault]]
op = "read"
error = "eio"
offset = "1MiB"
length = "1MiB"
[[export.fault]]
op = "write"
error = "short"
offset = "2MiB"
length = "1MiB"
[[export]]
name = "steady"
path = "steady.img"
tenant = 1
""")
    s = Server("--config", str(cfg), "--for", "120s", preexec_fn=_limit_file_size)
    _, port = s.ready()
    fio: dict[str, dict[str, object]] = {}
    try:
        # The other tenant, busy the whole time: fio writes and verifies 3 MiB.
        def steady_load() -> None:
            fio.update(_fio(tmp_path, f"""
[steady]
ioengine=nbd
uri=nbd://127.0.0.1:{port}/steady
rw=randwrite
bs=4k
iodepth=4
size=3m
verify=crc32c
do_verify=1
loops=3
"""))
        t = threading.Thread(target=steady_load)
        t.start()
        # EIO on a read of the faulty range; the same connection reads elsewhere fine.
        r = _qemu_io(port, "flaky", "read 0 64k", "read 1M 4k", "read 3M 64k")
        out = r.stdout + r.stderr
        assert "read failed: Input/output error" in out, out
        assert out.count("read 65536/65536 bytes") == 2, out
        # A short write: EIO to the client, and half of it on disk.
        r = _qemu_io(port, "flaky", "write -P 0xcd 2M 64k")
        assert "write failed: Input/output error" in r.stdout + r.stderr, r.stdout + r.stderr
        data = flaky.read_bytes()[2 * MiB:2 * MiB + 64 * 1024]
        assert data[:32 * 1024] == b"\xcd" * 32 * 1024 and data[32 * 1024:] == bytes(32 * 1024)
        # Past the process's file-size limit: the kernel's EFBIG, answered ENOSPC.
        r = _qemu_io(port, "flaky", "write -P 0x11 9M 4k", "write -P 0x22 4M 4k", "read -P 0x22 4M 4k")
        out = r.stdout + r.stderr
        assert "write failed: No space left on device" in out, out
        assert "Pattern verification failed" not in out and out.count("4 KiB, 1 ops") == 2, out
        t.join(timeout=60)
        assert not t.is_alive(), "fio on the steady tenant did not finish"
    finally:
        code, table, err = s.finish(signal.SIGTERM)
    assert code == 0, err  # alive after EFBIG (SIGXFSZ would have killed it)
    job = fio["steady"]
    assert job["error"] == 0, job
    assert job["write"]["io_bytes"] > 0 and job["read"]["io_bytes"] > 0  # type: ignore[index]
    rows = {cells[0]: cells for line in table.splitlines()
            if len(cells := [c.strip() for c in line.split("│")[1:-1]]) == 6}
    # the response-time table: tenant, mean, p50, p99, max (µs), errors
    assert rows["0"][5] == "3" and rows["1"][5] == "0", table
