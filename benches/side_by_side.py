"""Do two simulations slow each other down when they run side by side on two CPUs?

Measured apart from the machine's drift: one process runs the same short run again and
again, while a second process alternates ``--period`` seconds running that run too and
``--period`` seconds idle. The first process's run times are split by what the second
was doing; the ratio of their medians (busy over idle) is the side-by-side slow-down,
both halves measured within seconds of each other all along.

The run: examples/experiments/compare.toml's four tenants under one policy (the real
traces when ../shared/traces is present: run from the repository root), ``--duration``
of simulated time (3,000 s: 0.2-0.4 s of wall time a run here).

    .venv/bin/python benches/side_by_side.py [--policy wf2q] [--seconds 90] [--period 4]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import time
import tomllib
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from pathlib import Path

from storqos.experiments.experiment import Experiment, from_dict, run_one

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "experiments" / "compare.toml"
SETTLE_S = 0.5  # after the neighbour is turned on or off (it ends its run first), before timing again


def experiment(policy: str, duration: str) -> Experiment:
    raw = tomllib.loads(EXAMPLE.read_text())
    raw.update(duration=duration, window="60s", policy=[{"kind": policy}], grid={"seed": [1]})
    return from_dict(raw, base=EXAMPLE.parent, where=EXAMPLE.name, path=EXAMPLE)


def one_run(exp: Experiment) -> float:
    """The run's own wall time (s), as the sweep measures it."""
    run = exp.runs[0]
    return run_one(run, None if run.trace_key is None else exp.traces.get(run.trace_key)).wall_s


def neighbour(policy: str, duration: str, busy: Synchronized, stop: Event) -> None:
    """The second process: runs the run again and again while ``busy`` is set."""
    exp = experiment(policy, duration)
    while not stop.is_set():
        if busy.value:
            one_run(exp)
        else:
            time.sleep(0.01)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="wf2q", help="the run's policy (a kind of storqos.model.specs.POLICIES)")
    ap.add_argument("--duration", default="3000s", help="simulated time per run")
    ap.add_argument("--seconds", type=float, default=90.0, help="how long to measure (s)")
    ap.add_argument("--period", type=float, default=4.0, help="the neighbour's busy and idle spells (s)")
    args = ap.parse_args()
    if args.period <= 0 or args.seconds < 2 * args.period:
        ap.error(f"--seconds ({args.seconds:g}) must be at least twice --period ({args.period:g}), which must be > 0")
    ctx = mp.get_context("spawn")
    busy = ctx.Value("i", 0)
    stop = ctx.Event()
    other = ctx.Process(target=neighbour, args=(args.policy, args.duration, busy, stop))
    other.start()
    times: dict[int, list[float]] = {0: [], 1: []}
    try:
        exp = experiment(args.policy, args.duration)
        one_run(exp)  # warm
        end = time.monotonic() + args.seconds
        switch = time.monotonic() + args.period
        while time.monotonic() < end:
            if time.monotonic() >= switch:
                busy.value ^= 1
                switch = time.monotonic() + args.period
                time.sleep(SETTLE_S)
                continue
            times[busy.value].append(one_run(exp))  # only this loop turns the neighbour on or off
    finally:
        stop.set()
        other.join()
    idle, side = times[0], times[1]
    if not idle or not side:
        ap.error("no run fitted in one of the two states: raise --seconds or --period")
    print(f"{args.policy}, {args.duration} simulated per run, {args.seconds:.0f} s: "
          f"alone {statistics.median(idle) * 1e3:.0f} ms (median of {len(idle)}), "
          f"beside a busy neighbour {statistics.median(side) * 1e3:.0f} ms (median of {len(side)}); "
          f"slow-down **{statistics.median(side) / statistics.median(idle):.3f}**")


if __name__ == "__main__":
    main()
