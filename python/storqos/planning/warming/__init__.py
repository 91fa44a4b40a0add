"""Predictive tier warming (seed 002, Xue et al., ICAC'14): learn when user intensity is
High or Low, predict the next change, and schedule bulky system work so that the fast
tier is warmed with the user working set *before* High arrives.

* :mod:`~storqos.planning.warming.intensity` — per-minute intensity, High/Low threshold;
* :mod:`~storqos.planning.warming.daymodel` — day classes (K-means + silhouette) and the
  hierarchical Markov model of state durations, online update;
* :mod:`~storqos.planning.warming.predict` — next change / residual Low time, held-out error;
* :mod:`~storqos.planning.warming.fasttier` — hit rate and slowdown (Eqs. 1–14), T_fast = C/F;
* :mod:`~storqos.planning.warming.policies` — user-only, feedback, prediction, oracle (Fig. 8);
* :mod:`~storqos.planning.warming.reqlevel` — request-level LRU check on the core's cache device;
* :mod:`~storqos.planning.warming.multiday` — request-level Figs. 14–15: every evaluated day of
  every policy's schedule replayed through the simulator with the cache device;
* :mod:`~storqos.planning.warming.workload` — the 35-day bi-modal synthetic workload;
* :func:`warm` — all of it on one trace (what ``storqos warm`` runs).
"""

from __future__ import annotations

from storqos.planning.warming.analysis import WarmReport, warm
from storqos.planning.warming.daymodel import DayModel
from storqos.planning.warming.fasttier import FastTier
from storqos.planning.warming.intensity import Intensity, per_minute
from storqos.planning.warming.multiday import RequestResult, evaluate_requests
from storqos.planning.warming.policies import POLICIES, Knobs, compare, evaluate
from storqos.planning.warming.predict import Predictor, change_time_errors, error_summary

__all__ = [
    "POLICIES",
    "DayModel",
    "FastTier",
    "Intensity",
    "Knobs",
    "Predictor",
    "RequestResult",
    "WarmReport",
    "change_time_errors",
    "compare",
    "error_summary",
    "evaluate",
    "evaluate_requests",
    "per_minute",
    "warm",
]
