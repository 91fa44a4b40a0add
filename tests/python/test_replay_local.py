"""`storqos replay TRACE FILE`: a trace replayed to a local file or block device with
direct I/O; every request answered and logged in the simulator's columns, each at or
after its trace time; writes only when asked; NBD-only options refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
from conftest import assert_one_line_error, run_cli


def _trace(n: int, rate: float, *, tenants: int = 2, reads: float = 1.0, seed: int = 3) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return pl.DataFrame({
        "arrival_ns": np.cumsum(rng.exponential(1e9 / rate, n)).astype(np.int64),
        "is_read": rng.random(n) < reads, "offset": (rng.integers(0, 1 << 14, n) * 4096).astype(np.uint64),
        "size": np.full(n, 4096, np.uint32), "tenant": (np.arange(n) % tenants).astype(np.uint32)})


def _image(path: Path, size: int = 8 << 20) -> Path:
    path.write_bytes(bytes(range(256)) * (size // 256))
    return path


def test_replays_reads_to_a_file_and_logs_every_request(tmp_path: Path) -> None:
    trace, image, out = tmp_path / "t.csv", _image(tmp_path / "disk.img"), tmp_path / "local.parquet"
    _trace(300, 1000.0).write_csv(trace)
    r = run_cli("replay", str(trace), str(image), "--out", str(out), "--json")
    assert r.code == 0, r.err
    summary = json.loads(r.out)
    assert [t["completed"] for t in summary["tenants"]] == [150, 150] and summary["errors"] == 0
    # 300 requests at 1,000 a second: the trace spans about 0.3 s, which the replay keeps
    assert 0.2 < summary["span_s"] < 2.0, summary
    log = pl.read_parquet(out)
    assert log.height == 300 and (log["response_ns"] > 0).all()
    assert sorted(log["tenant"].unique().to_list()) == [0, 1]
    assert (log["finish_ns"] >= log["arrival_ns"]).all()


def test_writes_need_writes_and_change_the_file(tmp_path: Path) -> None:
    trace, image = tmp_path / "t.csv", _image(tmp_path / "disk.img")
    _trace(100, 2000.0, reads=0.5).write_csv(trace)
    before = image.read_bytes()
    assert_one_line_error(run_cli("replay", str(trace), str(image)), "--writes", "writes", "overwrite")
    assert image.read_bytes() == before  # refused before anything was sent
    r = run_cli("replay", str(trace), str(image), "--writes", "--json")
    assert r.code == 0, r.err
    assert sum(t["completed"] for t in json.loads(r.out)["tenants"]) == 100


def test_options_of_nbd_only_and_missing_devices_are_one_line(tmp_path: Path) -> None:
    trace, image = tmp_path / "t.csv", _image(tmp_path / "disk.img")
    _trace(20, 1000.0).write_csv(trace)
    assert_one_line_error(run_cli("replay", str(trace), str(image), "--tenant-map", "1=b"), "--tenant-map",
                          "NBD only")
    assert_one_line_error(run_cli("replay", str(trace), str(image), "--closed", "4"), "--closed", "NBD only")
    assert_one_line_error(run_cli("replay", str(trace), str(tmp_path / "nope.img")), "nope.img",
                          "no such file or device")
    assert_one_line_error(run_cli("replay", str(trace), "nbd://127.0.0.1:1/a", "--writes"), "--writes")
    # a mistyped URI is read as a URI, not as a file name
    assert_one_line_error(run_cli("replay", str(trace), "nbd:/127.0.0.1/a"), "URI")
