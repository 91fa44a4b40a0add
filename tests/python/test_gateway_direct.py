"""Direct exports (``storqos serve --direct``, ``direct = true``): the gateway reads and
writes their files with O_DIRECT, so a client's reads reach the disk and leave nothing
in the gateway host's page cache, whatever the client's alignment, and no byte is lost
between the direct path and the cached one (unaligned writes)."""

from __future__ import annotations

import ctypes
import mmap
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from storqos.live.gateway_config import load, merged
from test_serve import Server, _qemu_io

# Checks and bytes through a real client: nothing here measures time.
pytestmark = pytest.mark.untimed

MIB = 1 << 20
PAGE = mmap.PAGESIZE


def _resident_pages(path: Path, start: int, length: int) -> int:
    """Pages of ``path``'s ``start .. start + length`` in the page cache now (mincore(2)
    over a private mapping of the file, which reports the file's cached pages)."""
    libc = ctypes.CDLL(None, use_errno=True)
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), start + length, access=mmap.ACCESS_COPY)
    try:
        base = ctypes.c_char.from_buffer(m)
        vec = (ctypes.c_ubyte * ((start + length) // PAGE))()
        if libc.mincore(ctypes.c_void_p(ctypes.addressof(base)), ctypes.c_size_t(start + length), vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        del base
        return sum(v & 1 for v in vec[start // PAGE:])
    finally:
        m.close()


def _cold_file(path: Path, size: int) -> Path:
    """A file of ``size`` random bytes, on the disk and out of the page cache."""
    with open(path, "wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return path


def _serve_and_read(path: Path, *flags: str) -> None:
    """Serve ``path`` (with ``flags``) and read its last 3 MiB through qemu-io."""
    s = Server("--export", f"d={path}:0", *flags, "--listen", "127.0.0.1:0", "--for", "60s")
    try:
        line, port = s.ready()
        r = _qemu_io(port, "d", "read 1M 3M")
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        code, _, err = s.finish(signal.SIGTERM)
    assert code == 0, err


def test_direct_reads_leave_the_page_cache_alone_and_buffered_ones_do_not(tmp_path: Path) -> None:
    cold = _cold_file(tmp_path / "d.img", 4 * MIB)
    assert _resident_pages(cold, MIB, 3 * MIB) == 0  # what the comparison starts from
    _serve_and_read(cold, "--direct")
    assert _resident_pages(cold, MIB, 3 * MIB) == 0
    # The same read served through the page cache leaves it there: the check can tell.
    _serve_and_read(cold)
    assert _resident_pages(cold, MIB, 3 * MIB) > (3 * MIB // PAGE) // 2


def test_aligned_and_unaligned_writes_all_land(tmp_path: Path) -> None:
    img = _cold_file(tmp_path / "d.img", 2 * MIB)
    before = img.read_bytes()
    s = Server("--export", f"d={img}:0", "--direct", "--listen", "127.0.0.1:0", "--for", "60s")
    try:
        line, port = s.ready()
        export_line = s.lines.get(timeout=10)
        assert export_line is not None and "  direct  " in export_line, export_line
        r = _qemu_io(port, "d",
                     "write -P 0x5a 0 64k",        # aligned: O_DIRECT
                     "write -P 0x33 1000 100",     # inside it, not aligned: the page cache
                     "write -P 0x77 70000 5000",   # across two blocks, not aligned
                     "read -P 0x5a 0 1000", "read -P 0x33 1000 100", "read -P 0x5a 1100 64436",
                     "read -P 0x77 70000 5000", "flush")
        assert r.returncode == 0 and "Pattern verification failed" not in r.stdout, r.stdout + r.stderr
    finally:
        code, out, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    want = bytearray(before)
    want[0:65536] = b"\x5a" * 65536
    want[1000:1100] = b"\x33" * 100
    want[70000:75000] = b"\x77" * 5000
    assert img.read_bytes() == bytes(want)


def test_the_config_key_and_its_errors(tmp_path: Path) -> None:
    shutil.copy(Path(__file__).parents[2] / "examples" / "gateway" / "gw.toml", tmp_path / "gw.toml")
    for name in ("web.img", "batch.img"):
        _cold_file(tmp_path / name, MIB)
    gw = tmp_path / "gw.toml"
    gw.write_text(gw.read_text().replace('tenant = "batch"\n', 'tenant = "batch"\ndirect = true\n', 1))
    exports = merged(load(gw))["exports"]
    assert [e.get("direct", False) for e in exports] == [False, True]
    r = run_cli("serve", "--config", str(gw), "--check")
    assert r.code == 0 and "batch: tenant 1, 1 MiB, direct," in r.out, r.out
    text = gw.read_text().replace("direct = true\n", 'direct = true\n[export.tier]\nfast = "web.img"\n', 1)
    gw.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("direct"))
    assert_one_line_error(run_cli("serve", "--config", str(gw), "--check"), f"{gw}:{line}: ",
                          "direct: a tiered export goes through the page cache")


def _io_urings(pid: int) -> int:
    """io_uring instances process ``pid`` holds open (its descriptors' links name them)."""
    n = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            n += os.readlink(fd) == "anon_inode:[io_uring]"
        except OSError:  # closed meanwhile
            pass
    return n


@pytest.mark.skipif(shutil.which("nbdcopy") is None, reason="nbdcopy (libnbd-bin; `make test` installs it)")
@pytest.mark.parametrize("reads", ["io_uring", None])
def test_many_reads_in_flight_return_the_files_bytes(tmp_path: Path, reads: str | None) -> None:
    """Direct reads go through the I/O threads by default, through io_uring from the
    scheduler loop with --direct-reads io_uring; with 64 reads in flight through 8 slots
    every byte comes back from the disk either way."""
    img = _cold_file(tmp_path / "d.img", 16 * MIB)
    s = Server("--export", f"d={img}:0", "--direct", "--depth", "8", "--listen", "127.0.0.1:0", "--for", "60s",
               *(["--direct-reads", reads] if reads else []))
    try:
        line, port = s.ready()
        assert ("direct reads through io_uring" in line) == (reads == "io_uring"), line
        assert _io_urings(s.p.pid) == (1 if reads == "io_uring" else 0)
        out = tmp_path / "out.img"
        r = subprocess.run(["nbdcopy", "--connections=1", "--requests=64", "--request-size=4096",
                            f"nbd://127.0.0.1:{port}/d", str(out)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    finally:
        code, _, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    assert _resident_pages(img, 0, 16 * MIB) == 0  # the disk answered (before the check below reads it)
    assert out.read_bytes() == img.read_bytes()


def test_the_config_file_and_the_flag_choose_how_direct_files_are_read(tmp_path: Path) -> None:
    img = _cold_file(tmp_path / "d.img", MIB)
    cfg = tmp_path / "gw.toml"
    cfg.write_text(f'direct_reads = "io_uring"\n[[export]]\nname = "d"\npath = "{img}"\ndirect = true\n')
    r = run_cli("serve", "--config", str(cfg), "--check")
    assert r.code == 0 and "direct reads through io_uring" in r.out, (r.code, r.out, r.err)
    r = run_cli("serve", "--config", str(cfg), "--check", "--direct-reads", "threads")
    assert r.code == 0 and "io_uring" not in r.out, (r.code, r.out, r.err)


def test_a_wrong_direct_reads_setting_is_refused(tmp_path: Path) -> None:
    img = _cold_file(tmp_path / "d.img", MIB)
    assert_one_line_error(run_cli("serve", "--export", f"d={img}:0", "--direct", "--direct-reads", "uring", "--check"),
                          "--direct-reads", "expected one of threads, io_uring, got 'uring'")
    cfg = tmp_path / "gw.toml"
    cfg.write_text(f'direct_reads = "aio"\n[[export]]\nname = "d"\npath = "{img}"\ndirect = true\n')
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"),
                          f"{cfg}:1", "direct_reads", "expected one of threads, io_uring, got 'aio'")
    # qemu-nbd refuses --aio=native without --cache=none in the same way.
    assert_one_line_error(run_cli("serve", "--export", f"d={img}:0", "--direct-reads", "io_uring", "--check"),
                          "direct_reads: io_uring reads the files of direct exports, and no export is direct")
