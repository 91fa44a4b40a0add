"""Benchmark: ``storqos advise`` for 4 tenants × 6 policies on a mix of about
1 M requests, on 2 cores (target ≤ 60 s), and the number of simulations each policy's
search needed against a plain bisection from zero (the top doubled from the tenants'
mean load until every SLO holds, then [0, top] halved to 0.5 %), which is run after it,
serially, to count its simulations and check both find the same capacity. It also
prints what bisection of the planner's bracket would take: the most trials the search's
closing of its bracket may take (storqos.planning.advise.bracket), after the one at its top.
With the headroom (default 10 %, ``--headroom 0`` for none) a trial is a simulation at
10 % more load and, when every SLO held there, one at the mix's own load.

The mix (synthetic, so the benchmark runs without ../shared; 125 s, 0.99 M requests): a steady Poisson
tenant (2k IOPS, p99 ≤ 10 ms), an on/off tenant bursting at 10k IOPS (p95 ≤ 50 ms),
a Poisson tenant at 3k IOPS (p99 ≤ 20 ms) and an on/off tenant at 6k / 1k IOPS
(p95 ≤ 100 ms); a constant-rate device.

    .venv/bin/python benches/advise.py [--workers 2] [--duration 100s] [--no-plain] [--headroom 10%]
"""

from __future__ import annotations

import argparse
import time

from storqos.planning import advise as A

MIX = """
name = "bench-1M"
duration = "{duration}"
seed = 1
[device]
kind = "constant"
[[tenant]]
name = "steady"
generator = {{ kind = "poisson", rate = "2k" }}
slo = "p99<=10ms"
[[tenant]]
name = "bursty"
generator = {{ kind = "onoff", rate_on = "10k", rate_off = 0, mean_on = "50ms", mean_off = "450ms" }}
slo = "p95<=50ms"
[[tenant]]
name = "oltp"
generator = {{ kind = "poisson", rate = "3k" }}
slo = "p99<=20ms"
[[tenant]]
name = "batch"
generator = {{ kind = "onoff", rate_on = "6k", rate_off = "1k", mean_on = "200ms", mean_off = "800ms" }}
slo = "p95<=100ms"
"""


def main() -> None:
    import tomllib

    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--duration", default="125s")
    ap.add_argument("--no-plain", action="store_true", help="skip the plain bisection (its counts and check)")
    ap.add_argument("--headroom", default="10%", help="extra load every answer must hold at (0: none)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    p = A.problem_from_dict(tomllib.loads(MIX.format(duration=args.duration)), headroom=args.headroom)
    t_load = time.perf_counter() - t0
    requests = p.trace.height
    t1 = time.perf_counter()
    advice = A.advise(p, A.DEFAULT_POLICIES, backend="local", workers=args.workers)
    t_search = time.perf_counter() - t1
    print(f"{requests:,} requests, {len(p.tenants)} tenants, {len(A.DEFAULT_POLICIES)} policies, "
          f"headroom {100 * p.headroom:g} %")
    print(f"load + bounds: {t_load:.1f} s; advise on {args.workers} workers: {t_search:.1f} s "
          f"(total {t_load + t_search:.1f} s; target <= 60 s)")
    print(f"planner's bracket [{p.lower:,.0f}, {p.upper:,.0f}] IOPS: bisection closes it in "
          f"{A.bisection_steps(p.lower, p.upper, A.TOLERANCE)} trials")
    print()
    print("| policy | capacity (IOPS) | search: trials | simulations | + proof | plain bisection | plain's capacity | "
          "search wall s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    total_s = total_p = 0
    for r in advice.ranked:
        plain_c, plain_n = (None, 0) if args.no_plain else A.plain_bisection(p, r.policy)
        total_s += r.search_simulations
        total_p += plain_n
        cap = "never" if r.status == "never" else f"{r.capacity:,.0f}" + (" (any)" if r.status == "any" else "")
        print(f"| {A.DISPLAY[r.policy]} | {cap} | {r.search_trials} | {r.search_simulations} | "
              f"{r.simulations - r.search_simulations} | {plain_n or '–'} | "
              f"{'–' if plain_c is None else f'{plain_c:,.0f}'} | {r.wall_s:.1f} |")
    if not args.no_plain:
        print(f"| all | | | {total_s} | | {total_p} | | |")
    print()
    print("advice:", advice.explanation())


if __name__ == "__main__":
    main()
