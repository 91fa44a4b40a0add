"""Tier warming live (seed 002): one day of the synthetic diurnal
workload, compressed into 2.5 s, replayed through `storqos serve` with
examples/gateway/warming.toml (a tiered export and the scrub's and warm-up's exports
sharing its block map) and through its simulated twin. Both take the same schedule
(`storqos.live.tier_warming.schedule`: the warming package's planner, then its request
streams); the ordering of user p90 the twin gives is the one the live run must show."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, assert_one_line_error, run_cli, until_calm
from storqos.live.tier_warming import DayReplay, live, read_gateway, schedule, simulated

EXAMPLE = REPO / "examples" / "gateway" / "warming.toml"
#: The twin's p90 of policy b at least this many times policy a's: a promised "a below b".
STRICT = 2.0
#: At most this fraction of a live day's requests issued late (> 1 ms after their time).
LATE = 0.01


def _folder(tmp_path: Path) -> Path:
    cfg = tmp_path / "warming.toml"
    cfg.write_text(EXAMPLE.read_text().replace('listen = "127.0.0.1:10809"', 'listen = "127.0.0.1:0"'))
    for name, size in (("data-fast.img", 90 * 4096), ("data.img", 51 * 90 * 4096)):
        with open(tmp_path / name, "wb") as f:
            f.truncate(size)
    return cfg


@pytest.mark.alone
def test_live_p90_order_matches_the_twin_on_the_same_schedule(tmp_path: Path) -> None:
    pytest.importorskip("nbd")
    desc = DayReplay(config=_folder(tmp_path), day_s=2.5)
    gw = read_gateway(desc)
    sched = schedule(desc, gw)
    on = sched.system_on
    # The planner's schedules: prediction stops the scrub before the morning's High,
    # feedback only once High is detected, the oracle exactly T_fast before it.
    first_stop = {p: int(np.flatnonzero(~on[p][300:])[0]) + 300 for p in ("feedback", "prediction", "oracle")}
    assert first_stop["prediction"] < first_stop["feedback"] and first_stop["oracle"] < first_stop["feedback"]
    assert on["user-only"].sum() == 0 < on["prediction"].sum() < on["feedback"].sum()
    sim = simulated(gw, sched)
    # A replay the machine held up issues requests late and bunched, and their waits
    # land in the users' p90 (6.6 % of prediction's requests late gave it 1.42 ms, where
    # on time it reads 0.23-0.28 ms): such a day is replayed again.
    got = until_calm(lambda: live(gw, sched, desc), lambda r: max(d.late_fraction for d in r.values()) <= LATE)
    for p in sched.streams:  # every request of the same streams was served, live and simulated
        for k in ("user_requests", "scrub_requests", "warm_requests"):
            assert getattr(got[p], k) == getattr(sim[p], k), (p, k)
    promised = [(a, b) for a in sim for b in sim if sim[b].p90_ms >= STRICT * sim[a].p90_ms]
    assert {("prediction", "feedback"), ("oracle", "feedback"), ("user-only", "feedback")} <= set(promised)
    table = {p: (round(sim[p].p90_ms, 3), round(got[p].p90_ms, 3)) for p in sim}
    for a, b in promised:
        assert got[a].p90_ms < got[b].p90_ms, f"live p90 of {a} not below {b}'s: (simulated, live) ms {table}"


def test_a_shared_tier_is_checked_in_one_line(tmp_path: Path) -> None:
    cfg = _folder(tmp_path)
    text = cfg.read_text()
    cases = [
        (text.replace('shares = "data"              # the same', 'shares = "dta"               # the same'),
         "shares", "no earlier [[export]] named 'dta'"),
        (text.replace('path = "data.img"\ntenant = "scrub"', 'path = "data-fast.img"\ntenant = "scrub"'),
         "shares", "is not the file of export 'data'"),
    ]
    for i, (bad, *needles) in enumerate(cases):
        assert bad != text
        f = tmp_path / f"bad{i}.toml"
        f.write_text(bad)
        assert_one_line_error(run_cli("serve", "--config", str(f), "--check"), *needles)
