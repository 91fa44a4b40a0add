"""Benchmark: reading large synthetic traces, side by side in one run.

For each format, N synthetic requests are written to a temporary folder, then timed:

- ``read_trace``: storqos' reader (fast polars parse + whole-trace validation + unit
  conversion + canonical dtypes: the path every command uses);
- ``polars floor`` (DiskSim and Parquet): a bare ``pl.read_csv`` of the same file with
  the same schema / a bare ``pl.read_parquet``, with no validation, i.e. the cost of
  parsing alone (storqos decodes Parquet with pyarrow, which reports a damaged file as
  an error where polars' reader can abort the process);
- ``python lines`` (DiskSim only): the exact line-by-line pass the readers fall back to
  on bad input (what a plain-Python reader costs), on ``--python-requests`` lines.

Every time is the median of REPEATS runs. Usage:
    python benches/trace_read.py [--requests 5000000] [--python-requests 1000000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl
from storqos.traces import read_trace, write_csv, write_disksim, write_parquet, write_spc, write_vscsi
from storqos.traces._lines import parse_lines
from storqos.traces.disksim import _SCHEMA as DISKSIM_SCHEMA
from storqos.traces.disksim import _parse_line as disksim_line

REPEATS = 3


def synthetic(n: int, seed: int = 1) -> pl.DataFrame:
    """n requests, Poisson-like arrivals at ~20k IOPS over 6 devices."""
    rng = np.random.default_rng(seed)
    return pl.DataFrame(
        {
            "arrival_ns": np.cumsum(rng.integers(0, 100_000, n)) // 1000 * 1000,
            "is_read": rng.random(n) < 0.7,
            "offset": rng.integers(0, 2**26, n) * 512,
            "size": rng.choice([4096, 8192, 16384, 65536], n),
            "device": rng.integers(0, 6, n).astype(str),
            "tenant": np.zeros(n, dtype=np.uint32),
        },
        schema_overrides={"offset": pl.UInt64, "size": pl.UInt32, "tenant": pl.UInt32},
    )


def median_time(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=5_000_000)
    ap.add_argument("--python-requests", type=int, default=1_000_000)
    args = ap.parse_args()
    n = args.requests
    df = synthetic(n)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        files = {
            "disksim": d / "t.trace",
            "spc": d / "t.spc",
            "csv": d / "t.csv",
            "parquet": d / "t.parquet",
            "vscsi": d / "t.vscsi",
        }
        write_disksim(df, files["disksim"])
        write_spc(df, files["spc"])
        write_csv(df, files["csv"])
        write_parquet(df, files["parquet"])
        write_vscsi(df, files["vscsi"])
        for fmt, path in files.items():
            secs = median_time(lambda path=path, fmt=fmt: read_trace(path, format=fmt))
            rows.append({"format": fmt, "reader": "read_trace", "requests": n, "seconds": secs,
                         "mreq_per_s": n / secs / 1e6, "mb": path.stat().st_size / 1e6})
        path = files["disksim"]
        secs = median_time(lambda: pl.read_csv(path, has_header=False, separator=" ", schema=DISKSIM_SCHEMA))
        rows.append({"format": "disksim", "reader": "polars floor", "requests": n, "seconds": secs,
                     "mreq_per_s": n / secs / 1e6, "mb": path.stat().st_size / 1e6})
        path = files["parquet"]
        secs = median_time(lambda: pl.read_parquet(path))
        rows.append({"format": "parquet", "reader": "polars floor", "requests": n, "seconds": secs,
                     "mreq_per_s": n / secs / 1e6, "mb": path.stat().st_size / 1e6})
        path = files["disksim"]
        m = min(args.python_requests, n)
        secs = median_time(
            lambda: parse_lines(path, disksim_line, skip_lines=0, unit_label=" ns", ns_per_unit=1, sort=False,
                                limit=m)
        )
        rows.append({"format": "disksim", "reader": "python lines", "requests": m, "seconds": secs,
                     "mreq_per_s": m / secs / 1e6, "mb": path.stat().st_size / 1e6 * m / n})
    for r in rows:
        print(f"{r['format']:8} {r['reader']:13} {r['requests']:>10,} req {r['mb']:8.1f} MB "
              f"{r['seconds']:7.2f} s {r['mreq_per_s']:6.2f} M req/s")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
