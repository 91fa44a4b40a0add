"""Benchmark: what a tiered export (crates/storqos-gateway/src/tier.rs) adds to the
gateway's path per I/O, side by side with a plain export in one run (issue 17's target:
≤ 5 µs per I/O).

One gateway (FCFS, no emulated capacity) serves a plain export `d` and two tiered
exports of the same size: `hit` (every block placed on the fast file: each read is
routed through the block map and read from the fast file) and `miss` (nothing placed,
no LRU: routed, then read from the slow file). `qemu-img bench` sends 4 KiB reads at a
fixed queue depth to each in turn (interleaved, median of REPEATS); the extra time per
I/O is 1/IOPS(tiered) − 1/IOPS(plain). Writes too (write-through: slow file, then the
fast copy of a placed block).

    .venv/bin/python benches/gateway_tiered.py [--count 50000] [--depth 16] [--repeats 5]
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
    args = ap.parse_args()
    exports = ["d", "hit", "miss"]
    rates: dict[tuple[str, bool], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        cfg = config(Path(tmp), port, args.depth)
        p = subprocess.Popen([sys.executable, "-m", "storqos.cli", "serve", "--config", str(cfg)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_listening(port, p)
            for write in (False, True):
                runs: dict[str, list[float]] = {e: [] for e in exports}
                for _ in range(args.repeats):
                    for e in exports:
                        runs[e].append(qemu_img_bench_export(port, e, args.count, args.depth, write))
                for e in exports:
                    rates[(e, write)] = statistics.median(runs[e])
        finally:
            p.terminate()
            p.wait(timeout=30)
    print(f"4 KiB requests, queue depth {args.depth}, {args.count:,} per run, median of {args.repeats} "
          f"(client: qemu-img bench; {os.cpu_count()} CPUs; files in the page cache)")
    print(f"{'export':<28} {'read IOPS':>10} {'+µs/I/O':>8} {'write IOPS':>11} {'+µs/I/O':>8}")
    names = {"d": "plain", "hit": "tiered, every read a hit", "miss": "tiered, every read a miss"}
    for e in exports:
        r, w = rates[(e, False)], rates[(e, True)]
        dr = (1 / r - 1 / rates[("d", False)]) * 1e6
        dw = (1 / w - 1 / rates[("d", True)]) * 1e6
        print(f"{names[e]:<28} {r:>10,.0f} {dr:>8.2f} {w:>11,.0f} {dw:>8.2f}")


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
