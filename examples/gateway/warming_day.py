"""A gateway that learns its day (seed 002 as a gateway feature): a thin driver of
``storqos warm --save`` and the gateway's ``[background]`` job.

1. Two weeks of the synthetic diurnal workload (weekday High about 08:00-18:00) give a
   day model: ``storqos warm TRACE --save day.toml``.
2. ``storqos serve`` runs examples/gateway/warming.toml (a tiered export ``data`` for the
   users, ``scrub`` and ``warm`` sharing its file as background tenants) with a
   ``[background]`` table: the scrub in the Low periods the model predicts, the warm-up
   of the users' export before the predicted High, one model minute every 10 ms.
3. The next day's user requests (a Monday) are replayed through it, a day in 14.4 s,
   while ``storqos ctl background`` is read every 20 ms.

Prints the job's run and warm-up periods (model time) beside the users' true High
period, the users' response times in High and in Low, and the job's last report.

    python examples/gateway/warming_day.py          # about 20 s
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl
from storqos.live.control_client import command
from storqos.live.replay import replay
from storqos.planning.warming.workload import bimodal_days

HERE = Path(__file__).resolve().parent
CLI = shutil.which("storqos") or str(Path(sys.executable).with_name("storqos"))
TICK_S = 0.01  # wall-clock seconds per model minute: a day in 14.4 s
TRAIN_DAYS = 14
PEAK_IOPS = 0.15  # the users' weekday rate at High, before compression (900 IOPS replayed)
BACKGROUND = f"""
[background]
export = "scrub"
rate = 300             # the scrub's IOPS while it runs
t_fast = 60            # stop an hour (model minutes) before the predicted High
model = "day.toml"
interval = "{TICK_S * 1000:g}ms"
warm_export = "warm"   # the users' set (the fast tier's 90 blocks), read through
warm_bytes = "360KiB"  # the tiered export's LRU
users = ["users"]      # whose requests make the day (not the warm-up's)
"""


def storqos(*args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([CLI, *args], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"storqos {args[0]}: {r.stderr.strip()}")
    return r


def periods(samples: list[tuple[float, bool]]) -> str:
    """The model-time periods in which a sampled flag was on, as HH:MM-HH:MM."""
    runs, start = [], None
    for m, on in samples:
        if on and start is None:
            start = m
        elif not on and start is not None:
            runs.append((start, m))
            start = None
    if start is not None:
        runs.append((start, samples[-1][0]))
    hhmm = lambda m: f"{int(min(m, 1440)) // 60:02d}:{int(min(m, 1440)) % 60:02d}"  # noqa: E731
    return ", ".join(f"{hhmm(a)}-{hhmm(b)}" for a, b in runs) or "-"


def main() -> None:
    trace, truth = bimodal_days(TRAIN_DAYS + 1, PEAK_IOPS, seed=3)
    day_ns = 86_400 * 10**9
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trace.filter(pl.col("arrival_ns") < TRAIN_DAYS * day_ns).write_parquet(folder / "weeks.parquet")
        storqos("warm", str(folder / "weeks.parquet"), "--train-days", str(TRAIN_DAYS - 2),
                "--save", str(folder / "day.toml"))
        text = (HERE / "warming.toml").read_text().replace('listen = "127.0.0.1:10809"', 'listen = "127.0.0.1:0"')
        (folder / "gw.toml").write_text(f'control = "{folder / "gw.sock"}"\n' + text.replace("\n[policy]",
                                                                                        BACKGROUND + "\n[policy]", 1))
        for name, size in (("data-fast.img", 90 * 4096), ("data.img", 51 * 90 * 4096)):
            with open(folder / name, "wb") as f:
                f.truncate(size)
        users = trace.filter(pl.col("arrival_ns") >= TRAIN_DAYS * day_ns).with_columns(
            pl.col("arrival_ns") - TRAIN_DAYS * day_ns, (pl.col("offset") % (90 * 4096)).alias("offset"))
        gw = subprocess.Popen([CLI, "serve", "--config", str(folder / "gw.toml"), "--for", "60s"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=folder)
        assert gw.stdout is not None and gw.stderr is not None
        log: list[str] = []
        threading.Thread(target=lambda: log.extend(gw.stderr or []), daemon=True).start()  # its log, kept
        while (port := re.search(r"on nbd://127\.0\.0\.1:(\d+)", line := gw.stdout.readline())) is None:
            if not line:
                gw.wait()
                sys.exit(f"storqos serve: {''.join(log).strip()}")
        threading.Thread(target=gw.stdout.read, daemon=True).start()  # its summary, not shown
        origin = time.time()  # the job's minute 0: a Monday 00:00
        samples: list[tuple[float, bool, bool]] = []
        done = threading.Event()

        def watch() -> None:
            while not done.wait(0.02):
                b = command(folder / "gw.sock", {"cmd": "stats"})["background"]
                if b is not None:
                    samples.append(((time.time() - origin) / TICK_S, bool(b["running"]), bool(b["warming"])))

        th = threading.Thread(target=watch, daemon=True)
        th.start()
        res = replay(users, {0: f"nbd://127.0.0.1:{port[1]}/data"}, speed=60 / TICK_S)
        done.set()
        th.join()
        view = storqos("ctl", "background", "--socket", str(folder / "gw.sock"), "--json")
        gw.terminate()
        gw.wait(timeout=20)
    high_h = truth[TRAIN_DAYS]
    print(f"the users' High: {int(high_h[0]):02d}:{round(high_h[0] % 1 * 60):02d}-"
          f"{int(high_h[1]):02d}:{round(high_h[1] % 1 * 60):02d} (true), {res.requests.height:,} user requests")
    print(f"scrub ran:   {periods([(m, r) for m, r, _ in samples])}")
    print(f"warm-up ran: {periods([(m, w) for m, _, w in samples])}")
    r = res.requests
    minute = r["arrival_ns"].to_numpy() / (TICK_S * 1e9)  # replayed from 00:00
    lat_ms = (r["finish_ns"] - r["arrival_ns"]).to_numpy() / 1e6
    high = (minute >= high_h[0] * 60) & (minute < high_h[1] * 60)
    for name, sel in (("High", high), ("Low", ~high)):
        p50, p99 = np.percentile(lat_ms[sel], [50, 99]) if sel.any() else (float("nan"),) * 2
        print(f"users in {name:<4}: {int(sel.sum()):>6,} requests, p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    b = json.loads(view.stdout)["background"]
    print(f"the job: {b['done']:,} scrub reads ({b['passes']} passes), {b['warmed']:,} warm-up reads")


if __name__ == "__main__":
    main()
