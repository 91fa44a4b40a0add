"""Seed 002's tier warming live and simulated, side by side.

One experiment description, two runs of the same schedule: examples/gateway/warming.toml
(a tiered export `data` for the users, `scrub` and `warm` sharing its file and block map
as background tenants, WF2Q+ 8:1:1, the slow tier emulated at 1,000 IOPS) and
storqos.live.tier_warming.DayReplay (day 16 of the synthetic diurnal workload, the day model
trained on days 0-13, T_fast = 4 h, 1 user request in 80). The warming package's
planner decides each policy's scrub minutes; its request streams are replayed live
(storqos serve + libnbd, open loop) and simulated (the same policy spec in front of the
simulator's LRU cache device built from the same file). Prints each policy's scrub
schedule, then user p50 / p90 / p99 and the requests served, live beside simulated.

    python examples/validation/warming_twin.py            # a day in 30 s: about 2.5 min
    python examples/validation/warming_twin.py --day-s 5  # faster, noisier
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from storqos.live.tier_warming import DayReplay, live, p90_order, read_gateway, schedule, simulated

GATEWAY = Path(__file__).resolve().parents[1] / "gateway"  # warming.toml


def hhmm(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--day-s", type=float, default=30.0, help="wall-clock seconds per simulated day")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text = (GATEWAY / "warming.toml").read_text().replace('listen = "127.0.0.1:10809"', 'listen = "127.0.0.1:0"')
        (folder / "warming.toml").write_text(text)
        for name, size in (("data-fast.img", 90 * 4096), ("data.img", 51 * 90 * 4096)):
            with open(folder / name, "wb") as f:
                f.truncate(size)
        desc = DayReplay(config=folder / "warming.toml", day_s=args.day_s)
        gw = read_gateway(desc)
        sched = schedule(desc, gw)
        print(f"day {desc.day}, a day in {desc.day_s:g} s (x{desc.compression:,.0f}), T_fast {desc.t_fast_min:g} min, "
              f"C = {sched.capacity_bytes // 4096} blocks of 4 KiB")
        for p, on in sched.system_on.items():
            d = np.diff(np.concatenate([[0], on.astype(np.int8), [0]]))
            runs = ", ".join(f"{hhmm(a)}-{hhmm(b)}" for a, b in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1),
                                                                     strict=True))
            print(f"  {p:<10} scrub {int(on.sum()):>4} min: {runs or '-'}")
        sim = simulated(gw, sched)
        got = live(gw, sched, desc)
    print(f"\n{'policy':<10} | {'sim p50':>8} {'p90':>7} {'p99':>7} | {'live p50':>8} {'p90':>7} {'p99':>7} | "
          f"{'users':>5} {'scrub':>5} {'warm':>4} | late")
    for p in sim:
        s, g = sim[p], got[p]
        print(f"{p:<10} | {s.p50_ms:8.3f} {s.p90_ms:7.3f} {s.p99_ms:7.3f} | {g.p50_ms:8.3f} {g.p90_ms:7.3f} "
              f"{g.p99_ms:7.3f} | {g.user_requests:>5} {g.scrub_requests:>5} {g.warm_requests:>4} | "
              f"{100 * g.late_fraction:.1f} %")
    print(f"\nuser p90 order, simulated: {p90_order(sim, 1.0)}")
    print(f"user p90 order, live:      {p90_order(got, 1.0)}   (ties: within 2x)")


if __name__ == "__main__":
    main()
