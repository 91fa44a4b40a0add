"""Benchmark: what a tiered export (crates/storqos-gateway/src/tier.rs) adds to the
gateway's path per I/O, side by side with a plain export in one run (the target:
≤ 5 µs per I/O).

One gateway (FCFS, no emulated capacity) serves a plain export `d` and two tiered
exports of the same size: `hit` (every block placed on the fast file: each read is
routed through the block map and read from the fast file) and `miss` (nothing placed,
no LRU: routed, then read from the slow file). `qemu-img bench` sends 4 KiB reads at a
fixed queue depth to each in turn (interleaved, REPEATS times, each time in another
order); the extra time per I/O is 1/IOPS(tiered) − 1/IOPS(plain) of the same repeat
(its median and range are printed). Writes too (write-through: slow file, then the
fast copy of a placed block), after the three slow files' pages are dropped from the
page cache, so that each write phase starts from the same state: the read phase leaves
the plain and `miss` files in large readahead folios, in which ext4 makes every 4 KiB
write walk the folio's buffer heads, and `hit`'s slow file is not read then. With
`--writes-only`, writes right after the start instead (no read phase, no drop): the
slow files as the gateway's start left them.

    .venv/bin/python benches/gateway_tiered.py [--count 50000] [--depth 16] [--repeats 5] [--writes-only]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gateway import free_port, qemu_img_bench, wait_listening  # noqa: E402

REPEATS = 5
IMAGE_BYTES = 64 << 20


def config(tmp: Path, port: int, depth: int) -> Path:
    for name in ("d.img", "hit.img", "hit-fast.img", "miss.img", "miss-fast.img"):
        with open(tmp / name, "wb") as f:
            f.truncate(IMAGE_BYTES)
    cfg = tmp / "gw.toml"
    cfg.write_text(f"""
listen = "127.0.0.1:{port}"
depth = {depth}
[[export]]
name = "d"
path = "d.img"
[[export]]
name = "hit"
path = "hit.img"
tier = {{ fast = "hit-fast.img", pin = 1.0, lru = false }}
[[export]]
name = "miss"
path = "miss.img"
tier = {{ fast = "miss-fast.img", pin = 0.0, lru = false }}
""")
    return cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=50_000, help="requests per qemu-img bench run")
    ap.add_argument("--depth", type=int, default=16, help="client queue depth (and the gateway's depth)")
    ap.add_argument("--repeats", type=int, default=REPEATS)
    ap.add_argument("--writes-only", action="store_true",
                    help="no read phase: writes right after the start, the slow files as the start left them")
    args = ap.parse_args()
    exports = ["d", "hit", "miss"]
    runs: dict[tuple[str, bool], list[float]] = {}
    cpu: dict[tuple[str, bool], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        cfg = config(Path(tmp), port, args.depth)
        p = subprocess.Popen([sys.executable, "-m", "storqos.cli", "serve", "--config", str(cfg)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_listening(port, p)
            for write in (True,) if args.writes_only else (False, True):
                if write and not args.writes_only:
                    drop_cached(Path(tmp), exports)
                for e in exports:
                    runs[(e, write)], cpu[(e, write)] = [], []
                for r in range(args.repeats):
                    # Each repeat in another order: no export always runs first.
                    for e in exports[r % 3:] + exports[:r % 3]:
                        before = cpu_ns(p.pid)
                        runs[(e, write)].append(qemu_img_bench_export(port, e, args.count, args.depth, write))
                        cpu[(e, write)].append((cpu_ns(p.pid) - before) / args.count / 1e3)
        finally:
            p.terminate()
            p.wait(timeout=30)
    print(f"4 KiB requests, queue depth {args.depth}, {args.count:,} per run, {args.repeats} repeats "
          f"(client: qemu-img bench; {os.cpu_count()} CPUs; files in the page cache)")
    print("IOPS: median; + µs/I/O: median [range] over the repeats of 1/IOPS(export) - 1/IOPS(plain), "
          "same repeat; CPU: the gateway's CPU time per I/O, its median, then + µs/I/O the same way")
    print(f"{'export':<28} {'read IOPS':>11} {'+ µs/I/O [range]':>22} {'write IOPS':>11} {'+ µs/I/O [range]':>22}")
    names = {"d": "plain", "hit": "tiered, every read a hit", "miss": "tiered, every read a miss"}
    for table, (per, extra_of) in {"": (runs, lambda a, b: (1 / a - 1 / b) * 1e6),
                                   "CPU ": (cpu, lambda a, b: a - b)}.items():
        for e in exports:
            cols = [f"{'-':>11}{'':23}"] if args.writes_only else []
            for write in (True,) if args.writes_only else (False, True):
                extra = [extra_of(a, b) for a, b in zip(per[(e, write)], per[("d", write)], strict=True)]
                mid = statistics.median(per[(e, write)])
                cols.append(f"{mid:>11,.0f} " if not table else f"{mid:>8.2f} µs ")
                cols[-1] += f"{statistics.median(extra):>7.2f} [{min(extra):>5.2f}, {max(extra):>5.2f}]"
            print(f"{table + names[e]:<28} {cols[0]} {cols[1]}")


def cpu_ns(pid: int) -> int:
    """CPU time of process ``pid`` so far, all its threads (ns; Linux schedstat)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(Path(f"/proc/{pid}/task/{t}/schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that just ended
    return total


def drop_cached(tmp: Path, exports: list[str]) -> None:
    """Drop the exports' slow files from the page cache (written back first)."""
    for e in exports:
        fd = os.open(tmp / f"{e}.img", os.O_RDWR)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def qemu_img_bench_export(port: int, export: str, count: int, depth: int, write: bool) -> float:
    """`qemu_img_bench` against export ``export`` (it names export ``d``)."""
    if export == "d":
        return qemu_img_bench(port, count, depth, write)
    args = ["qemu-img", "bench", "-f", "raw", "-c", str(count), "-d", str(depth), "-s", "4k", "-S", "4k"]
    if write:
        args.append("-w")
    out = subprocess.run([*args, f"nbd://127.0.0.1:{port}/{export}"], capture_output=True, text=True,
                         check=True).stdout
    seconds = float(out.rsplit("Run completed in ", 1)[1].split()[0])
    return count / seconds


if __name__ == "__main__":
    main()
