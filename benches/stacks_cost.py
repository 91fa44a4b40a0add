"""Per-request cost of the models of real QoS systems beside FCFS, in the simulator.

1 M Poisson requests (4 KiB, one in four a write) over 8 tenants at 90 % of a
100,000-IOPS constant-rate device; each model gets per-tenant limits at 1.5× a tenant's
share (so they shape bursts but the device stays the bottleneck) or, for BFQ, equal
weights. FCFS and the model run alternately in one process, ``--repeats`` times each;
the ratio is of the medians (this machine moves ±25 % from one process to the next).
storqos' own mClock and WF2Q+ with the same tenants are run too, for scale.

    .venv/bin/python benches/stacks_cost.py
    .venv/bin/python benches/stacks_cost.py --requests 200000 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import polars as pl
from storqos.model.sim import simulate

CAPACITY = 100_000.0
TENANTS = 8


def workload(requests: int) -> pl.DataFrame:
    """The benchmark's requests."""
    rng = np.random.default_rng(1)
    arrival = np.cumsum(rng.exponential(1e9 / (0.9 * CAPACITY), requests)).astype(np.int64)
    return pl.DataFrame({"arrival_ns": arrival, "tenant": rng.integers(0, TENANTS, requests),
                         "offset": rng.integers(0, 1 << 20, requests) * 4096,
                         "size": np.full(requests, 4096), "is_read": rng.random(requests) < 0.75})


def settings(name: str) -> dict[str, str]:
    """Each model's per-tenant settings."""
    share = 1.5 * 0.9 * CAPACITY / TENANTS
    iops = ",".join([f"{share:.0f}"] * TENANTS)
    spdk = ",".join([f"{1000 * round(share / 1000)}"] * TENANTS)
    bps = ",".join([f"{share * 4096:.0f}"] * TENANTS)
    return {"qemu-throttle": {"iops": iops}, "blk-throttle": {"read_iops": iops, "write_iops": iops},
            "bfq": {"weights": ",".join(["100"] * TENANTS)}, "nbdkit-rate": {"bps": bps},
            "spdk-qos": {"iops": spdk}, "ceph-mclock": {}, "rbd-qos": {"iops": iops},
            "mclock": {"reservations": ",".join(["0"] * TENANTS)}, "wf2q": {"weights": ",".join(["1"] * TENANTS)}}[name]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    trace = workload(args.requests)
    print(f"{args.requests:,} requests, {TENANTS} tenants, medians of {args.repeats}")
    print(f"{'model':<14} {'FCFS ns/req':>12} {'model ns/req':>13} {'ratio':>6} {'range':>12}")
    for name in ("qemu-throttle", "blk-throttle", "bfq", "nbdkit-rate", "spdk-qos", "ceph-mclock", "rbd-qos",
                 "mclock", "wf2q"):
        base: list[float] = []
        model: list[float] = []
        for _ in range(args.repeats):
            for policy, params, out in (("fcfs", {}, base), (name, settings(name), model)):
                t = time.perf_counter()
                simulate(trace, policy, "constant", capacity=CAPACITY, **params)  # type: ignore[arg-type]
                out.append((time.perf_counter() - t) * 1e9 / args.requests)
        ratios = [m / b for m, b in zip(model, base, strict=True)]
        print(f"{name:<14} {statistics.median(base):>12.0f} {statistics.median(model):>13.0f} "
              f"{statistics.median(model) / statistics.median(base):>5.2f}× {min(ratios):>5.2f}–{max(ratios):.2f}×")


if __name__ == "__main__":
    main()
