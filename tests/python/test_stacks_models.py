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
