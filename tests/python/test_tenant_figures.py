"""The per-tenant figures a comparison reads: IOPS and percentiles by tenant, and
Ruemmler and Wilkes' demerit between two response-time distributions."""

from __future__ import annotations

import numpy as np
import polars as pl
from storqos.model.tenant_figures import demerit, per_tenant


def test_demerit_of_a_shifted_distribution_is_the_shift() -> None:
    rng = np.random.default_rng(1)
    a = rng.exponential(1e6, 5_000)
    # Every quantile moves by 250 µs: the horizontal distance is 250 µs everywhere.
    assert abs(demerit(a + 250_000, a) - 250_000) < 1e-6
    assert demerit(a, a) == 0.0


def test_demerit_is_the_rms_of_the_quantile_gaps() -> None:
    # Uniform on [0, 1) against uniform on [0, 2): the gap at fraction q is q, so the
    # demerit is sqrt(mean of q^2 over q in (0, 1)) = 1/sqrt(3).
    n = 200_000
    q = (np.arange(n) + 0.5) / n
    assert abs(demerit(q, 2 * q) - 1 / np.sqrt(3)) < 1e-3


def test_demerit_of_an_empty_side_is_zero() -> None:
    assert demerit(np.array([]), np.array([1.0, 2.0])) == 0.0


def test_per_tenant_counts_over_the_whole_run() -> None:
    # Tenant 0: 3 requests, tenant 1: 1; the run spans 0 .. 2 s, so 1.5 and 0.5 IOPS.
    log = pl.DataFrame({"tenant": [0, 0, 0, 1], "arrival_ns": [0, 500_000_000, 1_000_000_000, 0],
                        "finish_ns": [10_000_000, 520_000_000, 2_000_000_000, 40_000_000],
                        "response_ns": [10_000_000, 20_000_000, 1_000_000_000, 40_000_000]})
    got = per_tenant(log, ["web"])
    assert got["name"].to_list() == ["web", "1"]
    assert got["iops"].to_list() == [1.5, 0.5]
    assert got["p50_ns"].to_list() == [20_000_000, 40_000_000]
