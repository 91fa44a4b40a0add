"""Benchmark: SARC+AVATAR on seed 001's 8-disk array, 8 classes, side by side with FCFS
and SARC+Facade on the same streamed arrivals in one run; and the same on the 8-way
striped array with exponential per-disk service (250 IOPS each), a cheap device that
isolates the scheduler's overhead from the disk model's cost. The Rust-only twin is
`cargo run --release -p storqos-core --example twolevel_rate`.

8 Poisson classes (random 8 KiB reads over the array) at 1,500 IOPS in total (≈ 80 %
of the array's deep-queue capacity), SLOs 187.5 IOPS @ 200 ms each; summaries and
per-second windows on, arrivals streamed from the core's generators. Reports simulated
requests per wall-clock second (median of REPEATS).

    .venv/bin/python benches/twolevel.py [--requests 10000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, cast

import storqos
from storqos.model import synth
from storqos.model.twolevel import spec

CLASSES = 8
TOTAL_IOPS = 1500.0
REPEATS = 3
#: The same striped array with exponential service per disk (75 % utilisation at 1,500 IOPS).
ARRAY_8_EXP = {**spec.ARRAY_8_DISKS, "service": {"kind": "exponential", "iops": 250.0}}


def gens(n: int) -> list[dict]:
    per = n // CLASSES
    return [
        cast(dict[str, Any], synth.poisson(TOTAL_IOPS / CLASSES, count=per, tenant=i, size="8KiB", span="64GiB",
                                           seed=100 + i, materialize=False))
        for i in range(CLASSES)
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=10_000_000)
    ap.add_argument("--repeats", type=int, default=REPEATS)
    args = ap.parse_args()
    slo = ",".join(f"c{i}:{TOTAL_IOPS / CLASSES:g}iops@200ms" for i in range(CLASSES))
    policies: dict[str, str | dict[str, Any]] = {
        "fcfs": "fcfs",
        "sarc+avatar": spec.twolevel_spec("sarc+avatar", slo),
        "sarc+facade": spec.twolevel_spec("sarc+facade", slo),
    }
    devices = {"8-disk striped array (SPTF disk model)": spec.ARRAY_8_DISKS, "8-way striped array (exponential)": ARRAY_8_EXP}
    print(f"{args.requests:,} requests, {CLASSES} classes, {TOTAL_IOPS:g} IOPS offered, best of {args.repeats}")
    for label, dev in devices.items():
        print(f"device: {label}")
        for name, pol in policies.items():
            rates = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                r = storqos.simulate(None, pol, dev, generators=gens(args.requests))
                wall = time.perf_counter() - t0
                rates.append(r.arrived / wall)
            print(f"{name:>12}: {max(rates) / 1e6:6.2f} M simulated requests/s "
                  f"(median {statistics.median(rates) / 1e6:.2f}; arrived {r.arrived:,}, simulated {r.end_ns / 1e9:,.0f} s)")

if __name__ == "__main__":
    main()
