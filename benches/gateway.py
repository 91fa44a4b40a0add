"""Benchmark: the live gateway (`storqos serve`) against qemu-nbd, side by side in one run.

The same file is served by qemu-nbd (QEMU's NBD server, no QoS) and by `storqos serve`
under FCFS and WF2Q+, and driven by the same real client, `qemu-img bench` (4 KiB
requests at a fixed queue depth, sequential offsets), for reads and for writes. Reports
IOPS (median of REPEATS) and storqos ÷ qemu-nbd: what running every request through
the scheduler task (and its I/O threads) costs against a plain NBD server.

    .venv/bin/python benches/gateway.py [--count 50000] [--depth 16] [--repeats 3]

The gateway is started as `python -m storqos.cli serve` with this interpreter, so
`PYTHONPATH=other/tree/python` benchmarks that tree's build.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPEATS = 3
IMAGE_BYTES = 256 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"server exited early with status {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port} after {timeout} s")


def qemu_img_bench(port: int, count: int, depth: int, write: bool) -> float:
    """IOPS of one `qemu-img bench` run against nbd://127.0.0.1:PORT/d."""
    args = ["qemu-img", "bench", "-f", "raw", "-c", str(count), "-d", str(depth), "-s", "4k", "-S", "4k"]
    if write:
        args.append("-w")
    out = subprocess.run([*args, f"nbd://127.0.0.1:{port}/d"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"Run completed in ([0-9.]+) seconds", out)
    if not m:
        raise SystemExit(f"unexpected qemu-img bench output: {out!r}")
    return count / float(m.group(1))


def server(kind: str, image: Path, port: int, depth: int) -> subprocess.Popen[bytes]:
    if kind == "qemu-nbd":
        cmd = ["qemu-nbd", "-f", "raw", "-x", "d", "-b", "127.0.0.1", "-p", str(port), "-t", str(image)]
    else:
        # `python -m storqos.cli` rather than the venv's `storqos` script, so a
        # PYTHONPATH pointing at another source tree is honoured.
        cmd = [sys.executable, "-m", "storqos.cli", "serve", "--export", f"d={image}", "--policy", kind,
               "--depth", str(depth), "--listen", f"127.0.0.1:{port}"]
        if kind == "wf2q":
            cmd += ["--weights", "1"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=50_000, help="requests per qemu-img bench run")
    ap.add_argument("--depth", type=int, default=16, help="client queue depth (and the gateway's --depth)")
    ap.add_argument("--repeats", type=int, default=REPEATS)
    args = ap.parse_args()
    for tool in ("qemu-img", "qemu-nbd"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is required (Debian package qemu-utils)")

    kinds = ["qemu-nbd", "fcfs", "wf2q"]
    rates: dict[tuple[str, bool], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        image = Path(tmp) / "bench.img"
        with open(image, "wb") as f:
            f.truncate(IMAGE_BYTES)
        for write in (False, True):
            runs: dict[str, list[float]] = {k: [] for k in kinds}
            # Interleave the servers so a slow phase of the machine hits all of them.
            for _ in range(args.repeats):
                for kind in kinds:
                    port = free_port()
                    p = server(kind, image, port, args.depth)
                    try:
                        wait_listening(port, p)
                        runs[kind].append(qemu_img_bench(port, args.count, args.depth, write))
                    finally:
                        p.terminate()
                        p.wait(timeout=30)
            for kind in kinds:
                rates[(kind, write)] = statistics.median(runs[kind])

    print(f"4 KiB requests, queue depth {args.depth}, {args.count:,} per run, median of {args.repeats} "
          f"(client: qemu-img bench; {os.cpu_count()} CPUs)")
    print(f"{'server':<22} {'read IOPS':>12} {'÷ qemu-nbd':>11} {'write IOPS':>12} {'÷ qemu-nbd':>11}")
    names = {"qemu-nbd": "qemu-nbd", "fcfs": "storqos serve fcfs", "wf2q": "storqos serve wf2q+"}
    for kind in kinds:
        r, w = rates[(kind, False)], rates[(kind, True)]
        rr, rw = r / rates[("qemu-nbd", False)], w / rates[("qemu-nbd", True)]
        print(f"{names[kind]:<22} {r:>12,.0f} {rr:>11.2f} {w:>12,.0f} {rw:>11.2f}")


if __name__ == "__main__":
    main()
