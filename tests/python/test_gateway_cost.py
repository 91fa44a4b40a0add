"""QoS on real storage without an emulated capacity: a noisy tenant
of 1 MiB reads at queue depth 8 beside a victim of 4 KiB reads at queue depth 1, on a
slow disk: the noisy tenant's export delays each read by 10 ms before it starts (a
`delay` fault rule), so its reads hold backend slots without using a CPU, as a disk's
do. Without the backend's cost model the noisy tenant holds every slot and the victim
waits behind its I/O; with it, the victim's requests never wait for a noisy read. fio's
nbd engine is both clients."""

from __future__ import annotations

import os
import signal
import statistics
import sys
from pathlib import Path

import pytest
from conftest import REPO
from test_serve import Server, _fio

sys.path.insert(0, str(REPO / "benches"))
from gateway_isolation import fio_jobs, victim_p99_us  # noqa: E402  (the benchmark's jobs and reading)

MiB = 1 << 20
#: Each of the noisy tenant's reads waits this long on the backend: far above what this
#: machine's noise does to a p99 (1-2 ms at worst, seen with a busy loop beside the test).
DELAY_US = 10_000


def _gateway(tmp_path: Path, data: Path, cost: bool) -> Server:
    cfg = tmp_path / f"gw-{cost}.toml"
    cfg.write_text(f"""
listen = "127.0.0.1:0"
depth = 4
[policy]
kind = "wf2q"
[[export]]
name = "victim"
path = "{data}"
tenant = 0
[[export]]
name = "noisy"
path = "{data}"
tenant = 1
[[export.fault]]
op = "read"
delay = "{DELAY_US}us"
[cost]
enabled = {str(cost).lower()}
""")
    return Server("--config", str(cfg), "--for", "120s")


@pytest.mark.alone
def test_with_the_cost_model_the_victim_never_waits_for_a_slow_tenants_read(tmp_path: Path) -> None:
    data = tmp_path / "data.img"
    with open(data, "wb") as f:
        for _ in range(64):
            f.write(os.urandom(MiB))
    on, off = _gateway(tmp_path, data, True), _gateway(tmp_path, data, False)
    ports = {True: on.ready()[1], False: off.ready()[1]}
    beside: dict[bool, list[float]] = {True: [], False: []}
    try:
        # Interleaved, three times each: this machine's noise (other processes on 2
        # CPUs) moves one run's p99 by 2-3x; the medians compare.
        for _ in range(3):
            for cost, port in ports.items():
                both = _fio(tmp_path, fio_jobs(port, 2, True))
                assert float(both["noisy"]["read"]["iops"]) > 20, both["noisy"]  # type: ignore[index]
                beside[cost].append(victim_p99_us(both["victim"]))
    finally:
        codes = [s.finish(signal.SIGTERM) for s in (on, off)]
    assert all(c == 0 for c, _, _ in codes), codes
    b_on, b_off = statistics.median(beside[True]), statistics.median(beside[False])
    print(f"victim p99 beside the noisy tenant {b_on:.0f} µs with the cost model, {b_off:.0f} µs without "
          "(medians of 3)")
    # Without the cost model the 4 slots hold the noisy tenant's reads, one freed every
    # ~DELAY/4: the victim's p99 is most of a delay (8.2-8.8 ms measured with a busy loop
    # beside the test).
    assert b_off > DELAY_US / 2, beside
    # With it the noisy tenant has one read on the backend at a time and the victim's
    # requests go to the free slots: no victim request waits even half a noisy read's
    # delay (66-84 µs in the same runs; a cost model that stopped asking the policy once
    # the large tenant's picks did not fit left it behind several: p99 5.8-6.5 ms with
    # a 2 ms delay). Its ratio to the p99 alone is the benchmark's (target <= 2x;
    # 1.78-1.98x on a quiet machine, BENCHMARKS.md) and not measured here: a busy CPU
    # beside the test makes the victim *alone* quicker (40-42 µs with a busy loop on one
    # CPU, its wake-ups gone, against 82-102 µs quiet) and the ratio 3.5-5.4x, while the
    # times beside the noisy tenant are what the cost model decides.
    assert b_on < DELAY_US / 2, beside
