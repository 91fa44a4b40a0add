"""Cost of tenants: wall time per request and peak memory of
``storqos.simulate`` with 1 M requests spread over 2 … 65,536 tenants, per policy.

Each request goes to a tenant drawn uniformly at random (the worst case for per-tenant
state: no two consecutive requests share a tenant's cache lines), arrivals are Poisson at
90 % of a 100,000-IOPS constant-rate device, and every policy gets per-tenant parameters
(equal weights, zero reservations, a deadline or an SLO per tenant). Every (policy,
tenants) point runs in its own process, so that its peak RSS (VmHWM, the Python
interpreter and polars included) is its own; its time is the median of ``--repeats``
calls in that process (this machine moves ±25 % from one process to the next).

    .venv/bin/python benches/tenants_scale.py                 # the table
    .venv/bin/python benches/tenants_scale.py --tenants 65536 # one column
    .venv/bin/python benches/tenants_scale.py --tenants 2 4096 --policies fclb --alternate 9  # ratios, one process
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

REQUESTS = 1_000_000
CAPACITY = 100_000.0
TENANTS = (2, 16, 256, 4096, 65536)
POLICIES = ("fcfs", "edf", "wf2q", "sfq", "yfq", "mclock", "fclb", "sarc+avatar", "sarc+facade", "miser")


def policy(name: str, n: int) -> dict[str, object]:
    """The policy spec for ``n`` tenants (tenant i is class i)."""
    from storqos.model.specs import policy_spec

    per = 0.9 * CAPACITY / n
    if name in ("wf2q", "sfq", "yfq"):
        return policy_spec(name, weights=[1.0] * n)
    if name == "mclock":
        return policy_spec(name, reservations=["0"] * n)
    if name == "edf":
        return policy_spec(name, deadlines=[f"{10 + i % 7}ms" for i in range(n)])
    if name == "fclb":
        return policy_spec(name, workloads=[f"{per:g}:100ms"] * n)
    if name == "miser":
        return policy_spec(name, cmin=f"{0.8 * CAPACITY:g}", deadlines=["10ms"])
    if name.startswith("sarc"):
        kind = {"sarc+avatar": "sarc_avatar", "sarc+facade": "sarc_facade"}[name]
        return {"kind": kind, "slo": [{"rate_iops": per, "latency_ns": 200_000_000}] * n}
    return policy_spec(name)


def workload(n: int, requests: int) -> Any:
    """The benchmark's requests over ``n`` tenants (a polars frame)."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(1)
    arrival = np.cumsum(rng.exponential(1e9 / (0.9 * CAPACITY), requests)).astype(np.int64)
    return pl.DataFrame({"arrival_ns": arrival, "tenant": rng.integers(0, n, requests).astype(np.uint32),
                         "size": np.full(requests, 4096, np.uint32), "offset": np.zeros(requests, np.uint64),
                         "is_read": np.ones(requests, bool)})


def alternate(name: str, tenants: list[int], requests: int, rounds: int) -> None:
    """Every tenant count of ``name`` in this one process, in turn, ``rounds`` times: the
    ratios of the medians (and of the best times), which the process-to-process swing of
    this machine (±25 %) does not reach."""
    import storqos

    cases = {n: (workload(n, requests), policy(name, n)) for n in tenants}
    walls: dict[int, list[float]] = {n: [] for n in tenants}
    for _ in range(rounds):
        for n, (df, spec) in cases.items():
            t0 = time.perf_counter()
            storqos.simulate(df, spec, "constant", capacity=CAPACITY)
            walls[n].append(time.perf_counter() - t0)
    med = {n: statistics.median(w) * 1e9 / requests for n, w in walls.items()}
    base = tenants[0]
    print(f"{name}, {rounds} alternating rounds, ns per request (median / best): " + ", ".join(
        f"{n:,} tenants {med[n]:,.0f} / {min(walls[n]) * 1e9 / requests:,.0f}"
        + ("" if n == base else f" ({med[n] / med[base]:.2f}× / {min(walls[n]) / min(walls[base]):.2f}×)")
        for n in tenants))


def one(name: str, n: int, requests: int, repeats: int) -> dict[str, object]:
    """One point in this process: the median wall of ``repeats`` calls."""
    import resource

    import storqos

    df = workload(n, requests)
    spec = policy(name, n)
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = storqos.simulate(df, spec, "constant", capacity=CAPACITY)
        walls.append(time.perf_counter() - t0)
        assert r.total["completed"][0] == requests, r.total
    wall = statistics.median(walls)
    return {"policy": name, "tenants": n, "wall_s": wall, "ns_per_request": wall * 1e9 / requests,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tenants", type=int, nargs="*", default=list(TENANTS))
    ap.add_argument("--policies", nargs="*", default=list(POLICIES))
    ap.add_argument("--requests", type=int, default=REQUESTS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--alternate", type=int, metavar="ROUNDS",
                    help="run each policy's tenant counts in one process, in turn, ROUNDS times (ratios only)")
    ap.add_argument("--one", nargs=2, metavar=("POLICY", "TENANTS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.alternate:
        for name in args.policies:
            alternate(name, args.tenants, args.requests, args.alternate)
        return
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.requests, args.repeats)))
        return
    rows: dict[tuple[str, int], dict[str, float]] = {}
    for name in args.policies:
        for n in args.tenants:
            p = subprocess.run([sys.executable, __file__, "--one", name, str(n), "--requests", str(args.requests),
                                "--repeats", str(args.repeats)],
                               capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(f"{name} @ {n}: failed: {p.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                continue
            rows[(name, n)] = json.loads(p.stdout)
            print(f"  {name:12} {n:>6} tenants: {rows[(name, n)]['ns_per_request']:8.0f} ns/request, "
                  f"peak RSS {rows[(name, n)]['peak_rss_mib']:6.0f} MiB", file=sys.stderr)
    print(f"\n{args.requests:,} requests, ns per request (median wall of {args.repeats} storqos.simulate calls / "
          "requests), peak RSS in MiB in brackets\n")
    print("| policy | " + " | ".join(f"{n:,}" for n in args.tenants) + " | 4,096 ÷ 2 |")
    print("|---|" + "---:|" * (len(args.tenants) + 1))
    for name in args.policies:
        cells = []
        for n in args.tenants:
            r = rows.get((name, n))
            cells.append("–" if r is None else f"{r['ns_per_request']:,.0f} ({r['peak_rss_mib']:,.0f})")
        a, b = rows.get((name, 2)), rows.get((name, 4096))
        ratio = f"{b['ns_per_request'] / a['ns_per_request']:.1f}×" if a and b else "–"
        print(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")


if __name__ == "__main__":
    main()
