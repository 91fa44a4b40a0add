"""Seed 003's step case live and simulated, side by side.

One experiment description, two runs: examples/gateway/fclb.toml (the gateway: FCLB over
YFQ on an emulated 1,000 IOPS server, admission control at connect time) and
examples/gateway/fclb.fio (w1 reads from 0 s, the neighbour w2 steps in at 3 s). Live:
`storqos serve` + fio's nbd engine in a scratch folder; simulated: storqos.live.gateway_twin
(the same policy spec, the constant-rate device, fio's jobs as closed-loop clients).
Prints w1's and w2's p95 (from the bucket, as the paper's monitor measures it) and
bucket rates per control period, and where w1's p95 came back within its target.
With --gain online the [policy] measures the plant gain itself (``gain = "online"``,
the pole placed on each tenant's estimate every period) and w1's K and Ĝ are printed too.

    python examples/gateway/fclb_step.py               # about 10 s; needs fio
    python examples/gateway/fclb_step.py --gain online
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from storqos.live.gateway_twin import Experiment

HERE = Path(__file__).resolve().parent
PERIOD = 0.25  # the example's control period (s)


def live(folder: Path) -> dict[float, dict[str, float]]:
    """Serve the example and run fio against it; the policy's gauges per period."""
    cfg, fio = folder / "fclb.toml", folder / "fclb.fio"
    serve = subprocess.Popen([sys.executable, "-m", "storqos.cli", "serve", "--config", str(cfg), "--for", "30s",
                              "--window", f"{PERIOD}s", "--out", str(folder / "series.json")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert serve.stdout is not None
    port = re.search(r"127\.0\.0\.1:(\d+)", serve.stdout.readline())
    if port is None:
        sys.exit(f"storqos serve did not start: {serve.stderr.read() if serve.stderr else ''}")
    fio.write_text(fio.read_text().replace("127.0.0.1:10809", f"127.0.0.1:{port.group(1)}"))
    subprocess.run(["fio", "--output=/dev/null", str(fio)], check=True, cwd=folder, timeout=60)
    serve.send_signal(2)
    serve.wait(timeout=20)
    rows: dict[float, dict[str, float]] = collections.defaultdict(dict)
    for g in json.loads((folder / "series.gauges.json").read_text()):
        if g["value"] is not None:
            rows[round(g["start_s"], 3)][g["name"]] = g["value"]
    return rows


def simulated(folder: Path) -> dict[float, dict[str, float]]:
    """The twin: the same two files in simulated time; the gauges per period."""
    r = Experiment.load(folder / "fclb.toml", folder / "fclb.fio").simulate(window=f"{PERIOD}s")
    rows: dict[float, dict[str, float]] = collections.defaultdict(dict)
    for t, name, v in r.gauges.iter_rows():
        # A gauge is sampled as its window ends: the live series stamps that end.
        rows[round(t / 1e9 + PERIOD, 3)][name] = v
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gain", choices=("knee", "online"), default="knee",
                    help="the example's gain (the server's knee gain, pole 0) or gain = \"online\"")
    online = ap.parse_args().gain == "online"
    if shutil.which("fio") is None:
        sys.exit("fio is needed for the live half (Debian: apt-get install fio)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text = (HERE / "fclb.toml").read_text().replace('listen = "127.0.0.1:10809"', 'listen = "127.0.0.1:0"')
        if online:
            text = text.replace("pole = 0 ", 'gain = "online"\npole = 0 ', 1)
        (folder / "fclb.toml").write_text(text)
        shutil.copy(HERE / "fclb.fio", folder / "fclb.fio")
        for name in ("w1", "w2", "hog", "tight"):
            with open(folder / f"{name}.img", "wb") as f:
                f.truncate(16 << 20)
        sim = simulated(folder)
        got = live(folder)
    k_head = f" {'K1':>5} {'G1':>6}" if online else ""
    print(f"{'t (s)':>6} | {'live r1':>8} {'p95 w1':>7}{k_head} {'r2':>6} {'p95 w2':>7} | "
          f"{'sim r1':>8} {'p95 w1':>7}{k_head} {'r2':>6} {'p95 w2':>7}")
    nan = float("nan")
    for t in sorted(set(sim) | set(got)):
        if t > 6.0:
            break
        a, b = got.get(t, {}), sim.get(t, {})

        def cols(r: dict[str, float]) -> str:
            k = (f" {r.get('fclb_gain_iops_per_ms.0', nan):5.1f} {r.get('fclb_plant_gain_ms_per_iops.0', nan):6.3f}"
                 if online else "")
            return (f"{r.get('fclb_rate_iops.0', nan):8.0f} {r.get('fclb_period_p95_ms.0', nan):7.1f}{k} "
                    f"{r.get('fclb_rate_iops.1', nan):6.0f} {r.get('fclb_period_p95_ms.1', nan):7.1f}")
        print(f"{t:6.2f} | {cols(a)} | {cols(b)}")


if __name__ == "__main__":
    main()
