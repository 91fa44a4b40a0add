"""The models of the QoS systems operators run, as policies of the simulator: their
settings parsed as the systems name them, refused where out of range, and a run of each
limiter at the rate its system promises."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from storqos.base.errors import InputError
from storqos.model import registry
from storqos.model.sim import simulate
from storqos.model.specs import policy_spec


def _backlog(n: int, tenants: int = 1, size: int = 4096) -> pl.DataFrame:
    """``n`` reads per tenant, all at time 0."""
    return pl.DataFrame({"arrival_ns": np.zeros(n * tenants, dtype=np.int64),
                         "tenant": np.repeat(np.arange(tenants), n).astype(np.int64),
                         "offset": np.zeros(n * tenants, dtype=np.int64),
                         "size": np.full(n * tenants, size, dtype=np.int64),
                         "is_read": np.ones(n * tenants, dtype=bool)})


def test_settings_reach_the_core_under_their_keys_in_the_cores_units() -> None:
    spec = policy_spec("qemu-throttle", iops="200,none", bps="1MiB/s,512KiB", iops_burst=[400, None],
                       burst_seconds="5,none", groups="0,1")
    assert spec == {"kind": "qemu_throttle", "iops": [200.0, None], "bps": [1048576.0, 524288.0],
                    "iops_burst": [400.0, None], "burst_seconds": [5, None], "groups": [0, 1]}
    assert policy_spec("bfq", weights="200,100", slice_idle="4ms", low_latency="false") == {
        "kind": "bfq", "weights": [200.0, 100.0], "slice_idle_ns": 4_000_000, "low_latency": False}


@pytest.mark.parametrize(("policy", "kw", "option", "says"), [
    ("qemu-throttle", {"iops": "0"}, "--iops", "must be > 0"),
    ("qemu-throttle", {"burst_seconds": "1.5"}, "--burst-seconds", "1.5"),
    ("bfq", {"weights": "1500"}, "--weights", "[1, 1000]"),
    ("ceph-mclock", {"classes": "client,backup", "total_capacity": 1000}, "--classes", "client, recovery, best_effort"),
    ("ceph-mclock", {}, "--capacity", "osd_mclock_max_capacity_iops"),
    ("nbdkit-rate", {"bps": "fast"}, "--bps", "fast"),
])
def test_a_setting_out_of_its_range_is_one_line_naming_its_option(policy: str, kw: dict[str, object], option: str,
                                                                 says: str) -> None:
    with pytest.raises(InputError) as e:
        policy_spec(policy, **kw)  # type: ignore[arg-type]
    assert e.value.where == option
    assert says in e.value.message
    assert "\n" not in str(e.value)


def test_each_target_has_its_models() -> None:
    assert [p.name for p in registry.for_target("cgroup")] == ["blk-throttle", "bfq"]
    assert [p.name for p in registry.for_target("libvirt")] == ["qemu-throttle"]
    assert {"qemu", "libvirt", "cgroup", "nbdkit", "spdk", "ceph", "rbd"} <= set(registry.targets())
    assert registry.for_target("storqos") == ()


def test_qemu_throttle_passes_a_backlog_at_its_iops() -> None:
    # QEMU lets a bucket of iops/10 through at once, then one request every 1/iops:
    # 1,000 requests at 100 IOPS pass the last at (1000 − 11) × 10 ms = 9.89 s.
    res = simulate(_backlog(1000), "qemu-throttle", "constant", capacity="100k", iops="100", keep_requests=True)
    assert res.requests is not None
    last = res.requests["dispatch_ns"].max()
    assert last == pytest.approx(9.89e9, abs=1e6)


def test_a_trace_runs_through_every_model() -> None:
    trace = _backlog(50, tenants=2)
    settings: dict[str, dict[str, object]] = {
        "qemu-throttle": {"iops": "100,200"}, "blk-throttle": {"read_iops": "100,200"},
        "bfq": {"weights": "200,100"}, "nbdkit-rate": {"bps": "400KiB/s,800KiB/s"},
        "spdk-qos": {"iops": "1000,2000"}, "ceph-mclock": {"classes": "client,recovery"},
        "rbd-qos": {"iops": "100,200"},
    }
    for p in registry.policies("simulate"):
        if p.targets:
            res = simulate(trace, p.name, "constant", capacity="5k", **settings[p.name])  # type: ignore[arg-type]
            assert res.summary()["total"]["completed"] == 100, p.name


def _poisson(rates: list[float], seconds: float, seed: int = 7) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    parts = []
    for t, rate in enumerate(rates):
        n = int(rate * seconds)
        parts.append(pl.DataFrame({"arrival_ns": np.cumsum(rng.exponential(1e9 / rate, n)).astype(np.int64),
                                   "tenant": np.full(n, t, dtype=np.int64),
                                   "offset": rng.integers(0, 1 << 18, n, dtype=np.int64) * 4096,
                                   "size": np.full(n, 4096, dtype=np.int64), "is_read": rng.random(n) < 0.75}))
    return pl.concat(parts).sort("arrival_ns")


@pytest.mark.parametrize("spread", [0.4, 0.6])
def test_bfq_idling_starves_the_lighter_group_unless_injection_keeps_paying(spread: float) -> None:
    from storqos.live.stacks.check import service_device
    from storqos.model.tenant_figures import per_tenant

    # Weights 300 and 100, 1,000 requests a second each on a 60 µs device. While the
    # heavier queue idles for its next request, BFQ injects the other group's only as
    # long as the heavier one's sampled service stays under 1.5x the shortest it has
    # seen (bfq_update_inject_limit). With service times spread as a loop device's are
    # (log-sd 0.4-0.6), a sample soon exceeds that, the limit falls to 0 and the lighter
    # group waits for whole budgets: p99 over 100 ms, 20x the heavier's. With a device
    # of nearly constant service no sample ever does, injection grows and nobody waits:
    # the model's p99 tips between the two on probes near the line (docs/stacks.md).
    trace = _poisson([1000.0, 1000.0], 2.0)
    rng = np.random.default_rng(11)
    p99 = {}
    for s in (spread, 0.02):
        device = service_device(60e3 * np.exp(rng.normal(0.0, s, 4000)))
        res = simulate(trace, "bfq", device, weights="300,100", keep_requests=True)
        assert res.requests is not None
        p99[s] = per_tenant(res.requests, ["0", "1"])["p99_ns"].to_list()
    heavy, light = p99[spread]
    assert light > 100e6 and light > 20 * heavy, p99
    assert max(p99[0.02]) < 20e6, p99
