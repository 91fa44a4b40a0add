"""Seed 002 §3.2–4.2: the fast-tier model (Eqs. 1–14) against a request-level LRU
simulation, the per-minute planner, and the four policies on the 35-day synthetic
workload (train days 0–13, evaluate 14–34): the claims of Figs. 14 and 15 are
checked at request level (all 21 evaluated days replayed through the simulator with
the cache-tier device, :mod:`storqos.planning.warming.multiday`)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import shared_traces
from storqos.base.errors import InputError
from storqos.planning.warming.daymodel import DayModel
from storqos.planning.warming.fasttier import FastTier
from storqos.planning.warming.intensity import per_minute
from storqos.planning.warming.multiday import build_streams, evaluate_requests, setup_for
from storqos.planning.warming.policies import GRID_S, Knobs, compare, evaluate
from storqos.planning.warming.reqlevel import SYSTEM, USER, WARM, WARM_CHUNK, CacheSetup, hit_rate_check
from storqos.planning.warming.workload import bimodal_days

#: The module-scoped fixtures cost seconds each: all of this module's tests go to one
#: pytest-xdist worker (make test runs `--dist loadgroup`), which computes them once.
pytestmark = pytest.mark.xdist_group("test_warming_policies")

GIB, MIB = 1 << 30, 1 << 20
TRAIN, TEST = range(14), range(14, 35)


def test_fast_tier_equations():
    t = FastTier(64 * GIB, 200 * MIB, r_fast_s=0.0002, r_slow_s=0.004, h0=0.9)
    assert t.t_fast_s == pytest.approx(64 * 1024 / 200)  # Eq. 7: 327.68 s
    assert t.hit_rate(0.0) == pytest.approx(0.9)  # Eq. 2 at S = 0
    assert t.hit_rate(t.s_max) == pytest.approx(0.0)  # Eq. 5: all slow
    for s in np.linspace(0, t.s_max, 7):  # Eq. 1
        h = t.hit_rate(s)
        assert t.service_time(s) == pytest.approx(h * t.r_fast_s + (1 - h) * t.r_slow_s)
    # Eqs. 3/6/9: S reaches S_max after exactly T_fast of system work; Eqs. 10–12: back in T_fast.
    up = t.trajectory(np.ones(100, bool), t.t_fast_s / 100)
    assert np.allclose(np.diff(up), t.s_max / 100) and up[-1] == pytest.approx(t.s_max)
    down = t.trajectory(np.zeros(100, bool), t.t_fast_s / 100, s0=t.s_max)
    assert down[-1] == pytest.approx(0.0) and down[49] == pytest.approx(t.s_max / 2)
    with pytest.raises(InputError, match="--warm-rate"):
        FastTier(GIB, 0)


def test_model_matches_request_level_lru_simulation():
    # LRU cache device in the Rust core: system work with a 50x larger working set evicts
    # the user set; the sequential warm-up brings it back, both in C/F = 60 s.
    d = hit_rate_check(CacheSetup(), user_iops=10, window_s=10)
    err = (d["measured_hit"] - d["model_hit"]).abs()
    assert err.max() < 0.15 and err.mean() < 0.05
    h = dict(zip(d["t_s"].to_list(), d["measured_hit"].to_list(), strict=True))
    assert h[50.0] == 1.0 and h[110.0] < 0.25  # warm, then nearly cold after T_fast
    assert h[180.0] > 0.95  # warm again T_fast after system work stopped


@pytest.fixture(scope="module")
def synth():
    df, _ = bimodal_days(35, seed=0)
    intensity = per_minute(df)
    return intensity, DayModel.fit(intensity, TRAIN)


@pytest.fixture(scope="module")
def at60(synth):
    intensity, model = synth
    return compare(intensity, model, FastTier.from_warmup(3600), TEST)


@pytest.fixture(scope="module")
def req60(synth):
    # Request level: 21 days x (feedback, prediction, oracle), one simulate each.
    intensity, model = synth
    df, _ = bimodal_days(35, seed=0)
    return evaluate_requests(intensity, df, model, 3600, TEST, policies=("feedback", "prediction", "oracle"))


def test_prediction_beats_feedback_and_is_close_to_oracle_at_60_min_request_level(req60):
    # The claim of Figs. 14 and 15, on the request-level replay of days 14-34 with T_fast = 60 min.
    pred, fb, oracle = req60["prediction"], req60["feedback"], req60["oracle"]
    assert pred.user_requests == fb.user_requests == oracle.user_requests > 500_000
    assert pred.p90_ms <= fb.p90_ms
    assert pred.p90_ms <= 1.2 * oracle.p90_ms
    assert pred.system_requests > 0 and pred.system_gib > 0
    # Fig. 14: feedback runs system work longer (it stops only after High is seen) and
    # pays with a colder tier when the users come.
    assert fb.system_requests > pred.system_requests
    assert fb.hit_fraction < pred.hit_fraction < oracle.hit_fraction + 0.01
    # Fig. 15: the CDFs are ordered at the tail (from the user tenant's per-request log).
    i = int(np.searchsorted(GRID_S, 2e-3))
    assert pred.cdf[i] >= fb.cdf[i]
    assert abs(pred.cdf[-1] - 1) < 1e-9


def test_request_level_benefit_grows_with_warm_up_time(synth, req60):
    intensity, model = synth
    df, _ = bimodal_days(35, seed=0)
    small = evaluate_requests(intensity, df, model, 60, TEST, policies=("feedback", "prediction"))
    gap_1 = small["feedback"].p90_ms - small["prediction"].p90_ms
    gap_60 = req60["feedback"].p90_ms - req60["prediction"].p90_ms
    assert gap_60 > 5 * max(gap_1, 0.001)  # §4.2: "the larger the fast tier, the higher the benefits"


def test_request_streams_follow_the_schedule():
    setup = setup_for(600)  # T_fast = 10 min: 150 chunks of 16 KiB
    chunks = setup.capacity_bytes // WARM_CHUNK
    assert chunks == 150 and setup.capacity_bytes / setup.warm_rate_bps == pytest.approx(600)
    on = np.zeros(120, bool)
    on[10:30] = True  # system work 10-30, then a 90-minute pause
    on[100:105] = True  # a short burst, then 15 minutes: the warm-up is cut at the end
    users = np.arange(0, 120 * 60_000_000_000, 7_000_000_000)
    s = build_streams(setup, users, on, seed=3)
    t0 = chunks * int(WARM_CHUNK / setup.warm_rate_bps * 1e9)
    minute = (s["arrival_ns"].to_numpy() - t0) // 60_000_000_000
    ten = s["tenant"].to_numpy()
    assert set(minute[ten == SYSTEM]) <= set(np.flatnonzero(on))
    assert (ten == SYSTEM).sum() == pytest.approx(25 * 60, rel=0.15)  # 1 IOPS while on
    assert (ten == USER).sum() == len(users)
    warm = minute[(ten == WARM) & (minute >= 0)]
    assert ((warm >= 30) & (warm < 40)).sum() == chunks  # a full pass takes T_fast after the stop at 30
    assert ((warm >= 105) & (warm < 120)).sum() == chunks  # and again after 105 (15 min >= 10 min)
    assert not ((warm >= 40) & (warm < 100)).any()
    assert (minute[ten == WARM] < 0).sum() == chunks  # the pre-warm pass


def test_planner_orders_the_policies_like_the_request_level_runs(synth, at60, req60):
    # The per-minute planner (Eqs. 1-14) that decides the schedules agrees with the
    # request-level ordering, and its benefit also grows with the warm-up time.
    pred, fb, oracle, user = at60["prediction"], at60["feedback"], at60["oracle"], at60["user-only"]
    assert user.system_work_h == 0 and user.p90_ms < oracle.p90_ms <= pred.p90_ms <= fb.p90_ms
    assert fb.system_work_h > pred.system_work_h > 0 and fb.cold_fraction > pred.cold_fraction
    for p in ("feedback", "prediction", "oracle"):  # the replay ran exactly the planned minutes
        assert req60[p].system_on_h == pytest.approx(at60[p].system_on_h)
    intensity, model = synth
    small = compare(intensity, model, FastTier.from_warmup(60), TEST, policies=("feedback", "prediction"))
    assert fb.p90_ms - pred.p90_ms > 5 * max(small["feedback"].p90_ms - small["prediction"].p90_ms, 0.001)


def test_knobs_trade_system_work_for_user_latency(synth, at60):
    intensity, model = synth
    tier = FastTier.from_warmup(3600)
    days = range(14, 21)
    base = evaluate("feedback", intensity, model, tier, days)
    low_util = evaluate("feedback", intensity, model, tier, days, Knobs(util_limit=0.4))
    assert low_util.system_work_h < base.system_work_h
    in_high = evaluate("feedback", intensity, model, tier, days, Knobs(h_high=(0.5, 0.9)))
    assert in_high.system_work_h > base.system_work_h and in_high.p90_ms >= base.p90_ms
    with pytest.raises(InputError, match="h_low"):
        Knobs(h_low=(0.8, 0.2))
    with pytest.raises(InputError, match="unknown policy"):
        evaluate("lottery", intensity, model, tier, days)


def test_prediction_has_the_tier_warm_when_high_arrives(synth, at60):
    intensity, model = synth
    states = model.states(intensity.per_min)
    lo = TEST.start * 1440
    highs = [t for t in range(lo + 1, TEST.stop * 1440) if states[t] == 1 and states[t - 1] == 0]
    assert len(highs) == len(TEST)  # one Low→High change a day
    hit = {p: np.mean([at60[p].hit_rate[t - lo] for t in highs]) for p in ("feedback", "prediction", "oracle")}
    assert hit["oracle"] > 0.99 and hit["prediction"] > 0.75 and hit["feedback"] < 0.05
    pred = at60["prediction"]
    kinds = [e["event"] for e in pred.schedule]
    assert kinds.count("system start") >= len(TEST) and "warm-up done" in kinds


@pytest.mark.skipif(shared_traces() is None, reason="../shared/traces not present")
def test_hp_week_request_level_at_60_min():
    # HP hplajw: train Sat-Wed, replay Thu-Fri request by request (the trace's own arrivals).
    from storqos.traces import read_trace
    from storqos.traces.srt import trace_origin

    srt = shared_traces() / "hp-hplajw-1week" / "ajw.1week.srt"
    o = trace_origin(srt)
    df = read_trace(srt)
    smd = o.hour * 60 + o.minute
    hp = per_minute(df, start_minute_of_day=smd, first_weekday=o.weekday())
    r = evaluate_requests(hp, df, DayModel.fit(hp, range(5)), 3600, range(5, 7), start_minute_of_day=smd)
    assert r["user-only"].user_requests == int(hp.per_min[5 * 1440 : 7 * 1440].sum())
    assert r["prediction"].p90_ms <= r["feedback"].p90_ms and r["prediction"].system_requests > 0
    assert r["user-only"].system_requests == 0 and r["user-only"].hit_fraction == 1.0
