"""BAA's simulated twin (seed 004): the same two files as BAA live,
examples/gateway/baa.toml + baa.fio, run by storqos.live.gateway_twin in simulated time (the
config's kind "baa" spec, the simulator's tiered device with the tiers' emulated
capacities and each export's `pin` as its tenant's hit ratio, fio's jobs as closed-loop
clients). Its per-tenant IOPS are within 10 % of `storqos allocate`'s for Example III
under BAA and FQ, BAA fills both devices and FQ leaves the SSD under-used, as live
(tests/python/test_gateway_baa.py). Simulation only: no gateway, no fio."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import REPO
from storqos.base.errors import InputError
from storqos.live.gateway_twin import Experiment
from test_gateway_baa import HDD, HITS, SSD, TENANTS, _lp

EXAMPLES = REPO / "examples" / "gateway"
#: Measured from here on (s): after the third re-allocation, as the live test.
SETTLE_NS = 3_000_000_000


def _experiment(folder: Path, allocator: str = "baa", toml: str | None = None, fio: str | None = None) -> Experiment:
    """The example's files in ``folder`` (with ``allocator``, or the given texts) and its
    images (sparse, 16 MiB), loaded as ``storqos serve --config`` checks them."""
    folder.mkdir(exist_ok=True)
    for t in TENANTS:
        for name in (f"{t}.img", f"{t}-fast.img"):
            with open(folder / name, "wb") as f:
                f.truncate(16 << 20)
    text = toml if toml is not None else (EXAMPLES / "baa.toml").read_text()
    (folder / "baa.toml").write_text(text.replace('allocator = "baa"', f'allocator = "{allocator}"'))
    if fio is None:
        shutil.copy(EXAMPLES / "baa.fio", folder / "baa.fio")
    else:
        (folder / "baa.fio").write_text(fio)
    return Experiment.load(folder / "baa.toml", folder / "baa.fio")


def _twin(exp: Experiment) -> tuple[list[float], list[float]]:
    r = exp.simulate(window="0.5s", keep_requests=True)
    end = exp.duration_ns()
    util = exp.tier_utilisation(r, SETTLE_NS, end)
    return exp.tenant_iops(r, SETTLE_NS, end), [util["slow"], util["fast"]]


def test_example_iii_twin_meets_the_lp_and_fq_underuses_the_ssd(tmp_path: Path) -> None:
    lp = _lp()
    exp = _experiment(tmp_path / "baa")
    dev = exp.device()
    assert dev["kind"] == "tiered" and dev["hits"] == "spread" and dev["depth"] == 16, dev
    assert (dev["slow"]["iops"], dev["fast"]["iops"]) == (HDD, SSD), dev
    assert dev["tenant_hit_ratios"] == list(HITS), dev
    assert exp.config["policy"]["kind"] == "baa", exp.config["policy"]

    got, util = _twin(exp)
    print(f"BAA twin {[round(x, 1) for x in got]} vs LP {[round(x, 1) for x in lp['baa']]}; "
          f"HDD {util[0]:.1%}, SSD {util[1]:.1%}")
    for t, g, w in zip(TENANTS, got, lp["baa"], strict=True):
        assert abs(g - w) <= 0.10 * w, (t, got, lp["baa"])
    assert min(util) >= 0.90, util
    # Deterministic: hits spread evenly, constant-rate tiers.
    assert _twin(exp) == (got, util)

    got_fq, util_fq = _twin(_experiment(tmp_path / "fq", "fq"))
    print(f"FQ twin {[round(x, 1) for x in got_fq]} vs LP {[round(x, 1) for x in lp['fq']]}; "
          f"HDD {util_fq[0]:.1%}, SSD {util_fq[1]:.1%}")
    for t, g, w in zip(TENANTS, got_fq, lp["fq"], strict=True):
        assert abs(g - w) <= 0.10 * w, (t, got_fq, lp["fq"])
    # The HDD saturates first; the SSD is left at ~69 % (BAA: 100 %), as live.
    assert util_fq[0] >= 0.90 and util_fq[1] <= 0.80, util_fq
    assert sum(got) > 1.15 * sum(got_fq), (got, got_fq)


def test_random_readers_draw_hits_and_large_reads_hit_only_whole_placed_runs(tmp_path: Path) -> None:
    fio = (EXAMPLES / "baa.fio").read_text().replace("rw=read", "rw=randread").replace("bs=4k", "bs=8k")
    dev = _experiment(tmp_path, fio=fio).device()
    assert dev["hits"] == "random", dev
    # 8 KiB reads over 4 KiB blocks: both blocks placed. pin 0.75 places 3 of every 4
    # blocks (b = 1, 2, 3 of 0..3), so half the aligned pairs; pin 0.5 every other block.
    assert dev["tenant_hit_ratios"][:2] == [0.5, 0.0], dev


@pytest.mark.parametrize(("old", "new", "want"), [
    ("pin = 0.75, lru = false", "pin = 0.75, lru = true", "lru = true"),
    ("[tiers.fast]                  # the SSD: every tiered export's fast file\n",
     "[tiers.fast]\ndepth = 2\n", "[tiers.fast] depth = 1, got 2"),
])
def test_what_the_twin_does_not_model_is_one_line(tmp_path: Path, old: str, new: str, want: str) -> None:
    text = (EXAMPLES / "baa.toml").read_text()
    assert old in text
    with pytest.raises(InputError) as e:
        _experiment(tmp_path, toml=text.replace(old, new)).device()
    assert want in str(e.value) and "\n" not in str(e.value), str(e.value)
