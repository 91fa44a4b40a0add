"""Benchmark: reading large synthetic traces, each reader against polars on the same file.

For each format, N synthetic requests are written to a temporary folder (deleted
afterwards), then timed in the same process:

- ``read_trace``: storqos' reader (fast polars parse + whole-trace validation + unit
  conversion + canonical dtypes: the path every command uses);
- ``polars``: a bare ``pl.read_csv`` of the same file (default options, types inferred;
  ``has_header=False`` for the header-less formats, ``separator=" "`` for the blank
  separated ones), or a bare ``pl.read_parquet``: the cost of parsing alone, with no
  validation. The ratio printed is polars' time / storqos' time (1.0 = as fast as
  polars; the target is >= 0.8 for the delimited text formats): of the median wall
  times; in brackets the median of the rounds' own ratios (paired: each round runs
  both readers back to back, so load that drifts between rounds cancels), of the best
  times, and of the median CPU times (all threads: the work done, which another
  process's load disturbs less than the wall time). storqos decodes Parquet
  with pyarrow, which reports a damaged file as an error where polars' reader can abort
  the process;
- ``python lines`` (DiskSim only): the exact line-by-line pass the readers fall back to
  on bad input (what a plain-Python reader costs), on ``--python-requests`` lines.

The two readers of a format run alternately, ``--repeats`` rounds (default 5); every
time is the median. The text formats: named-column CSV (storqos' own columns), SPC, MSR Cambridge
(one volume per file, as in the published traces, no header), DiskSim and FIU (blank
separated). Usage:
    python benches/trace_read.py [--requests 10000000] [--python-requests 1000000]
                                 [--formats csv,spc,msr,disksim,fiu,parquet,vscsi] [--repeats 5]
"""

from __future__ import annotations

import argparse
import functools
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
from storqos.traces.disksim import _parse_line as disksim_line

REPEATS = 5
ALL_FORMATS = ("csv", "spc", "msr", "disksim", "fiu", "parquet", "vscsi")


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


def write_msr(df: pl.DataFrame, path: Path, seed: int = 2) -> None:
    """MSR Cambridge layout, one volume (``src1``, disk 2) like each published file."""
    rng = np.random.default_rng(seed)
    df.select(
        (pl.col("arrival_ns") // 100 + 128166372003061629).alias("Timestamp"),
        pl.lit("src1").alias("Hostname"),
        pl.lit(2).alias("DiskNumber"),
        pl.when(pl.col("is_read")).then(pl.lit("Read")).otherwise(pl.lit("Write")).alias("Type"),
        pl.col("offset").alias("Offset"),
        pl.col("size").alias("Size"),
        pl.Series("ResponseTime", rng.integers(100, 200_000, df.height)),
    ).write_csv(path, include_header=False)


def write_fiu(df: pl.DataFrame, path: Path) -> None:
    """FIU's original blank-separated layout (ts pid process lba size op major minor md5)."""
    df.select(
        (pl.col("arrival_ns") + 89966811921625).alias("ts"),
        pl.lit(4257).alias("pid"),
        pl.lit("nfsd").alias("process"),
        (pl.col("offset") // 512).alias("lba"),
        (pl.col("size") // 512).alias("size"),
        pl.when(pl.col("is_read")).then(pl.lit("R")).otherwise(pl.lit("W")).alias("op"),
        pl.lit(8).alias("major"),
        pl.col("device").alias("minor"),
        pl.lit("2c4787c7e4b1a8d0a3b1f6d9e2c5a7b4").alias("md5"),
    ).write_csv(path, separator=" ", include_header=False, quote_style="never")


#: How each format's file is written, and the bare polars read it is compared with.
WRITERS: dict[str, tuple[str, Callable[[pl.DataFrame, Path], None]]] = {
    "csv": ("t.csv", write_csv),
    "spc": ("t.spc", write_spc),
    "msr": ("t.msr.csv", write_msr),
    "disksim": ("t.trace", write_disksim),
    "fiu": ("t.blkparse", write_fiu),
    "parquet": ("t.parquet", write_parquet),
    "vscsi": ("t.vscsi", write_vscsi),
}
BARE: dict[str, tuple[str, Callable[[Path], object]]] = {
    "csv": ("pl.read_csv(p)", lambda p: pl.read_csv(p)),
    "spc": ("pl.read_csv(p, has_header=False)", lambda p: pl.read_csv(p, has_header=False)),
    "msr": ("pl.read_csv(p, has_header=False)", lambda p: pl.read_csv(p, has_header=False)),
    "disksim": ('pl.read_csv(p, has_header=False, separator=" ")',
                lambda p: pl.read_csv(p, has_header=False, separator=" ")),
    "fiu": ('pl.read_csv(p, has_header=False, separator=" ")',
            lambda p: pl.read_csv(p, has_header=False, separator=" ")),
    "parquet": ("pl.read_parquet(p)", lambda p: pl.read_parquet(p)),
}


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall time and the process's CPU time (all threads) of one call, in seconds."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def alternate(fns: list[Callable[[], object]], repeats: int) -> tuple[list[list[float]], list[list[float]]]:
    """Run the functions in turn, ``repeats`` rounds; the wall and CPU times of each."""
    walls: list[list[float]] = [[] for _ in fns]
    cpus: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, ws, cs in zip(fns, walls, cpus, strict=True):
            w, c = timed(fn)
            ws.append(w)
            cs.append(c)
    return walls, cpus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000_000)
    ap.add_argument("--python-requests", type=int, default=1_000_000)
    ap.add_argument("--formats", default=",".join(ALL_FORMATS))
    ap.add_argument("--repeats", type=int, default=REPEATS, help="rounds of alternation (default %(default)s)")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    for f in formats:
        if f not in WRITERS:
            ap.error(f"unknown format {f!r}; choose from {', '.join(ALL_FORMATS)}")
    n = args.requests
    df = synthetic(n)
    rows = []

    def row(fmt: str, reader: str, requests: int, times: list[float], mb: float, **extra: object) -> None:
        secs = statistics.median(times)
        rows.append({"format": fmt, "reader": reader, "requests": requests, "seconds": secs,
                     "min": min(times), "max": max(times), "mreq_per_s": requests / secs / 1e6, "mb": mb,
                     **extra})

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for fmt in formats:
            name, writer = WRITERS[fmt]
            path = d / name
            writer(df, path)
            mb = path.stat().st_size / 1e6
            ours = functools.partial(read_trace, path, format=fmt)
            if fmt in BARE:
                call, bare = BARE[fmt]
                (t_ours, t_bare), (c_ours, c_bare) = alternate([ours, functools.partial(bare, path)],
                                                               args.repeats)
                ratio = statistics.median(t_bare) / statistics.median(t_ours)
                row(fmt, "read_trace", n, t_ours, mb, vs_polars=ratio, vs_polars_best=min(t_bare) / min(t_ours),
                    vs_polars_paired=statistics.median(b / o for b, o in zip(t_bare, t_ours, strict=True)),
                    vs_polars_cpu=statistics.median(c_bare) / statistics.median(c_ours))
                row(fmt, "polars", n, t_bare, mb, call=call)
            else:
                (t_ours,), _ = alternate([ours], args.repeats)
                row(fmt, "read_trace", n, t_ours, mb)
            if fmt == "disksim" and args.python_requests > 0:
                m = min(args.python_requests, n)
                (t_py,), _ = alternate([
                    functools.partial(parse_lines, path, disksim_line, skip_lines=0, unit_label=" ns",
                                      ns_per_unit=1, sort=False, limit=m)
                ], args.repeats)
                row(fmt, "python lines", m, t_py, mb * m / n)
            path.unlink()
    for r in rows:
        vs = (f"  {r['vs_polars']:.2f}x polars' speed (paired {r['vs_polars_paired']:.2f}x, "
              f"best {r['vs_polars_best']:.2f}x, CPU {r['vs_polars_cpu']:.2f}x)"
              if "vs_polars" in r else "")
        print(f"{r['format']:8} {r['reader']:13} {r['requests']:>10,} req {r['mb']:8.1f} MB "
              f"{r['seconds']:7.2f} s ({r['min']:.2f}-{r['max']:.2f}) {r['mreq_per_s']:6.2f} M req/s{vs}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
