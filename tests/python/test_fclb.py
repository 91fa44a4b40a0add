"""Seed 003 from Python: FCLB / YFQ specs, the stability check, admission control, the
four cases against plain YFQ and a fixed bucket, and `storqos admit`."""

from __future__ import annotations

import json

import polars as pl
import pytest
from storqos import ClosedClient, simulate
from storqos.base.errors import InputError
from storqos.model.fclb.admission import admit
from storqos.model.fclb.cases import run_experiment
from storqos.model.fclb.spec import Workload, check_gain, fclb_spec, workload_spec, yfq_spec
from storqos.model.specs import POLICIES, policy_spec

#: The module-scoped fixtures cost seconds each: all of this module's tests go to one
#: pytest-xdist worker (make test runs `--dist loadgroup`), which computes them once.
pytestmark = pytest.mark.xdist_group("test_fclb")

DISK = {"kind": "disk", "profile": "desktop-7200", "queue": "fifo"}
SPAN = 9_100_000_000


def test_policy_names_and_specs():
    assert "yfq" in POLICIES and "fclb" in POLICIES
    assert policy_spec("yfq", weights="2,1", batch=2) == {"kind": "yfq", "weights": [2.0, 1.0], "batch": 2}
    spec = policy_spec("fclb", workloads="40:35ms:8,20:38ms:4", weights=[2, 1], pole=0.4, plant_gain=3.0)
    assert spec["workloads"] == [{"iops": 40.0, "rt_ns": 35_000_000, "bucket": 8.0}, {"iops": 20.0, "rt_ns": 38_000_000, "bucket": 4.0}]
    assert spec["then"] == {"kind": "yfq", "weights": [2.0, 1.0]}
    assert workload_spec({"iops": "1.5k", "rt": "5ms", "ref": "4ms", "ceiling": 2000}) == {
        "iops": 1500.0, "rt_ns": 5_000_000, "ref_ns": 4_000_000, "ceiling_iops": 2000.0}
    with pytest.raises(InputError, match="needs its workloads"):
        policy_spec("fclb")
    with pytest.raises(InputError, match="whole number"):
        workload_spec("40:35ms:2.5")
    with pytest.raises(InputError, match="unknown mode"):
        fclb_spec(["40:35ms"], mode="adaptive")


def test_unstable_gain_is_rejected_with_the_bound():
    with pytest.raises(InputError, match=r"0 < K < 2/G = 6\.6667 IOPS/ms"):
        fclb_spec(["40:35ms"], backend=yfq_spec([1]), gain=10, plant_gain=0.3)
    with pytest.raises(InputError, match=r"pole p = 1 - K\*G = -2\.0000"):
        check_gain(10, 0.3)
    assert check_gain(2, 0.3) == pytest.approx(0.4)


def test_fclb_through_the_public_simulator_shows_its_gauges():
    spec = fclb_spec(["40:35ms:8", "20:38ms:4"], backend=yfq_spec([2, 1]), gain=0.2)
    clients = [ClosedClient(tenant=t, outstanding=8, span=SPAN, stop="30s") for t in (0, 1)]
    res = simulate(policy=spec, device=DISK, closed=clients, until="30s")
    names = set(res.gauges["name"].to_list())
    assert {"fclb_rate_iops.0", "fclb_tokens.1", "fclb_rt_p95_ms.0", "yfq_virtual_time"} <= names
    done = dict(zip(res.tenants["tenant"].to_list(), res.tenants["completed"].to_list(), strict=True))
    assert done[0] / done[1] == pytest.approx(2.0, rel=0.1)
    # Each gets at least its demanded rate.
    assert done[0] >= 40 * 29 and done[1] >= 20 * 29


def test_online_gain_in_the_simulator_spec():
    """``gain="online"``: the same core estimator the gateway runs, on the seed's disk;
    each workload's Ĝ stays within 1/4..16 x the start value and K = (1 - p)/Ĝ."""
    spec = policy_spec("fclb", workloads="40:35ms:8,20:38ms:4", weights=[2, 1], gain="online", pole=0.4,
                       plant_gain=3.0)
    assert spec["gain_iops_per_ms"] == "online" and spec["pole"] == 0.4
    clients = [ClosedClient(tenant=t, outstanding=8, span=SPAN, stop="20s") for t in (0, 1)]
    res = simulate(policy=spec, device=DISK, closed=clients, until="20s")
    g = res.gauges.filter(pl.col("name") == "fclb_plant_gain_ms_per_iops.0")["value"].to_list()
    k = res.gauges.filter(pl.col("name") == "fclb_gain_iops_per_ms.0")["value"].to_list()
    assert g and all(0.75 - 1e-9 <= x <= 48.0 + 1e-9 for x in g), g
    assert all(abs(a * b - 0.6) < 1e-9 for a, b in zip(g, k, strict=True))
    with pytest.raises(InputError, match="online") as e:
        fclb_spec(["40:35ms"], gain="foo")
    assert e.value.where == "--gain"


def test_admission_table3():
    rep = admit(["w1:40:35ms", "w2:20:38ms"], weights=[2, 1], curve_rates=[40, 60, 80, 90])
    assert rep.admitted and rep.target_iops == 60
    t = rep.table
    # What admission promises, checked against its own IOPS -> p95 curve (separate runs at
    # each offered rate): at T = 60 IOPS the p95 with the 20 % margin fits both demands...
    p95_at = dict(zip(rep.curve["offered_iops"].to_list(), rep.curve["p95_ms"].to_list(), strict=True))
    assert 1.2 * p95_at[60.0] <= min(t["rt_ms"].to_list()), (p95_at, t)
    assert t["admitted"].to_list() == [True, True]
    assert rep.stable_limit_iops == 80
    # ... and at 90 IOPS it does not fit 25 ms, so two 45 IOPS / 25 ms workloads are refused.
    assert 1.2 * p95_at[90.0] > 25.0, p95_at
    heavy = admit([Workload("a", 45, "25ms"), Workload("b", 45, "25ms")], curve_rates=[])
    assert not heavy.admitted


@pytest.fixture(scope="module")
def experiment():
    return run_experiment(["both", "inactive-w2", "pulse-w2"], ["fclb", "fixed-bucket", "yfq"])


def test_both_active_two_to_one_and_surplus_use(experiment):
    s = experiment.summary
    both = s.filter((pl.col("case") == "both") & (pl.col("policy") == "fclb"))
    assert both["throughput_ratio"][0] == pytest.approx(2.0, rel=0.1)
    assert both["violation_pct"].max() < 10
    assert (both["throughput_iops"] >= pl.Series([40.0, 20.0])).all()
    limit = experiment.admission.stable_limit_iops
    alone = s.filter((pl.col("case") == "inactive-w2") & (pl.col("policy") == "fclb"))
    assert alone["steady_iops"][0] >= 0.9 * limit
    fixed = s.filter((pl.col("case") == "inactive-w2") & (pl.col("policy") == "fixed-bucket"))
    assert alone["steady_iops"][0] > 1.5 * fixed["steady_iops"][0]
    yfq = s.filter((pl.col("case") == "both") & (pl.col("policy") == "yfq"))
    assert yfq["violation_pct"].min() > 90
    series = experiment.series.filter((pl.col("case") == "pulse-w2") & (pl.col("policy") == "fclb"))
    assert {"start_s", "workload", "iops", "rate_iops", "rt_p95_ms"} <= set(series.columns)
    assert series.filter(pl.col("workload") == "W1")["rate_iops"].max() > 50


def test_admit_cli(cli):
    r = cli("admit", "--workload", "w1:40:35ms", "--workload", "w2:20:38ms", "--weights", "2,1", "--duration", "30s", "--json")
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["admitted"] and d["target_iops"] == 60
    assert {"rt_measured_ms", "rt_target_ms", "reference_ms"} <= set(d["workloads"][0])
    r = cli("admit", "--workload", "w1:40:35ms", "--duration", "20s")
    assert r.code == 0 and "ADMITTED" in r.out and "RT′" in r.out and "IOPS" in r.out
    r = cli("admit", "--workload", "w1:forty:35ms")
    assert r.code == 2 and "malformed rate" in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("admit", "--workload", "w1:40:35ms", "--weights", "2,1")
    assert r.code == 2 and "one weight > 0 per workload" in r.err
    # The disk model sets its own speed: a capacity given with it was dropped.
    r = cli("admit", "--workload", "w1:40:35ms", "--device", "disk", "--capacity", "100")
    assert r.code == 2 and "--capacity: device 'disk' takes no capacity" in r.err, r.err
    # Two rows named alike: which one the verdict is about could not be told.
    r = cli("admit", "--workload", "w1:40:35ms", "--workload", "w1:20:38ms")
    assert r.code == 2 and "--workload: workload name(s) w1 given twice" in r.err, r.err
    r = cli("admit", "--help")
    assert r.code == 0 and "Example:" in r.out
