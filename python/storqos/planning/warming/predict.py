"""Predicting the next High/Low change and the residual Low time (seed 002, §3.1,
Fig. 7), and the error of those predictions on days not used for training.

At minute t the predictor knows the series up to t only. It needs:

1. the *class of the current day*: a training day's own class; otherwise the class the
   calendar suggests (the most frequent class of training days on the same weekday —
   our reading of the weekday/weekend hierarchy of Fig. 6) or, without a calendar, the
   upper Markov chain's most likely successor of the previous day's class;
2. the *current period*: its state and start (from the labelled past);
3. the *lower level*: the residual duration of that period given how long it has
   lasted, from the durations of periods of the same class, state and start time of day
   (:meth:`DayModel.residual`).

The predicted change is t + residual. The error reported is, for every state change on
the held-out days, (predicted − actual) change time, predicted at the start of the
period that ends there (Fig. 7 compares exactly these: "the points where the model
detects a change" vs "the actual state changes").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from storqos.planning.warming.daymodel import DayModel
from storqos.planning.warming.intensity import DAY_MIN, Intensity, runs

#: Quantile of the residual-duration distribution used for a point prediction.
POINT_QUANTILE = 0.5


@dataclass
class Predictor:
    """A :class:`DayModel` applied to one intensity series (possibly beyond training)."""

    model: DayModel
    intensity: Intensity

    def day_class(self, day: int) -> int:
        """Class of ``day``: learned for training days, else predicted (calendar, then
        the class chain from the previous day)."""
        i = day - self.model.first_day
        if 0 <= i < len(self.model.labels):
            return self.model.labels[i]
        c = self.model.class_of_weekday(self.intensity.weekday(day))
        if c is not None:
            return c
        return self.model.next_class(self.day_class(day - 1)) if day > 0 else 0

    def states(self) -> np.ndarray:
        """High/Low labels of the whole series (the "actual" states)."""
        return self.model.states(self.intensity.per_min)

    def residual(self, state: int, period_start: int, now: int, q: float = POINT_QUANTILE) -> float:
        """Predicted minutes from ``now`` until the period (``state``, started at absolute
        minute ``period_start``) ends."""
        day = period_start // DAY_MIN
        return self.model.residual(
            state, self.day_class(day), period_start % DAY_MIN, now - period_start, q, self.day_class(day + 1)
        )

    def next_change(self, state: int, period_start: int, now: int, q: float = POINT_QUANTILE) -> float:
        """Predicted absolute minute of the next state change."""
        return now + self.residual(state, period_start, now, q)


def change_time_errors(
    model: DayModel, intensity: Intensity, test_days: range, *, online: bool = True, q: float = POINT_QUANTILE
) -> pl.DataFrame:
    """Predicted vs actual change times on ``test_days`` (not used for training).

    Every period that starts and ends inside the test days is predicted at its start
    (elapsed 0). With ``online``, each test day is added to the model (:meth:`DayModel.update`)
    after its changes have been predicted. Columns: ``day``, ``state`` (of the period
    that ends), ``start_min``, ``actual_min``, ``predicted_min``, ``error_min``
    (predicted − actual, minutes).
    """
    p = Predictor(model, intensity)
    s = p.states()
    starts, lengths = runs(s)
    rows = []
    for day in test_days:
        lo, hi = day * DAY_MIN, (day + 1) * DAY_MIN
        for st, ln in zip(starts, lengths, strict=True):
            end = st + ln
            if not (lo <= end < hi) or st < test_days.start * DAY_MIN or end >= len(s):
                continue
            pred = p.next_change(int(s[st]), int(st), int(st), q)
            rows.append({"day": day, "state": "High" if s[st] else "Low", "start_min": int(st),
                         "actual_min": int(end), "predicted_min": float(pred), "error_min": float(pred - end)})
        if online:
            model.update(intensity.day(day), intensity.weekday(day))
    return pl.DataFrame(rows, schema={"day": pl.Int64, "state": pl.Utf8, "start_min": pl.Int64, "actual_min": pl.Int64,
                                      "predicted_min": pl.Float64, "error_min": pl.Float64})


def error_summary(errors: pl.DataFrame) -> dict[str, float]:
    """Mean / median / p90 absolute error (minutes) and the bias, over all changes and
    for Low→High changes (the ones a warm-up must anticipate)."""
    out: dict[str, float] = {"changes": float(errors.height)}
    for name, df in (("all", errors), ("to_high", errors.filter(pl.col("state") == "Low"))):
        e = df["error_min"].to_numpy()
        if len(e) == 0:
            continue
        a = np.abs(e)
        out |= {f"{name}_mean_abs_min": float(a.mean()), f"{name}_median_abs_min": float(np.median(a)),
                f"{name}_p90_abs_min": float(np.quantile(a, 0.9)), f"{name}_bias_min": float(e.mean())}
    return out


__all__ = ["POINT_QUANTILE", "Predictor", "change_time_errors", "error_summary"]
