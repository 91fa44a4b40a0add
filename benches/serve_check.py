"""Benchmark: `storqos serve --config gw.toml --check` against the number of exports.

Each config has two tenants and N exports over one 1 MiB sparse image (as many
volumes of one host would look to the checker: each export's file is opened once).
The command runs REPEATS times per N, as a user runs it (a fresh interpreter each
time, its output to /dev/null); the median and range of the wall time are printed,
then the time per export.

With `--against DIR`, the same commands also run with DIR's `storqos` package first on
the path (e.g. an older commit's ``python/`` from ``git archive COMMIT python | tar -x
-C DIR``, with this tree's compiled extension copied into DIR/python/storqos), side by
side: for each N, one run of each in turn.

    .venv/bin/python benches/serve_check.py [--exports 1000,4000,19000,20000] [--repeats 3] [--against DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPEATS = 3


def config(d: Path, n: int) -> Path:
    """A config of ``n`` exports over one image in ``d``."""
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "a.img", "wb") as f:
        f.truncate(1 << 20)
    lines = ['listen = "127.0.0.1:0"', "[policy]", 'kind = "wf2q"', "[[tenant]]", 'name = "t0"', "weight = 2",
             "[[tenant]]", 'name = "t1"', "weight = 1"]
    for i in range(n):
        lines += ["[[export]]", f'name = "e{i}"', 'path = "a.img"', f'tenant = "t{i % 2}"']
    (d / "gw.toml").write_text("\n".join(lines) + "\n")
    return d / "gw.toml"


def check(cfg: Path, pythonpath: str | None) -> tuple[float, int, str]:
    """One `serve --check` of ``cfg``: its wall time (s), exit status and last line on stderr."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "storqos.cli", "serve", "--config", str(cfg), "--check"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, timeout=3600)
    took = time.perf_counter() - t0
    return took, p.returncode, (p.stderr.strip().splitlines() or [""])[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exports", default="1000,4000,19000,20000", help="numbers of exports, comma-separated")
    ap.add_argument("--repeats", type=int, default=REPEATS)
    ap.add_argument("--against", type=Path, default=None, help="a folder holding another python/storqos to compare")
    args = ap.parse_args()
    sizes = [int(x) for x in args.exports.split(",")]
    versions: list[tuple[str, str | None]] = [("this tree", None)]
    if args.against is not None:
        versions.append((f"{args.against}", str(args.against / "python")))
    with tempfile.TemporaryDirectory(prefix="storqos-bench-check-") as tmp:
        print(f"{'exports':>8}  {'version':<28} {'median s':>9} {'range s':>14} {'µs/export':>10}  exit")
        for n in sizes:
            cfg = config(Path(tmp) / str(n), n)
            times: dict[str, list[float]] = {name: [] for name, _ in versions}
            status: dict[str, tuple[int, str]] = {}
            for _ in range(args.repeats):
                for name, path in versions:
                    took, code, last = check(cfg, path)
                    times[name].append(took)
                    status[name] = (code, last)
            for name, _ in versions:
                t = times[name]
                med = statistics.median(t)
                code, last = status[name]
                note = "" if code == 0 else f"  ({last[:70]})"
                print(f"{n:>8,}  {name[:28]:<28} {med:>9.2f} {min(t):>6.2f}-{max(t):<6.2f} "
                      f"{med / n * 1e6:>10.0f}  {code}{note}", flush=True)


if __name__ == "__main__":
    main()
