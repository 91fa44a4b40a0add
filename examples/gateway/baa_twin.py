"""Seed 004's Example III live, simulated and allocated, side by side.

One experiment description, three answers: examples/gateway/baa.toml (four tenants on
tiered exports placing 0.75, 0.5, 0.9, 0.95 of their blocks on an emulated 1,000 IOPS
SSD, the rest on a 200 IOPS HDD; the gateway's BAA re-allocates every second) with
examples/gateway/baa.fio (four backlogged sequential readers, 10 s):

- live: `storqos serve` + fio's nbd engine in a scratch folder;
- twin: storqos.live.gateway_twin reads the same two files (the config's policy spec, the
  simulator's tiered device with the tiers' capacities and each export's `pin` as its
  tenant's hit ratio, fio's jobs as closed-loop clients);
- LP: `storqos allocate` for the same capacities and hit ratios (storqos.planning.alloc).

Each for the allocator in the file (BAA) and the FQ baseline: per-tenant IOPS and the
devices' utilisation from 3 s on (after the third re-allocation).

    python examples/gateway/baa_twin.py             # about 25 s; needs fio
    python examples/gateway/baa_twin.py --sim-only  # the twin and the LP, under a second
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from storqos.live.gateway_twin import Experiment, read_live_series
from storqos.planning.alloc import Client, Device, allocate

HERE = Path(__file__).resolve().parent
WINDOW_S = 0.5  # statistics window (s)
SETTLE_S = 3.0  # measure from here on (s)
NAMES = ("p", "q", "r", "s")
Row = tuple[list[float], list[float]]  # per-tenant IOPS, [hdd, ssd] utilisation


def prepare(folder: Path, allocator: str) -> tuple[Path, Path]:
    """The example's two files in ``folder`` (any free port, ``allocator``) and its images."""
    text = (HERE / "baa.toml").read_text().replace('listen = "127.0.0.1:10809"', 'listen = "127.0.0.1:0"')
    (folder / "baa.toml").write_text(text.replace('allocator = "baa"', f'allocator = "{allocator}"'))
    shutil.copy(HERE / "baa.fio", folder / "baa.fio")
    for t in NAMES:
        for name in (f"{t}.img", f"{t}-fast.img"):
            with open(folder / name, "wb") as f:
                f.truncate(16 << 20)
    return folder / "baa.toml", folder / "baa.fio"


def twin(exp: Experiment) -> Row:
    """The simulated twin, from SETTLE_S to the end of the jobs."""
    r = exp.simulate(window=f"{WINDOW_S}s", keep_requests=True)
    start, end = int(SETTLE_S * 1e9), exp.duration_ns()
    util = exp.tier_utilisation(r, start, end)
    return exp.tenant_iops(r, start, end), [util["slow"], util["fast"]]


def lp(exp: Experiment) -> Row:
    """`storqos allocate` on the twin's numbers: the tiers' capacities and hit ratios."""
    dev = exp.device()
    alloc = str(exp.config["policy"]["allocator"])
    res = allocate([Device("hdd", dev["slow"]["iops"]), Device("ssd", dev["fast"]["iops"])],
                   [Client(n, hit=h) for n, h in zip(NAMES, dev["tenant_hit_ratios"], strict=True)], [alloc])
    util = dict(res.devices.select("device", "utilisation").iter_rows())
    return res.clients["allocation_iops"].to_list(), [util["hdd"], util["ssd"]]


def live(cfg: Path, fio: Path, capacities: tuple[float, float]) -> Row:
    """Serve the example, run fio against it; means over the whole windows from SETTLE_S
    on where all four read (fio's last window dropped)."""
    folder = cfg.parent
    series = folder / "series.json"
    serve = subprocess.Popen([sys.executable, "-m", "storqos.cli", "serve", "--config", str(cfg), "--for", "60s",
                              "--window", f"{WINDOW_S}s", "--out", str(series)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert serve.stdout is not None
    port = re.search(r"127\.0\.0\.1:(\d+)", serve.stdout.readline())
    if port is None:
        sys.exit(f"storqos serve did not start: {serve.stderr.read() if serve.stderr else ''}")
    job = folder / "live.fio"
    job.write_text(fio.read_text().replace("127.0.0.1:10809", f"127.0.0.1:{port.group(1)}"))
    subprocess.run(["fio", "--output=/dev/null", str(job)], check=True, cwd=folder, timeout=60)
    serve.send_signal(2)
    serve.wait(timeout=20)
    iops, ops = read_live_series(series)
    active = sorted(t for t, r in iops.items() if len(r) == len(NAMES) and min(r.values()) > 0)
    steady = [t for t in active[:-1] if t >= SETTLE_S]
    tenants = [sum(iops[t][i] for t in steady) / len(steady) for i in range(len(NAMES))]
    starts = sorted(ops)
    prev = {b: a for a, b in zip(starts, starts[1:], strict=False)}
    util = [sum(ops[t][name] - ops[prev[t]][name] for t in steady) / (cap * WINDOW_S * len(steady))
            for name, cap in (("tier_slow_ops", capacities[0]), ("tier_fast_ops", capacities[1]))]
    return tenants, util


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--sim-only", action="store_true", help="the twin and the LP only (no fio, no gateway)")
    args = ap.parse_args()
    if not args.sim_only and shutil.which("fio") is None:
        sys.exit("fio is needed for the live half (Debian: apt-get install fio), or give --sim-only")
    print(f"{'':12} | {'p':>6} {'q':>6} {'r':>6} {'s':>6} | {'HDD':>6} {'SSD':>6}")
    for allocator in ("baa", "fq"):
        with tempfile.TemporaryDirectory() as tmp:
            cfg, fio = prepare(Path(tmp), allocator)
            exp = Experiment.load(cfg, fio)
            rows = {"LP": lp(exp), "twin": twin(exp)}
            if not args.sim_only:
                dev = exp.device()
                rows["live"] = live(cfg, fio, (dev["slow"]["iops"], dev["fast"]["iops"]))
        for what, (tenants, util) in rows.items():
            print(f"{allocator.upper() + ' ' + what:12} | {' '.join(f'{x:6.1f}' for x in tenants)} | "
                  f"{util[0]:6.1%} {util[1]:6.1%}")


if __name__ == "__main__":
    main()
