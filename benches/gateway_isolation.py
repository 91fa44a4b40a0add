"""QoS on a real file without an emulated capacity: the victim's
p99 alone and beside a noisy tenant, with the gateway's backend cost model on and off.

A victim of 4 KiB random reads at queue depth 1 and a noisy tenant of 1 MiB random reads
at queue depth 8, both through fio's nbd engine, on one 64 MiB file in the page cache,
under WF2Q+ with equal weights. For each setting: ``--runs`` pairs of runs (victim
alone, then both), interleaved, ``--seconds`` each; the medians of the victim's p99
compare (one run's p99 moves 2-3x with this machine's noise).

With ``--delay``, the noisy tenant's export waits that long before each of its reads
(a ``delay`` fault rule), as a disk's reads hold their slots without using a CPU; at
page-cache speed the slots are free most of the time and what the victim shares with
the noisy tenant is the CPUs, not the backend.

    .venv/bin/python benches/gateway_isolation.py               # 5 pairs of 3 s per setting
    .venv/bin/python benches/gateway_isolation.py --delay 2ms --depth 4
    .venv/bin/python benches/gateway_isolation.py --runs 9 --seconds 5

tests/python/test_gateway_cost.py runs the measurement with ``--delay 2ms --depth 4``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

MiB = 1 << 20


def fio_jobs(port: int, seconds: float, noisy: bool) -> str:
    """The fio job file: the victim, and the noisy tenant if ``noisy``."""
    jobs = f"""
[global]
ioengine=nbd
time_based=1
runtime={seconds:g}
[victim]
uri=nbd://127.0.0.1:{port}/victim
rw=randread
bs=4k
iodepth=1
"""
    if noisy:
        jobs += f"""
[noisy]
uri=nbd://127.0.0.1:{port}/noisy
rw=randread
bs=1m
iodepth=8
"""
    return jobs


def victim_p99_us(job: dict[str, object]) -> float:
    """fio's completion-latency p99 of a job, in µs."""
    return float(job["read"]["clat_ns"]["percentile"]["99.000000"]) / 1e3  # type: ignore[index]


def run_fio(workdir: Path, jobs: str) -> dict[str, dict[str, object]]:
    """Run ``jobs`` and return fio's jobs by name."""
    path = workdir / "job.fio"
    path.write_text(jobs)
    fio = shutil.which("fio")
    if fio is None:
        raise SystemExit("fio is not installed (Debian: apt-get install fio)")
    r = subprocess.run([fio, "--output-format=json", str(path)], capture_output=True, text=True, timeout=300,
                       cwd=workdir, check=True)
    return {j["jobname"]: j for j in json.loads(r.stdout[r.stdout.index("{"):])["jobs"]}


def measure(workdir: Path, data: Path, cost: bool, runs: int, seconds: float, delay_s: float = 0.0,
            depth: int = 8) -> tuple[float, float, float]:
    """Medians of the victim's p99 alone and beside the noisy tenant (µs), and the noisy
    tenant's median throughput (MB/s)."""
    from storqos.live.gateway import gateway_config
    from storqos.live.gateway_process import GatewayProcess
    from storqos.model.specs import policy_spec

    noisy: dict[str, object] = {"name": "noisy", "path": str(data), "tenant": 1}
    if delay_s > 0:
        noisy["faults"] = [{"op": "read", "delay_s": delay_s}]
    cfg = gateway_config([f"victim={data}:0", noisy], policy_spec("wf2q", weights=[1.0, 1.0]),
                         listen="127.0.0.1:0", cost={"enabled": cost}, depth=depth)
    alone, beside, mbps = [], [], []
    with GatewayProcess(cfg) as gw:
        port = int(gw.uri("victim").rsplit(":", 1)[1].split("/", 1)[0])
        for _ in range(runs):
            alone.append(victim_p99_us(run_fio(workdir, fio_jobs(port, seconds, False))["victim"]))
            both = run_fio(workdir, fio_jobs(port, seconds, True))
            beside.append(victim_p99_us(both["victim"]))
            mbps.append(float(both["noisy"]["read"]["bw_bytes"]) / 1e6)  # type: ignore[index]
    return statistics.median(alone), statistics.median(beside), statistics.median(mbps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="pairs of runs per setting")
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one fio run")
    ap.add_argument("--delay", default="0", help="wait before each noisy read, e.g. 2ms (default: none)")
    ap.add_argument("--depth", type=int, default=8, help="backend slots (default 8)")
    a = ap.parse_args()
    from storqos.base.units import parse_duration

    delay_s = parse_duration(a.delay, "--delay") / 1e9
    with tempfile.TemporaryDirectory(prefix="storqos-isolation-") as tmp:
        work = Path(tmp)
        data = work / "data.img"
        with open(data, "wb") as f:
            for _ in range(64):
                f.write(os.urandom(MiB))
        slow = f", each noisy read delayed {a.delay}" if delay_s > 0 else ""
        print(f"victim 4 KiB QD1 beside 1 MiB QD8, WF2Q+, depth {a.depth}{slow}, "
              f"medians of {a.runs} runs of {a.seconds:g} s\n")
        print("| cost model | victim p99 alone | beside the noisy tenant | ratio | noisy tenant |")
        print("|---|---:|---:|---:|---:|")
        for cost in (True, False):
            alone, beside, mbps = measure(work, data, cost, a.runs, a.seconds, delay_s, a.depth)
            print(f"| {'on' if cost else 'off'} | {alone:.0f} µs | {beside:.0f} µs | {beside / alone:.2f}× | "
                  f"{mbps:,.0f} MB/s |", flush=True)


if __name__ == "__main__":
    main()
