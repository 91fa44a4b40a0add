"""One call from a trace to the learned model, the schedule and the policy comparison
(what ``storqos warm`` prints): train on the first days, evaluate on the rest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from storqos.base.errors import InputError
from storqos.planning.warming.daymodel import DayModel
from storqos.planning.warming.fasttier import FastTier
from storqos.planning.warming.intensity import DAY_MIN, Intensity
from storqos.planning.warming.policies import POLICIES, Knobs, PolicyResult, compare
from storqos.planning.warming.predict import change_time_errors, error_summary

#: Training days when the trace is long enough (the paper trains on two weeks, §4.2).
TRAIN_DAYS = 14
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def default_train_days(days: int) -> int:
    """Two weeks when at least 15 days exist, else all but the last two days (≥ 1)."""
    if days < 2:
        raise InputError(f"need at least 2 whole days of trace to train and evaluate, got {days}")
    return TRAIN_DAYS if days > TRAIN_DAYS else max(1, days - 2)


@dataclass
class WarmReport:
    """Model, prediction error, schedule and comparison of one run."""

    model: dict[str, Any]
    t_fast_s: float
    train_days: range
    test_days: range
    prediction_error: dict[str, float]
    results: dict[str, PolicyResult]
    first_weekday: int
    #: the model learned on the training days (``storqos warm --save`` writes it)
    day_model: DayModel | None = None

    def comparison(self) -> pl.DataFrame:
        """One row per policy (units in the column names)."""
        return pl.DataFrame([r.row() for r in self.results.values()])

    def schedule(self, policy: str = "prediction") -> list[dict[str, Any]]:
        """System-work start/stop and warm-up events, with day and time of day."""
        out = []
        for e in self.results[policy].schedule:
            m = e["minute"]
            d = m // DAY_MIN
            out.append({"day": d, "weekday": WEEKDAYS[(self.first_weekday + d) % 7],
                        "time": f"{(m % DAY_MIN) // 60:02d}:{m % 60:02d}", "event": e["event"]})
        return out

    def summary(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "t_fast_s": self.t_fast_s,
            "train_days": [self.train_days.start, self.train_days.stop - 1],
            "test_days": [self.test_days.start, self.test_days.stop - 1],
            "model": self.model,
            "prediction_error_min": self.prediction_error,
            "schedule": {p: self.schedule(p) for p in self.results if p != "user-only"},
            "comparison": self.comparison().to_dicts(),
        }


def warm(intensity: Intensity, tier: FastTier, *, train_days: int | None = None, threshold: float | None = None,
         knobs: Knobs | None = None, policies: tuple[str, ...] = POLICIES) -> WarmReport:
    """Learn on the first ``train_days`` days, report prediction error and compare the
    policies on the remaining days."""
    n = intensity.days
    if n < 2:  # said before any other day count: no --train-days fits a shorter trace
        default_train_days(n)
    k = default_train_days(n) if train_days is None else int(train_days)
    if not 1 <= k < n:
        raise InputError(f"training days must be in 1..{n - 1} for a {n}-day trace, got {k}", "--train-days")
    train, test = range(k), range(k, n)
    model = DayModel.fit(intensity, train, threshold=threshold)
    summary = model.summary()
    # A second copy learns online over the test days; the compared policies use the model as trained.
    errors = change_time_errors(DayModel.fit(intensity, train, threshold=model.threshold), intensity, test, online=True)
    results = compare(intensity, model, tier, test, knobs, policies)
    return WarmReport(summary, tier.t_fast_s, train, test, error_summary(errors), results, intensity.first_weekday,
                      model)


__all__ = ["TRAIN_DAYS", "WarmReport", "default_train_days", "warm"]
