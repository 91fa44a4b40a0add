"""Tiered exports: a slow file and a fast file with a block map
(placed blocks plus an LRU cache), write-through. Data read equals data written
whichever tier holds it (nbdcopy in and out, qemu-io patterns, unaligned), both tiers
serve, the map is rebuilt at a restart (the slow file alone holds the data), a fast
file that fails under the gateway costs no request, a slow file that fails costs only
its export's requests, and bad tier settings are one line, exit 2."""

from __future__ import annotations

import collections
import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from test_serve import Server, _qemu_io, _tool

MiB = 1 << 20


def _config(tmp_path: Path, *, pin: float = 0.25, fast_bytes: int = 3 * MiB, extra: str = "") -> Path:
    """A gateway of one tiered export ``t`` (8 MiB; its fast file ``fast_bytes``) and
    one plain export ``plain``."""
    for name, size in (("t.img", 8 * MiB), ("t-fast.img", fast_bytes), ("plain.img", MiB)):
        if not (tmp_path / name).exists():
            with open(tmp_path / name, "wb") as f:
                f.truncate(size)
    cfg = tmp_path / "gw.toml"
    cfg.write_text(f"""
listen = "127.0.0.1:0"
depth = 4
[tiers.fast]
iops = "20k"
[tiers.slow]
iops = "5k"
[[tenant]]
name = "a"
[[tenant]]
name = "b"
[[export]]
name = "t"
path = "t.img"
tenant = "a"
[export.tier]
fast = "t-fast.img"
pin = {pin}
block = "4KiB"
{extra}
[[export]]
name = "plain"
path = "plain.img"
tenant = "b"
""")
    return cfg


def _tier_ops(series: Path) -> dict[str, float]:
    last: dict[str, float] = collections.defaultdict(float)
    for g in json.loads(series.with_name(series.stem + ".gauges.json").read_text()):
        if g["name"].startswith("tier_"):
            last[g["name"]] = max(last[g["name"]], g["value"])
    return last


@pytest.mark.untimed
def test_data_read_equals_data_written_on_either_tier_and_survives_a_restart(tmp_path: Path) -> None:
    nbdcopy = _tool("nbdcopy", "libnbd-bin")
    src, back = tmp_path / "src.img", tmp_path / "back.img"
    src.write_bytes(os.urandom(8 * MiB))
    cfg = _config(tmp_path)
    series = tmp_path / "series.json"
    s = Server("--config", str(cfg), "--for", "60s", "--window", "200ms", "--out", str(series))
    try:
        line, port = s.ready()
        uri = f"nbd://127.0.0.1:{port}/t"
        assert subprocess.run([nbdcopy, str(src), uri], timeout=60).returncode == 0
        # Out twice: the first pass misses where nothing is placed (and copies blocks
        # into the LRU part), the second hits them.
        for _ in range(2):
            back.unlink(missing_ok=True)
            assert subprocess.run([nbdcopy, uri, str(back)], timeout=60).returncode == 0
            assert hashlib.sha256(back.read_bytes()).digest() == hashlib.sha256(src.read_bytes()).digest()
        # Unaligned writes across block edges, read back twice (a miss, then a hit).
        cmds = ["write -P 0x5a 4095 3", "write -P 0xc3 1048000 9000", "write -P 0x11 7340032 4096"]
        assert _qemu_io(port, "t", *cmds).returncode == 0
        for _ in range(2):
            r = _qemu_io(port, "t", "read -P 0x5a 4095 3", "read -P 0xc3 1048000 9000", "read -P 0x11 7340032 4096")
            assert r.returncode == 0 and "Pattern verification failed" not in r.stdout, r.stdout + r.stderr
    finally:
        code, _, err = s.finish(signal.SIGINT)
    assert code == 0, err
    ops = _tier_ops(series)
    assert ops["tier_fast_ops"] > 0 and ops["tier_slow_ops"] > 0, ops
    # Write-through: the slow file alone is the export's data; the map is rebuilt.
    expect = bytearray(src.read_bytes())
    expect[4095:4098] = b"\x5a" * 3
    expect[1048000:1057000] = b"\xc3" * 9000
    expect[7340032:7344128] = b"\x11" * 4096
    assert (tmp_path / "t.img").read_bytes() == bytes(expect)
    (tmp_path / "t-fast.img").write_bytes(b"\xff" * 3 * MiB)  # whatever the fast file held
    s = Server("--config", str(cfg), "--for", "60s")
    try:
        _, port = s.ready()
        back.unlink()
        assert subprocess.run([nbdcopy, f"nbd://127.0.0.1:{port}/t", str(back)], timeout=60).returncode == 0
        assert back.read_bytes() == bytes(expect)
    finally:
        s.finish(signal.SIGINT)


def test_a_failing_fast_file_costs_nothing_and_a_failing_slow_file_only_its_export(tmp_path: Path) -> None:
    cfg = _config(tmp_path, pin=1.0, fast_bytes=8 * MiB, extra="lru = false")
    s = Server("--config", str(cfg), "--for", "60s")
    try:
        _, port = s.ready()
        assert _qemu_io(port, "t", "write -P 0x7e 0 64k").returncode == 0
        os.truncate(tmp_path / "t-fast.img", 0)
        r = _qemu_io(port, "t", "read -P 0x7e 0 64k")
        assert r.returncode == 0 and "Pattern verification failed" not in r.stdout, r.stdout + r.stderr
        os.truncate(tmp_path / "t.img", 0)
        r = _qemu_io(port, "t", "read 1M 4k")
        assert "Input/output error" in r.stdout + r.stderr, r.stdout + r.stderr
        r = _qemu_io(port, "plain", "write -P 0x33 0 4k", "read -P 0x33 0 4k")
        assert r.returncode == 0 and "Pattern verification failed" not in r.stdout, r.stdout + r.stderr
    finally:
        code, _, err = s.finish(signal.SIGINT)
    assert code == 0
    assert err.count("fast tier") == 1 and "served from the slow file" in err, err


@pytest.mark.untimed
def test_bad_tier_settings_are_one_line_errors(tmp_path: Path) -> None:
    cfg = _config(tmp_path, pin=0.5, fast_bytes=MiB)
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"),
                          "exports[0].tier.fast", "hold 256 block(s)", "needs 1024")
    cfg = _config(tmp_path, pin=1.5)
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"), "gw.toml:", "pin", "[0, 1]")
    (tmp_path / "t-fast.img").unlink()
    cfg.write_text(cfg.read_text().replace("pin = 1.5", "pin = 0.5"))
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"), "gw.toml:", "t-fast.img", "no such file")
    cfg.write_text(_config(tmp_path).read_text().replace('name = "b"', 'name = "a"'))
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"), "[[tenant]]", "a", "twice")
    cfg.write_text(_config(tmp_path).read_text().replace('iops = "5k"', "iops = 0"))
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"), "gw.toml:", "iops")
