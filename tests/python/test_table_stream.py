"""TableStream: a live gateway's per-window series goes to --out in chunks as it grows
(memory stays bounded however long it serves), and the file is whole or absent."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from storqos.base.errors import InputError
from storqos.base.table_stream import TableStream

SCHEMA = {"start_s": pl.Float64, "tenant": pl.Int64, "name": pl.Utf8}


def _rows(n: int, first: int = 0) -> list[dict[str, object]]:
    return [{"start_s": i / 10, "tenant": i % 3, "name": f"r{i}"} for i in range(first, first + n)]


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_chunks_are_written_as_they_come_and_read_back_whole(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"series{suffix}"
    s = TableStream(path, SCHEMA, chunk_rows=4)
    s.add(_rows(3))
    assert (len(s.pending), s.rows) == (3, 0), "below a chunk: held"
    s.add(_rows(3, 3))  # 6 pending >= 4: written, nothing held
    assert s.pending == [] and s.rows == 6
    assert not path.exists(), "the file appears only when the series is complete"
    s.add(_rows(5, 6))
    assert s.close() == 11
    want = pl.DataFrame(_rows(11), schema=SCHEMA)
    if suffix == ".csv":
        got = pl.read_csv(path, schema=SCHEMA)
    elif suffix == ".json":
        got = pl.DataFrame(json.loads(path.read_text()), schema=SCHEMA)
    else:
        got = pl.read_parquet(path)
    assert got.equals(want)
    assert not s.part.exists()


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_an_empty_series_is_an_empty_table(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"empty{suffix}"
    assert TableStream(path, SCHEMA).close() == 0
    if suffix == ".json":
        assert json.loads(path.read_text()) == []
    elif suffix == ".csv":
        assert path.read_text().strip() == "start_s,tenant,name"
    else:
        assert pl.read_parquet(path).schema == pl.Schema(SCHEMA)


def test_abort_keeps_the_previous_file_and_bad_suffixes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text("old\n")
    s = TableStream(path, SCHEMA, chunk_rows=1)
    s.add(_rows(2))
    s.abort()
    assert path.read_text() == "old\n" and not s.part.exists()
    with pytest.raises(InputError, match="unknown output type"):
        TableStream(tmp_path / "s.xlsx", SCHEMA)
