"""A table written as it grows: rows arrive in batches (a live gateway's per-window
series, every 100 ms for as long as it serves) and go to the file in chunks, so the
series never has to sit in memory. Like :func:`storqos.base.paths.write_table` the file is
whole or absent: rows go to a part file (:class:`storqos.base.paths.Replacement`), put in
place by :meth:`close` (:meth:`abort` removes it).

>>> s = TableStream(Path(tmp) / "w.csv", {"t": pl.Int64})  # doctest: +SKIP
>>> s.add([{"t": 1}]); s.close()  # doctest: +SKIP
1
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

import polars as pl
import pyarrow.parquet as pq

from storqos.base.paths import Replacement, check_table_file

#: Rows held before a chunk is written.
CHUNK_ROWS = 65_536


class TableStream:
    """Rows of ``schema`` appended to ``path`` (.csv, .json or .parquet, by its suffix)."""

    def __init__(self, path: Path, schema: dict[str, Any], where: str = "--out", chunk_rows: int = CHUNK_ROWS) -> None:
        self.suffix = check_table_file(path, where)
        self.path, self.schema, self.chunk_rows = path, schema, chunk_rows
        self._out = Replacement(path)
        self.part = self._out.part
        self.pending: list[dict[str, Any]] = []
        self.rows = 0
        self._file: IO[Any] | None = None
        self._parquet: pq.ParquetWriter | None = None

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Append ``rows`` (written once a chunk's worth is pending)."""
        self.pending.extend(rows)
        if len(self.pending) >= self.chunk_rows:
            self._write()

    def _write(self) -> None:
        df = pl.DataFrame(self.pending, schema=self.schema, orient="row") if self.pending else None
        first = self.rows == 0 and self._file is None and self._parquet is None
        if self.suffix == ".parquet":
            if self._parquet is None:
                self._parquet = pq.ParquetWriter(self.part, pl.DataFrame(schema=self.schema).to_arrow().schema)
            if df is not None:
                self._parquet.write_table(df.to_arrow())
        else:
            if self._file is None:
                self._file = open(self.part, "w", encoding="utf-8")  # noqa: SIM115 (closed in close/abort)
            if self.suffix == ".csv":
                (df if df is not None else pl.DataFrame(schema=self.schema)).write_csv(
                    self._file, include_header=first)
            else:
                for i, row in enumerate(df.to_dicts() if df is not None else []):
                    lead = "[\n  " if first and i == 0 else ",\n  "
                    self._file.write(lead + json.dumps(row, default=float))
        self.rows += len(self.pending)
        self.pending = []

    def close(self) -> int:
        """Write what is pending, move the file into place; the number of rows."""
        self._write()
        if self._parquet is not None:
            self._parquet.close()
        if self._file is not None:
            if self.suffix == ".json":
                self._file.write("\n]\n" if self.rows else "[]\n")
            self._file.close()
        self._out.commit()
        return self.rows

    def abort(self) -> None:
        """Drop the part file (the previous file at ``path``, if any, stays)."""
        for closer in (self._parquet, self._file):
            if closer is not None:
                try:
                    closer.close()
                except Exception:  # noqa: BLE001 (best effort on the way out)
                    pass
        self._out.abort()


__all__ = ["CHUNK_ROWS", "TableStream"]
