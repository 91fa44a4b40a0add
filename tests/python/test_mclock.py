"""mClock from Python: the spec builder (storqos.specs.mclock_spec / policy_spec) and
the policy's promises through storqos.simulate on a constant-rate device of 1000 IOPS
with closed-loop tenants (the exhaustive checks are crates/storqos-core/tests/mclock.rs)."""

from __future__ import annotations

import pytest
from storqos import simulate
from storqos.errors import InputError
from storqos.sim import ClosedClient
from storqos.specs import POLICIES, mclock_spec, policy_spec

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
