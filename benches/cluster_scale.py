"""A cluster's cost per request and its memory, beside one server, in the simulator.

``--servers`` servers (constant-rate, each at 80 % load) behind dmClock (mClock with
each tenant's total reservation, weight and limit, reports charged at arrival), hash
placement of 4 MiB objects, ``--tenants`` tenants of Poisson 4 KiB reads and writes (one
in four a write, 2 replicas) streamed from generators, ``--requests`` in all. Beside it,
the same requests through one server of the cluster's whole capacity running the same
mClock: the ratio of the costs per request is what the cluster adds (placement, the
servers' event heap, the trackers, replicas). Each run in a process of its own, whose
peak resident memory is read from the kernel; ``--repeats`` alternate runs, medians.

    .venv/bin/python benches/cluster_scale.py                       # 1,000 x 10,000 x 100 M
    .venv/bin/python benches/cluster_scale.py --servers 100 --tenants 1000 --requests 2000000
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

from storqos import _core

#: Load of every server (and of the single server).
LOAD = 0.8
#: Mean IOPS each server is asked for.
PER_SERVER_IOPS = 1_000.0


def _specs(servers: int, tenants: int, requests: int, cluster: bool) -> tuple[str, str, str, str]:
    """The policy, device, cluster and generators of a run (JSON)."""
    per_tenant = requests // tenants
    # Writes go to 2 replicas: the servers see 1.25 sub-requests per request.
    total_iops = LOAD * PER_SERVER_IOPS * servers / 1.25
    rate = total_iops / tenants
    gens = [{"kind": "poisson", "rate": rate, "count": per_tenant, "tenant": t, "bytes": 4096,
             "read_fraction": 0.75, "span_bytes": 1 << 34, "seed": 1 + t} for t in range(tenants)]
    policy = {"kind": "mclock", "reservations": [0.5 * rate] * tenants, "weights": [1.0] * tenants,
              "limits": [2.0 * rate] * tenants}
    device = {"kind": "constant", "iops": PER_SERVER_IOPS if cluster else PER_SERVER_IOPS * servers / 1.25}
    shape = {"servers": servers, "placement": {"kind": "hash", "object_bytes": 4 << 20, "replicas": 2, "seed": 0},
             "coordination": {"kind": "dmclock"}}
    return json.dumps(policy), json.dumps(device), json.dumps(shape), json.dumps(gens)


def _child(servers: int, tenants: int, requests: int, cluster: bool) -> None:
    """One run; prints seconds, requests and peak RSS (bytes) as JSON."""
    import numpy as np

    policy, device, shape, gens = _specs(servers, tenants, requests, cluster)
    empty = (np.zeros(0, np.uint64), np.zeros(0, np.uint32), np.zeros(0, np.uint32), np.zeros(0, np.uint64),
             np.zeros(0, bool))
    t0 = time.perf_counter()
    out: _core.ClusterOutput | _core.SimOutput
    if cluster:
        out = _core.simulate_cluster(*empty, None, policy, device, shape, generators_json=gens)
    else:
        out = _core.simulate(*empty, None, policy, device, generators_json=gens)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"wall_s": wall, "arrived": out.arrived, "unfinished": out.unfinished, "rss": rss}))


def _run(args: argparse.Namespace, cluster: bool) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", "cluster" if cluster else "single", "--servers", str(args.servers),
           "--tenants", str(args.tenants), "--requests", str(args.requests)]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=1_000)
    ap.add_argument("--tenants", type=int, default=10_000)
    ap.add_argument("--requests", type=int, default=100_000_000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--child", choices=["cluster", "single"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.servers, args.tenants, args.requests, args.child == "cluster")
        return
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for _ in range(args.repeats):
        for cluster in (False, True):
            runs[cluster].append(_run(args, cluster))
    print(f"{args.servers:,} servers x {args.tenants:,} tenants x {args.requests:,} requests, "
          f"medians of {args.repeats}")
    print(f"{'run':<16} {'wall s':>8} {'ns/request':>11} {'peak RSS GiB':>13} {'unfinished':>11}")
    per: dict[bool, float] = {}
    for cluster in (False, True):
        rs = runs[cluster]
        wall = statistics.median(r["wall_s"] for r in rs)
        per[cluster] = 1e9 * wall / rs[0]["arrived"]
        rss = max(r["rss"] for r in rs) / 2**30
        name = f"{args.servers:,} servers" if cluster else "one server"
        print(f"{name:<16} {wall:>8.1f} {per[cluster]:>11.0f} {rss:>13.2f} {int(rs[0]['unfinished']):>11,}")
    print(f"cluster / one server, per request: {per[True] / per[False]:.2f}x")


if __name__ == "__main__":
    main()
