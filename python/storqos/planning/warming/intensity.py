"""Per-minute user intensity and its High/Low states (seed 002, §2 and §3.1).

The paper works on the arrival intensity "at a granularity of a minute" (Fig. 4), whose
empirical density is bi-modal: the user traffic alternates between a *High* and a *Low*
state. The threshold between them "can be discovered via statistical analysis.
Alternatively, the threshold could be user-defined" (§3.1). Our statistical analysis:
K-means with two clusters on the log of the smoothed per-minute intensity (log because
the two modes differ by an order of magnitude); the threshold is the geometric midpoint
of the two centres.

States are labelled on the intensity smoothed by a centred moving average of
:data:`SMOOTH_MIN` minutes (the paper plots 10-minute and hourly averages, Figs. 2–3),
then runs shorter than :data:`MIN_RUN_MIN` are merged into their neighbours so that a
short lull inside a busy day is not a Low period (§1: "avoiding instability due to
short-lived, low user intensity"). An online detector (what the feedback policy sees)
uses a *trailing* mean of :data:`DETECT_MIN` minutes instead: it knows only the past.

Minute 0 of a series is local midnight of day 0 (traces that start later are padded
with zero minutes in front); ``first_weekday`` (0 = Monday) places the days in the week.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from storqos.base.errors import InputError

#: Minutes per day.
DAY_MIN = 1440
#: Centred moving average (minutes) used to label the training states.
SMOOTH_MIN = 31
#: Runs shorter than this (minutes) are merged into the surrounding state.
MIN_RUN_MIN = 30
#: Trailing window (minutes) of the online High/Low detector (the feedback policy's).
DETECT_MIN = 10
#: Added to intensities before the log (requests/min), so that idle minutes are finite.
LOG_FLOOR = 0.1

HIGH = 1
LOW = 0


@dataclass
class Intensity:
    """Requests per minute, minute 0 = midnight of day 0."""

    per_min: np.ndarray
    first_weekday: int = 0

    @property
    def days(self) -> int:
        """Whole days in the series."""
        return len(self.per_min) // DAY_MIN

    def day(self, d: int) -> np.ndarray:
        """The 1440 per-minute counts of day ``d``."""
        return self.per_min[d * DAY_MIN : (d + 1) * DAY_MIN]

    def weekday(self, d: int) -> int:
        """Day of week of day ``d`` (0 = Monday ... 6 = Sunday)."""
        return (self.first_weekday + d) % 7

    def hourly(self) -> np.ndarray:
        """(days, 24) mean requests/min per hour."""
        return self.per_min[: self.days * DAY_MIN].reshape(self.days, 24, 60).mean(axis=2)


def per_minute(
    trace: pl.DataFrame, *, start_minute_of_day: int = 0, first_weekday: int = 0, tenant: int | None = None
) -> Intensity:
    """Per-minute arrival counts of a canonical trace (``arrival_ns`` rebased to 0).

    ``start_minute_of_day``: local time of the first arrival in minutes after midnight
    (the series is padded in front so that minute 0 is midnight). The last partial day
    is padded with zero minutes. ``tenant`` keeps one tenant only.
    """
    if "arrival_ns" not in trace.columns:
        raise InputError("trace has no arrival_ns column")
    if tenant is not None and "tenant" in trace.columns:
        trace = trace.filter(pl.col("tenant") == tenant)
    if trace.height == 0:
        raise InputError("trace has no requests to build an intensity series from")
    if not 0 <= start_minute_of_day < DAY_MIN:
        raise InputError(f"start minute of day must be in [0, {DAY_MIN}), got {start_minute_of_day}")
    minute = trace["arrival_ns"].to_numpy() // 60_000_000_000 + int(start_minute_of_day)
    counts = np.bincount(minute.astype(np.int64))
    days = -(-len(counts) // DAY_MIN)
    out = np.zeros(days * DAY_MIN, dtype=np.float64)
    out[: len(counts)] = counts
    return Intensity(out, int(first_weekday) % 7)


def smooth(x: np.ndarray, window: int = SMOOTH_MIN) -> np.ndarray:
    """Centred moving average (edges averaged over the part of the window inside)."""
    if window <= 1:
        return x.astype(float)
    k = np.ones(window)
    num = np.convolve(x, k, mode="same")
    den = np.convolve(np.ones_like(x, dtype=float), k, mode="same")
    return num / den


def trailing(x: np.ndarray, window: int = DETECT_MIN) -> np.ndarray:
    """Mean of the last ``window`` minutes up to and including each minute (causal)."""
    c = np.concatenate([[0.0], np.cumsum(x, dtype=float)])
    i = np.arange(1, len(x) + 1)
    lo = np.maximum(0, i - window)
    return (c[i] - c[lo]) / (i - lo)


def learn_threshold(per_min: np.ndarray, window: int = SMOOTH_MIN, seed: int = 0) -> float:
    """High/Low threshold (requests/min): two-cluster K-means on log smoothed intensity,
    geometric midpoint of the centres."""
    from sklearn.cluster import KMeans

    z = np.log(smooth(per_min, window) + LOG_FLOOR).reshape(-1, 1)
    if np.ptp(z) == 0:
        raise InputError("intensity is constant: no High and Low states to learn; give --threshold")
    km = KMeans(n_clusters=2, n_init=10, random_state=seed).fit(z)
    lo, hi = sorted(float(c) for c in km.cluster_centers_.ravel())
    return float(np.exp((lo + hi) / 2) - LOG_FLOOR)


def merge_short_runs(states: np.ndarray, min_run: int = MIN_RUN_MIN) -> np.ndarray:
    """Flip interior runs shorter than ``min_run`` to the surrounding state, shortest first."""
    s = states.copy()
    while True:
        starts, lengths = runs(s)
        if len(starts) < 3:
            return s
        inner = lengths[1:-1]
        j = int(np.argmin(inner)) + 1
        if lengths[j] >= min_run:
            return s
        s[starts[j] : starts[j] + lengths[j]] = 1 - s[starts[j]]


def runs(states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start index and length of every run of equal values."""
    if len(states) == 0:
        return np.zeros(0, int), np.zeros(0, int)
    change = np.flatnonzero(np.diff(states)) + 1
    starts = np.concatenate([[0], change])
    lengths = np.diff(np.concatenate([starts, [len(states)]]))
    return starts, lengths


def label_states(per_min: np.ndarray, threshold: float, *, window: int = SMOOTH_MIN, min_run: int = MIN_RUN_MIN) -> np.ndarray:
    """High (1) / Low (0) per minute: smoothed intensity ≥ threshold, short runs merged."""
    return merge_short_runs((smooth(per_min, window) >= threshold).astype(np.int8), min_run)


def detect_states(per_min: np.ndarray, threshold: float, window: int = DETECT_MIN) -> np.ndarray:
    """Online (causal) High/Low detection: trailing mean ≥ threshold."""
    return (trailing(per_min, window) >= threshold).astype(np.int8)


__all__ = [
    "DAY_MIN",
    "DETECT_MIN",
    "HIGH",
    "LOW",
    "MIN_RUN_MIN",
    "SMOOTH_MIN",
    "Intensity",
    "detect_states",
    "label_states",
    "learn_threshold",
    "merge_short_runs",
    "per_minute",
    "runs",
    "smooth",
    "trailing",
]
