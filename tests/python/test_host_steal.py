"""Steal time (CPU time the host took from this virtual machine) around a replay: read
from the kernel's /proc/stat as proc(5) documents it, and named when a replay falls
behind."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from storqos.live.host_steal import STAT, cpu_times, host_busy, steal_between, steal_ms
from storqos.live.replay import ReplayResult

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")  # proc(5): the columns are in USER_HZ ticks


def _stat(tmp_path: Path, first: str) -> Path:
    p = tmp_path / "stat"
    p.write_text(first + "\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 12345\n")
    return p


def test_steal_is_the_eighth_column_of_the_cpu_line(tmp_path: Path) -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    before = steal_ms(_stat(tmp_path, "cpu  4705 150 1120 16250 520 0 42 7 0 0"))
    after = steal_ms(_stat(tmp_path, "cpu  4805 150 1180 16350 520 0 44 12 0 0"))
    assert before == pytest.approx(7 * TICK_MS) and after == pytest.approx(12 * TICK_MS)
    assert steal_between(before, after) == pytest.approx(5 * TICK_MS)


@pytest.mark.parametrize("first", [
    "cpu  4705 150 1120 16250 520 0 42",  # a kernel without the steal column
    "cpu0 4705 150 1120 16250 520 0 42 7 0 0",  # not the machine's line
    "cpu  4705 150 1120 16250 520 0 42 x 0 0",
    "",
])
def test_no_steal_column_is_none(tmp_path: Path, first: str) -> None:
    assert steal_ms(_stat(tmp_path, first)) is None
    assert steal_between(None, 5.0) is None and steal_between(5.0, None) is None


def test_a_missing_file_is_none(tmp_path: Path) -> None:
    assert steal_ms(tmp_path / "absent") is None


@pytest.mark.skipif(not STAT.exists(), reason="needs Linux's /proc/stat")
def test_this_machine_counts_steal_and_it_never_goes_back() -> None:
    a = steal_ms()
    b = steal_ms()
    assert a is not None and b is not None and 0 <= a <= b


def _behind(steal: float | None) -> ReplayResult:
    errors = np.full(1000, 10_000, dtype=np.int64)
    errors[:50] = 3_000_000  # 5 % issued 3 ms late
    return ReplayResult(requests=pl.DataFrame(), issue_error_ns=errors, errors={}, first_error=None, span_s=1.0,
                        scheduled_span_s=1.0, export_bytes={0: 1 << 20}, mode="open", steal_ms=steal)


def test_falling_behind_names_what_the_host_took() -> None:
    msg = _behind(30.0).fell_behind()
    assert msg is not None and "5.0 % of requests" in msg
    assert msg.endswith("while the host took 30 ms of CPU time from this machine (steal time)"), msg
    assert _behind(30.0).schedule()["steal_ms"] == 30.0
    for quiet in (0.0, None):
        msg = _behind(quiet).fell_behind()
        assert msg is not None and "host" not in msg
    assert "steal_ms" not in _behind(None).schedule()


def test_the_machines_cpu_time_sums_the_columns_but_the_guests(tmp_path: Path) -> None:
    # proc(5): guest and guest_nice are counted in user and nice already.
    t = cpu_times(_stat(tmp_path, "cpu  4705 150 1120 16250 520 0 42 7 0 0"))
    assert t is not None
    assert t.steal_ms == pytest.approx(7 * TICK_MS) and t.total_ms == pytest.approx(22794 * TICK_MS)
    assert t.idle_ms == pytest.approx((16250 + 520) * TICK_MS)
    assert t.busy_ms == pytest.approx((4705 + 150 + 1120 + 42) * TICK_MS)
    with_guests = cpu_times(_stat(tmp_path, "cpu  4705 150 1120 16250 520 0 42 7 300 20"))
    assert with_guests is not None and with_guests.total_ms == pytest.approx(22794 * TICK_MS)


def test_a_busy_host_is_named_above_one_percent() -> None:
    # 2 CPUs for 10 s are 20,000 ms of CPU time: 1 % of it is 200 ms.
    assert host_busy(200.0, 10.0, cpus=2) is None
    assert host_busy(0.0, 10.0, cpus=2) is None and host_busy(None, 10.0, cpus=2) is None
    msg = host_busy(600.0, 10.0, cpus=2)
    assert msg == "the host took 600 ms of CPU time from this machine meanwhile (3.0 % of it)", msg
    assert host_busy(1_500.0, 10.0, cpus=1) == ("the host took 1,500 ms of CPU time from this machine meanwhile "
                                                "(15.0 % of it)")
