"""Planning from traces: capacity and power plans (workload shaping), allocation for SSD +
HDD (BAA), noisy-neighbour checks, ``storqos advise``'s search for the cheapest setting
that meets the SLOs, and tier warming's day models and policies. Stands on experiments."""

from __future__ import annotations

from storqos.base.lazy import submodules

__getattr__ = submodules(__name__)
