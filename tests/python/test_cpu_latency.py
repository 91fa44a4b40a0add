"""Keeping the CPUs awake while measuring (storqos.live.cpu_latency): the kernel's CPU latency
request is 0 µs while held, released with the block (its file closed), refused in one
line where `yes` cannot hold it; `auto` then carries on and `no` never asks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from storqos.base.errors import InputError
from storqos.live import cpu_latency

may_hold = pytest.mark.skipif(not os.access(cpu_latency.DEVICE, os.W_OK),
                              reason="needs write access to /dev/cpu_dma_latency (root)")


def _open_on_device() -> int:
    """This process's open files that are the latency request device."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(cpu_latency.DEVICE):
                n += 1
        except OSError:
            continue
    return n


@may_hold
def test_the_request_is_zero_while_held_and_released_after() -> None:
    assert _open_on_device() == 0
    with cpu_latency.cpus_awake("yes") as held:
        assert held
        # What the kernel keeps to now, read back from the device (any other holder can
        # only ask for 0 too, or more).
        assert cpu_latency.cpu_latency_us() == 0
        assert _open_on_device() == 1
    assert _open_on_device() == 0
    with cpu_latency.cpus_awake("auto") as held:
        assert held and cpu_latency.cpu_latency_us() == 0


def test_no_holds_nothing() -> None:
    with cpu_latency.cpus_awake("no") as held:
        assert not held and _open_on_device() == 0


def test_yes_where_it_cannot_is_one_line_and_auto_carries_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(cpu_latency, "DEVICE", tmp_path / "no-such-device")
    with pytest.raises(InputError) as e:
        with cpu_latency.cpus_awake("yes"):
            pass
    assert "cannot keep the CPUs awake" in str(e.value) and "No such file" in str(e.value)
    with cpu_latency.cpus_awake("auto") as held:
        assert not held
    assert not cpu_latency.can_keep_awake("auto")
    assert cpu_latency.cpu_latency_us() is None


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(InputError, match=r"unknown value 'always' \(auto, yes or no\)"):
        with cpu_latency.cpus_awake("always"):
            pass


@pytest.mark.parametrize("command", [["replay", "t.csv", "nbd://127.0.0.1:1/a"], ["calibrate", "nbd://127.0.0.1:1/a"],
                                     ["validate", "x.toml"]])
def test_the_commands_refuse_an_unknown_mode_before_anything_starts(command: list[str]) -> None:
    assert_one_line_error(run_cli(*command, "--awake-cpus", "sometimes"), "--awake-cpus", "unknown value 'sometimes'")
