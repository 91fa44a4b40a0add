"""mClock from Python: the spec builder (storqos.model.specs.mclock_spec / policy_spec) and
the policy's promises through storqos.simulate on a constant-rate device of 1000 IOPS
with closed-loop tenants (the exhaustive checks are crates/storqos-core/tests/mclock.rs)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from conftest import assert_one_line_error, run_cli
from storqos import simulate
from storqos.base.errors import InputError
from storqos.model.sim import ClosedClient
from storqos.model.specs import POLICIES, mclock_spec, policy_spec

#: Simulated seconds per run.
SECONDS = 5


def rates(policy: dict, n: int) -> list[float]:
    clients = [ClosedClient(tenant=t, outstanding=8) for t in range(n)]
    res = simulate(None, policy, "constant", capacity=1000, closed=clients, until=f"{SECONDS}s")
    done = dict(zip(res.tenants["tenant"].to_list(), res.tenants["completed"].to_list(), strict=True))
    return [done.get(t, 0) / SECONDS for t in range(n)]


def test_spec_builder() -> None:
    assert "mclock" in POLICIES
    assert policy_spec("mclock", reservations="300,0", weights="1,2", limits="-,1.5k") == {
        "kind": "mclock", "reservations": [300.0, 0.0], "weights": [1.0, 2.0], "limits": [None, 1500.0]}
    assert mclock_spec(cost="512KiB", limit_break=True) == {"kind": "mclock", "cost": {"size": 524288}, "limit_break": True}
    with pytest.raises(InputError, match="reservations: malformed rate 'lots'"):
        mclock_spec(reservations=["lots"])
    with pytest.raises(InputError, match="reservations: every entry must be an IOPS value"):
        mclock_spec(reservations=[None])
    with pytest.raises(InputError, match="reservations\\[0\\] \\(900 IOPS\\) exceeds limits\\[0\\] \\(500 IOPS\\)"):
        simulate(None, mclock_spec(reservations=[900], limits=[500]), "constant", capacity=1000,
                 closed=[ClosedClient(outstanding=1, stop="1s")])


def test_reservation_weight_and_limit_through_the_simulator() -> None:
    # Reservation 400 against weights 1:1:10 (which alone would give it 83 IOPS).
    x = rates(mclock_spec(reservations=[400, 0, 0], weights=[1, 1, 10]), 3)
    assert abs(x[0] - 400) <= 4, x
    assert abs(x[2] / x[1] - 10) <= 0.5, x
    # Limit 200 on the heavier tenant; the other takes the rest.
    x = rates(mclock_spec(weights=[10, 1], limits=[200, None]), 2)
    assert x[0] <= 200.2 and abs(x[0] - 200) <= 2 and abs(x[1] - 800) <= 8, x
    # Limit break: alone, the limited tenant gets the idle device.
    assert rates(mclock_spec(limits=[200]), 1)[0] <= 200.2
    assert rates(mclock_spec(limits=[200], limit_break=True), 1)[0] >= 990


def test_reject_at_limit_in_the_simulator_and_the_cli(tmp_path: Path) -> None:
    assert mclock_spec(limits="200", at_limit="reject:5ms") == {
        "kind": "mclock", "limits": [200.0], "at_limit": "reject", "reject_threshold_ns": 5_000_000}
    for bad, msg in (("sometimes", "expected wait, allow, reject"), ("wait:5ms", "a threshold is for reject")):
        with pytest.raises(InputError, match=msg):
            mclock_spec(limits="200", at_limit=bad)
    # One request every ms for 2 s against a limit of 200 IOPS: with no threshold one in
    # five is admitted (its limit tag is due on arrival), 400 of 2,000; the rest are
    # refused at once instead of queueing for seconds.
    steady = pl.DataFrame({"arrival_ns": [i * 1_000_000 for i in range(2000)], "size": [4096] * 2000})
    res = simulate(steady, mclock_spec(limits=[200], at_limit="reject"), "constant", capacity=1000)
    assert res.rejected == {0: 1600}
    assert res.tenants["completed"].to_list() == [400] and res.tenants["rejected"].to_list() == [1600]
    assert res.tenants["max_ns"][0] == 1_000_000, "an admitted request waits for nothing but its service"
    wait = simulate(steady, mclock_spec(limits=[200]), "constant", capacity=1000)
    assert wait.rejected == {} and "rejected" not in wait.tenants.columns
    assert wait.tenants["max_ns"][0] > 5e9, "waiting at the limit: the last requests wait seconds"
    trace = tmp_path / "steady.csv"
    steady.with_columns(pl.lit(True).alias("is_read"), pl.lit(0).alias("offset")).write_csv(trace)
    r = run_cli("simulate", str(trace), "--format", "csv", "--policy", "mclock", "--limits", "200", "--at-limit", "reject",
                "--capacity", "1k", "--json")
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    assert summary["rejected"] == 1600 and summary["tenants"][0]["rejected"] == 1600
    assert_one_line_error(run_cli("simulate", str(trace), "--policy", "mclock", "--at-limit", "drop"),
                          "--at-limit", "expected wait, allow, reject")
