"""Write the seed corpus of the fuzz targets (corpus/parsers, corpus/server): well-formed
and nearly well-formed client byte streams, built from the NBD spec's layouts.

    python3 make_seeds.py
"""

from __future__ import annotations

import struct
from pathlib import Path

IHAVEOPT = b"IHAVEOPT"
REQ = 0x25609513


def opt(option: int, data: bytes = b"") -> bytes:
    return IHAVEOPT + struct.pack(">II", option, len(data)) + data


def go(name: bytes, *info: int) -> bytes:
    return struct.pack(">I", len(name)) + name + struct.pack(">H", len(info)) + b"".join(struct.pack(">H", i) for i in info)


def meta(name: bytes, *queries: bytes) -> bytes:
    return (struct.pack(">I", len(name)) + name + struct.pack(">I", len(queries))
            + b"".join(struct.pack(">I", len(q)) + q for q in queries))


def req(cmd: int, cookie: int, offset: int, length: int, flags: int = 0, payload: bytes = b"") -> bytes:
    return struct.pack(">IHHQQI", REQ, flags, cmd, cookie, offset, length) + payload


FLAGS = struct.pack(">I", 3)
SEEDS = {
    "go-read-write-flush": FLAGS + opt(7, go(b"a", 3)) + req(0, 1, 0, 4096) + req(1, 2, 4096, 8, payload=b"x" * 8)
    + req(3, 3, 0, 0) + req(2, 4, 0, 0),
    "structured-block-status": FLAGS + opt(8) + opt(10, meta(b"a", b"base:allocation")) + opt(7, go(b"a"))
    + req(7, 1, 0, 65536) + req(7, 2, 0, 65536, flags=8) + req(0, 3, 0, 65536),
    "list-info-abort": FLAGS + opt(3) + opt(9, meta(b"a")) + opt(6, go(b"a", 0, 3)) + opt(2),
    "export-name": FLAGS + opt(1, b"a") + req(6, 1, 0, 4096, flags=2) + req(4, 2, 0, 4096, flags=1),
    "starttls-without-tls": FLAGS + opt(5) + opt(7, go(b"")),
    "bad-option-magic": FLAGS + b"IHAVEOPX" + struct.pack(">II", 7, 5) + b"short",
    "huge-option": FLAGS + IHAVEOPT + struct.pack(">II", 7, 0xFFFFFFFF),
    "bad-request-magic": FLAGS + opt(7, go(b"a")) + struct.pack(">IHHQQI", 0xDEADBEEF, 0, 0, 1, 0, 4096),
    "read-too-long": FLAGS + opt(7, go(b"a")) + req(0, 1, 0, (32 << 20) + 1),
    "out-of-range": FLAGS + opt(7, go(b"a")) + req(0, 1, 1 << 40, 4096) + req(1, 2, (1 << 64) - 1, 1, payload=b"z"),
    "unknown-command-and-flags": FLAGS + opt(7, go(b"a")) + req(99, 1, 0, 1) + req(0, 2, 0, 4096, flags=0xFFFF),
    "bad-meta": FLAGS + opt(8) + opt(10, b"\x00\x00\x00\x09a") + opt(10, meta(b"nope", b"base:allocation")),
    "bad-client-flags": struct.pack(">I", 0xFFFFFFFF),
}

for target in ("parsers", "server"):
    d = Path(__file__).parent / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    for name, data in SEEDS.items():
        (d / name).write_bytes(data)
print(f"{len(SEEDS)} seeds in corpus/parsers and corpus/server")
