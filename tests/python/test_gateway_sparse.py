"""Structured replies and `base:allocation` block status, with real
clients: nbdinfo --map and qemu-img map see the holes of a sparse export, and nbdcopy
copies it without writing its holes (the copy is as sparse as the source)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from test_serve import Server, _image, _tool

MiB = 1 << 20


@pytest.mark.untimed
def test_holes_are_seen_and_skipped_by_real_clients(tmp_path: Path) -> None:
    src = _image(tmp_path / "sparse.img", 16 * MiB)
    data = os.urandom(MiB)
    with open(src, "r+b") as f:  # data at 4 MiB (1 MiB) and at 12 MiB (4 KiB); holes elsewhere
        f.seek(4 * MiB)
        f.write(data)
        f.seek(12 * MiB)
        f.write(b"\x5a" * 4096)
    s = Server("--export", f"d={src}", "--listen", "127.0.0.1:0", "--for", "60s")
    _, port = s.ready()
    uri = f"nbd://127.0.0.1:{port}/d"
    try:
        info = subprocess.run([_tool("nbdinfo", "libnbd-bin"), uri], capture_output=True, text=True, timeout=30)
        assert "using structured packets" in info.stdout, info.stdout
        m = subprocess.run([_tool("nbdinfo", "libnbd-bin"), "--map", "--json", uri], capture_output=True, text=True,
                           timeout=30)
        extents = [(e["offset"], e["length"], e["type"]) for e in json.loads(m.stdout)]
        assert extents == [(0, 4 * MiB, 3), (4 * MiB, MiB, 0), (5 * MiB, 7 * MiB, 3), (12 * MiB, 4096, 0),
                           (12 * MiB + 4096, 4 * MiB - 4096, 3)], extents
        q = subprocess.run([_tool("qemu-img", "qemu-utils"), "map", "--output=json", "-f", "raw", uri],
                           capture_output=True, text=True, timeout=30)
        mapped = [(e["start"], e["length"]) for e in json.loads(q.stdout) if e["data"]]
        assert mapped == [(4 * MiB, MiB), (12 * MiB, 4096)], q.stdout
        dst = tmp_path / "copy.img"
        cp = subprocess.run([_tool("nbdcopy", "libnbd-bin"), uri, str(dst)], capture_output=True, text=True,
                            timeout=60)
        assert cp.returncode == 0, cp.stderr
    finally:
        code, _, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    assert dst.read_bytes() == src.read_bytes()
    # Only the data was written: the copy holds about 1 MiB + 4 KiB of blocks, not 16 MiB.
    assert dst.stat().st_blocks * 512 <= 2 * MiB, dst.stat().st_blocks * 512
