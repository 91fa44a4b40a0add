"""Synthetic multi-day user workload with bi-modal diurnal and weekly intensity, like
seed 002's Figs. 2–4 (a web service's storage node: busy working hours, quiet nights,
quieter and shorter weekend days).

Each day is one :func:`storqos.model.synth.diurnal` generator (the Rust core's Poisson process
with an hourly profile) with its own profile: Low level :data:`LOW_LEVEL` × peak, High
level 1 on weekdays and :data:`WEEKEND_LEVEL` on weekends, between a start and an end
hour drawn around :data:`WEEKDAY_HOURS` / :data:`WEEKEND_HOURS` with a standard
deviation of :data:`JITTER_H` hours. Fractional start/end hours are honoured by giving
the boundary hour the mixed rate (the change falls inside that hour). Day 0 is a Monday.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from storqos.model.synth import diurnal

#: Low level relative to the weekday peak (the two modes of Fig. 4 ~ one decade apart).
LOW_LEVEL = 0.08
#: Weekend High level relative to the weekday peak (§3.1: weekend High differs).
WEEKEND_LEVEL = 0.5
#: Mean High period of a weekday (start, end hour).
WEEKDAY_HOURS = (8.0, 19.0)
#: Mean High period of a weekend day.
WEEKEND_HOURS = (10.5, 17.0)
#: Day-to-day standard deviation of the start and end hours.
JITTER_H = 0.3


def day_profile(start_h: float, end_h: float, high: float, low: float = LOW_LEVEL) -> list[float]:
    """Hourly profile: ``high`` inside [start_h, end_h), ``low`` elsewhere, mixed in the
    boundary hours by the fraction of the hour inside."""
    prof = []
    for h in range(24):
        inside = max(0.0, min(h + 1, end_h) - max(h, start_h))
        prof.append(low + (high - low) * inside)
    return prof


def bimodal_days(
    days: int = 35,
    peak_rate: float = 1.0,
    *,
    seed: int = 0,
    size: int = 4096,
    span: int | None = None,
) -> tuple[pl.DataFrame, list[tuple[float, float]]]:
    """``days`` days of Poisson arrivals (``peak_rate`` IOPS at weekday High).

    Returns the trace (canonical columns, day 0 = Monday 00:00) and the true High period
    (start hour, end hour) of every day.
    """
    rng = np.random.default_rng(seed)
    frames, truth = [], []
    for d in range(days):
        weekend = d % 7 >= 5
        mean = WEEKEND_HOURS if weekend else WEEKDAY_HOURS
        s, e = (float(np.clip(m + JITTER_H * rng.standard_normal(), 0.5, 23.5)) for m in mean)
        truth.append((s, e))
        prof = day_profile(s, e, WEEKEND_LEVEL if weekend else 1.0)
        df = diurnal(peak_rate, 1, hourly=prof, weekend_factor=1.0, size=size, span=span, seed=seed * 1000 + d)
        assert isinstance(df, pl.DataFrame)
        frames.append(df.with_columns(pl.col("arrival_ns") + d * 86_400_000_000_000))
    return pl.concat(frames), truth


__all__ = ["JITTER_H", "LOW_LEVEL", "WEEKDAY_HOURS", "WEEKEND_HOURS", "WEEKEND_LEVEL", "bimodal_days", "day_profile"]
