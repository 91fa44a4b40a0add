"""Seed 002 §2–3.1: per-minute intensity, High/Low threshold, day classes by K-means +
silhouette (k ≤ sqrt(n/2)), hierarchical Markov model, online update, predictions of
the next change and of the residual Low time, error on held-out days."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from storqos.base.errors import InputError
from storqos.planning.warming.daymodel import DayModel, cluster_days, day_features, max_clusters
from storqos.planning.warming.intensity import DAY_MIN, HIGH, LOW, Intensity, per_minute
from storqos.planning.warming.predict import Predictor, change_time_errors, error_summary
from storqos.planning.warming.workload import LOW_LEVEL, WEEKEND_LEVEL, bimodal_days

#: The module-scoped fixtures cost seconds each: all of this module's tests go to one
#: pytest-xdist worker (make test runs `--dist loadgroup`), which computes them once.
pytestmark = pytest.mark.xdist_group("test_warming_model")

HP = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "hp-hplajw-1week" / "ajw.1week.srt"
PEAK_PER_MIN = 60.0  # bimodal_days(peak_rate=1 IOPS)
TRAIN = range(14)
TEST = range(14, 35)


@pytest.fixture(scope="module")
def synth():
    df, truth = bimodal_days(35, seed=0)
    intensity = per_minute(df)
    return intensity, truth, DayModel.fit(intensity, TRAIN)


def test_intensity_is_per_minute_and_aligned_to_days(synth):
    intensity, _, _ = synth
    assert intensity.days == 35 and len(intensity.per_min) == 35 * DAY_MIN
    # Monday 03:00 is Low, Monday 13:00 is High (Poisson around 4.8 and 60 per minute).
    assert intensity.per_min[3 * 60 : 4 * 60].mean() == pytest.approx(LOW_LEVEL * PEAK_PER_MIN, rel=0.3)
    assert intensity.per_min[13 * 60 : 14 * 60].mean() == pytest.approx(PEAK_PER_MIN, rel=0.1)


def test_threshold_separates_the_two_modes(synth):
    _, _, model = synth
    # Learned by 2-means on log intensity: between Low and the (lower) weekend High level.
    assert LOW_LEVEL * PEAK_PER_MIN < model.threshold < WEEKEND_LEVEL * PEAK_PER_MIN
    given = DayModel.fit(synth[0], TRAIN, threshold=20.0)
    assert given.threshold == 20.0
    with pytest.raises(InputError, match="threshold"):
        DayModel.fit(synth[0], TRAIN, threshold=0.0)


def test_days_cluster_into_weekdays_and_weekends(synth):
    intensity, _, model = synth
    assert max_clusters(14) == 2 and max_clusters(35) == 4 and max_clusters(7) == 1
    assert model.k == 2 and set(model.silhouettes) == {2}
    weekday_class = {model.labels[d] for d in TRAIN if d % 7 < 5}
    weekend_class = {model.labels[d] for d in TRAIN if d % 7 >= 5}
    assert len(weekday_class) == 1 and len(weekend_class) == 1 and weekday_class != weekend_class
    # On 35 days the silhouette search covers k = 2..4 and picks its best.
    labels, centres, scores = cluster_days(day_features(intensity))
    assert set(scores) == {2, 3, 4} and len(centres) == max(scores, key=scores.get)
    assert len(set(labels)) == len(centres)


def test_markov_levels_match_the_calendar(synth):
    _, truth, model = synth
    p = model.class_transitions()
    wd, we = model.labels[0], model.labels[5]
    assert np.allclose(p.sum(axis=1), 1.0)
    assert p[wd, wd] == pytest.approx(0.8) and p[wd, we] == pytest.approx(0.2)  # Mon..Fri → next
    assert p[we, wd] == pytest.approx(1 / 3)  # Sat→Sun, Sun→Mon, Sat→Sun over two weekends
    q = model.state_transitions()
    assert np.allclose(q.sum(axis=1), 1.0)
    # Within a class, High is followed by Low and vice versa.
    assert q[2 * wd + HIGH, 2 * wd + LOW] > 0.7 and q[2 * wd + HIGH, 2 * wd + HIGH] == 0
    # Weekday High periods last the working day, weekend ones are shorter.
    true_wd = np.median([60 * (e - s) for d, (s, e) in enumerate(truth[:14]) if d % 7 < 5])
    true_we = np.median([60 * (e - s) for d, (s, e) in enumerate(truth[:14]) if d % 7 >= 5])
    assert np.median(model.durations(HIGH, wd)) == pytest.approx(true_wd, abs=75)
    assert np.median(model.durations(HIGH, we)) == pytest.approx(true_we, abs=75)


def test_online_update_adds_days_without_reclustering(synth):
    intensity, _, _ = synth
    model = DayModel.fit(intensity, TRAIN)
    before = len([p for p in model.periods if not p.censored])
    classes = [model.update(intensity.day(d), intensity.weekday(d)) for d in range(14, 21)]
    assert classes == [model.labels[0]] * 5 + [model.labels[5]] * 2
    assert len(model.labels) == 21 and model.class_counts.sum() == 20
    assert len([p for p in model.periods if not p.censored]) >= before + 13
    with pytest.raises(InputError, match="1440 minutes"):
        model.update(np.zeros(10))


def test_prediction_error_on_days_not_used_for_training(synth):
    intensity, _, _ = synth
    model = DayModel.fit(intensity, TRAIN)
    errors = change_time_errors(model, intensity, TEST, online=True)
    s = error_summary(errors)
    # 21 held-out days, two changes a day (minus the censored last one).
    assert s["changes"] >= 40
    # Change hours jitter by ±0.3 h a day: errors of the order of that jitter.
    assert s["to_high_mean_abs_min"] < 45 and s["all_median_abs_min"] < 40
    assert (errors["predicted_min"] > errors["start_min"]).all()


def test_residual_low_time_at_night(synth):
    intensity, _, model = synth
    pred = Predictor(model, intensity)
    states = pred.states()
    day = 16  # Wednesday of the third week (held out)
    now = day * DAY_MIN + 3 * 60
    assert states[now] == LOW
    start = now - int(np.argmax(states[:now][::-1] == HIGH))
    actual = now + int(np.argmax(states[now:] == HIGH))
    assert pred.residual(LOW, start, now) == pytest.approx(actual - now, abs=60)
    assert pred.next_change(LOW, start, now) == pytest.approx(actual, abs=60)


@pytest.mark.skipif(not HP.exists(), reason="../shared/traces not present")
def test_hp_week_has_weekday_and_weekend_pattern():
    from storqos.traces import read_trace
    from storqos.traces.srt import trace_origin

    origin = trace_origin(HP)
    assert origin is not None and origin.strftime("%a %Y-%m-%d %H:%M") == "Sat 1992-05-30 00:03"
    intensity = per_minute(read_trace(HP), start_minute_of_day=origin.hour * 60 + origin.minute,
                           first_weekday=origin.weekday())
    assert intensity.days == 7 and intensity.weekday(0) == 5
    model = DayModel.fit(intensity, range(5))  # Sat..Wed
    assert model.k == 1  # 5 days: sqrt(5/2) < 2, a single class
    high = model.states(intensity.per_min).reshape(7, DAY_MIN).sum(axis=1)
    weekend, weekdays = high[:2], high[2:]
    assert weekend.max() < 0.5 * weekdays.min()  # the real weekend is quiet
    errors = change_time_errors(model, intensity, range(5, 7))
    s = error_summary(errors)
    assert s["changes"] >= 4 and np.isfinite(s["all_median_abs_min"])


def _calendar_days(n: int) -> Intensity:
    """Poisson days: 20 requests a minute 08:00-18:00 on weekdays and 11:00-16:00 at
    weekends, 0.5 otherwise; day 0 a Monday."""
    x = np.full(n * DAY_MIN, 0.5)
    for d in range(n):
        a, b = (8 * 60, 18 * 60) if d % 7 < 5 else (11 * 60, 16 * 60)
        x[d * DAY_MIN + a:d * DAY_MIN + b] = 20.0
    return Intensity(np.random.default_rng(0).poisson(x).astype(float))


def test_a_period_seen_from_inside_began_where_its_class_of_day_begins_them():
    model = DayModel.fit(_calendar_days(21))
    weekday, weekend = model.class_of_weekday(1), model.class_of_weekday(6)
    assert weekday != weekend
    # At 02:00 on a Tuesday, the night began Monday at 18:00: 8 h before; on a Monday,
    # Sunday's at 16:00: 10 h before (the detector's smoothing moves starts by minutes).
    assert model.began(LOW, 120, weekday, weekday) == pytest.approx(-480, abs=15)
    assert model.began(LOW, 120, weekday, weekend) == pytest.approx(-600, abs=15)
    # Without the classes, the nights of every day: most are weekday nights.
    assert model.began(LOW, 120) == pytest.approx(-480, abs=15)
    # At 12:00 on a weekday the High began at 08:00; no High covers 02:00.
    assert model.began(HIGH, 720, weekday, weekday) == pytest.approx(-240, abs=15)
    assert model.began(HIGH, 120) is None
