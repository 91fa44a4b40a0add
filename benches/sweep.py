"""A sweep of long runs (>= 1 s each) timed three ways in one invocation: in one process,
on the local process pool and on a Dask LocalCluster (cluster start-up included), with
the speed-ups over serial, where the parallel wall time went, and a check that every
back end gives identical results.

The experiment: examples/experiments/compare.toml's four tenants (the real traces when
../shared/traces is present: run from the repository root) under mClock and WF2Q+, at
2 capacities × 8 seeds = 32 runs, each simulating 30,000 s (8.3 h; the closed-loop
backup tenant runs all along: 12 M to 42 M requests per run).

    .venv/bin/python benches/sweep.py [--workers 2] [--seeds 8] [--duration 30000s]
        [--backends pool,dask] [--rounds 3] [--dask tcp://HOST:PORT]   # the latter: also an existing cluster

Every round times every back end (serial included), in an order turned by one from one
round to the next; each speed-up is against its own round's serial wall, and the
summary gives the medians over the rounds.

Where the time goes, per parallel back end (k workers, W = the runs' own wall times
summed, as measured inside the workers):

- start-up: from the call to the first run starting (processes spawned, storqos and
  dask imported there, the trace shipped);
- imbalance: the time workers sat idle while others finished their last runs (k × wall
  − W − k × start-up − k × tear-down, over k);
- tear-down: from the last result to the call's return;
- slow-down: W over the serial W (1.0 = runs as fast as alone; more = the workers
  competed for the cores, with each other or with other processes);
- efficiency: W / (k × wall), the share of the workers' time spent running runs (the
  speed-up over serial is k × efficiency / slow-down: efficiency is the part the sweep
  code controls, slow-down the part the machine does).

Other processes' CPU use during each phase (mean cores busy) is printed too (the machine is
shared: a parallel back end can only be as fast as the cores left to it). A Dask cluster
given by a loopback address counts as the sweep's own in its phase and as another process
in the others. The share of the CPU time the host took from this virtual machine (steal
time) is printed as well. Before each back end the script waits (up to --quiet-wait seconds) for the
machine to be quiet.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storqos.experiments.experiment import Experiment, ExperimentResult, from_dict, run_experiment
from storqos.live.host_steal import CpuTimes, cpu_times, steal_between, steal_share

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "experiments" / "compare.toml"
CAPACITIES = ["1.2k", "1.4k"]
POLICIES = [{"kind": "mclock"}, {"kind": "wf2q"}]


def _busy_cpu_s(t: CpuTimes | None) -> float:
    """CPU-seconds every process of the machine had used by the reading ``t`` of
    /proc/stat (not the host's steal, counted apart); 0 where the kernel does not say."""
    return 0.0 if t is None else t.busy_ms / 1e3


def _own_cpu_s() -> float:
    """CPU-seconds used by this process, its reaped children, and its children still
    running with theirs: a Dask LocalCluster's workers are forked by a fork server, a
    child of this process that lives on between sweeps and reaps them itself."""
    import psutil

    own = sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))
    return own + _pids_cpu_s([child.pid for child in psutil.Process().children()])


@dataclass
class Timing:
    label: str
    workers: int
    wall: float
    run_walls: float  # W: the runs' own wall times summed
    startup: float  # call → first run starting
    teardown: float  # last result → return
    others_cpu: float  # CPU-seconds other processes used meanwhile
    steal_ms: float  # CPU time the host took from the machine meanwhile (0 where not counted)
    result: ExperimentResult

    @property
    def efficiency(self) -> float:
        """The share of the workers' time spent running runs."""
        return self.run_walls / (self.workers * self.wall)


def wait_quiet(limit_s: float, max_cores: float = 0.25) -> float:
    """Wait (at most ``limit_s``) until other processes use under ``max_cores`` over a
    second; return the cores they used in the last second measured."""
    deadline = time.monotonic() + limit_s
    while True:
        busy0, own0, t0 = _busy_cpu_s(cpu_times()), _own_cpu_s(), time.perf_counter()
        time.sleep(1.0)
        used = ((_busy_cpu_s(cpu_times()) - busy0) - (_own_cpu_s() - own0)) / (time.perf_counter() - t0)
        if used < max_cores or time.monotonic() >= deadline:
            return used


def cluster_pids(client: Any, address: str) -> list[int]:
    """The process ids of the scheduler and workers of the Dask cluster ``client`` is
    connected to at ``address``, when it runs on this machine (a loopback address;
    none otherwise): they are not this process's children, yet their CPU time is the
    back end's, not other processes'."""
    from urllib.parse import urlsplit

    if urlsplit(address).hostname not in ("127.0.0.1", "localhost", "::1"):
        return []
    return [client.run_on_scheduler(os.getpid), *client.run(os.getpid).values()]


def _pids_cpu_s(pids: list[int]) -> float:
    """CPU-seconds used so far by these processes (and their reaped children)."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:  # gone
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


def timed(exp: Experiment, label: str, backend: str, workers: int | None, k: int,
          cluster: list[int] | None = None) -> Timing:
    """One back end's sweep; ``cluster``: the pids of a Dask cluster given by address
    that runs on this machine, whose CPU counts as the sweep's own."""
    def own_cpu_s() -> float:  # this process, its children and the cluster's processes
        return _own_cpu_s() + _pids_cpu_s(cluster or [])

    done: dict[int, float] = {}
    cpu0, own0 = cpu_times(), own_cpu_s()
    t0 = time.perf_counter()
    res = run_experiment(exp, backend=backend, workers=workers, on_done=lambda i: done.__setitem__(i, time.perf_counter()))
    t1 = time.perf_counter()
    cpu1 = cpu_times()
    others = max(0.0, (_busy_cpu_s(cpu1) - _busy_cpu_s(cpu0)) - (own_cpu_s() - own0))
    if len(done) < len(res.outputs):  # the serial path reports runs too; be safe
        done = {i: t1 for i in range(len(res.outputs))}
    first_start = min(done[o.index] - o.wall_s for o in res.outputs)
    return Timing(label, k, t1 - t0, sum(o.wall_s for o in res.outputs), max(0.0, first_start - t0),
                  max(0.0, t1 - max(done.values())), others,
                  steal_between(*(None if c is None else c.steal_ms for c in (cpu0, cpu1))) or 0.0, res)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=8, help="seeds per (policy, capacity): runs = 2 x 2 x SEEDS")
    ap.add_argument("--duration", default="30000s", help="simulated time per run (the closed-loop tenant runs all along)")
    ap.add_argument("--quiet-wait", type=float, default=60.0,
                    help="before each back end, wait up to this many seconds for other processes to use < 0.25 core")
    ap.add_argument("--backends", default="pool,dask", help="which of pool,dask to time beside serial")
    ap.add_argument("--rounds", type=int, default=3,
                    help="time every back end this many times, the order turned by one each round; medians")
    ap.add_argument("--dask", default=None, help="also time an existing Dask scheduler (tcp://HOST:PORT)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error(f"--rounds: at least 1, got {args.rounds}")
    raw = tomllib.loads(EXAMPLE.read_text())
    raw.update(duration=args.duration, window="60s", policy=POLICIES,
               grid={"device.capacity": CAPACITIES, "seed": list(range(1, args.seeds + 1))})
    exp = from_dict(raw, base=EXAMPLE.parent, where=EXAMPLE.name, path=EXAMPLE)
    n, k = len(exp.runs), args.workers
    plan: list[tuple[str, str, int | None, int]] = [("serial (1 process)", "serial", 1, 1)]  # the reference
    if "pool" in args.backends.split(","):
        plan.append((f"local process pool ({k} workers)", "local", k, k))
    if "dask" in args.backends.split(","):
        plan.append((f"Dask LocalCluster ({k} workers, start-up included)", f"local:{k}", None, k))
    pids: dict[str, list[int]] = {}
    if args.dask:
        from dask.distributed import Client

        with Client(args.dask, timeout="10s") as c:
            kd = sum(w["nthreads"] for w in c.scheduler_info()["workers"].values())
            pids[args.dask] = cluster_pids(c, args.dask)
        plan.append((f"Dask scheduler {args.dask} ({kd} worker threads)", args.dask, None, kd))
    rounds: list[list[Timing]] = []
    for r in range(args.rounds):
        # Each round times every back end; the order turns by one each round, so that
        # a machine that speeds up or slows down over minutes favours none of them.
        order = plan[r % len(plan):] + plan[:r % len(plan)]
        got = {}
        for label, backend, workers, kk in order:
            wait_quiet(args.quiet_wait)
            got[label] = timed(exp, label, backend, workers, kk, pids.get(backend))
        rounds.append([got[label] for label, *_ in plan])
    first = rounds[0][0].result
    identical = all(
        t.result.tenants.equals(first.tenants) and t.result.windows.equals(first.windows) and t.result.cdf.equals(first.cdf)
        for rows in rounds for t in rows
    )
    walls = [o.wall_s for o in first.outputs]
    requests = sum(o.arrived for o in first.outputs)
    print(f"{n}-run sweep ({len(POLICIES)} policies x {len(CAPACITIES)} capacities x {args.seeds} seeds), "
          f"{args.duration} simulated per run, {requests / 1e6:,.0f} M simulated requests; "
          f"serial run walls {min(walls):.2f}-{max(walls):.2f} s; {os.cpu_count()} CPUs")
    for r, rows in enumerate(rounds):
        if args.rounds > 1:
            print(f"\nround {r + 1} of {args.rounds} (timed in the order "
                  f"{', '.join(plan[(r + i) % len(plan)][1] for i in range(len(plan)))})")
        print_round(rows)
    if args.rounds > 1:
        print(f"\nmedians over the {args.rounds} rounds (each speed-up against its own round's serial wall):")
        print("| back end | wall (s) | speed-up vs serial (each round) | median speed-up | median efficiency "
              "| median slow-down |")
        print("|---|---:|---|---:|---:|---:|")
        for i, (label, *_) in enumerate(plan):
            col = [rows[i] for rows in rounds]
            ups = [rows[0].wall / rows[i].wall for rows in rounds]
            print(f"| {label} | {statistics.median(t.wall for t in col):.2f} | "
                  f"{', '.join(f'{u:.2f}x' for u in ups)} | **{statistics.median(ups):.2f}x** | "
                  f"{statistics.median(t.efficiency for t in col):.2f} | "
                  f"{statistics.median(rows[i].run_walls / rows[0].run_walls for rows in rounds):.2f} |")
    print(f"identical results on every back end: {identical}")
    assert identical


def print_round(rows: list[Timing]) -> None:
    """One round's table: each back end against the round's serial phase (rows[0])."""
    serial = rows[0]
    print("| back end | wall (s) | speed-up vs serial | efficiency | start-up (s) | imbalance (s) | tear-down (s) "
          "| slow-down of runs | other processes' CPU (cores) | host's steal (% of CPU time) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        imbalance = max(0.0, (r.workers * r.wall - r.run_walls) / r.workers - r.startup - r.teardown)
        print(f"| {r.label} | {r.wall:.2f} | **{serial.wall / r.wall:.2f}x** | {r.efficiency:.2f} | "
              f"{r.startup:.2f} | {imbalance if r.workers > 1 else 0.0:.2f} | {r.teardown:.2f} | "
              f"{r.run_walls / serial.run_walls:.2f} | {r.others_cpu / r.wall:.2f} | "
              f"{100 * steal_share(r.steal_ms, r.wall):.2f} |")


if __name__ == "__main__":
    main()
