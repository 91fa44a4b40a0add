"""A 64-point sweep run three ways, side by side: in one process, on the local process
pool (2 workers) and on a 2-worker Dask LocalCluster (cluster start-up included), with a
check that all three give identical results.

The experiment: examples/experiments/compare.toml's four tenants (real traces when
../shared/traces is present) with mClock and WF2Q+ at 8 capacities × 4 seeds = 64 runs.

    .venv/bin/python benches/sweep.py [--workers 2] [--duration 300s]
"""

from __future__ import annotations

import argparse
import os
import time
import tomllib
from pathlib import Path

from storqos.experiment import from_dict, run_experiment

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "experiments" / "compare.toml"
CAPACITIES = ["1.2k", "1.3k", "1.4k", "1.5k", "1.6k", "1.8k", "2k", "2.5k"]
SEEDS = [1, 2, 3, 4]
POLICIES = [{"kind": "mclock"}, {"kind": "wf2q"}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--duration", default="300s", help="simulated time per run (the closed-loop tenant keeps running after the traces end)")
    args = ap.parse_args()
    raw = tomllib.loads(EXAMPLE.read_text())
    raw.update(duration=args.duration, policy=POLICIES, grid={"device.capacity": CAPACITIES, "seed": SEEDS})
    exp = from_dict(raw, base=EXAMPLE.parent, where=EXAMPLE.name, path=EXAMPLE)
    n = len(exp.runs)
    assert n == 64, n
    requests = None
    rows = []
    results = {}
    for label, backend, workers in (
        ("serial (1 process)", "serial", 1),
        (f"local process pool ({args.workers} workers)", "local", args.workers),
        (f"Dask LocalCluster ({args.workers} workers, start-up included)", f"local:{args.workers}", None),
    ):
        t0 = time.perf_counter()
        res = run_experiment(exp, backend=backend, workers=workers)
        wall = time.perf_counter() - t0
        results[label] = res
        if requests is None:
            requests = sum(o.arrived for o in res.outputs)
        rows.append((label, wall))
    first = next(iter(results.values()))
    identical = all(
        r.tenants.equals(first.tenants) and r.windows.equals(first.windows) and r.cdf.equals(first.cdf)
        for r in results.values()
    )
    print(f"64-point sweep ({len(POLICIES)} policies x {len(CAPACITIES)} capacities x {len(SEEDS)} seeds), "
          f"{requests:,} simulated requests, {args.duration} per run, {os.cpu_count()} CPUs")
    print("| backend | wall (s) | runs/s | speed-up vs serial |")
    print("|---|---:|---:|---:|")
    for label, wall in rows:
        print(f"| {label} | {wall:.2f} | {n / wall:.1f} | {rows[0][1] / wall:.2f}x |")
    print(f"identical results on every backend: {identical}")
    assert identical


if __name__ == "__main__":
    main()
