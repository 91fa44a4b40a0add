"""simulate(): the Python face of the core event loop."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
import storqos
import storqos.traces
from storqos.base.errors import InputError, InputWarning


def _trace(times_ms: list[float], tenants: list[int] | None = None) -> pl.DataFrame:
    n = len(times_ms)
    return pl.DataFrame(
        {
            "arrival_ns": [int(t * 1e6) for t in times_ms],
            "is_read": [True] * n,
            "offset": [0] * n,
            "size": [4096] * n,
            "tenant": tenants or [0] * n,
        },
        schema={"arrival_ns": pl.Int64, "is_read": pl.Boolean, "offset": pl.UInt64, "size": pl.UInt32, "tenant": pl.UInt32},
    )


def test_lindley_by_hand() -> None:
    res = storqos.simulate(_trace([0, 0, 5, 40]), "fcfs", "constant", capacity=100, keep_requests=True)
    assert res.requests is not None
    assert res.requests["finish_ns"].to_list() == [10_000_000, 20_000_000, 30_000_000, 50_000_000]
    assert res.requests["response_ns"].to_list() == [10_000_000, 20_000_000, 25_000_000, 10_000_000]
    assert res.total["completed"][0] == 4
    assert res.unfinished == 0


def test_same_result_as_the_lindley_recursion() -> None:
    """FCFS at one 1 ms server is finish_i = max(arrival_i, finish_{i-1}) + 1 ms, computed
    here in NumPy (a running maximum of arrival_i - i·s, plus (i+1)·s)."""
    tr = storqos.model.synth.poisson(900, count=200_000, seed=3)
    res = storqos.simulate(tr, "fcfs", "constant", capacity=1000)
    a = tr["arrival_ns"].to_numpy().astype(np.int64)
    k = np.arange(a.size, dtype=np.int64) * 1_000_000
    fin = np.maximum.accumulate(a - k) + k + 1_000_000
    assert res.total["mean_ns"][0] == pytest.approx(float((fin - a).mean()), rel=1e-12)
    assert res.total["max_ns"][0] == int((fin - a).max())


def test_summaries_without_per_request_log() -> None:
    tr = storqos.model.synth.poisson(500, duration="20s", seed=1)
    res = storqos.simulate(tr, "fcfs", "constant", capacity=800, window="1s")
    assert res.requests is None
    assert 18 <= res.windows.height <= 21
    assert set(res.windows.columns) >= {"start_ns", "tenant", "arrivals", "completed", "p95_ns", "iops"}
    assert res.windows["completed"].sum() == res.arrived
    # p95 monotone with p50 per window
    assert (res.windows["p95_ns"] >= res.windows["p50_ns"]).all()
    assert res.cdf["fraction"].max() == pytest.approx(1.0)


def test_streamed_generators_equal_materialised() -> None:
    spec = storqos.model.synth.poisson(700, count=50_000, seed=9, materialize=False)
    a = storqos.simulate(None, "fcfs", "constant", capacity=800, generators=[spec])
    b = storqos.simulate(storqos.model.synth.to_frame([spec]), "fcfs", "constant", capacity=800)
    assert a.total.to_dicts() == b.total.to_dicts()


def test_closed_loop_littles_law() -> None:
    c = storqos.ClosedClient(tenant=0, outstanding=4, stop="10s")
    res = storqos.simulate(None, "fcfs", "constant", capacity=200, closed=[c], until="10s")
    # 200 IOPS for 10 s; each request waits behind the other 3: 4 × 5 ms.
    assert res.total["completed"][0] == pytest.approx(2000, abs=4)
    assert res.total["p50_ns"][0] == pytest.approx(20_000_000, rel=0.002)


def test_deterministic_for_a_seed() -> None:
    tr = storqos.model.synth.onoff(3000, 100, "50ms", "200ms", count=20_000, seed=4)
    r1 = storqos.simulate(tr, "fcfs", "exponential", capacity=1500, seed=5, keep_requests=True)
    r2 = storqos.simulate(tr, "fcfs", "exponential", capacity=1500, seed=5, keep_requests=True)
    r3 = storqos.simulate(tr, "fcfs", "exponential", capacity=1500, seed=6, keep_requests=True)
    assert r1.requests is not None and r2.requests is not None and r3.requests is not None
    assert r1.requests.equals(r2.requests)
    assert not r1.requests.equals(r3.requests)


def test_bad_specs_are_input_errors() -> None:
    tr = _trace([0, 1])
    with pytest.raises(InputError, match="unknown policy 'xyz'"):
        storqos.simulate(tr, "xyz", "constant", capacity=10)
    with pytest.raises(InputError, match="^capacity=: "):  # the keyword argument, as Python names it
        storqos.simulate(tr, "fcfs", "constant", capacity=0)
    with pytest.raises(InputError, match="unknown device"):
        storqos.simulate(tr, "fcfs", "ssd", capacity=10)
    with pytest.raises(InputError, match="before the previous request"):
        storqos.simulate(_trace([5, 1]), "fcfs", "constant", capacity=10)


def test_synthetic_generators_shapes() -> None:
    # Diurnal: weekends at the given factor of weekdays; night quieter than the peak hour.
    d = storqos.model.synth.diurnal(2.0, days=14, weekend_factor=0.25, seed=2)
    day = (d["arrival_ns"] // (86_400 * 10**9)) % 7
    per_day = d.group_by(day.alias("dow")).len().sort("dow")["len"].to_numpy() / 2
    assert per_day[5:].mean() / per_day[:5].mean() == pytest.approx(0.25, abs=0.03)
    hour = (d["arrival_ns"] // (3600 * 10**9)) % 24
    by_hour = d.group_by(hour.alias("h")).len().sort("h")["len"].to_numpy()
    assert by_hour[11] > 10 * by_hour[2]
    # On/off: bursty: the busiest 100 ms window is far above the mean rate.
    b = storqos.model.synth.onoff(2000, 0, "100ms", "900ms", duration="120s", seed=3)
    st = storqos.traces.stats(b)
    assert st["mean_iops"] == pytest.approx(200, rel=0.15)
    assert st["peak_iops_100ms"] > 5 * st["mean_iops"]
    # Poisson: the asked rate.
    p = storqos.model.synth.poisson("1k", duration="30s", seed=4)
    assert storqos.traces.stats(p)["mean_iops"] == pytest.approx(1000, rel=0.03)


def test_onoff_off_rate_accepts_units_and_zero() -> None:
    a = storqos.model.synth.onoff("3k", "1k", "50ms", "200ms", count=2000, seed=1)
    b = storqos.model.synth.onoff("3k", 0, "50ms", "200ms", count=2000, seed=1)
    assert isinstance(a, pl.DataFrame) and isinstance(b, pl.DataFrame)
    assert a.height == b.height == 2000
    # A busy OFF state packs the same count into less time than a silent one.
    assert a["arrival_ns"].max() < b["arrival_ns"].max()
    with pytest.raises(InputError, match="--rate-off"):
        storqos.model.synth.onoff("3k", "-1", "50ms", "200ms", count=10)


def _three_tenants() -> pl.DataFrame:
    n = 300
    return pl.DataFrame({
        "arrival_ns": [i * 1_000_000 for i in range(n)],
        "tenant": [i % 3 for i in range(n)],
        "size": [4096] * n,
    })


@pytest.mark.parametrize(
    "policy, kw, option",
    [
        ("wf2q", {"weights": [2, 1]}, "weights="),
        ("sfq", {"weights": [1, 1, 1, 1]}, "weights="),
        ("mclock", {"reservations": "100,0"}, "reservations="),
        ("mclock", {"limits": "none,none,none,50"}, "limits="),
    ],
)
def test_a_per_tenant_list_of_another_length_is_an_error(policy: str, kw: dict[str, object], option: str) -> None:
    """Three tenants: a list of two or four values was padded or cut without a word."""
    given = len(next(iter(kw.values())).split(",") if isinstance(next(iter(kw.values())), str) else next(iter(kw.values())))
    with pytest.raises(InputError, match=rf"^{option}: {given} value\(s\) for 3 tenant\(s\) \(ids 0-2\)"):
        storqos.simulate(_three_tenants(), policy, "constant", capacity=2000, **kw)
    full = {k: ([1, 1, 1] if k == "weights" else "100,0,0" if k == "reservations" else "none,none,50") for k in kw}
    assert storqos.simulate(_three_tenants(), policy, "constant", capacity=2000, **full).tenants.height == 3


def test_iops_is_over_the_runs_span_for_every_tenant() -> None:
    """A tenant active for 1 ms of a 1 s run is credited 1 request per second, not 1,000."""
    df = pl.DataFrame({"arrival_ns": [0, 500_000_000, 999_000_000], "tenant": [0, 1, 0], "size": [4096] * 3})
    res = storqos.simulate(df, "fcfs", "constant", capacity="1M")
    span_s = (999_000_000 + 1_000) / 1e9  # first arrival to the last completion (1 µs service)
    got = dict(zip(res.tenants["tenant"].to_list(), res.tenants["iops"].to_list(), strict=True))
    assert got[0] == pytest.approx(2 / span_s) and got[1] == pytest.approx(1 / span_s)


@pytest.mark.parametrize(
    "cmin, deadline, short, warning, enough",
    [
        # ΔC·δ = (550 − 486) · 10 ms = 0.64 < 1: the deadline guarantee needs one spare slot.
        (486, "10ms", 550, r"ΔC·δ = 0.64 < 1 .* capacity= ≥ 586", 600),
        # Cmin 200, δ = 3 ms: ΔC ≥ 333.3 IOPS, so 533.333 falls short (ΔC·δ = 0.999999) and the
        # whole number the warning suggests, 534, is enough (never "ΔC·δ = 1 < 1").
        (200, "3ms", 533.333, r"ΔC·δ = 0.999 < 1 .* capacity= ≥ 534$", 534),
    ],
)
def test_miser_without_slack_above_cmin_warns(cmin: float, deadline: str, short: float, warning: str,
                                              enough: float) -> None:
    df = _three_tenants().with_columns(pl.lit(0, pl.UInt32).alias("tenant"))
    with pytest.warns(InputWarning, match=warning):
        storqos.simulate(df, "miser", "constant", capacity=short, cmin=cmin, deadlines=deadline)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        storqos.simulate(df, "miser", "constant", capacity=enough, cmin=cmin, deadlines=deadline)


def test_core_errors_arrive_typed() -> None:
    """The core's refusals are InputError subclasses by kind, carrying the core's own line."""
    from storqos.base.errors import ConfigError, DataError

    with pytest.raises(ConfigError) as e:
        storqos.model.specs.check({"kind": "wf2q", "weights": [0]}, {"kind": "constant", "iops": 10})
    assert isinstance(e.value, InputError)
    assert e.value.message == "wf2q: weights[0] must be a finite number > 0, got 0"
    assert str(e.value) == "invalid configuration: " + e.value.message
    backwards = pl.DataFrame({"arrival_ns": [10, 5], "size": [4096, 4096]})
    with pytest.raises(DataError, match="^invalid input: request 1 arrives at 5 ns"):
        storqos.simulate(backwards, "fcfs", "constant", capacity=100)
