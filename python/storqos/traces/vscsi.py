"""VMware vscsi binary traces (the CloudPhysics layout read by PyMimircache / libCacheSim).

Fixed-size little-endian records, no header; two versions:

* v1, 32 bytes, ``struct '<IIIHHQQ'``:
  ``serial:u32, length_bytes:u32, n_sg:u32, cmd:u16, ver:u16, lbn:u64, ts_us:u64``
* v2, 40 bytes, ``struct '<HHIIIQQQ'``:
  ``cmd:u16, ver:u16, serial:u32, length_bytes:u32, n_sg:u32, lbn:u64, ts_us:u64,
  resp_us:u64``

The version is ``ver >> 8`` (1 or 2); like libCacheSim, the reader tries v2 on the first
two records, then v1, and then requires every record to carry that version.

Field mapping: ``cmd`` is the SCSI opcode: READ(6/10/12/16) = 0x08, 0x28, 0xA8, 0x88
are reads; WRITE(6/10/12/16) = 0x0A, 0x2A, 0xAA, 0x8A are writes; all other commands
(TEST UNIT READY, INQUIRY, SYNCHRONIZE CACHE, ...) move no data and are skipped.
``ts_us`` is the issue time in µs, ``lbn`` the start in 512-byte sectors, ``length``
the transfer size in bytes, v2 ``resp_us`` the response time → ``response_ns``.
There is no device field: ``device`` is ``"0"``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from storqos.base.errors import InputError
from storqos.traces._pipeline import check_limit, finish, no_requests, source_file
from storqos.traces.schema import MAX_INT64, MAX_SIZE, SECTOR_BYTES

V1 = np.dtype(
    [("sn", "<u4"), ("len", "<u4"), ("nsg", "<u4"), ("cmd", "<u2"), ("ver", "<u2"), ("lbn", "<u8"), ("ts", "<u8")]
)
V2 = np.dtype(
    [
        ("cmd", "<u2"),
        ("ver", "<u2"),
        ("sn", "<u4"),
        ("len", "<u4"),
        ("nsg", "<u4"),
        ("lbn", "<u8"),
        ("ts", "<u8"),
        ("rt", "<u8"),
    ]
)
DTYPES = {1: V1, 2: V2}
READ_OPCODES = (0x08, 0x28, 0xA8, 0x88)
WRITE_OPCODES = (0x0A, 0x2A, 0xAA, 0x8A)


def vscsi_version(head: bytes) -> int | None:
    """1 or 2 if the first records of ``head`` look like vscsi v1/v2, else None."""
    for version in (2, 1):
        dt = DTYPES[version]
        n = min(2, len(head) // dt.itemsize)
        if n == 0:
            continue
        rec = np.frombuffer(head, dtype=dt, count=n)
        if np.all(rec["ver"] >> 8 == version):
            return version
    return None


def read_vscsi(path: str | Path, *, sort: bool = False, limit: int | None = None) -> pl.DataFrame:
    """Read a vscsi v1/v2 binary trace."""
    check_limit(limit)
    p = source_file(path)
    data = p.read_bytes()
    version = vscsi_version(data[: 2 * V2.itemsize])
    if version is None:
        raise InputError(
            "not a vscsi trace: the version field (ver >> 8) of the first records is neither 1 nor 2",
            f"{p}: byte 0",
        )
    dt = DTYPES[version]
    n_full, tail = divmod(len(data), dt.itemsize)
    if tail:
        raise InputError(
            f"truncated record: {tail} of {dt.itemsize} bytes", f"{p}: byte {n_full * dt.itemsize}"
        )
    rec = np.frombuffer(data, dtype=dt, count=n_full)

    def where(i: int | np.integer) -> str:
        return f"{p}: byte {int(i) * dt.itemsize}"

    bad_ver = (rec["ver"] >> 8) != version
    if bad_ver.any():
        i = int(np.argmax(bad_ver))
        raise InputError(
            f"record version {int(rec['ver'][i]) >> 8}, expected {version} (vscsi v{version})", where(i)
        )
    index = np.flatnonzero(np.isin(rec["cmd"], READ_OPCODES + WRITE_OPCODES))
    if limit is not None:
        index = index[:limit]
    io = rec if len(index) == n_full else rec[index]
    if len(io) == 0 and limit != 0:
        raise no_requests(p, "no READ or WRITE commands")
    bad_len = (io["len"] == 0) | (io["len"] > MAX_SIZE)
    if bad_len.any():
        i = int(np.argmax(bad_len))
        raise InputError(f"size {int(io['len'][i])} bytes: a READ/WRITE must move data", where(index[i]))
    # 64-bit fields beyond what Int64 nanoseconds / bytes hold are errors, not wrapped.
    for field, scale, what in (("lbn", SECTOR_BYTES, "sector number"), ("ts", 1000, "timestamp (us)")) + (
        (("rt", 1000, "response time (us)"),) if version == 2 else ()
    ):
        big = io[field] > MAX_INT64 // scale
        if big.any():
            i = int(np.argmax(big))
            raise InputError(
                f"{what} {int(io[field][i])} is out of range (at most {MAX_INT64 // scale:,})", where(index[i])
            )
    ts = io["ts"].astype(np.int64)
    if not sort and len(ts) > 1:
        back = np.diff(ts) < 0
        if back.any():
            i = int(np.argmax(back)) + 1
            raise InputError(
                f"timestamp {int(ts[i])} us is before the previous one ({int(ts[i - 1])} us); "
                "pass --sort to sort the trace",
                where(index[i]),
            )
    cols: dict[str, object] = {
        "t": ts,
        "is_read": np.isin(io["cmd"], READ_OPCODES),
        "offset": io["lbn"].astype(np.int64) * SECTOR_BYTES,
        "size": io["len"].astype(np.int64),
        "device": pl.repeat("0", len(io), eager=True, dtype=pl.String),
    }
    if version == 2:
        cols["response_ns"] = io["rt"].astype(np.int64) * 1000
    return finish(pl.DataFrame(cols), factor=1000, sort=sort, limit=None, strict=False)


def write_vscsi(df: pl.DataFrame, path: str | Path, *, version: int = 1) -> None:
    """Write a canonical trace as vscsi v1 or v2 (READ(10)/WRITE(10) opcodes).

    Times are rounded down to µs, offsets to 512-byte sectors; v2 takes ``resp_us``
    from ``response_ns`` when present. ``device`` is not stored.
    """
    if version not in DTYPES:
        raise InputError(f"vscsi version must be 1 or 2, got {version}")
    n = df.height
    rec = np.zeros(n, dtype=DTYPES[version])
    rec["sn"] = np.arange(n, dtype=np.uint32)
    rec["len"] = df["size"].to_numpy()
    rec["nsg"] = 1
    rec["cmd"] = np.where(df["is_read"].to_numpy(), 0x28, 0x2A)
    rec["ver"] = version << 8
    rec["lbn"] = df["offset"].to_numpy() // SECTOR_BYTES
    rec["ts"] = df["arrival_ns"].to_numpy() // 1000
    if version == 2 and "response_ns" in df.columns:
        rec["rt"] = df["response_ns"].fill_null(0).to_numpy() // 1000
    Path(path).write_bytes(rec.tobytes())
