"""Hierarchical Markov model of High/Low periods over days (seed 002, §3.1, Fig. 6).

**Day classes.** Each day is described by its 24 hourly mean log intensities. Days are
clustered with K-means; the number of clusters k is the one with the highest mean
silhouette s(i) = (b(i) − a(i)) / max{a(i), b(i)}, searched over 2 ≤ k ≤ ⌊sqrt(n/2)⌋
(n days; the paper's rule of thumb after Mardia [13]). When ⌊sqrt(n/2)⌋ < 2 (fewer than
8 days) there is a single class. The classes typically come out as weekdays and
weekends (Figs. 2–3).

**Upper level.** A Markov chain over day classes: P(class of day d+1 | class of day d),
estimated from consecutive training days (rows without data are uniform).

**Lower level.** Within each class, the High/Low periods are a semi-Markov chain: the
transition probabilities between (class, state) pairs at every state change, and the
empirical *duration* distribution of each state. Durations depend strongly on the time of
day a period starts (a Low period starting at 18:00 lasts the night, one starting at
12:30 is a lunch break), so every observed period keeps its start time of day and a
prediction uses the periods of the same class and state that started within
:data:`PHASE_WINDOW_MIN` of the same time of day (falling back to the whole class, then
to every class). A period belongs to the class of the day it starts in; the periods cut
by the start or end of the data are censored and not used as durations.

**Online update.** :meth:`DayModel.update` adds a new day without re-clustering: the
day joins the class of the nearest centroid, the centroid moves to the running mean, and
its periods and the class transition are counted (§3.1: "the model is updated
continuously as new data on user workload is collected").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from storqos.base.errors import InputError
from storqos.planning.warming.intensity import (
    DAY_MIN,
    HIGH,
    LOG_FLOOR,
    MIN_RUN_MIN,
    SMOOTH_MIN,
    Intensity,
    label_states,
    learn_threshold,
    runs,
)

#: Periods of the same class and state that started within this many minutes of the
#: same time of day inform a duration prediction.
PHASE_WINDOW_MIN = 90
#: Fewest matching periods before falling back to a wider set.
MIN_MATCHES = 2


def day_features(intensity: Intensity, days: range | list[int] | None = None) -> np.ndarray:
    """(days, 24) hourly mean log intensity: what days are clustered on."""
    h = intensity.hourly()
    if days is not None:
        h = h[list(days)]
    return np.log(h + LOG_FLOOR)


def max_clusters(n_days: int) -> int:
    """⌊sqrt(n/2)⌋, the paper's upper bound on the number of day classes."""
    return int(math.isqrt(n_days // 2)) if n_days >= 2 else 1


def cluster_days(features: np.ndarray, seed: int = 0) -> tuple[np.ndarray, np.ndarray, dict[int, float]]:
    """K-means over days with k chosen by silhouette, k ≤ sqrt(n/2).

    Returns (labels, centroids, {k: mean silhouette}).
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    n = len(features)
    kmax = min(max_clusters(n), n - 1)
    scores: dict[int, float] = {}
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for k in range(2, kmax + 1):
        km = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(features)
        if len(set(km.labels_)) < 2:
            continue
        s = float(silhouette_score(features, km.labels_))
        scores[k] = s
        if best is None or s > best[0]:
            best = (s, km.labels_.copy(), km.cluster_centers_.copy())
    if best is None:
        return np.zeros(n, dtype=int), features.mean(axis=0, keepdims=True), scores
    # Order classes by mean intensity, busiest first, so that labels are stable.
    labels, centres = best[1], best[2]
    order = np.argsort(-centres.mean(axis=1))
    remap = np.empty_like(order)
    remap[order] = np.arange(len(order))
    return remap[labels], centres[order], scores


@dataclass
class Period:
    """One High or Low period."""

    state: int
    start_min: int  # absolute minute
    duration_min: int
    day_class: int
    censored: bool = False
    next_class: int = -1  # class of the day after the start day (-1: unknown)

    @property
    def start_of_day(self) -> int:
        return self.start_min % DAY_MIN


@dataclass
class DayModel:
    """The learned model: threshold, day classes, both Markov levels."""

    threshold: float
    labels: list[int]
    centroids: np.ndarray
    silhouettes: dict[int, float]
    class_counts: np.ndarray  # (k, k) day-class transitions
    state_counts: np.ndarray  # (k*2, k*2) (class, state) transitions at state changes
    periods: list[Period] = field(default_factory=list)
    centroid_n: list[int] = field(default_factory=list)
    weekdays: list[int] = field(default_factory=list)
    smooth_min: int = SMOOTH_MIN
    min_run_min: int = MIN_RUN_MIN
    #: the per-minute series learned from (first training day onwards)
    series: np.ndarray = field(default_factory=lambda: np.zeros(0))
    first_day: int = 0

    # ---- learning -------------------------------------------------------------------
    @classmethod
    def fit(
        cls,
        intensity: Intensity,
        days: range | None = None,
        *,
        threshold: float | None = None,
        seed: int = 0,
        smooth_min: int = SMOOTH_MIN,
        min_run_min: int = MIN_RUN_MIN,
    ) -> DayModel:
        """Learn from ``days`` (default all) of ``intensity``; ``threshold`` (requests/min)
        overrides the learned High/Low threshold."""
        days = range(intensity.days) if days is None else days
        if len(days) < 1:
            raise InputError("need at least one day of data to learn from")
        if days.start < 0 or days.stop > intensity.days:
            raise InputError(f"training days {days.start}..{days.stop - 1} outside the {intensity.days} days of data")
        x = intensity.per_min[days.start * DAY_MIN : days.stop * DAY_MIN]
        thr = learn_threshold(x, smooth_min, seed) if threshold is None else float(threshold)
        if not thr > 0:
            raise InputError(f"threshold must be > 0 requests/min, got {thr}", "--threshold")
        labels, centres, scores = cluster_days(day_features(intensity, days), seed)
        k = len(centres)
        m = cls(
            threshold=thr,
            labels=[int(c) for c in labels],
            centroids=centres,
            silhouettes=scores,
            class_counts=np.zeros((k, k)),
            state_counts=np.zeros((2 * k, 2 * k)),
            centroid_n=[int((labels == c).sum()) for c in range(k)],
            weekdays=[intensity.weekday(d) for d in days],
            smooth_min=smooth_min,
            min_run_min=min_run_min,
            series=x.astype(float).copy(),
            first_day=days.start,
        )
        for a, b in zip(m.labels, m.labels[1:], strict=False):
            m.class_counts[a, b] += 1
        m._add_periods(x, days.start, m.labels)
        return m

    def states(self, per_min: np.ndarray) -> np.ndarray:
        """High/Low labels of a per-minute series with this model's threshold."""
        return label_states(per_min, self.threshold, window=self.smooth_min, min_run=self.min_run_min)

    def _add_periods(self, x: np.ndarray, first_day: int, day_labels: list[int]) -> None:
        s = self.states(x)
        starts, lengths = runs(s)
        prev: Period | None = None
        for i, (st, ln) in enumerate(zip(starts, lengths, strict=True)):
            di = min(st // DAY_MIN, len(day_labels) - 1)
            nxt = day_labels[di + 1] if di + 1 < len(day_labels) else -1
            p = Period(int(s[st]), int(first_day * DAY_MIN + st), int(ln), int(day_labels[di]),
                       i == 0 or i == len(starts) - 1, int(nxt))
            self.periods.append(p)
            if prev is not None:
                self.state_counts[2 * prev.day_class + prev.state, 2 * p.day_class + p.state] += 1
            prev = p

    def update(self, day_per_min: np.ndarray, weekday: int | None = None) -> int:
        """Add one new day (1440 per-minute counts) online; returns its class.

        The day joins the nearest class (no re-clustering), the class centroid moves to
        the running mean, the class transition is counted, and the periods are recounted
        (the period running over midnight into the new day is no longer censored).
        """
        if len(day_per_min) != DAY_MIN:
            raise InputError(f"a day has {DAY_MIN} minutes, got {len(day_per_min)}")
        f = np.log(day_per_min.reshape(24, 60).mean(axis=1) + LOG_FLOOR)
        c = self.classify(f)
        n = self.centroid_n[c] + 1
        self.centroids[c] += (f - self.centroids[c]) / n
        self.centroid_n[c] = n
        if self.labels:
            self.class_counts[self.labels[-1], c] += 1
        self.labels.append(c)
        self.weekdays.append(-1 if weekday is None else int(weekday))
        self.series = np.concatenate([self.series, np.asarray(day_per_min, dtype=float)])
        self.periods = []
        self.state_counts[:] = 0
        self._add_periods(self.series, self.first_day, self.labels)
        return c

    def classify(self, features: np.ndarray, hours: int = 24) -> int:
        """Nearest class centroid over the first ``hours`` hours of a day's features."""
        d = ((self.centroids[:, :hours] - features[:hours]) ** 2).sum(axis=1)
        return int(np.argmin(d))

    # ---- the two Markov levels ------------------------------------------------------
    @property
    def k(self) -> int:
        """Number of day classes."""
        return len(self.centroids)

    def class_transitions(self) -> np.ndarray:
        """(k, k) P(next day's class | this day's class)."""
        return _rows(self.class_counts)

    def state_transitions(self) -> np.ndarray:
        """(2k, 2k) P(next (class, state) | (class, state)) at a state change; index
        2·class + state (state 1 = High)."""
        return _rows(self.state_counts)

    def next_class(self, c: int) -> int:
        """Most likely class of the day after a day of class ``c``."""
        return int(np.argmax(self.class_transitions()[c]))

    def began(self, state: int, minute_of_day: int, today: int | None = None,
              yesterday: int | None = None) -> int | None:
        """Where a ``state`` period under way at ``minute_of_day`` typically began,
        in minutes from then (≤ 0): the median start, relative to that time of day, of
        the observed uncensored periods of ``state`` that covered it (a night's Low
        period seen at 02:00 began the evening before); None if none did. With the
        classes of ``today`` and ``yesterday``, only periods begun on a day of the class
        of the day they would have begun on count (at least :data:`MIN_MATCHES` of
        them, else all). For a watcher that starts inside a period and so did not see
        it begin."""
        every, matching = [], []
        for p in self.periods:
            if p.censored or p.state != state:
                continue
            ago = (minute_of_day - p.start_of_day) % DAY_MIN  # the latest start before it
            if ago < p.duration_min:
                every.append(-ago)
                if p.day_class == (yesterday if ago > minute_of_day else today):
                    matching.append(-ago)
        back = matching if len(matching) >= MIN_MATCHES else every
        return int(np.median(back)) if back else None

    def durations(
        self, state: int, day_class: int | None = None, start_of_day: int | None = None, next_class: int | None = None
    ) -> np.ndarray:
        """Observed (uncensored) durations (minutes) of ``state`` periods: of one class,
        followed by a day of class ``next_class``, starting within
        :data:`PHASE_WINDOW_MIN` of ``start_of_day``, for those given."""
        out = []
        for p in self.periods:
            if p.censored or p.state != state or (day_class is not None and p.day_class != day_class):
                continue
            if next_class is not None and p.next_class != next_class:
                continue
            if start_of_day is not None:
                d = abs(p.start_of_day - start_of_day)
                if min(d, DAY_MIN - d) > PHASE_WINDOW_MIN:
                    continue
            out.append(p.duration_min)
        return np.asarray(out, dtype=float)

    def duration_summary(self) -> list[dict[str, float | str]]:
        """Per class and state: periods, mean / median / p10 / p90 duration (min)."""
        rows = []
        for c in range(self.k):
            for s in (HIGH, 1 - HIGH):
                d = self.durations(s, c)
                rows.append({
                    "class": c,
                    "state": "High" if s == HIGH else "Low",
                    "periods": int(len(d)),
                    "mean_min": float(d.mean()) if len(d) else float("nan"),
                    "median_min": float(np.median(d)) if len(d) else float("nan"),
                    "p10_min": float(np.quantile(d, 0.1)) if len(d) else float("nan"),
                    "p90_min": float(np.quantile(d, 0.9)) if len(d) else float("nan"),
                })
        return rows

    def residual(
        self, state: int, day_class: int, start_of_day: int, elapsed: float, q: float = 0.5, next_class: int | None = None
    ) -> float:
        """Predicted remaining minutes of a ``state`` period that started at
        ``start_of_day`` (minute of day) in a day of ``day_class`` (followed by a day of
        ``next_class``) and has lasted ``elapsed`` minutes: the ``q``-quantile of
        D − elapsed over the matching observed durations D > elapsed (0 when none is that
        long: the change is overdue). Pools widen until :data:`MIN_MATCHES` match."""
        for pool in (
            self.durations(state, day_class, start_of_day, next_class),
            self.durations(state, day_class, start_of_day),
            self.durations(state, None, start_of_day),
            self.durations(state, day_class),
            self.durations(state),
        ):
            longer = pool[pool > elapsed]
            if len(longer) >= MIN_MATCHES:
                return float(np.quantile(longer - elapsed, q))
        return 0.0

    def class_of_weekday(self, weekday: int) -> int | None:
        """Most frequent class of training days falling on ``weekday`` (None if unseen)."""
        seen = [c for w, c in zip(self.weekdays, self.labels, strict=False) if w == weekday]
        return max(set(seen), key=seen.count) if seen else None

    def summary(self) -> dict[str, object]:
        """JSON-ready description: threshold, classes, transitions, durations."""
        return {
            "threshold_per_min": self.threshold,
            "classes": self.k,
            "silhouette_by_k": {str(k): v for k, v in self.silhouettes.items()},
            "days_per_class": [int(self.labels.count(c)) for c in range(self.k)],
            "weekdays_per_class": [sorted({w for w, c in zip(self.weekdays, self.labels, strict=False) if c == cl and w >= 0})
                                   for cl in range(self.k)],
            "class_transitions": self.class_transitions().tolist(),
            "state_durations": self.duration_summary(),
        }


def _rows(m: np.ndarray) -> np.ndarray:
    s = m.sum(axis=1, keepdims=True)
    n = m.shape[1]
    return np.where(s > 0, m / np.where(s > 0, s, 1), 1.0 / n)


__all__ = ["MIN_MATCHES", "PHASE_WINDOW_MIN", "DayModel", "Period", "cluster_days", "day_features", "max_clusters"]
