"""The path in a burst (issue 16, file mode): the replay issues one request at a time
and the path behind it answers one at a time, both timed by `storqos calibrate` on
bursts from rest; validate makes a request wait for the requests before it in that
queue where the simulated device's k servers let it through sooner. Constructed inputs,
expected answers worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError
from storqos.device_profile import BurstPoint, DepthPoint, DeviceProfile, Op, ServicePoint, dump_profile, load_profile
from storqos.validate import burst_delay_ns, with_path

US = 1_000


def _costs(read: tuple[float, float], write: tuple[float, float] | None = None) -> dict[Op, tuple[float, float]]:
    return {"read": (read[0] * US, read[1] * US), "write": ((write or read)[0] * US, (write or read)[1] * US)}


def test_a_burst_is_answered_one_completion_time_apart() -> None:
    """Five reads due at once, 10 µs per issue, 30 µs between two completions, each
    100 µs on its own: issued at 0, 10, 20, 30, 40 µs; the first reply at 100 µs, each
    next one 30 µs later (130, 160, 190, 220), so request p answers 100 + 20p µs after
    its issue: 20p µs later than on its own."""
    own = np.full(5, 100 * US, np.int64)
    got = burst_delay_ns(np.zeros(5, np.int64), own, np.ones(5, bool), _costs((10, 30)))
    assert got.tolist() == [0, 20 * US, 40 * US, 60 * US, 80 * US]
    # The last reply: issued at 40 µs, answered 100 + 80 µs later, at 220 µs: the first
    # reply's 100 µs and four completion times.
    assert 40 * US + own[-1] + got[-1] == 100 * US + 4 * 30 * US


def test_nothing_later_when_the_path_keeps_up_or_the_requests_are_slower_on_their_own() -> None:
    own = np.full(8, 100 * US, np.int64)
    # A completion (5 µs) is quicker than an issue (10 µs): the replies come 10 µs apart
    # as the issues do.
    assert not burst_delay_ns(np.zeros(8, np.int64), own, np.ones(8, bool), _costs((10, 5))).any()
    # 100 µs apart, 30 µs per completion: nothing queues either.
    assert not burst_delay_ns(np.arange(8, dtype=np.int64) * 100 * US, own, np.ones(8, bool), _costs((10, 30))).any()
    # The simulated device already answers them 40 µs apart (its own queue is the
    # slower one): the path adds nothing.
    slow = (np.arange(8, dtype=np.int64) * 30 + 100) * US  # issued 10 µs apart, replies 40 µs apart
    assert not burst_delay_ns(np.zeros(8, np.int64), slow, np.ones(8, bool), _costs((10, 30))).any()


def test_a_train_of_writes_slower_than_its_spacing_queues() -> None:
    """Writes 38 µs apart (FIU's journal), 80 µs between two completions, 50 µs each on
    its own: replies at 50, 130, 210, 290 µs against 50, 88, 126, 164 on their own: 0,
    42, 84, 126 µs later."""
    own = np.full(4, 50 * US, np.int64)
    got = burst_delay_ns(np.arange(4, dtype=np.int64) * 38 * US, own, np.zeros(4, bool), _costs((10, 15), (12, 80)))
    assert got.tolist() == [0, 42 * US, 84 * US, 126 * US]


def test_reads_and_writes_in_one_burst_each_cost_their_own_op() -> None:
    """read, write, read due at once, 20 µs each on its own; reads 10 µs per issue and
    15 between completions, writes 12 and 80: issued at 0, 10, 22; replies at 20,
    max(30, 20 + 80) = 100, max(42, 100 + 15) = 115: 0, 70 and 73 µs later."""
    own = np.full(3, 20 * US, np.int64)
    got = burst_delay_ns(np.zeros(3, np.int64), own, np.array([True, False, True]), _costs((10, 15), (12, 80)))
    assert got.tolist() == [0, 70 * US, 73 * US]


def _profile(burst: list[BurstPoint] | None) -> DeviceProfile:
    flat = ServicePoint(op="read", pattern="random", size=4096, iops=10_000, mean_us=100, min_us=100,
                        percentiles_us=[(50.0, 100.0), (99.0, 100.0)])
    return DeviceProfile(version=1, storqos_version="t", target="t", engine="replay", direct=False, created="t",
                         time_per_point_s=1, capacity_iops=10_000, parallelism=1, op_time_us=100,
                         bandwidth_bytes_per_s=1e9, service=[flat],
                         queue_depth=[DepthPoint(qd=1, iops=10_000, mean_us=100, p50_us=100, p99_us=100)],
                         burst=burst)


def _point(op: str, issue_us: float, finish_us: float) -> BurstPoint:
    return BurstPoint(op=op, requests=4, bursts=10, period_us=10_000, issue_us=issue_us, finish_us=finish_us,
                      response_us=[100.0, 110.0, 120.0, 130.0])


def test_validate_delays_replies_the_path_cannot_give_yet() -> None:
    """Three reads due at once, simulated responses 100, 150 and 160 µs; 10 µs per
    issue and 30 between completions: issued at 0, 10, 20, the replies at 100,
    max(160, 130) = 160 and max(180, 190) = 190 µs, so the third answers 170 µs after
    its issue, 10 more than simulated (the second is late enough on its own). Without
    burst measurements (an older profile) nothing is added."""
    req = pl.DataFrame({"arrival_ns": [0, 0, 0], "finish_ns": [100, 150, 160], "response_ns": [100, 150, 160],
                        "is_read": [True, True, True]}).with_columns(
        pl.col("arrival_ns", "finish_ns", "response_ns").cast(pl.UInt64) * US)
    got = with_path(req, _profile([_point("read", 10, 30)]))
    assert got["response_ns"].to_list() == [100 * US, 150 * US, 170 * US]
    assert got["finish_ns"].to_list() == [100 * US, 150 * US, 170 * US]
    assert with_path(req, _profile(None))["response_ns"].to_list() == req["response_ns"].to_list()


def test_burst_costs_and_old_profiles() -> None:
    only_reads = _profile([_point("read", 8, 15)])
    assert only_reads.burst_costs_ns() == {"read": (8_000, 15_000), "write": (8_000, 15_000)}
    both = _profile([_point("read", 8, 15), _point("write", 12, 70)])
    assert both.burst_costs_ns() == {"read": (8_000, 15_000), "write": (12_000, 70_000)}
    assert _profile(None).burst_costs_ns() is None


def test_profiles_with_and_without_bursts_load(tmp_path: Path) -> None:
    new = tmp_path / "new.toml"
    new.write_text(dump_profile(_profile([_point("read", 8, 15), _point("write", 12, 70)])))
    assert load_profile(new).burst_costs_ns() == {"read": (8_000, 15_000), "write": (12_000, 70_000)}
    old = tmp_path / "old.toml"
    text = dump_profile(_profile(None))
    assert "burst" not in text  # a profile made before the bursts were measured
    old.write_text(text)
    assert load_profile(old).burst is None
    with pytest.raises(ValidationError, match="requests"):
        BurstPoint(op="read", requests=1, bursts=1, period_us=1, issue_us=1, finish_us=1, response_us=[1.0, 1.0])
