"""Several live gateways keeping each tenant's total promises, and the cluster simulator's
prediction of the same run.

``--gateways`` gateways (``storqos serve --cluster``, mClock, an emulated device of
``--iops`` each) on one etcd, ``--tenants`` tenants with an export on every gateway. Each
tenant's requests (Poisson 4 KiB reads) go to the gateways with Zipf-skewed
probabilities (s = 1: 48, 24, 16, 12 % over four), its favourite gateway rotating with the
tenant, so every gateway is some tenants' hot spot. Four classes of tenants: reserved
(a reservation it asks a little more than), heavy (weight 4), plain (weight 1) and
capped (weight 4, and a limit below what that weight would give it); together they ask about 1.5 times the cluster's
capacity. `storqos replay` sends the trace at its times, one connection per (tenant,
gateway); per tenant and 1 s window (after ``--warmup`` s, while the shares settle):

- reservation met: windows in which a reserved tenant got at least 95 % of its
  reservation;
- limit overshoot: a capped tenant's IOPS over its limit, worst window and over the run;
- weighted fairness: min/max of IOPS/weight over the heavy and plain tenants;
- prediction: `simulate_cluster` of the same trace (the trace's gateway as each request's
  server, `split` coordination every 500 ms, constant-rate devices), each tenant's total
  IOPS against the measured.

    .venv/bin/python benches/cluster_live.py                    # 4 gateways x 64 tenants
    .venv/bin/python benches/cluster_live.py --gateways 2 --tenants 16 --seconds 10
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from storqos.live.etcd import LocalEtcd
from storqos.live.replay import replay
from storqos.model.cluster import Cluster, simulate_cluster

MiB = 1 << 20


@dataclass(frozen=True)
class Tenants:
    """Each tenant's class and QoS parameters, by id."""

    kind: list[str]
    reservation: list[float]
    limit: list[float | None]
    weight: list[float]
    rate: list[float]


def tenants(n: int, capacity: float) -> Tenants:
    """Four classes in equal numbers (by id modulo 4, so each class's favourite gateways
    rotate alike): reserved, heavy, plain, capped; demand ~1.5x ``capacity``."""
    fair = capacity / n
    kind, r, lim, w, rate = [], [], [], [], []
    for t in range(n):
        k = ("reserved", "heavy", "plain", "capped")[t % 4]
        kind.append(k)
        r.append(float(round(1.6 * fair)) if k == "reserved" else 0.0)
        lim.append(float(round(0.5 * fair)) if k == "capped" else None)
        w.append(4.0 if k in ("heavy", "capped") else 1.0)
        rate.append({"reserved": 1.9, "heavy": 1.9, "plain": 1.5, "capped": 0.8}[k] * fair)
    return Tenants(kind, r, lim, w, rate)


def trace(ts: Tenants, gateways: int, seconds: float, seed: int) -> pl.DataFrame:
    """Poisson 4 KiB reads per tenant; each request's gateway Zipf(1)-skewed, the
    tenant's favourite rotating with its id (column ``server``)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, gateways + 1)
    p /= p.sum()
    parts = []
    for t, rate in enumerate(ts.rate):
        n = rng.poisson(rate * seconds)
        arrival = np.sort(rng.uniform(0, seconds * 1e9, n)).astype(np.uint64)
        rank = rng.choice(gateways, n, p=p)
        parts.append(pl.DataFrame({
            "arrival_ns": arrival, "tenant": np.full(n, t, np.uint32),
            "server": ((rank + t // 4) % gateways).astype(np.uint32),
            "offset": (rng.integers(0, 16 * MiB // 4096, n) * 4096).astype(np.uint64),
            "size": np.full(n, 4096, np.uint32), "is_read": np.ones(n, bool)}))
    return pl.concat(parts).sort("arrival_ns")


def start_gateways(dir: Path, uri: str, ts: Tenants, gateways: int, iops: float) -> list[tuple[subprocess.Popen, int]]:
    """The gateways, each with an export per tenant; (process, port) of each."""
    n = len(ts.kind)
    lists = ["--reservations", ",".join(f"{x:g}" for x in ts.reservation),
             "--limits", ",".join("none" if x is None else f"{x:g}" for x in ts.limit),
             "--weights", ",".join(f"{x:g}" for x in ts.weight)]
    out = []
    for g in range(gateways):
        exports = []
        for t in range(n):
            img = dir / f"t{t}g{g}.img"
            with open(img, "wb") as f:
                f.truncate(16 * MiB)
            exports += ["--export", f"t{t}g{g}={img}:{t}"]
        p = subprocess.Popen([sys.executable, "-m", "storqos.cli", "serve", *exports, "--policy", "mclock", *lists,
                              "--iops", f"{iops:g}", "--listen", "127.0.0.1:0", "--cluster", uri,
                              "--cluster-id", f"g{g}", "--for", "600s"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert p.stdout is not None
        line = p.stdout.readline()
        m = re.search(r"nbd://127\.0\.0\.1:(\d+)", line)
        if not m:
            raise SystemExit(f"gateway {g} did not start: {line!r}")
        out.append((p, int(m.group(1))))
    return out


def per_window(df: pl.DataFrame, tenant: str, warmup: float) -> pl.DataFrame:
    """IOPS per tenant and whole second (by completion), after ``warmup`` s."""
    t0 = df["arrival_ns"].min()
    return (df.with_columns(((pl.col("finish_ns") - t0) // 1_000_000_000).alias("s"))
            .filter(pl.col("s") >= warmup).group_by(tenant, "s").len().rename({"len": "iops"}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gateways", type=int, default=4)
    ap.add_argument("--tenants", type=int, default=64)
    ap.add_argument("--iops", type=float, default=1000.0, help="each gateway's emulated capacity")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    ts = tenants(a.tenants, a.iops * a.gateways)
    tr = trace(ts, a.gateways, a.seconds, a.seed)
    with tempfile.TemporaryDirectory(prefix="storqos-cluster-live-") as d:
        etcd = LocalEtcd(d)
        gws: list[tuple[subprocess.Popen, int]] = []
        try:
            gws = start_gateways(Path(d), etcd.cluster("bench"), ts, a.gateways, a.iops)
            time.sleep(1.0)  # every member has published once
            sub = tr.with_columns((pl.col("tenant") * a.gateways + pl.col("server")).alias("tenant"))
            uris = {t * a.gateways + g: f"nbd://127.0.0.1:{gws[g][1]}/t{t}g{g}"
                    for t in range(a.tenants) for g in range(a.gateways)}
            t0 = time.monotonic()
            res = replay(sub.drop("server"), uris, max_outstanding=1 << 20)
            took = time.monotonic() - t0
        finally:
            for p, _ in gws:
                p.send_signal(signal.SIGTERM)
            for p, _ in gws:
                p.wait(30)
            etcd.stop()
    live = res.requests.with_columns((pl.col("tenant") // a.gateways).alias("t"))
    sch = res.schedule()
    print(f"{a.gateways} gateways x {a.tenants} tenants, {a.iops:g} IOPS each, {tr.height:,} requests over "
          f"{a.seconds:g} s (replayed in {took:.1f} s; issued late by p50 {sch['issue_error_p50_us'] / 1e3:.2g} ms, "
          f"p99 {sch['issue_error_p99_us'] / 1e3:.2g} ms)")
    win = per_window(live, "t", a.warmup).filter(pl.col("s") < a.seconds)
    kinds = pl.DataFrame({"t": np.arange(a.tenants, dtype=np.uint32), "kind": ts.kind,
                          "reservation": ts.reservation, "limit": [x or 0.0 for x in ts.limit], "weight": ts.weight})
    win = win.with_columns(pl.col("t").cast(pl.UInt32)).join(kinds, on="t")
    col = lambda df, c: df[c].to_numpy().astype(float)  # noqa: E731 (one column as floats)
    resv = win.filter(pl.col("kind") == "reserved")
    met = float(np.mean(col(resv, "iops") >= 0.95 * col(resv, "reservation")))
    capped = win.filter(pl.col("kind") == "capped")
    worst = float(np.max(col(capped, "iops") / col(capped, "limit"))) - 1
    span = a.seconds - a.warmup
    tot = win.group_by("t").agg((pl.col("iops").sum() / span).alias("iops")).join(kinds, on="t")
    tc = tot.filter(pl.col("kind") == "capped")
    over = float(np.max(col(tc, "iops") / col(tc, "limit"))) - 1
    fair = tot.filter(pl.col("kind").is_in(["heavy", "plain"]))
    norm = col(fair, "iops") / col(fair, "weight")
    print(f"reservation met in {100 * met:.1f} % of 1 s windows (reserved tenants, >= 95 % of "
          f"{ts.reservation[0]:g} IOPS)")
    print(f"limit overshoot: worst 1 s window {100 * worst:+.1f} %, over the run {100 * over:+.1f} % "
          f"(limit {ts.limit[3]:g} IOPS)")
    print(f"weighted fairness (IOPS / weight, heavy and plain tenants): min/max {norm.min() / norm.max():.3f}")
    sim = simulate_cluster(tr, "mclock", "constant", capacity=a.iops,
                           cluster=Cluster(servers=a.gateways, placement="device", coordination="split",
                                           period="500ms"),
                           reservations=ts.reservation, limits=ts.limit, weights=ts.weight, window="1s")
    sw = (sim.windows.filter((pl.col("start_ns") >= a.warmup * 1e9) & (pl.col("start_ns") < a.seconds * 1e9))
          .group_by("tenant").agg((pl.col("completed").sum() / span).alias("sim_iops"))
          .rename({"tenant": "t"}).with_columns(pl.col("t").cast(pl.UInt32)))
    cmp = tot.join(sw, on="t")
    err = np.abs(col(cmp, "sim_iops") - col(cmp, "iops")) / col(cmp, "iops")
    print(f"simulated beside measured, each tenant's total IOPS: median error {100 * np.median(err):.1f} %, "
          f"worst {100 * err.max():.1f} %")
    for kind in ("reserved", "heavy", "plain", "capped"):
        k = cmp.filter(pl.col("kind") == kind)
        print(f"  {kind:8}  live {np.mean(col(k, 'iops')):6.1f} IOPS   simulated {np.mean(col(k, 'sim_iops')):6.1f} IOPS")

if __name__ == "__main__":
    main()
