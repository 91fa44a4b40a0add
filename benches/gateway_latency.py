"""Benchmark: the time the gateway adds to a read from a disk, beside qemu-nbd's.

4 KiB random reads of a 256 MiB file of random data on this machine's disk, with
O_DIRECT (past the page cache, so the disk answers every read), read four ways by fio:

- **disk**: the file itself (fio's libaio engine, ``direct=1``): the disk's own time;
- **storqos, io_uring**: through `storqos serve --direct` (FCFS, 8 slots) on loopback,
  fio's nbd engine (libnbd) as the client, with ``--direct-reads io_uring``: reads
  submitted through io_uring by the scheduler loop's thread;
- **storqos, threads**: the same with the default, ``--direct-reads threads``:
  each read handed to one of the gateway's I/O threads (as writes always are);
- **qemu-nbd**: through ``qemu-nbd --cache=none --aio=native`` (QEMU's NBD server, no
  QoS, the disk read with Linux AIO from its event loop), the same client.

Three patterns: one read at a time **back to back** (the next one sent as the last
one's reply comes), one at a time **2 ms apart** (fio's ``thinktime``: every thread on
the path goes to sleep between two reads and wakes for the next, as for a lone request
in a trace), and **16 in flight**. Reported: the total latency's p50 and p99 (µs; fio's
``lat``, submission to completion) and the IOPS, each the median over the rounds with
its range, and the p50 the server adds to the disk's. The targets' order turns every
round.

    .venv/bin/python benches/gateway_latency.py [--seconds 6] [--rounds 3]

The gateway is started as `python -m storqos.cli serve` with this interpreter, so
`PYTHONPATH=other/tree/python` benchmarks that tree's build.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gateway import free_port, wait_listening  # benches/gateway.py: the same helpers
from gateway_ops import qemu_nbd, storqos  # benches/gateway_ops.py: the servers, started the same way

IMAGE_BYTES = 256 << 20
SERVERS = ("storqos, io_uring", "storqos, threads", "qemu-nbd")
TARGETS = ("disk", *SERVERS)
#: pattern -> (reads in flight, fio's thinktime in µs between a read's completion and the next)
PATTERNS = {"back to back": (1, 0), "2 ms apart": (1, 2000), "16 in flight": (16, 0)}


def fio_reads(target: str, image: Path, port: int, seconds: int, depth: int, think_us: int,
              tmp: Path) -> tuple[float, float, float]:
    """p50 and p99 of fio's total latency (µs), and the IOPS, of 4 KiB random reads."""
    where = (f"ioengine=libaio\ndirect=1\nfilename={image}\n" if target == "disk"
             else f"ioengine=nbd\nuri=nbd://127.0.0.1:{port}/d\n")
    job = tmp / "lat.fio"
    job.write_text(f"[r]\n{where}rw=randread\nbs=4k\niodepth={depth}\nsize={IMAGE_BYTES}\ntime_based=1\n"
                   f"runtime={seconds}\nthinktime={think_us}\nlat_percentiles=1\nrandrepeat=0\n")
    r = subprocess.run(["fio", "--output-format=json", str(job)], capture_output=True, text=True, cwd=tmp,
                       timeout=seconds + 120)
    if r.returncode != 0:
        raise SystemExit(f"fio against {target} failed: {r.stderr.strip()[-500:]}")
    read = json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]["read"]
    pct = read["lat_ns"]["percentile"]
    return pct["50.000000"] / 1e3, pct["99.000000"] / 1e3, float(read["iops"])


def servers(image: Path, ports: dict[str, int]) -> list[subprocess.Popen[bytes]]:
    def direct(port: int, reads: str) -> subprocess.Popen[bytes]:
        return storqos(["--export", f"d={image}", "--direct", "--direct-reads", reads, "--listen", f"127.0.0.1:{port}"])

    procs = [
        direct(ports["storqos, io_uring"], "io_uring"),
        direct(ports["storqos, threads"], "threads"),
        qemu_nbd(image, ports["qemu-nbd"], options=("--cache=none", "--aio=native")),
    ]
    for name, proc in zip(SERVERS, procs, strict=True):
        wait_listening(ports[name], proc)
    return procs


def span(xs: list[float]) -> str:
    return f"{statistics.median(xs):.0f} ({min(xs):.0f}-{max(xs):.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=6, help="length of each fio run")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for tool in ("fio", "qemu-nbd"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is required (`make test` installs it)")
    # Not in /tmp if that is a tmpfs: it cannot do O_DIRECT, and the point is the disk.
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent) as t:
        tmp = Path(t)
        image = tmp / "data.img"
        with open(image, "wb") as f:
            for _ in range(IMAGE_BYTES >> 20):
                f.write(os.urandom(1 << 20))
        os.sync()
        ports = {name: free_port() for name in SERVERS}
        procs = servers(image, ports)
        runs: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        try:
            for rnd in range(args.rounds):
                k = rnd % len(TARGETS)
                order = TARGETS[k:] + TARGETS[:k]
                for pattern, (depth, think) in PATTERNS.items():
                    for target in order:
                        runs.setdefault((pattern, target), []).append(
                            fio_reads(target, image, ports.get(target, 0), args.seconds, depth, think, tmp))
                print(f"round {rnd + 1} done ({time.strftime('%H:%M:%S')})", file=sys.stderr)
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=10)
    print(f"{os.cpu_count()} CPUs; 4 KiB random reads, O_DIRECT; {args.seconds} s runs; "
          f"median (range) of {args.rounds} rounds")
    for pattern in PATTERNS:
        print(f"\n{pattern}")
        print(f"  {'target':<18}{'p50 µs':>14}{'added':>7}{'p99 µs':>16}{'k IOPS':>14}")
        disk = statistics.median(r[0] for r in runs[(pattern, "disk")])
        for target in TARGETS:
            rs = runs[(pattern, target)]
            p50s = [r[0] for r in rs]
            added = "" if target == "disk" else f"{statistics.median(p50s) - disk:+.0f}"
            iops = [r[2] / 1e3 for r in rs]
            print(f"  {target:<18}{span(p50s):>14}{added:>7}{span([r[1] for r in rs]):>16}"
                  f"{statistics.median(iops):>6.1f} ({min(iops):.1f}-{max(iops):.1f})")


if __name__ == "__main__":
    main()
