"""Cluster runs from Python and from ``storqos simulate --cluster``: placement (a read to
one server, a write to every replica), a tenant's total limit kept across its servers by
dmClock and the split allocator where servers on their own give it their sum (dmclock's
limit-break setting of ceph/dmclock#21, scaled down), and bad settings refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import assert_one_line_error, run_cli
from storqos.base.errors import InputError
from storqos.model.cluster import Cluster, alt_range_trace, simulate_cluster

BUNDLED = Path(__file__).resolve().parents[2] / "python" / "storqos" / "data" / "websearch-excerpt.mqsim"


def _per_second(res_windows: pl.DataFrame, start_s: int, end_s: int) -> np.ndarray:
    w = res_windows.filter((pl.col("start_ns") >= start_s * 10**9) & (pl.col("start_ns") < end_s * 10**9))
    return w["completed"].to_numpy()


def test_a_total_limit_holds_across_servers_with_coordination_and_not_without() -> None:
    # 20 clients over 20 servers of 80 IOPS, each limited to 30 IOPS in total while
    # asking 100 over 10 servers. Each server alone grants its 30: a client takes what
    # its 10 servers have for it, 80. Split every 500 ms: 30 every second, within 5 %.
    # dmClock: never above 30 on average (at most 2 % over), at least 95 % of it, and
    # each 2-s interval within 20 %.
    trace = alt_range_trace(20, 20, 8)
    kw = {"reservations": [20] * 20, "limits": [30] * 20, "weights": [1] * 20}
    common = {"placement": "device", "servers": 20}
    alone = simulate_cluster(trace, "mclock", capacity=80, cluster=Cluster(**common), **kw)  # type: ignore[arg-type]
    assert (_per_second(alone.windows, 2, 8) >= 76).all()
    split = simulate_cluster(trace, "mclock", capacity=80,
                             cluster=Cluster(**common, coordination="split"), **kw)  # type: ignore[arg-type]
    s = _per_second(split.windows, 2, 8)
    assert s.size == 120 and ((s >= 28.5) & (s <= 31.5)).all(), (s.min(), s.max())
    dm = simulate_cluster(trace, "mclock", capacity=80, window="2s",
                          cluster=Cluster(**common, coordination="dmclock"), **kw)  # type: ignore[arg-type]
    d = _per_second(dm.windows, 2, 8) / 2
    assert 0.95 <= d.mean() / 30 <= 1.02 and ((d >= 24) & (d <= 36)).all(), (d.min(), d.mean(), d.max())
    # Each request charged its own report, as the paper and Ceph's dmclock library do:
    # the library's break (clients limited to 30 got 55-86 in its 2-s intervals).
    lib = simulate_cluster(trace, "mclock", capacity=80, window="2s",
                           cluster=Cluster(**common, coordination="dmclock", charge="request"), **kw)  # type: ignore[arg-type]
    b = _per_second(lib.windows, 2, 8) / 2
    assert b.mean() > 1.2 * 30 and b.max() > 2 * 30, (b.min(), b.mean(), b.max())


def test_cli_places_reads_on_one_server_and_writes_on_every_replica() -> None:
    r = run_cli("simulate", str(BUNDLED), "--cluster", "5", "--replicas", "3", "--capacity", "400", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    served = sum(s["completed"] for s in doc["servers"])
    # MQSim's last column: 1 = read.
    flags = [line.split()[-1] for line in BUNDLED.read_text().splitlines() if line.strip()]
    reads = sum(f == "1" for f in flags)
    assert doc["arrived"] == len(flags) and served == reads + 3 * (len(flags) - reads)
    assert len(doc["servers"]) == 5 and doc["cluster"]["placement"]["replicas"] == 3
    table = run_cli("simulate", str(BUNDLED), "--cluster", "5", "--capacity", "400", columns=80)
    assert table.code == 0, table.err
    assert "per server" in table.out and max(len(x) for x in table.out.splitlines()) <= 80


@pytest.mark.parametrize(("args", "needles"), [
    (["--cluster", "0"], ["--cluster", "between 1 and 65536"]),
    (["--cluster", "2", "--replicas", "3"], ["--replicas", "between 1 and 2"]),
    (["--cluster", "4", "--coordination", "dmclock", "--policy", "wf2q"], ["--coordination", "give --policy mclock"]),
    (["--cluster", "4", "--coordination", "often"], ["--coordination", "none, dmclock, split"]),
    (["--cluster", "4", "--placement", "random"], ["--placement", "hash, device"]),
    (["--cluster", "4", "--object-size", "0"], ["--object-size", "> 0"]),
    (["--cluster", "1", "--placement", "device"], ["--cluster", "6 devices need 6 servers, the cluster has 1"]),
])
def test_bad_cluster_settings_are_one_line(args: list[str], needles: list[str]) -> None:
    r = run_cli("simulate", str(BUNDLED), "--capacity", "400", "--split-by", "device", *args)
    assert_one_line_error(r, *needles)


def test_python_names_its_keywords() -> None:
    with pytest.raises(InputError, match="coordination="):
        simulate_cluster(None, "fcfs", capacity=100, cluster=Cluster(servers=2, coordination="dmclock"))
    with pytest.raises(InputError, match="charge must be one of arrival, request"):
        Cluster(servers=2, coordination="dmclock", charge="later").to_spec()  # type: ignore[arg-type]
    with pytest.raises(InputError, match="charge applies to dmclock coordination only"):
        Cluster(servers=2, coordination="split", charge="request").to_spec()


CLUSTER_EXPERIMENT = """
name = "cluster"
seed = 3
duration = "4s"

[device]
kind = "constant"
capacity = "300"

[cluster]
servers = 4
replicas = 2

[[tenant]]
name = "a"
generator = { kind = "poisson", rate = "400", span = "1GiB" }
limit = "100"

[[tenant]]
name = "b"
generator = { kind = "poisson", rate = "100", span = "1GiB" }

[[policy]]
kind = "mclock"

[grid]
"cluster.coordination" = ["none", "dmclock"]
"""


def test_an_experiment_file_runs_on_a_cluster_and_grids_over_its_coordination(tmp_path: Path) -> None:
    from storqos.experiments.experiment import load, run_experiment

    path = tmp_path / "c.toml"
    path.write_text(CLUSTER_EXPERIMENT)
    exp = load(path)
    assert [(r.cluster or {}).get("coordination") for r in exp.runs] == ["none", "dmclock"]
    res = run_experiment(exp, workers=1)
    # Tenant a asks 400 IOPS for 4 s against a limit of 100: alone, each of the 4
    # servers grants it 100, so it gets nearly all it asks; in total, 100 a second.
    first_4s = {o.point["cluster.coordination"]: o.windows.filter((pl.col("tenant") == 0)
                                                                 & (pl.col("start_ns") < 4 * 10**9))["completed"].sum()
                for o in res.outputs}
    assert first_4s["dmclock"] <= 4 * 100 * 1.05 + 8, first_4s
    assert first_4s["none"] > 3 * first_4s["dmclock"], first_4s
    bad = tmp_path / "bad.toml"
    bad.write_text(CLUSTER_EXPERIMENT.replace("replicas = 2", "replicas = 20"))
    with pytest.raises(InputError, match="replicas"):
        load(bad)
