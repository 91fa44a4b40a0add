"""Seed 003: the feedback-controlled leaky bucket (FCLB) over YFQ, from Python.

The policy, profiling, tuning and experiments run in the Rust core
(``storqos_core::fclb``); these modules build specs and wrap results in DataFrames:

- :mod:`storqos.model.fclb.spec`: the ``yfq`` and ``fclb`` policy specs and their workloads;
- :mod:`storqos.model.fclb.admission`: admission control (§2) and controller tuning (§3);
- :mod:`storqos.model.fclb.cases`: the paper's four experiment cases (§4.5).

This package module imports none of them, so the policy specs import without the rest.
"""
