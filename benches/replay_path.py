"""Benchmark: where a replayed request's time goes, on the wire (why a
page-cached or direct-I/O file's live response times move with the trace's pattern).

`storqos replay` records a request's response time from its libnbd call to the moment
it reads the reply. tcpdump sees two more instants on loopback: the request leaving and
the reply leaving the gateway. So each response splits into

- **client send**: replay's issue -> request on the wire;
- **gateway**: request on the wire -> reply on the wire (the gateway's loop waking,
  parsing, the read, the reply; loopback both ways);
- **client receive**: reply on the wire -> the replay records it (the replay waking
  from ``select`` if it slept, reading the reply).

Patterns of 4 KiB random reads through a FCFS gateway over a page-cached file, one
connection: lone reads 2 ms apart (what `storqos calibrate` measures "at rest"), trains
of 10 reads 14 µs apart every 1 ms, trains of 20 reads 38 µs and 18 µs apart every
5 ms (the spacings of FIU mail's swapper and gzip), bursts of 32 due at once every
10 ms (calibrate's bursts from rest). Per position in the train, the median of each
part over the trains, and the time the replay took to issue a whole train; rounds
alternate the patterns' order. ``--direct``: the file read with O_DIRECT through
``--depth`` I/O slots, as ``storqos validate --live-device direct`` serves it (the
disk's time in every request). ``--pin``: the gateway's threads on the second CPU and
the replay on the first, as if the client ran on a machine of its own.

The replay's clock and tcpdump's are aligned on the quickest request: the smallest
(wire time − issue time) over a run is taken as 0, so "client send" is measured from
the quickest send (a few µs).

    .venv/bin/python benches/replay_path.py [--rounds 2] [--direct [--depth 4]] [--pin]

Needs tcpdump (Debian's package; root or CAP_NET_RAW).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from nbd_capture import CMD_READ, capture, read, reply_times, request_times
from storqos.live.gateway import gateway_config
from storqos.live.gateway_process import GatewayProcess
from storqos.live.replay import replay
from storqos.live.validate import _exports
from storqos.model.specs import policy_spec

FILE_BYTES = 256 << 20
#: name -> (trains, requests per train, µs between a train's requests, ms between trains)
PATTERNS: dict[str, tuple[int, int, float, float]] = {
    "lone reads 2 ms apart": (1000, 1, 0.0, 2.0),
    "trains of 10 reads 14 µs apart": (300, 10, 14.0, 1.0),
    "trains of 20 reads 38 µs apart": (150, 20, 38.0, 5.0),
    "trains of 20 reads 18 µs apart": (150, 20, 18.0, 5.0),
    "bursts of 32 reads from rest": (30, 32, 0.0, 10.0),
}


def pattern(trains: int, per: int, gap_us: float, period_ms: float, seed: int) -> pl.DataFrame:
    n = trains * per
    arrival = np.repeat(np.arange(trains) * int(period_ms * 1e6), per) + np.tile(np.arange(per) * int(gap_us * 1e3),
                                                                                 trains)
    rng = np.random.default_rng(seed)
    return pl.DataFrame({"arrival_ns": arrival.astype(np.int64), "tenant": np.zeros(n, np.uint32),
                         "offset": (rng.integers(0, FILE_BYTES // 4096, n) * 4096).astype(np.uint64),
                         "size": np.full(n, 4096, np.uint32), "is_read": np.ones(n, bool)})


def parts(uri: str, port: int, df: pl.DataFrame, work: Path) -> tuple[np.ndarray, np.ndarray]:
    """Replay ``df`` under tcpdump; per request (rows, in trace order): client send,
    gateway, client receive and the replay's response time (ns; NaN where tcpdump
    dropped the packet), and the replay's issue times (ns from its first)."""
    pcap = work / "cap.pcap"
    with capture(port, pcap, both=True):
        res = replay(df, {0: uri}, warmup=True)
    n = df.height
    streams = read(pcap)
    sent = [(t, c) for t, c, kind in request_times(streams, port) if kind == CMD_READ]
    # libnbd numbers a connection's commands 1, 2, ... in the order issued: the warm-up
    # read is the first, the trace's requests follow in trace order.
    base = min(c for _t, c in sent) + 1
    wire_req = np.full(n, np.nan)
    for t, c in sent:
        if base <= c < base + n:
            wire_req[c - base] = t
    got = reply_times(streams, port, {c: 4096 for _t, c in sent})
    wire_rep = np.array([got.get(base + k, np.nan) for k in range(n)], dtype=np.float64)
    r = res.requests.sort("id")
    if r.height != n:
        raise SystemExit(f"replay_path: {n - r.height} requests failed")
    issue = r["arrival_ns"].to_numpy().astype(np.float64)
    done = r["finish_ns"].to_numpy().astype(np.float64)
    off = np.nanmin(wire_req - issue)
    wire_req -= off
    wire_rep -= off
    return np.stack([wire_req - issue, wire_rep - wire_req, done - wire_rep, done - issue], axis=1), issue


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--direct", action="store_true", help="read the file with O_DIRECT (the disk's time in each read)")
    ap.add_argument("--depth", type=int, default=4, help="with --direct: the gateway's I/O slots")
    ap.add_argument("--pin", action="store_true", help="the gateway on the second CPU, the replay on the first")
    args = ap.parse_args()
    if args.rounds < 1 or args.depth < 1:
        print("replay_path: --rounds and --depth: must be at least 1", file=sys.stderr)
        return 2
    if args.pin and len(os.sched_getaffinity(0)) < 2:
        print("replay_path: --pin: needs two CPUs", file=sys.stderr)
        return 2
    cpus = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="storqos-bench-") as tmp:
        work = Path(tmp)
        # One export written full, as validate's files are: without --direct, reads come
        # from the page cache.
        slots = {"depth": args.depth} if args.direct else {}
        cfg = gateway_config(_exports(work, 1, FILE_BYTES, fill=True, direct=args.direct), policy_spec("fcfs"),
                             listen="127.0.0.1:0", **slots)
        print(f"4 KiB random reads, FCFS gateway over a {FILE_BYTES >> 20} MiB "
              + (f"direct-I/O file, {args.depth} I/O slots" if args.direct else "page-cached file")
              + (f"; the gateway on CPU {cpus[1]}, the replay on CPU {cpus[0]}" if args.pin else ""))
        names = list(PATTERNS)
        for r in range(args.rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                trains, per, gap_us, period_ms = PATTERNS[name]
                with GatewayProcess(cfg) as gw:
                    port = int(str(gw.info["listen"]).rsplit(":", 1)[1])
                    if args.pin:  # every thread of the gateway, then this one
                        subprocess.run(["taskset", "-a", "-p", "-c", str(cpus[1]), str(gw.proc.pid)],
                                       check=True, capture_output=True)
                        os.sched_setaffinity(0, {cpus[0]})
                    p, issued = parts(gw.uri("t0"), port, pattern(trains, per, gap_us, period_ms, seed=r), work)
                pos = np.arange(trains * per) % per
                span = np.median(np.ptp(issued.reshape(trains, per), axis=1)) / 1e3
                print(f"\nround {r + 1}, {name} ({time.strftime('%H:%M:%S')}; medians over {trains:,} trains, µs"
                      + (f"; a train issued in {span:.0f} µs)" if per > 1 else ")"))
                print(f"{'position':>8} {'client send':>12} {'gateway':>9} {'client receive':>15} {'response':>9}")
                for k in sorted({0, 1, 2, 4, per // 2, per - 1}):
                    if k < per:
                        m = np.nanmedian(p[pos == k], axis=0) / 1e3
                        print(f"{k:8d} {m[0]:12.1f} {m[1]:9.1f} {m[2]:15.1f} {m[3]:9.1f}")
                m = np.nanmedian(p, axis=0) / 1e3
                print(f"{'all':>8} {m[0]:12.1f} {m[1]:9.1f} {m[2]:15.1f} {m[3]:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
