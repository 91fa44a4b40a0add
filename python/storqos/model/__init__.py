"""The policy code base as Python sees it: policy and device specs for the Rust core,
the simulator's front (:mod:`storqos.model.sim`), synthetic workloads, SLOs, device
profiles measured by ``storqos calibrate``, and the seeds' own models (the feedback-
controlled leaky bucket in :mod:`storqos.model.fclb`, SARC + AVATAR in
:mod:`storqos.model.twolevel`). Stands on :mod:`storqos.base` and :mod:`storqos.traces`."""

from __future__ import annotations

from storqos.base.lazy import submodules

__getattr__ = submodules(__name__)
