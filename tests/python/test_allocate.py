"""`storqos allocate` and `storqos.planning.alloc`: seed 004's examples, properties, bad input."""

from __future__ import annotations

import json

import polars as pl
import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from storqos.base.errors import InputError
from storqos.planning.alloc import Client, Device, allocate, parse_client, parse_device

EXAMPLE_III = [
    "allocate", "--device", "hdd=200", "--device", "ssd=1000",
    "--client", "p:hit=0.75", "--client", "q:hit=0.5", "--client", "r:hit=0.9", "--client", "s:hit=0.95",
]


def _policy(doc: dict, name: str) -> dict:
    return next(p for p in doc["policies"] if p["policy"] == name)


def test_example_iii_table() -> None:
    r = run_cli(*EXAMPLE_III)
    assert r.code == 0, r.err
    baa = r.out.split("DRF:")[0]
    # Fair shares 200, 100, 277.8, 263.2; BAA allocations 282.5, 141.3, 398.6, 377.6.
    for v in ("200.0", "100.0", "277.8", "263.2", "282.5", "141.3", "398.6", "377.6"):
        assert v in baa, (v, r.out)
    # Both devices 100 % busy, ρ_d = 1.41, ρ_s = 1.43497 (the paper prints 1.44).
    assert baa.count("100.0 %") == 2
    assert "1.4126" in baa and "1.4350" in baa
    assert "(IOPS)" in r.out and "utilisation (%)" in r.out
    assert "DRF:" in r.out and "FQ:" in r.out


def test_example_iii_json() -> None:
    r = run_cli(*EXAMPLE_III, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    baa = _policy(doc, "baa")
    alloc = [c["allocation_iops"] for c in baa["clients"]]
    assert alloc == pytest.approx([282.5, 141.3, 398.6, 377.6], abs=0.05)
    assert [c["bottleneck"] for c in baa["clients"]] == ["hdd", "hdd", "ssd", "ssd"]
    assert [d["utilisation"] for d in baa["devices"]] == pytest.approx([1.0, 1.0], abs=1e-12)
    assert [d["amplification"] for d in baa["devices"]] == pytest.approx([1.41, 1.44], abs=0.01)
    # BAA maximises the total: above DRF and FQ here.
    totals = {p["policy"]: p["total_iops"] for p in doc["policies"]}
    assert totals["baa"] > totals["drf"] > totals["fq"]


def test_examples_i_and_ii() -> None:
    r = run_cli("allocate", "-d", "hdd=100", "-d", "ssd=500", "-c", "a:hit=0.5", "-c", "b:hit=0.9", "--json")
    doc = json.loads(r.out)
    baa, drf, fq = (_policy(doc, p) for p in ("baa", "drf", "fq"))
    assert [c["allocation_iops"] for c in baa["clients"]] == pytest.approx([100.0, 500.0])
    assert [c["ssd_iops"] for c in baa["clients"]] == pytest.approx([50.0, 450.0])
    assert [d["utilisation"] for d in baa["devices"]] == pytest.approx([1.0, 1.0])
    assert [c["allocation_iops"] for c in drf["clients"]] == pytest.approx([128.6, 357.1], abs=0.05)
    assert drf["devices"][1]["utilisation"] == pytest.approx(0.77, abs=0.005)
    assert [c["allocation_iops"] for c in fq["clients"]] == pytest.approx([166.7, 166.7], abs=0.05)

    r = run_cli("allocate", "-d", "hdd=100", "-d", "ssd=500", "-c", "a:hit=0.5", "-c", "b:hit=0.5",
                "-c", "c:hit=0.9", "--policy", "drf", "--policy", "fq", "--json")
    doc = json.loads(r.out)
    assert [p["policy"] for p in doc["policies"]] == ["drf", "fq"]
    drf, fq = _policy(doc, "drf"), _policy(doc, "fq")
    assert [c["allocation_iops"] for c in drf["clients"]] == pytest.approx([78.0, 78.0, 217.0], abs=0.5)
    assert drf["devices"][1]["utilisation"] == pytest.approx(0.55, abs=0.005)
    assert [c["allocation_iops"] for c in fq["clients"]] == pytest.approx([90.9] * 3, abs=0.05)
    assert fq["devices"][1]["utilisation"] == pytest.approx(0.345, abs=0.001)


def test_device_order_and_units() -> None:
    # SSD listed first: hit still goes to the faster device; h = h_bal counts as HDD-bound.
    res = allocate([Device("ssd", 1000), Device("hdd", 200)], [Client("p", hit=1000 / 1200), Client("q", hit=0.95)])
    baa = res.clients.filter(policy="baa")
    assert baa["bottleneck"].to_list() == ["hdd", "ssd"]
    assert res.devices.filter(policy="baa")["device"].to_list() == ["ssd", "hdd"]
    assert baa["fair_share_iops"][0] == pytest.approx(600.0)
    assert set(res.clients.columns) >= {"fair_share_iops", "allocation_iops", "ssd_iops", "hdd_iops", "hit_ratio"}
    assert parse_device("ssd=1.5k") == Device("ssd", 1500.0)


def test_three_tiers_and_weights() -> None:
    r = run_cli(
        "allocate", "-d", "hdd=200", "-d", "ssd=2k", "-d", "nvme=20k",
        "-c", "db:hdd=0.5,ssd=0.3,nvme=0.2", "-c", "web:hdd=0.02,ssd=0.5,nvme=0.48",
        "-c", "ml:hdd=0.001,ssd=0.009,nvme=0.99,weight=2", "--json",
    )
    assert r.code == 0, r.err
    baa = _policy(json.loads(r.out), "baa")
    cl = baa["clients"]
    assert [c["bottleneck"] for c in cl] == ["hdd", "ssd", "nvme"]
    assert all(c["allocation_iops"] >= c["fair_share_iops"] * (1 - 1e-9) for c in cl)
    assert cl[2]["weight"] == 2.0
    assert max(d["utilisation"] for d in baa["devices"]) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-d", "hdd=200", "-d", "ssd=1000", "-c", "p:hit=1.5"], "hit ratio must lie in [0, 1], got 1.5"),
        (["-d", "hdd=0", "-d", "ssd=1000", "-c", "p:hit=0.5"], "must be > 0 IOPS"),
        (["-d", "hdd=-5", "-d", "ssd=1000", "-c", "p:hit=0.5"], "must be > 0 IOPS"),
        (["-d", "hdd", "-d", "ssd=1000", "-c", "p:hit=0.5"], "malformed device 'hdd'"),
        (["-d", "hdd=200", "-d", "ssd=1000", "-c", "p0.5"], "malformed client 'p0.5'"),
        (["-d", "hdd=200", "-d", "ssd=1000", "-c", "p:hit=abc"], "hit ratio 'abc' is not a number"),
        (["-d", "hdd=200", "-d", "ssd=1000", "-c", "p:hdd=0.5,tape=0.5"], "unknown device 'tape'"),
        (["-d", "hdd=200", "-d", "ssd=1000", "-c", "p:hdd=0.5,ssd=0.6"], "must sum to 1"),
        (["-d", "hdd=200", "-d", "ssd=1000", "-d", "nvme=9k", "-c", "p:hit=0.5"], "needs exactly 2 devices"),
        (["-d", "hdd=200", "-d", "ssd=1000", "-c", "p:hit=0.5", "-c", "p:hit=0.6"], "--client: client name 'p' used twice"),
        (["-d", "hdd=200", "-d", "hdd=1000", "-c", "p:hit=0.5"], "--device: device name 'hdd' used twice"),
        # A policy given twice once ended in an internal error (ValueError from polars' item()).
        (["-d", "hdd=200", "-d", "ssd=1000", "-c", "p:hit=0.5", "-p", "baa", "-p", "BAA"], "--policy: policy name 'baa' used twice"),
        (["-d", "hdd=200", "-d", "ssd=1000", "-c", "p:hit=0.5,weight=0"], "weight must be > 0"),
        (["-d", "hdd=200", "-d", "ssd=1000", "-c", "p:hit=0.5", "-p", "wfq"], "unknown policy 'wfq'"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    r = run_cli("allocate", *args)
    assert r.code == 2, (r.code, r.out, r.err)
    assert message in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert "Traceback" not in r.err


def test_help_has_an_example() -> None:
    r = run_cli("allocate", "--help")
    assert r.code == 0
    assert "Example:" in r.out and "--client" in r.out and "--json" in r.out


def test_library_errors_are_input_errors() -> None:
    with pytest.raises(InputError, match="at least one client"):
        allocate([Device("hdd", 1)], [])
    with pytest.raises(InputError, match="either hit=RATIO or per-device fractions"):
        parse_client("p:hit=0.5,ssd=0.5")


@settings(max_examples=150, deadline=None)
@given(
    cd=st.floats(10, 1e4),
    cs=st.floats(10, 1e5),
    hits=st.lists(st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0])), min_size=2, max_size=20),
)
def test_properties_through_python(cd: float, cs: float, hits: list[float]) -> None:
    """P1 and P3 end to end (the Rust tests check P1–P4 on 1200 instances)."""
    res = allocate([Device("hdd", cd), Device("ssd", cs)], [Client(f"c{i}", hit=h) for i, h in enumerate(hits)])
    baa = res.clients.filter(policy="baa")
    assert (baa["allocation_iops"] >= baa["fair_share_iops"] * (1 - 1e-7)).all()
    ratios = baa.with_columns((pl.col("allocation_iops") / pl.col("fair_share_iops")).alias("rho"))
    spread = ratios.group_by("bottleneck").agg((pl.col("rho").max() - pl.col("rho").min()) / pl.col("rho").max())
    assert (spread["rho"] <= 1e-9).all()
    util = res.devices.filter(policy="baa")["utilisation"]
    assert util.max() == pytest.approx(1.0, abs=1e-9) and util.max() <= 1 + 1e-9


def test_fig3_simulation_agrees_with_allocator() -> None:
    """Seed 004 Fig. 3 (HD 100, SSD 5000; h 0.5 / 0.99): the two-level scheduler's
    simulated throughputs are within 3 % of the allocator for FQ, DRF and BAA, and BAA
    keeps both devices busy."""
    from storqos.planning.alloc import simulate_tiered

    res = allocate([Device("hdd", 100), Device("ssd", 5000)], [Client("1", hit=0.5), Client("2", hit=0.99)])
    for pol in ("fq", "drf", "baa"):
        sim = simulate_tiered(100, 5000, [[(0, 0.5)], [(0, 0.99)]], pol, duration="220s", seed=3)
        sim = sim.filter(pl.col("start_s") >= 20)
        want = res.clients.filter(policy=pol)["allocation_iops"].to_list()
        for i, w in enumerate(want):
            got = sim.filter(client=i)["throughput_iops"].mean()
            assert abs(got / w - 1) < 0.03, (pol, i, got, w)
    baa = simulate_tiered(100, 5000, [[(0, 0.5)], [(0, 0.99)]], "baa", duration="220s", seed=3)
    assert baa["hdd_utilisation"].mean() > 0.97 and baa["ssd_utilisation"].mean() > 0.97


def test_fig5_throughput_falls_at_510s_and_recovers_at_600s() -> None:
    from storqos.planning.alloc import simulate_tiered

    ts = simulate_tiered(200, 3000, [[(0, 0.45), ("510s", 0.2)], [(0, 0.95)]], "baa",
                         window="60s", period="100s", duration="700s", sample="10s", seed=5)
    total = ts.group_by("start_s").agg(pl.col("throughput_iops").sum())

    def mean(a: float, b: float) -> float:
        return total.filter((pl.col("start_s") >= a) & (pl.col("start_s") < b))["throughput_iops"].mean()

    before, dip, after = mean(400, 500), mean(520, 600), mean(610, 700)
    assert dip < 0.9 * before, (before, dip)
    assert after > 1.1 * dip, (dip, after)
    # Both clients fall after the change.
    c = {i: ts.filter(client=i) for i in (0, 1)}
    for i in (0, 1):
        pre = c[i].filter((pl.col("start_s") >= 400) & (pl.col("start_s") < 500))["throughput_iops"].mean()
        post = c[i].filter((pl.col("start_s") >= 520) & (pl.col("start_s") < 600))["throughput_iops"].mean()
        assert post < pre, (i, pre, post)
