"""Benchmark: how a disk behind a direct-I/O gateway answers trains of requests that
start from rest, by how far apart the requests of a train come (FIU mail's
trains are predicted too quick on direct files, docs/validation.md, "On direct-I/O
files").

Trains of ``--requests`` random 4 KiB reads, one train every ``--period-ms`` (the disk
at rest before each), ``--trains`` per spacing, are replayed open loop by the replay
engine through a FCFS gateway of ``--depth`` slots over a file read with O_DIRECT (the
disk's time, as ``storqos validate --live-device direct``). Every spacing is timed
``--rounds`` times, the order reversed from one round to the next. Per spacing and
round: the first reply's p50 (from the train's first request), the p50 of all, the
replies per second after the first (the train's replies less one over the time from
the first to the last), and when the last reply came after the train's first request.

    .venv/bin/python benches/direct_trains.py [--spacings 0,5,10,20,40,80] [--depth 6]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from storqos.live.calibrate import train_trace
from storqos.live.gateway import gateway_config
from storqos.live.gateway_process import GatewayProcess
from storqos.live.replay import replay
from storqos.live.validate import _exports
from storqos.model.specs import policy_spec

FILE_BYTES = 256 << 20


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--spacings", default="0,5,10,20,40,80", help="time between two requests of a train (µs, comma-separated)")
    ap.add_argument("--requests", type=int, default=20, help="requests per train")
    ap.add_argument("--trains", type=int, default=100, help="trains per spacing and round")
    ap.add_argument("--period-ms", type=float, default=10.0, help="time from one train's start to the next (ms)")
    ap.add_argument("--depth", type=int, default=6, help="the gateway's slots (requests in the disk at once)")
    ap.add_argument("--rounds", type=int, default=2, help="times every spacing is timed, the order reversed each round")
    args = ap.parse_args()
    try:
        spacings = [float(x) for x in args.spacings.split(",")]
    except ValueError:
        ap.error(f"--spacings: expected numbers separated by commas, got {args.spacings!r}")
    if any(s < 0 for s in spacings) or args.requests < 2 or args.trains < 1 or args.depth < 1 or args.rounds < 1:
        ap.error("--spacings must be >= 0, --requests >= 2, --trains, --depth and --rounds >= 1")
    if max(spacings) * args.requests >= args.period_ms * 1e3:
        ap.error("--period-ms must be longer than a train (spacing x requests)")
    print(f"trains of {args.requests} random 4 KiB reads, one every {args.period_ms:g} ms, {args.trains} per point, "
          f"FCFS gateway of depth {args.depth} over a {FILE_BYTES >> 20} MiB direct-I/O file")
    print("| round | spacing (µs) | first reply p50 (µs) | all p50 (µs) | replies/s after the first | last reply (µs) |")
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="storqos-trains-") as tmp:
        cfg = gateway_config(_exports(Path(tmp), 1, FILE_BYTES, fill=True, direct=True), policy_spec("fcfs"),
                             listen="127.0.0.1:0", depth=args.depth)
        with GatewayProcess(cfg) as gw:
            for r in range(args.rounds):
                for i, sp in enumerate(spacings if r % 2 == 0 else spacings[::-1]):
                    trace = train_trace(args.requests, args.trains, FILE_BYTES, spacing_us=sp,
                                        period_us=args.period_ms * 1e3, seed=5 + r * len(spacings) + i)
                    res = replay(trace, {0: gw.uri("t0")}, warmup=True)
                    log = res.requests.sort("arrival_ns")
                    a = log["arrival_ns"].to_numpy().astype(np.int64).reshape(-1, args.requests)
                    f = log["finish_ns"].to_numpy().astype(np.int64).reshape(-1, args.requests)
                    done = np.sort(f, axis=1)
                    rate = (args.requests - 1) / ((done[:, -1] - done[:, 0]) / 1e9)
                    resp = (f - a) / 1e3
                    print(f"| {r + 1} | {sp:g} | {np.median(resp[:, 0]):,.0f} | {np.median(resp):,.0f} | "
                          f"{np.median(rate):,.0f} | {np.median((done[:, -1] - a[:, 0]) / 1e3):,.0f} |", flush=True)


if __name__ == "__main__":
    main()
