"""The path in a burst (file mode): the replay issues one request at a time
and the path behind it answers one at a time, both timed by `storqos calibrate` on
bursts from rest; validate makes a request wait for the requests before it in that
queue where the simulated device's k servers let it through sooner, and counts its
time from its issue, as the replay does (the core's live path, through
storqos.model.live_path). Constructed inputs, expected answers worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError
from storqos.model.device_profile import BurstPoint, DepthPoint, DeviceProfile, Op, ServicePoint, dump_profile, load_profile
from storqos.model.live_path import live_path, with_path

US = 1_000


def _costs(read: tuple[float, float], write: tuple[float, float] | None = None) -> dict[Op, tuple[float, float]]:
    return {"read": (read[0] * US, read[1] * US), "write": ((write or read)[0] * US, (write or read)[1] * US)}


def _frame(arrival: np.ndarray, own: np.ndarray, is_read: np.ndarray) -> pl.DataFrame:
    """Simulated requests at ``arrival``, each ``own`` long, nothing waited (ns)."""
    arrival, own = np.asarray(arrival, np.int64), np.asarray(own, np.int64)
    return pl.DataFrame({"arrival_ns": arrival, "finish_ns": arrival + own, "response_ns": own,
                         "is_read": np.asarray(is_read, bool)}).with_columns(
        pl.col("arrival_ns", "finish_ns", "response_ns").cast(pl.UInt64))


def _late(prof: DeviceProfile, arrival: np.ndarray, own: np.ndarray, is_read: np.ndarray) -> np.ndarray:
    """How much later than its own time from its issue each request is answered (ns)."""
    got = with_path(_frame(arrival, own, is_read), prof)["response_ns"].to_numpy().astype(np.int64)
    return got - np.asarray(own, np.int64)


def burst_delay_ns(arrival: np.ndarray, own: np.ndarray, is_read: np.ndarray,
                   costs: dict[Op, tuple[float, float]]) -> np.ndarray:
    """The wait for the path's one reply at a time alone: through a profile with these
    bursts and nothing at rest (no path at rest, no hold)."""
    points = [_point(op, costs[op][0] / US, costs[op][1] / US) for op in ("read", "write")]  # type: ignore[index]
    return _late(_profile(points), arrival, own, is_read)


def _holds(prof: DeviceProfile) -> tuple[float, float]:
    """The reads' and the writes' hold shares fitted to the profile's bursts."""
    path = live_path(prof)
    return path.hold(True), path.hold(False)


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


def _point(op: str, issue_us: float, finish_us: float, pattern: str = "random") -> BurstPoint:
    return BurstPoint(op=op, pattern=pattern, requests=4, bursts=10, period_us=10_000, issue_us=issue_us,
                      finish_us=finish_us, response_us=[100.0, 110.0, 120.0, 130.0])


def test_validate_delays_replies_the_path_cannot_give_yet() -> None:
    """Three reads due at once, simulated responses 100, 150 and 160 µs; 10 µs per
    issue and 30 between completions: issued at 0, 10, 20, the replies at 100,
    max(160, 130) = 160 and max(180, 190) = 190 µs, so the third answers 170 µs after
    its issue, 10 more than simulated (the second is late enough on its own). The log
    counts from the issues, as the replay's does. Without burst measurements (an older
    profile) nothing is added."""
    req = pl.DataFrame({"arrival_ns": [0, 0, 0], "finish_ns": [100, 150, 160], "response_ns": [100, 150, 160],
                        "is_read": [True, True, True]}).with_columns(
        pl.col("arrival_ns", "finish_ns", "response_ns").cast(pl.UInt64) * US)
    got = with_path(req, _profile([_point("read", 10, 30)]))
    assert got["response_ns"].to_list() == [100 * US, 150 * US, 170 * US]
    assert got["arrival_ns"].to_list() == [0, 10 * US, 20 * US]
    assert got["finish_ns"].to_list() == [100 * US, 160 * US, 190 * US]
    assert with_path(req, _profile(None))["response_ns"].to_list() == req["response_ns"].to_list()


def test_a_request_issued_late_waited_in_the_replay_not_in_the_device_queue() -> None:
    """Three reads due at once on one server of 100 µs: simulated, they wait 0, 100 and
    200 µs and answer 100, 200 and 300 µs after their trace time. The replay issues
    them 10 µs apart (0, 10, 20): the third has waited 20 µs of its 200 in the replay,
    so the device answers it at 300 µs as simulated, 280 µs after its issue. A replay
    slower than the device (150 µs per issue: 0, 150, 300) waits out their whole queue:
    each read answers 100 µs after its issue, at 100, 250 and 400 µs."""
    req = pl.DataFrame({"arrival_ns": [0, 0, 0], "dispatch_ns": [0, 100, 200], "finish_ns": [100, 200, 300],
                        "response_ns": [100, 200, 300], "wait_ns": [0, 100, 200],
                        "is_read": [True, True, True]}).with_columns(
        pl.col("arrival_ns", "dispatch_ns", "finish_ns", "response_ns", "wait_ns").cast(pl.UInt64) * US)
    got = with_path(req, _profile([_point("read", 10, 5)]))
    assert got["response_ns"].to_list() == [100 * US, 190 * US, 280 * US]
    assert got["finish_ns"].to_list() == [100 * US, 200 * US, 300 * US]
    assert got["wait_ns"].to_list() == [0, 90 * US, 180 * US]
    assert got["dispatch_ns"].to_list() == [0, 100 * US, 200 * US]
    slow = with_path(req, _profile([_point("read", 150, 5)]))
    assert slow["response_ns"].to_list() == [100 * US] * 3
    assert slow["finish_ns"].to_list() == [100 * US, 250 * US, 400 * US]
    assert slow["wait_ns"].to_list() == [0, 0, 0]


def test_burst_costs_and_old_profiles() -> None:
    only_reads = _profile([_point("read", 8, 15)])
    assert only_reads.burst_costs_ns() == {"read": (8_000, 15_000), "write": (8_000, 15_000)}
    assert only_reads.burst_costs_ns("sequential") is None
    both = _profile([_point("read", 8, 15), _point("write", 12, 70)])
    assert both.burst_costs_ns() == {"read": (8_000, 15_000), "write": (12_000, 70_000)}
    assert _profile(None).burst_costs_ns() is None
    # Sequential bursts are kept apart from the random ones, whichever comes first.
    four = _profile([_point("read", 8, 12, "sequential"), _point("read", 8, 15), _point("write", 12, 22, "sequential"),
                     _point("write", 12, 70)])
    assert four.burst_costs_ns() == {"read": (8_000, 15_000), "write": (12_000, 70_000)}
    assert four.burst_costs_ns("sequential") == {"read": (8_000, 12_000), "write": (12_000, 22_000)}


def test_profiles_with_and_without_bursts_load(tmp_path: Path) -> None:
    new = tmp_path / "new.toml"
    new.write_text(dump_profile(_profile([_point("read", 8, 15), _point("write", 12, 70)])))
    assert load_profile(new).burst_costs_ns() == {"read": (8_000, 15_000), "write": (12_000, 70_000)}
    old = tmp_path / "old.toml"
    text = dump_profile(_profile(None))
    assert "burst" not in text  # a profile made before the bursts were measured
    old.write_text(text)
    assert load_profile(old).burst is None
    # A profile made before sequential bursts were measured: its bursts were random.
    older = tmp_path / "older.toml"
    head, *bursts = new.read_text().split("[[burst]]")
    older.write_text("[[burst]]".join([head, *(b.replace('pattern = "random"\n', "") for b in bursts)]))
    assert len(bursts) == 2 and "pattern" not in "".join(older.read_text().split("[[burst]]")[1:])
    assert [b.pattern for b in load_profile(older).burst or []] == ["random", "random"]
    with pytest.raises(ValidationError, match="requests"):
        BurstPoint(op="read", requests=1, bursts=1, period_us=1, issue_us=1, finish_us=1, response_us=[1.0, 1.0])


# The requests issued while a request is in flight hold the CPUs (the hold): the head of
# a burst of writes is answered later than a write at rest.


def _holding(first_us: float, own_us: float, issue_us: float, requests: int = 4) -> DeviceProfile:
    """A profile whose writes at rest take ``own_us`` (their path at rest nothing:
    without writes back to back measured, writes take the reads' 2 ms point, 100 µs as
    the model) and whose burst of ``requests`` writes from rest, issued
    ``issue_us`` apart, answered its first at ``first_us``: the share fitted to it is
    the one that gives that first position back; 5 µs between completions, under any
    spacing here (no wait for the chain of replies)."""
    head = BurstPoint(op="write", requests=requests, bursts=10, period_us=10_000, issue_us=issue_us, finish_us=5,
                      response_us=[first_us] + [own_us] * (requests - 1))
    return _profile([_point("read", issue_us, 5), head]).model_copy(
        update={"at_rest": _rest(100), "at_rest_write": _rest(own_us, "write")})


def test_each_request_issued_while_one_is_in_flight_puts_its_reply_off() -> None:
    """Four writes due at once, 10 µs per issue, 100 µs each on its own, a burst's first
    answered at 145 µs: the three others issued at 10, 20 and 30 µs each put it off by
    15 µs, a share of 1.5. The second (issued at 10, alone at 110) sees two (140), the
    third one, the last none: 45, 30, 15 and 0 µs later (within a nanosecond: the share
    is fitted to whole nanoseconds)."""
    prof = _holding(145, 100, 10)
    assert _holds(prof)[1] == pytest.approx(1.5, rel=1e-4)
    got = _late(prof, np.zeros(4, np.int64), np.full(4, 100 * US, np.int64), np.zeros(4, bool))
    assert got.tolist() == pytest.approx([45 * US, 30 * US, 15 * US, 0], abs=1)


def test_only_the_requests_issued_before_the_reply_hold_it() -> None:
    """Four writes due at once, 10 µs per issue, 25 µs each on its own, a burst's first
    answered at 29 µs: alone at 25 µs, it lets in the one issued at 10 µs and the one at
    20, not the one at 30 (2 µs each: a share of 0.2). The second (issued at 10, alone at
    35) the ones at 20 and 30: 4; the third (20, alone at 45) the one at 30: 2."""
    prof = _holding(29, 25, 10)
    assert _holds(prof)[1] == pytest.approx(0.2, rel=1e-3)
    got = _late(prof, np.zeros(4, np.int64), np.full(4, 25 * US, np.int64), np.zeros(4, bool))
    assert got.tolist() == pytest.approx([4 * US, 4 * US, 2 * US, 0], abs=1)
    # Reads with no share, and requests that come alone (1 ms apart), wait for nothing.
    assert not _late(prof, np.zeros(4, np.int64), np.full(4, 25 * US, np.int64), np.ones(4, bool)).any()
    held = _holding(145, 100, 10)
    assert not _late(held, np.arange(4, dtype=np.int64) * 1000 * US, np.full(4, 100 * US, np.int64),
                     np.zeros(4, bool)).any()


def _rest(us: float, op: str = "read") -> ServicePoint:
    return ServicePoint(op=op, pattern="random", size=4096, iops=500, mean_us=us, min_us=us,
                        percentiles_us=[(50.0, us), (99.0, us)])


def _write_burst(head_us: float, requests: int = 32) -> BurstPoint:
    return BurstPoint(op="write", requests=requests, bursts=30, period_us=14_000, issue_us=8, finish_us=76,
                      response_us=[head_us] + [1000.0] * (requests - 1))


def _rest_profile(burst: list[BurstPoint], write_rest_us: float = 213) -> DeviceProfile:
    return _profile(burst).model_copy(update={"at_rest": _rest(100), "at_rest_write": _rest(write_rest_us, "write")})


def test_a_burst_of_writes_from_rest_gives_back_its_measured_curve() -> None:
    """calibrate's burst of 32 writes from rest: 8 µs per issue, 76 between completions,
    a write at rest 213 µs, the first position answered at 585 µs. The share that gives
    back the first position: the 31 others are all issued before its reply (the last at
    248 µs), so 585 = 213 + 31 × 8 × share, share 1.5 (12 µs per request issued).

    The model applied to that burst (the first write at its time at rest, 213 µs, the
    others at a back-to-back time of 130 µs): write p is issued at 8p µs; the path
    answers 213 + 76p µs after the burst's first issue (a response of 213 + 68p), and
    the 31 − p writes issued after it, all before its reply, hold it 12 µs each (a
    response of 130 + 12 (31 − p) = 502 − 12p); its response is the larger: 585 for the
    first, 490, 478, 466 for the next three, then 213 + 68p (485 at position 4, 2,321 at
    the last). Without the hold the first position came out at 213."""
    prof = _rest_profile([_point("read", 10, 17), _write_burst(585)])
    assert _holds(prof)[1] == pytest.approx(1.5, rel=1e-4)
    n = 32
    arrival, writes = np.zeros(n, np.int64), np.zeros(n, bool)
    # (The writes' path at rest is nothing: without writes back to back measured, they
    # take the reads' 2 ms point, 100 µs as the model.)
    sim = np.array([213] + [130] * (n - 1), np.int64) * US
    got = with_path(_frame(arrival, sim, writes), prof)["response_ns"].to_numpy() / US
    p = np.arange(n)
    want = np.where(p == 0, 585, np.maximum(213 + 68 * p, 502 - 12 * p))
    assert got == pytest.approx(want, abs=0.01)
    assert got[[0, 1, 2, 3, 4, 31]].round().tolist() == [585, 490, 478, 466, 485, 2321]
    # A burst whose first position was no later than at rest: no hold.
    no_hold = _rest_profile([_point("read", 10, 17), _write_burst(213)])
    assert with_path(_frame(arrival, sim, writes), no_hold)["response_ns"][0] / US == 213


def test_a_measured_burst_of_writes_is_nearer_with_the_hold() -> None:
    """A burst of 32 writes as calibrate measured it (a page-cached file on 2 CPUs:
    at rest 213 µs, back to back 131 µs in the model, 8.18 µs per issue,
    76.6 µs between completions): with the hold, the first position comes out at its
    measured 609 µs (213 without) and the positions' mean error falls from 18 % to 14 %;
    reads, whose first position is barely later than at rest, keep their curve."""
    measured = [608.55, 752.15, 820.41, 717.94, 776.09, 566.16, 712.67, 739.86, 834.0, 1153.0, 1354.0, 1306.0,
                1142.0, 1640.0, 1237.0, 1617.0, 1368.0, 1562.0, 1506.0, 1716.0, 1608.0, 1718.0, 1807.0, 1905.0,
                2103.0, 1980.0, 2290.0, 2353.0, 2451.0, 2347.0, 2363.0, 2474.0]
    burst = BurstPoint(op="write", requests=32, bursts=30, period_us=13_869, issue_us=8.18, finish_us=76.57,
                       response_us=measured)
    prof = _rest_profile([_point("read", 10, 17), burst], write_rest_us=212.95)
    unheld = _rest_profile([_point("read", 10, 17), burst.model_copy(update={"response_us": [212.95, *measured[1:]]})],
                           write_rest_us=212.95)  # a first position at rest: no hold
    n = 32
    arrival, writes = np.zeros(n, np.int64), np.zeros(n, bool)
    sim = (np.array([212.95] + [130.6] * (n - 1)) * US).astype(np.int64)
    before, after = (with_path(_frame(arrival, sim, writes), p)["response_ns"].to_numpy() / US for p in (unheld, prof))
    assert after[0] == pytest.approx(608.55, abs=0.5)
    err_before = float(np.mean(np.abs(before / measured - 1)))
    err_after = float(np.mean(np.abs(after / measured - 1)))
    assert err_before == pytest.approx(0.179, abs=0.005)
    assert err_after == pytest.approx(0.142, abs=0.005)


def test_no_hold_without_a_late_head_or_a_time_at_rest() -> None:
    # The first position no later than at rest (its spread: every write at rest 213 µs):
    # no share.
    assert _holds(_rest_profile([_write_burst(200)])) == (0.0, 0.0)
    # Reads measured in bursts only: writes take the reads' share.
    reads_only = _rest_profile([BurstPoint(op="read", requests=4, bursts=10, period_us=10_000, issue_us=10,
                                           finish_us=17, response_us=[115.0, 120.0, 130.0, 140.0])])
    read, write = _holds(reads_only)
    assert read == pytest.approx(0.5, rel=1e-4)  # 100 µs at rest, 3 issued before: 15 = 3 × 10 × 0.5
    assert write == read
    # A first position later than the median at rest (213 µs) but within the writes'
    # spread at rest (p90 400 µs): no evidence of a hold.
    spread = ServicePoint(op="write", pattern="random", size=4096, iops=500, mean_us=250, min_us=150,
                          percentiles_us=[(50.0, 213.0), (90.0, 400.0), (99.0, 900.0)])
    within = _profile([_write_burst(350)]).model_copy(update={"at_rest": _rest(100), "at_rest_write": spread})
    assert _holds(within) == (0.0, 0.0)
    # Past it: the share that gives back the first position, from the median at rest.
    past = within.model_copy(update={"burst": [_write_burst(585)]})
    assert _holds(past)[1] == pytest.approx(1.5, rel=1e-4)
    # Profiles without a time at rest (made before it was measured) or without bursts.
    assert _holds(_profile([_write_burst(585)])) == (0.0, 0.0)
    assert _holds(_profile(None)) == (0.0, 0.0)


def test_validate_holds_the_head_of_a_burst_of_writes() -> None:
    """Three writes due at once, simulated 100 µs each, nothing at rest to add (the
    profile's reads at rest take its model's 100 µs, and writes, with no service of their
    own measured, take the reads' path); 8 µs per issue, 10 between completions, share
    1.5. Issued at 0, 8 and 16 µs; the path answers them at 100, 110 and 120 µs
    (responses 100, 102, 104); the first is held by the two issued after it (12 µs
    each: a response of 124 µs), the second by one (112), the third by none: each takes
    the later of the two."""
    req = pl.DataFrame({"arrival_ns": [0, 0, 0], "finish_ns": [100, 100, 100], "response_ns": [100, 100, 100],
                        "is_read": [False, False, False]}).with_columns(
        pl.col("arrival_ns", "finish_ns", "response_ns").cast(pl.UInt64) * US)
    burst = BurstPoint(op="write", requests=32, bursts=30, period_us=14_000, issue_us=8, finish_us=10,
                       response_us=[100.0 + 31 * 12] + [1000.0] * 31)
    prof = _rest_profile([burst], write_rest_us=100)
    assert _holds(prof)[1] == pytest.approx(1.5, rel=1e-4)
    got = with_path(req, prof)
    assert got["response_ns"].to_list() == [124 * US, 112 * US, 104 * US]


def _train(offsets_kib: list[int]) -> tuple[pl.DataFrame, np.ndarray]:
    """Four 4 KiB writes of one tenant 38 µs apart (FIU's journal), 50 µs each
    simulated, at the offsets given; the trace's offsets by request id."""
    n = len(offsets_kib)
    req = pl.DataFrame({"id": np.arange(n), "tenant": np.zeros(n, np.uint32),
                        "arrival_ns": np.arange(n) * 38 * US, "finish_ns": np.arange(n) * 38 * US + 50 * US,
                        "response_ns": np.full(n, 50 * US), "size": np.full(n, 4096, np.uint32),
                        "is_read": np.zeros(n, bool)}).with_columns(
        pl.col("id", "arrival_ns", "finish_ns", "response_ns").cast(pl.UInt64))
    return req, np.array(offsets_kib, dtype=np.uint64) * 1024


def test_sequential_writes_are_spaced_by_the_sequential_bursts() -> None:
    """The train of test_a_train_of_writes_slower_than_its_spacing_queues through
    validate: random writes 80 µs apart in bursts reply 0, 42, 84, 126 µs late; the
    same writes each continuing the one before, with sequential bursts 25 µs apart
    (below the 38 µs spacing), reply on time. Issued 38 µs apart, each after the replay
    finished the one before (12 µs per issue)."""
    prof = _profile([_point("read", 10, 15), _point("write", 12, 80), _point("write", 12, 25, "sequential")])
    rand, rand_off = _train([0, 400, 80, 1000])
    late = [0, 42 * US, 84 * US, 126 * US]
    assert (with_path(rand, prof, rand_off)["response_ns"].to_numpy() - 50 * US).tolist() == late
    seq, seq_off = _train([0, 4, 8, 12])
    assert with_path(seq, prof, seq_off)["response_ns"].to_list() == [50 * US] * 4
    # Without the offsets, or with a profile made before sequential bursts were
    # measured, every request takes the random bursts' spacing.
    assert (with_path(seq, prof)["response_ns"].to_numpy() - 50 * US).tolist() == late
    older = _profile([_point("read", 10, 15), _point("write", 12, 80)])
    assert (with_path(seq, older, seq_off)["response_ns"].to_numpy() - 50 * US).tolist() == late
