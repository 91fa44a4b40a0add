"""Benchmark: how closely `storqos replay` keeps a trace's timing, beside fio's
`read_iolog` replay of the same trace (the target: issue-time error p99 ≤ 100 µs
at 10k IOPS).

The trace: Poisson arrivals at 10k IOPS of 4 KiB random reads (--seconds long). The
storage: `storqos serve` on loopback over a sparse file (no emulation, so the server
keeps up; the trace's blocks are read once first, closed loop, so no run pays for a
cold page cache). Both replayers use libnbd (storqos through its Python bindings, fio through
its `nbd` engine) over one connection, fio with a version-3 iolog (µs timestamps) and
iodepth 256.

The measure is taken on the wire, the same way for both: tcpdump captures the
requests sent to the server (nanosecond timestamps); the k-th NBD read request on the
connection is the trace's k-th, and its issue-time error is

    (wire_k − trace_k) − median over k of (wire_k − trace_k)

(the median aligns the two clocks, so neither tool's start-up counts; a replay that
drifts behind shows as a growing error). Reported per run: p50 and p99 of |error| and
the largest error (µs), requests more than 1 ms late and the CPU time the host took from
this virtual machine around the run (steal time); for storqos also its own
record of issue times (the time of the libnbd call) and its median response time. storqos
replays twice per round: keeping the CPUs awake (`--awake-cpus yes`) and leaving them
free to sleep (the default); runs interleave the three, REPEATS times each, the order
reversed every other round.

    .venv/bin/python benches/replay_timing.py [--seconds 3] [--repeats 3]

Needs tcpdump (Debian's package; root or CAP_NET_RAW), fio, and root for the CPU latency
request (/dev/cpu_dma_latency).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
from nbd_capture import CMD_READ, capture, read, request_times
from storqos.live.gateway import gateway_config
from storqos.live.gateway_process import GatewayProcess
from storqos.live.host_steal import steal_between, steal_ms
from storqos.live.replay import replay
from storqos.model.specs import policy_spec

REPEATS = 3
RATE = 10_000.0


def trace(seconds: float, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n = int(RATE * seconds)
    arrival = np.cumsum(rng.exponential(1e9 / RATE, n)).astype(np.int64)
    arrival -= arrival[0]
    return pl.DataFrame({"arrival_ns": arrival, "is_read": np.ones(n, bool),
                         "offset": (rng.integers(0, 1 << 18, n) * 4096).astype(np.uint64),
                         "size": np.full(n, 4096, np.uint32), "tenant": np.zeros(n, np.uint32)})


def wire_times(pcap: Path, port: int) -> np.ndarray:
    """Capture times (ns) of the NBD read requests to ``port`` in ``pcap``, in order."""
    return np.array([t for t, _cookie, kind in request_times(read(pcap), port) if kind == CMD_READ], dtype=np.int64)


def errors(wire: np.ndarray, sched_ns: np.ndarray) -> dict[str, float]:
    n = min(wire.size, sched_ns.size)
    d = wire[:n] - sched_ns[:n]
    e = d - np.median(d)
    a = np.abs(e)
    return {"requests": float(n), "p50_us": float(np.percentile(a, 50) / 1e3),
            "p99_us": float(np.percentile(a, 99) / 1e3), "max_us": float(e.max() / 1e3),
            "late": float((e > 1_000_000).sum())}


def run_storqos(uri: str, df: pl.DataFrame, awake: str) -> tuple[float, float]:
    """Replay; returns the replay's own issue-time error p99 and its median response
    time (µs)."""
    res = replay(df, {0: uri}, awake=awake)
    if res.cpus_awake != (awake == "yes"):
        raise SystemExit(f"replay_timing: --awake-cpus {awake} was not honoured")
    return (float(res.schedule()["issue_error_p99_us"]),
            float(res.requests.select(pl.col("response_ns").median()).item() or 0) / 1e3)


def run_fio(uri: str, df: pl.DataFrame, work: Path) -> None:
    log = work / "trace.v3"
    with open(log, "w") as f:
        f.write("fio version 3 iolog\n0 nbd add\n0 nbd open\n")
        for t, off in zip((df["arrival_ns"] // 1000).to_list(), df["offset"].to_list(), strict=True):
            f.write(f"{t} nbd read {off} 4096\n")
        f.write(f"{int(df.select(pl.col('arrival_ns').max()).item()) // 1000 + 1000} nbd close\n")
    subprocess.run(["fio", "--name=replay", "--ioengine=nbd", f"--uri={uri}", f"--read_iolog={log}",
                    "--iodepth=256", "--output-format=json", f"--output={work / 'fio.json'}"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=REPEATS)
    args = ap.parse_args()
    df = trace(args.seconds)
    sched = df["arrival_ns"].to_numpy()
    tools = {"storqos, CPUs awake": "yes", "storqos, CPUs free": "no", "fio read_iolog": ""}
    results: dict[str, list[dict[str, float]]] = {t: [] for t in tools}
    with tempfile.TemporaryDirectory(prefix="storqos-bench-") as tmp:
        work = Path(tmp)
        img = work / "a.img"
        with open(img, "wb") as f:
            f.truncate(1 << 30)
        cfg = gateway_config([f"a={img}:0"], policy_spec("fcfs"), listen="127.0.0.1:0")
        with GatewayProcess(cfg) as gw:
            port = int(str(gw.info["listen"]).rsplit(":", 1)[1])
            uri = gw.uri("a")
            # Warm the server up: the trace's blocks in the page cache (reads of a sparse
            # file's holes allocate zero pages), its threads started.
            replay(df, {0: uri}, closed=32)
            for r in range(args.repeats):
                for tool in (list(results) if r % 2 == 0 else list(results)[::-1]):  # order alternates
                    pcap = work / "cap.pcap"
                    own = None
                    with capture(port, pcap):
                        stolen = steal_ms()
                        if tools[tool]:
                            own = run_storqos(uri, df, tools[tool])
                        else:
                            run_fio(uri, df, work)
                    stolen = steal_between(stolen, steal_ms())  # around the capture, the replay within it
                    res = errors(wire_times(pcap, port), sched)
                    results[tool].append(res)
                    print(f"run {r + 1} {tool:19} requests {res['requests']:,.0f}  p50 {res['p50_us']:8.1f} µs  "
                          f"p99 {res['p99_us']:8.1f} µs  max {res['max_us']:9.1f} µs  late {res['late']:,.0f}  "
                          f"host's steal {'-' if stolen is None else f'{stolen:,.0f} ms'}"
                          + (f"  (own record: p99 {own[0]:.1f} µs; median response {own[1]:.1f} µs)"
                             if own is not None else ""), file=sys.stderr)
    print(f"\nissue-time error at {RATE / 1e3:g}k IOPS, {args.seconds:g} s, medians of {args.repeats} runs:")
    print(f"{'tool':20} {'p50 |e| µs':>11} {'p99 |e| µs':>11} {'max µs':>10} {'late':>6}")
    med = {}
    for tool, rs in results.items():
        med[tool] = {k: statistics.median(r[k] for r in rs) for k in ("p50_us", "p99_us", "max_us", "late")}
        m = med[tool]
        print(f"{tool:20} {m['p50_us']:11.1f} {m['p99_us']:11.1f} {m['max_us']:10.1f} {m['late']:6.0f}")
    ranges = {t: (min(r["p99_us"] for r in rs), max(r["p99_us"] for r in rs)) for t, rs in results.items()}
    print("p99 ranges: " + ", ".join(f"{t} {a:.1f}-{b:.1f} µs" for t, (a, b) in ranges.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
