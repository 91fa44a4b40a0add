"""The live path in the core (storqos.model.live_path over storqos._core.LivePath): a
device profile's path at rest and in bursts applied to simulated requests gives what
validate's own numpy model gave before it moved to the core, request by request (its
numbers kept as goldens), and what the live path's parts give by hand."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from storqos.model.device_profile import BurstPoint, DepthPoint, DeviceProfile, RestPoint, ServicePoint
from storqos.model.live_path import live_path, with_path

US = 1_000


def _point(op: str, pattern: str, size: int, mean: float, pcts: list[tuple[float, float]]) -> ServicePoint:
    return ServicePoint(op=op, pattern=pattern, size=size, iops=1e6 / mean, mean_us=mean, min_us=pcts[0][1] * 0.9,
                        percentiles_us=pcts)


def _rest(op: str, spacing: float, mean: float, pcts: list[tuple[float, float]]) -> RestPoint:
    return RestPoint(op=op, pattern="random", size=4096, iops=1e6 / spacing, mean_us=mean, min_us=pcts[0][1] * 0.9,
                     percentiles_us=pcts, spacing_us=spacing)


def _burst(op: str, pattern: str, issue: float, finish: float, head: float) -> BurstPoint:
    curve = [head] + [head * 0.8 + finish * p for p in range(1, 16)]
    return BurstPoint(op=op, pattern=pattern, requests=16, bursts=30, period_us=9_000, issue_us=issue,
                      finish_us=finish, response_us=curve)


def profile() -> DeviceProfile:
    """A page-cached file through a gateway as calibrate measures one (numbers of the
    order the profile's module gives, not round: the model's float arithmetic shows)."""
    reads = [(1.0, 14.3), (10.0, 16.1), (50.0, 37.7), (90.0, 69.2), (99.0, 88.9), (99.9, 140.3)]
    writes = [(1.0, 22.1), (10.0, 27.9), (50.0, 51.3), (90.0, 92.7), (99.0, 131.1), (99.9, 190.6)]
    return DeviceProfile(
        version=1, storqos_version="t", target="t", engine="replay", direct=False, created="t", time_per_point_s=0.5,
        capacity_iops=61_234.5, parallelism=3, op_time_us=48.99, bandwidth_bytes_per_s=2.1e9,
        service=[_point("read", "random", 4096, 43.7, reads), _point("write", "random", 4096, 57.3, writes),
                 _point("read", "sequential", 65536, 81.3, [(q, us * 1.9) for q, us in reads])],
        queue_depth=[DepthPoint(qd=1, iops=22_800, mean_us=43.7, p50_us=37.7, p99_us=88.9),
                     DepthPoint(qd=4, iops=61_234.5, mean_us=65.1, p50_us=58.0, p99_us=130.0)],
        at_rest=_point("read", "random", 4096, 97.3, [(1.0, 71.3), (50.0, 95.1), (90.0, 119.7), (99.0, 170.2)]),
        at_rest_write=_point("write", "random", 4096, 231.7, [(1.0, 190.3), (50.0, 213.4), (90.0, 251.9),
                                                                (99.0, 330.8)]),
        at_rest_idle=[_rest("read", 250.0, 41.3, [(1.0, 30.2), (50.0, 40.1), (90.0, 55.3), (99.0, 71.9)]),
                      _rest("read", 10_000.0, 163.9, [(1.0, 121.7), (50.0, 160.2), (90.0, 188.4), (99.0, 260.3)]),
                      _rest("read", 50_000.0, 221.3, [(1.0, 181.1), (50.0, 219.8), (90.0, 251.3), (99.0, 319.9)]),
                      _rest("write", 10_000.0, 301.1, [(1.0, 240.7), (50.0, 297.3), (90.0, 340.2), (99.0, 420.6)])],
        burst=[_burst("read", "random", 8.17, 17.31, 101.7), _burst("write", "random", 8.31, 76.57, 608.55),
               _burst("read", "sequential", 8.02, 12.93, 99.1), _burst("write", "sequential", 8.11, 24.37, 280.3)],
        burst_depth=3)


def _log(arrival_us: list[float], response_us: list[float], reads: list[bool], wait_us: list[float] | None = None,
         tenant: list[int] | None = None) -> pl.DataFrame:
    """Simulated requests (ns) at the given times, in trace order (ids 0, 1, ...)."""
    n = len(arrival_us)
    arrival = np.round(np.array(arrival_us) * US).astype(np.int64)
    response = np.round(np.array(response_us) * US).astype(np.int64)
    wait = np.round(np.array(wait_us or [0.0] * n) * US).astype(np.int64)
    return pl.DataFrame({"id": np.arange(n), "tenant": np.array(tenant or [0] * n, np.uint32),
                         "arrival_ns": arrival, "dispatch_ns": arrival + wait, "finish_ns": arrival + response,
                         "response_ns": response, "wait_ns": wait, "size": np.full(n, 4096, np.uint32),
                         "is_read": reads}).with_columns(
        pl.col("id", "arrival_ns", "dispatch_ns", "finish_ns", "response_ns", "wait_ns").cast(pl.UInt64))


def _random_log(n: int, seed: int) -> tuple[pl.DataFrame, np.ndarray]:
    """``n`` requests of two tenants, bursts and lone ones, some continuing their
    tenant's previous one of their op; their offsets by id."""
    rng = np.random.default_rng(seed)
    gaps = np.where(rng.random(n) < 0.7, rng.integers(0, 30, n), rng.integers(200, 60_000, n)).astype(float)
    arrival = np.cumsum(gaps)
    response = rng.uniform(15, 400, n)
    wait = np.minimum(response * rng.random(n) * (gaps < 30), response - 10)
    reads = rng.random(n) < 0.6
    tenant = rng.integers(0, 2, n)
    log = _log(arrival.tolist(), response.tolist(), reads.tolist(), wait.tolist(), tenant.tolist())
    offsets = np.zeros(n, np.uint64)
    last: dict[tuple[int, bool], int] = {}
    for i in range(n):
        key = (int(tenant[i]), bool(reads[i]))
        offsets[i] = last[key] if key in last and rng.random() < 0.5 else rng.integers(0, 1 << 16) * 4096
        last[key] = int(offsets[i]) + 4096
    return log, offsets


#: A burst of three reads due at once, 100, 150, 160 µs simulated; then a lone read and
#: a lone write long after (each at rest); a train of writes 38 µs apart continuing each
#: other; reads that waited in the simulated queue while the replay was still issuing.
CASES = {
    "burst": _log([0, 0, 0, 5_000, 20_000], [100, 150, 160, 90, 120], [True, True, True, True, False]),
    "train": _log([0, 38, 76, 114], [50, 50, 50, 50], [False] * 4),
    "queued": _log([0, 0, 0, 0], [100, 200, 300, 400], [True] * 4, [0, 100, 200, 300]),
}
OFFSETS = {"burst": np.arange(5, dtype=np.uint64) * 1 << 20, "train": np.arange(4, dtype=np.uint64) * 4096,
           "queued": np.arange(4, dtype=np.uint64) * 1 << 20}


#: What validate's numpy model (before the model moved to the core) gave on CASES through
#: ``profile()``, offsets given or not alike: (arrival_ns, response_ns) per request; the
#: train's writes continue each other, which the sequential bursts see with the offsets.
NUMPY = {
    "burst": ([0, 8170, 16340, 5000000, 20000000], [272394, 281534, 290674, 177400, 357323]),
    "train": ([0, 38000, 76000, 114000], [366353, 325893, 364463, 403033]),
    "train+offsets": ([0, 38000, 76000, 114000], [366353, 273693, 260063, 246433]),
    "queued": ([0, 8170, 16340, 24510], [275723, 284863, 294003, 375490]),
}
#: The same model's writes' hold share on ``profile()`` (its reads': none).
NUMPY_HOLD = 3.1700722021660637


def test_the_core_gives_what_validates_numpy_model_gave() -> None:
    prof = profile()
    for name, log in CASES.items():
        for offsets in (None, OFFSETS[name]):
            got = with_path(log, prof, offsets)
            key = f"{name}+offsets" if offsets is not None and f"{name}+offsets" in NUMPY else name
            assert (got["arrival_ns"].to_list(), got["response_ns"].to_list()) == NUMPY[key], (name, offsets)
    path = live_path(prof)
    assert (path.hold(True), path.hold(False)) == (0.0, NUMPY_HOLD)


def test_a_burst_of_three_and_the_train_by_hand() -> None:
    """Without a path at rest (a profile whose spaced reads were not measured), the
    burst's three reads are issued 8.17 µs apart and answered no sooner than 17.31 µs
    after the reply before; the writes 38 µs apart take 76.57 µs between completions as
    random writes, 24.37 µs (under their spacing: on time) as sequential ones."""
    prof = profile().model_copy(update={"at_rest": None, "at_rest_write": None, "at_rest_idle": None})
    got = with_path(CASES["burst"].head(3), prof)
    assert got["arrival_ns"].to_list() == [0, 8_170, 16_340]
    # The first at its own 100 µs; the second's own reply (158.17 µs) is later than
    # 100 + 17.31; the third's own (176.34) is later than 158.17 + 17.31 = 175.48 too.
    assert got["finish_ns"].to_list() == [100_000, 158_170, 176_340]
    late = [0, 38_570, 77_140, 115_710]  # 76.57 − 38 µs more at each next write
    train = with_path(CASES["train"], prof)
    assert (train["response_ns"].to_numpy() - 50 * US).tolist() == late
    assert with_path(CASES["train"], prof, OFFSETS["train"])["response_ns"].to_list() == [50 * US] * 4


def test_a_request_at_rest_pays_its_op_s_path_by_idle_time() -> None:
    """The lone read 4.74 ms after the last reply pays the reads' path between their
    2 ms and 10 ms levels; the write, whose path at rest is its own, more."""
    got = with_path(CASES["burst"], profile())["response_ns"].to_list()
    assert 90 * US + 40 * US < got[3] < 90 * US + 130 * US
    assert got[4] > 120 * US + 150 * US


@pytest.mark.parametrize("seed", [0, 7])
def test_golden(seed: int) -> None:
    """What validate's numpy model gave on these requests, request by request (the
    digest of its columns), through the profile, without its bursts, and without its
    other spacings at rest. (The model in the core was checked equal to it on 20 such
    logs of 3,000 requests under each of the three.)"""
    log, offsets = _random_log(3_000, seed)
    prof = profile()
    for variant, want in zip((prof, prof.model_copy(update={"burst": None}),
                              prof.model_copy(update={"at_rest_idle": None})), GOLDEN[seed], strict=True):
        got = with_path(log, variant, offsets).select("arrival_ns", "response_ns", "finish_ns", "wait_ns")
        digest = hashlib.sha256(b"".join(got[c].to_numpy().tobytes() for c in got.columns)).hexdigest()[:16]
        assert digest == want


GOLDEN = {0: ("85beb062a758c586", "fc95a6ab10a575a0", "33ef77858a1056e3"),
          7: ("36314516e47adbf4", "e957b6568bac3c20", "f8d0adbd9eafda86")}


def test_simulate_with_the_profile_predicts_what_validate_compares(tmp_path: Path) -> None:
    """One experiment (a bursty trace of reads and writes, some continuing each other,
    FCFS): the requests validate would replay, predicted as validate predicts them on
    real files (its own simulation through the core's live path), are those
    `storqos simulate --device-profile` writes, request by request, and its per-tenant
    figures those validate compares."""
    from conftest import run_cli
    from storqos.experiments.experiment import load
    from storqos.live import validate as v
    from storqos.model.device_profile import dump_profile
    from storqos.model.tenant_figures import per_tenant

    prof = profile()
    (tmp_path / "p.toml").write_text(dump_profile(prof))
    log, offsets = _random_log(2_000, 3)
    trace = tmp_path / "t.csv"
    pl.DataFrame({"arrival_ns": log["arrival_ns"], "is_read": log["is_read"], "offset": offsets,
                  "size": log["size"]}).write_csv(trace)
    (tmp_path / "exp.toml").write_text(f'name = "one"\nseed = 1\n\n[device]\nkind = "constant"\ncapacity = "10k"\n\n'
                                       f'[[trace]]\npath = "{trace}"\nformat = "csv"\nname = "t"\n\n'
                                       '[[policy]]\nkind = "fcfs"\n')
    exp = load(tmp_path / "exp.toml")
    run = exp.runs[0]
    requests = v._requests(exp, run)
    predicted = v.predict(requests, run.policy, prof.sim_device(), run.seed, prof)
    out = tmp_path / "sim.parquet"
    r = run_cli("simulate", str(trace), "--device-profile", str(tmp_path / "p.toml"), "--seed", str(run.seed),
                "--out", str(out), "--json")
    assert r.code == 0, r.err
    simulated = pl.read_parquet(out)
    cols = ["id", "arrival_ns", "response_ns", "finish_ns", "wait_ns"]
    assert simulated.select(cols).equals(predicted.select(cols))
    # The live path moved them: not the plain simulation.
    assert not simulated["response_ns"].equals(v.predict(requests, run.policy, prof.sim_device(), run.seed)
                                               .sort("arrival_ns", maintain_order=True)["response_ns"])
    compared = per_tenant(predicted, [t.name for t in run.tenants])
    said = json.loads(r.out)["live_path"]
    assert [row["p50_ns"] for row in said] == compared["p50_ns"].to_list()
    assert [row["iops"] for row in said] == compared["iops"].to_list()
