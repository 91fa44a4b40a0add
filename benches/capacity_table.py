"""Benchmark: the full 6 × 4 capacity table (Table 4.1) on a bursty synthetic trace,
side by side in one run:

- storqos: the planner search (``storqos_core::shaping::cmin::capacity_table``: closed
  form for 100 %, a first search on a block subsample, then regula falsi on the full
  trace with up to 24 vectorised RTT probes per pass; see the module notes);
- the straightforward method: bisect each of the 24 cells on its own, re-running the
  scalar RTT over the whole trace for every probe (same 0.1 % tolerance).

Both on one core (the kernels are single-threaded). Then every cell of the fast table is
checked against the true minimum: feasible, and infeasible 0.1 % lower (so within 0.1 %
of the exact Cmin). Usage:
    python benches/capacity_table.py [--requests 10000000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import storqos
from storqos import _core

T = TypeVar("T")

DEADLINES_NS = [5_000_000, 10_000_000, 20_000_000, 50_000_000]
FRACTIONS = [0.9, 0.95, 0.99, 0.995, 0.999, 1.0]


def bursty_arrivals(n: int, seed: int = 7) -> np.ndarray:
    """On/off MMPP: 300 IOPS background, 3 000 IOPS bursts (mean on 0.2 s, off 2 s)."""
    mean_rate = 300 + 3000 * 0.2 / 2.2
    dur = f"{1.02 * n / mean_rate:.0f}s"
    bg = storqos.model.synth.poisson(300, duration=dur, seed=seed, materialize=False)
    burst = storqos.model.synth.onoff(3000, 0, "200ms", "2s", duration=dur, seed=seed + 1, materialize=False)
    cols = _core.generate(json.dumps([bg, burst]))
    return np.ascontiguousarray(cols.arrival_ns[:n], dtype=np.uint64)


def timed(fn: Callable[[], T], repeats: int) -> tuple[float, T]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--bisect-repeats", type=int, default=1)
    args = ap.parse_args()
    a = bursty_arrivals(args.requests)
    span_s = (int(a[-1]) - int(a[0])) / 1e9
    print(f"trace: {a.size:,} requests over {span_s:,.0f} s (mean {a.size / span_s:,.0f} IOPS)")
    t_fast, fast = timed(lambda: _core.capacity_table(a, DEADLINES_NS, FRACTIONS, method="fast"), args.repeats)
    t_slow, slow = timed(lambda: _core.capacity_table(a, DEADLINES_NS, FRACTIONS, method="bisect"), args.bisect_repeats)
    f = np.array(fast.cmin_iops)
    s = np.array(slow.cmin_iops)
    rel = float(np.max(np.abs(f - s) / s))
    cells = f.size
    print(f"{'method':<28}{'wall (s)':>10}{'passes':>9}{'probes':>9}{'per cell':>10}")
    print(f"{'storqos planner search':<28}{t_fast:>10.3f}{fast.passes:>9}{fast.probes:>9}{fast.probes / cells:>10.1f}")
    print(f"{'bisection, re-run per probe':<28}{t_slow:>10.3f}{slow.passes:>9}{slow.probes:>9}{slow.probes / cells:>10.1f}")
    print(
        f"planner detail: {fast.closed_form_sweeps} closed-form sweeps; subsample of {fast.sample_requests:,} "
        f"requests, {fast.sample_probes} probes on it; all RTT work = "
        f"{fast.lane_steps / a.size:.1f} full-trace probe equivalents ({fast.lane_steps / a.size / cells:.1f} per cell)"
    )
    print(f"speed-up: {t_slow / t_fast:.1f}x; largest relative difference between the tables: {100 * rel:.3f} %")
    # Distance from the true minimum: feasible at c, infeasible at c·(1 − 0.1 %).
    n = a.size
    for i, d in enumerate(DEADLINES_NS):
        for j, frac in enumerate(FRACTIONS):
            need = int(np.ceil(frac * n - 1e-9))
            c = float(f[i, j])
            assert int(_core.rtt_classify(a, c, d).sum()) >= need, f"{d} {frac}: {c} infeasible"
            assert int(_core.rtt_classify(a, c * (1 - 1e-3), d).sum()) < need, f"{d} {frac}: {c} not minimal"
    print("checked: every cell of the fast table is feasible, and infeasible 0.1 % lower (within 0.1 % of Cmin)")
    print("table (IOPS), rows 5/10/20/50 ms, columns 90/95/99/99.5/99.9/100 %:")
    for d, row in zip(DEADLINES_NS, f, strict=True):
        print(f"  {d / 1e6:>4.0f} ms  " + "  ".join(f"{x:>9.1f}" for x in row))


if __name__ == "__main__":
    main()
