"""The trace format names storqos reads, and which of them leave the time unit open."""

from __future__ import annotations

#: Every format name accepted by ``format=`` / ``--format``.
FORMATS: tuple[str, ...] = (
    "spc", "msr", "disksim", "mqsim", "blkparse", "fiu", "srt", "vscsi", "fio", "parquet", "csv",
)

#: Formats whose timestamps have no fixed unit (``time_unit`` applies; each has a default).
TIME_UNIT_FORMATS: tuple[str, ...] = ("disksim", "mqsim", "spc", "fio", "csv", "parquet")
