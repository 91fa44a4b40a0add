"""Benchmark: FCFS on a constant-rate server, side by side in one run.

- storqos: the general event loop (``storqos.simulate``: the built-in policy and device
  enums, summaries and per-window series on) over N synthetic Poisson requests;
- the reference kernels of ``benches/kernels`` (a benchmark-only crate, not in the
  product library), timed in-process by its ``kernels`` binary on the same arrivals: the
  specialised Rust Lindley kernel (completion times only), the same kernel keeping the
  event loop's summaries (HDR histogram + per-window series), the like-for-like one, and
  the leanest hand-written two-event simulation of the same model with the same
  summaries (no traits, timers or clients): what any event loop that handles an arrival
  and a completion per request costs at the least;
- a NumPy Lindley recursion (vectorised: f_i = (i+1)·s + max_{j≤i}(a_j − j·s));
- an equivalent SimPy model (on a smaller sample: SimPy runs in Python);
- peak RSS of summaries-only mode over a 100 M-request streamed generator, and over
  100 M requests of 8 closed-loop clients (each in its own process; ``--rss-only``).

Every rate is the median of REPEATS runs. Usage:
    python benches/event_loop.py [--requests 10000000] [--simpy-requests 200000] [--rss-requests 100000000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any, cast

import numpy as np
import polars as pl
import storqos
from storqos import _core

RATE_IOPS = 900.0  # arrival rate
CAPACITY_IOPS = 1000.0  # server capacity: utilisation 0.9
REPEATS = 3


def median_time(fn, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def simpy_fcfs(arrivals_ns: np.ndarray, service_ns: int) -> float:
    import simpy

    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    total = [0.0]

    def request(env, a):
        with server.request() as req:
            yield req
            yield env.timeout(service_ns)
            total[0] += env.now - a

    def source(env):
        last = 0
        for a in arrivals_ns.tolist():
            yield env.timeout(a - last)
            last = a
            env.process(request(env, a))

    env.process(source(env))
    env.run()
    return total[0] / len(arrivals_ns)


def numpy_lindley(arrivals_ns: np.ndarray, service_ns: int) -> np.ndarray:
    i = np.arange(len(arrivals_ns), dtype=np.int64)
    a = arrivals_ns.astype(np.int64)
    return (i + 1) * service_ns + np.maximum.accumulate(a - i * service_ns)


def rss_child(n: int, closed: bool) -> None:
    t0 = time.perf_counter()
    if closed:
        # 8 clients of one request outstanding each, no think time: the device completes
        # CAPACITY_IOPS requests per simulated second, so n requests take n / CAPACITY_IOPS s.
        clients = [storqos.ClosedClient(tenant=i % 2, outstanding=1, stop=f"{n / CAPACITY_IOPS}s") for i in range(8)]
        res = storqos.simulate(None, "fcfs", "constant", capacity=CAPACITY_IOPS, closed=clients)
    else:
        spec = cast(dict[str, Any], storqos.model.synth.poisson(RATE_IOPS, count=n, seed=11, materialize=False))
        res = storqos.simulate(None, "fcfs", "constant", capacity=CAPACITY_IOPS, generators=[spec])
    wall = time.perf_counter() - t0
    # VmHWM is this process's own peak (ru_maxrss would carry the forking parent's
    # peak across exec on Linux).
    with open("/proc/self/status") as f:
        hwm_kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    rss_mib = hwm_kib / 1024
    print(json.dumps({"requests": res.arrived, "wall_s": wall, "peak_rss_mib": rss_mib}))


def reference_kernels(arrivals: np.ndarray, service_ns: int) -> dict[str, float]:
    """Median seconds and mean responses of the benchmark-only Rust kernels
    (``benches/kernels``) on ``arrivals``, timed in their own process."""
    import tempfile
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "storqos-bench-kernels"], cwd=repo, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "arrivals.u64"
        np.ascontiguousarray(arrivals, dtype="<u8").tofile(f)
        exe = repo / "target" / "release" / "kernels"
        out = subprocess.check_output([str(exe), str(f), str(service_ns), "1000000000", str(REPEATS)])
    return json.loads(out)


def _rss(n: int, closed: bool) -> dict[str, float]:
    """Peak RSS of one summaries-only run of ``n`` requests, in a fresh process."""
    cmd = [sys.executable, __file__, "--rss-child", str(n)] + (["--rss-closed"] if closed else [])
    return json.loads(subprocess.check_output(cmd))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=10_000_000)
    ap.add_argument("--simpy-requests", type=int, default=200_000)
    ap.add_argument("--rss-requests", type=int, default=100_000_000)
    ap.add_argument("--rss-child", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--rss-closed", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--rss-only", action="store_true", help="only the two 100 M-request memory runs")
    args = ap.parse_args()
    if args.rss_child:
        rss_child(args.rss_child, args.rss_closed)
        return
    if args.rss_only:
        for kind in ("open", "closed"):
            rss = _rss(args.rss_requests, kind == "closed")
            print(f"summaries-only, {kind}-loop, {rss['requests']:,} requests: {rss['wall_s']:.1f} s wall, "
                  f"peak RSS {rss['peak_rss_mib']:.0f} MiB")
        return

    n = args.requests
    trace = cast(pl.DataFrame, storqos.model.synth.poisson(RATE_IOPS, count=n, seed=7))
    arrivals = trace["arrival_ns"].to_numpy().astype(np.uint64)
    service = round(1e9 / CAPACITY_IOPS)

    res_holder = {}

    def run_storqos():
        res_holder["r"] = storqos.simulate(trace, "fcfs", "constant", capacity=CAPACITY_IOPS)

    # Warm-up (page faults, first allocation) outside the timings.
    storqos.simulate(trace.head(100_000), "fcfs", "constant", capacity=CAPACITY_IOPS)
    t_sq = median_time(run_storqos)
    # Where the Python call's time goes: handing the columns over, the Rust run itself.
    cols = storqos.model.sim._columns(trace)
    specs = (json.dumps({"kind": "fcfs"}), json.dumps({"kind": "constant", "iops": CAPACITY_IOPS}))
    t_cols = median_time(lambda: storqos.model.sim._columns(trace))
    t_core = median_time(lambda: _core.simulate(*cols, *specs, closed_json="[]", generators_json="[]", seed=1,
                                                window_ns=1_000_000_000, keep_requests=False, until_ns=None))
    kernels = reference_kernels(arrivals, service)
    t_rk, t_rs, t_md = kernels["lindley_s"], kernels["lindley_summary_s"], kernels["minimal_des_s"]
    t_np = median_time(lambda: numpy_lindley(arrivals, service))
    m = args.simpy_requests
    t_sp = median_time(lambda: simpy_fcfs(arrivals[:m], service), repeats=1)

    # All four must agree on the answer.
    mean_sq = float(res_holder["r"].total["mean_ns"][0])
    mean_rk = kernels["mean_lindley_ns"]
    assert abs(kernels["mean_lindley_summary_ns"] - mean_rk) < 1e-6 * mean_rk
    assert abs(kernels["mean_minimal_des_ns"] - mean_rk) < 1e-6 * mean_rk
    fin = numpy_lindley(arrivals, service)
    mean_np = float((fin - arrivals.astype(np.int64)).mean())
    mean_sp_sub = simpy_fcfs(arrivals[:10_000], service)
    mean_rk_sub = float((fin[:10_000] - arrivals[:10_000].astype(np.int64)).mean())
    assert abs(mean_sq - mean_rk) < 1e-6 * mean_rk, (mean_sq, mean_rk)
    assert abs(mean_np - mean_rk) < 1e-6 * mean_rk
    assert abs(mean_sp_sub - mean_rk_sub) < 1e-6 * mean_rk_sub

    rss = _rss(args.rss_requests, False)
    rss_closed = _rss(args.rss_requests, True)

    rates = {
        "storqos event loop": n / t_sq,
        "Rust Lindley kernel": n / t_rk,
        "Rust Lindley+summaries": n / t_rs,
        "minimal two-event DES": n / t_md,
        "NumPy Lindley": n / t_np,
        "SimPy": m / t_sp,
    }
    print(f"FCFS, constant-rate server {CAPACITY_IOPS:.0f} IOPS, Poisson {RATE_IOPS:.0f} IOPS, {n:,} requests "
          f"(SimPy: {m:,}); median of {REPEATS} runs")
    print(f"{'implementation':<24} {'requests/s':>14}")
    for k, v in rates.items():
        print(f"{k:<24} {v:>14,.0f}")
    sq = rates["storqos event loop"]
    print(f"storqos / SimPy          = {sq / rates['SimPy']:.0f}x")
    print(f"storqos / NumPy Lindley  = {sq / rates['NumPy Lindley']:.2f}x")
    print(f"storqos / Rust Lindley   = {sq / rates['Rust Lindley kernel']:.3f}")
    print(f"storqos / Rust Lindley+summaries = {sq / rates['Rust Lindley+summaries']:.2f}")
    print(f"storqos / minimal two-event DES  = {sq / rates['minimal two-event DES']:.2f}")
    print(f"minimal two-event DES / Rust Lindley+summaries = "
          f"{rates['minimal two-event DES'] / rates['Rust Lindley+summaries']:.2f}")
    print(f"mean response (all agree): {mean_rk / 1e6:.4f} ms")
    print(f"one storqos.simulate call: {t_sq * 1e3:.0f} ms = columns {t_cols * 1e3:.0f} ms + _core.simulate "
          f"{t_core * 1e3:.0f} ms ({n / t_core / 1e6:.1f} M/s) + result tables")
    print(f"summaries-only, {rss['requests']:,} streamed requests: {rss['wall_s']:.1f} s wall, "
          f"{rss['requests'] / rss['wall_s']:,.0f} requests/s, peak RSS {rss['peak_rss_mib']:.0f} MiB")
    print(f"summaries-only, closed loop (8 clients), {rss_closed['requests']:,} requests: "
          f"{rss_closed['wall_s']:.1f} s wall, peak RSS {rss_closed['peak_rss_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
