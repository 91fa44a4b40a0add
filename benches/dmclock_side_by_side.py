"""Ceph's dmclock simulator beside storqos' cluster simulator, on the setting of
ceph/dmclock#21: C clients over S servers of 80 IOPS, every client reserving 20 IOPS,
limited to 30 in total, weight 1, asking 100 IOPS of 10 servers in turn ("alternate
range"), 1,000 requests each, no limit break (``server_soft_limit = 0``).

dmclock's simulator (``dmc_sim``, from the ceph/dmclock repository, built by you: it is
not part of storqos) runs in real time, a thread per client and server; it prints its
clients' IOPS per 2-s interval (clients 0-2 and the last three, unless its display filter,
``client_disp_filter`` in ``sim/src/test_dmclock_main.cc``, is widened to every client:
the figures are over the clients it prints). storqos runs the same clients (open loop, the same
server sequence) on a cluster of constant-rate servers, with dmClock charged per request
(as the library), at arrival (storqos' default) and the split allocator.

Prints, per setting and system, the 2-s intervals' IOPS over every client (min, median,
max, and the share of intervals more than 5 % over the limit), and dmc_sim's CPU time
beside its wall time (it runs on the machine's cores: a simulator short of CPU serves
less than its servers could).

    .venv/bin/python benches/dmclock_side_by_side.py --dmc-sim /tmp/dmclock/dmc_sim
    .venv/bin/python benches/dmclock_side_by_side.py --dmc-sim ... --setting 10x10
"""

from __future__ import annotations

import argparse
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from storqos.model.cluster import Cluster, alt_range_trace, simulate_cluster

LIMIT, RESERVATION, SERVER_IOPS, GOAL, OPS, SPREAD = 30.0, 20.0, 80, 100, 1000, 10
#: dmc_sim's measurement interval (its ``measure_unit``), seconds
INTERVAL_S = 2


def conf(clients: int, servers: int) -> str:
    """dmc_sim's configuration of the issue's setting, at this scale."""
    return f"""[global]
server_groups = 1
client_groups = 1
server_random_selection = 0
server_soft_limit = 0

[client.0]
client_count = {clients}
client_wait = 0
client_total_ops = {OPS}
client_server_select_range = {SPREAD}
client_iops_goal = {GOAL}
client_outstanding_ops = 100
client_reservation = {RESERVATION}
client_limit = {LIMIT}
client_weight = 1.0

[server.0]
server_count = {servers}
server_iops = {SERVER_IOPS}
server_threads = 1
"""


def dmc_intervals(text: str) -> np.ndarray:
    """(intervals, clients) IOPS from dmc_sim's "Client Data" rows ``t_N:`` (the total
    column dropped), the first and the last intervals with a client done dropped: the
    intervals every client was busy throughout."""
    part = text.split("==== Client Data ====", 1)[-1].split("====", 1)[0]
    rows = [[float(v) for v in m.group(1).split()][:-1] for m in re.finditer(r"^\s+t_\d+:\s+(.*)$", part, re.M)]
    if not rows:
        sys.exit("dmc_sim printed no client intervals (is it dmclock's dmc_sim?)")
    a = np.asarray(rows)
    busy = np.flatnonzero((a > 0).all(axis=1))
    return a[1:busy[-1]] if busy.size > 2 else a


def run_dmc(dmc_sim: Path, clients: int, servers: int) -> tuple[np.ndarray, float, float]:
    """dmc_sim on the setting: its intervals, its wall and CPU seconds."""
    with tempfile.TemporaryDirectory() as d:
        cfg = Path(d) / "sim.conf"
        cfg.write_text(conf(clients, servers))
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        p = subprocess.run([str(dmc_sim), "-c", str(cfg)], capture_output=True, text=True, timeout=900)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode:
        sys.exit(f"dmc_sim failed ({p.returncode}): {p.stderr.strip()[:200]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return dmc_intervals(p.stdout), wall, cpu


def run_storqos(clients: int, servers: int, coordination: str, charge: str = "arrival") -> np.ndarray:
    """storqos' cluster on the setting: (intervals, clients) IOPS, 2-s windows from 2 s
    to the end of the arrivals (every client backlogged throughout)."""
    seconds = OPS / GOAL
    trace = alt_range_trace(clients, servers, seconds, GOAL, SPREAD)
    kw = {"reservations": [RESERVATION] * clients, "limits": [LIMIT] * clients, "weights": [1] * clients}
    res = simulate_cluster(trace, "mclock", capacity=SERVER_IOPS, window=f"{INTERVAL_S}s",
                           cluster=Cluster(servers=servers, placement="device", coordination=coordination,  # type: ignore[arg-type]
                                           charge=charge),  # type: ignore[arg-type]
                           **kw)  # type: ignore[arg-type]
    w = res.windows
    starts = sorted(set(w["start_ns"].to_list()))
    keep = [s for s in starts if INTERVAL_S * 1e9 <= s and s + INTERVAL_S * 1e9 <= seconds * 1e9]
    out = np.zeros((len(keep), clients))
    for j, s in enumerate(keep):
        sub = w.filter(w["start_ns"] == s)
        out[j, sub["tenant"].to_numpy()] = sub["completed"].to_numpy() / INTERVAL_S
    return out


def row(name: str, a: np.ndarray, note: str = "") -> str:
    over = float((a > 1.05 * LIMIT).mean())
    return (f"| {name} | {a.min():.1f}–{np.median(a):.1f}–{a.max():.1f} | {a.mean():.1f} | {over:.0%} | "
            f"{note} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dmc-sim", type=Path, required=True, help="dmclock's simulator binary (dmc_sim)")
    ap.add_argument("--setting", action="append", default=None, metavar="CxS",
                    help="clients x servers (default: 100x100, the issue's, and 10x10)")
    args = ap.parse_args()
    if not args.dmc_sim.exists():
        sys.exit(f"--dmc-sim: {args.dmc_sim}: no such file")
    for setting in args.setting or ["100x100", "10x10"]:
        m = re.fullmatch(r"(\d+)x(\d+)", setting)
        if m is None:
            sys.exit(f"--setting: {setting!r} is not CLIENTSxSERVERS")
        clients, servers = int(m[1]), int(m[2])
        print(f"\n{clients} clients x {servers} servers of {SERVER_IOPS} IOPS; limit {LIMIT:g}, reservation "
              f"{RESERVATION:g}; IOPS per client and {INTERVAL_S}-s interval\n")
        print("| system | min–median–max | mean | intervals > limit + 5 % | |")
        print("|---|---|---:|---:|---|")
        dmc, wall, cpu = run_dmc(args.dmc_sim, clients, servers)
        print(row("dmclock's simulator (dmc_sim)", dmc, f"{cpu:.0f} CPU-s in {wall:.0f} s"), flush=True)
        for name, coordination, charge in (("storqos, dmClock charged per request (the library)", "dmclock", "request"),
                                           ("storqos, dmClock charged at arrival", "dmclock", "arrival"),
                                           ("storqos, split every 500 ms", "split", "arrival")):
            t0 = time.monotonic()
            a = run_storqos(clients, servers, coordination, charge)
            print(row(name, a, f"{time.monotonic() - t0:.1f} s"), flush=True)


if __name__ == "__main__":
    main()
