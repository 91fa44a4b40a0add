"""Seed 001's two-level scheduler from Python: SARC over AVATAR and its baselines.

The policies live in the Rust core (``storqos_core::twolevel``); these modules build
their specs and read their results:

- :mod:`storqos.model.twolevel.spec`: the policy specs from an SLO string, and seed 001's
  storage utility (an 8-disk striped array whose disks reorder their queues);
- :mod:`storqos.model.twolevel.analysis`: runs on that array, and the scheduler's gauges as
  time series (AVATAR's threshold L^O, SARC's credits, per-class low-level percentile
  and deadline misses);
- :mod:`storqos.model.twolevel.plots`: the paper-style figure of a comparison;
- :mod:`storqos.model.twolevel.workloads`: the E1 / E2 workloads and SLOs, scaled to the array.

This package module imports none of them, so the policy specs import without the rest.
"""
