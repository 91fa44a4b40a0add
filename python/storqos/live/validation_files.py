"""The files a validation serves (:mod:`storqos.live.validate`): one export per tenant,
sparse for the gateway's emulated device or written full for real files, read into the
page cache before each replay or served past it with O_DIRECT."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np


def fill_file(path: Path, size: int, *, direct: bool = False) -> Path:
    """``path`` written full: ``size`` bytes of a pattern that is not zeros. ``direct``:
    then on the disk and out of the page cache, as a direct export reads it (its first
    direct reads do not wait for the written pages to go out)."""
    chunk = (np.arange(1 << 20, dtype=np.uint32) * 2654435761).tobytes()  # 4 MiB, not zeros
    with open(path, "wb") as f:
        for _ in range(size // len(chunk)):
            f.write(chunk)
        f.write(chunk[: size % len(chunk)])
        if direct:
            f.flush()
            os.fsync(f.fileno())
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return path


def export_entry(name: str, path: Path, tenant: int, direct: bool) -> dict[str, Any]:
    """The gateway's entry of an export, served with O_DIRECT when ``direct``."""
    return {"name": name, "path": str(path), "tenant": tenant, **({"direct": True} if direct else {})}


def exports(workdir: Path, tenants: int, size: int, fill: bool, direct: bool = False) -> list[dict[str, Any]]:
    """One export ``tN`` per tenant: its file sparse (emulated device) or written full
    (real files: :func:`fill_file`; the page cache holds them, :func:`into_page_cache`
    before each replay, or with ``direct`` the disk, which the gateway then reads and
    writes with O_DIRECT)."""
    entries = []
    for t in range(tenants):
        p = workdir / f"tenant{t}.img"
        if fill:
            fill_file(p, size, direct=direct)
        else:
            with open(p, "wb") as f:
                f.truncate(size)
        entries.append(export_entry(f"t{t}", p, t, direct))
    return entries


def into_page_cache(paths: list[Path]) -> None:
    """Read the files through, so that a replay finds them in the page cache as the
    calibration found its own. A kernel that reclaims memory proactively drops a file's
    pages once they sit unused: on this machine class (DAMON pageout of pages idle for a
    minute) a 256 MiB export written full was 80 % in the cache a minute later, and a
    read of a dropped page took 55 µs instead of 1.5 µs, so the exports that waited out
    the calibration and the other runs' replays served part of their reads from the disk
    and the live times came out slower than predicted, by how long each file had waited."""
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_WILLNEED)
            while f.read(4 << 20):
                pass


def gateway_direct_reads(direct: bool, direct_reads: str) -> str | None:
    """The gateway's ``direct_reads`` for files served directly or not (None: none are)."""
    return direct_reads if direct else None


__all__ = ["export_entry", "exports", "fill_file", "gateway_direct_reads", "into_page_cache"]
