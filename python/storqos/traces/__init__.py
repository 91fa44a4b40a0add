"""Block I/O traces: readers for every supported format, transforms and statistics.

A trace is a plain polars DataFrame with the canonical columns of
:mod:`storqos.traces.schema` (``arrival_ns, is_read, offset, size, device, tenant`` plus
optional ``response_ns, process, host``), sorted by time and rebased to start at 0.

>>> from storqos.traces import read_trace, stats, bundled
>>> df = read_trace(bundled("websearch"))
>>> stats(df)["count"]
8000

Formats (:data:`FORMATS`): ``spc``, ``msr``, ``disksim`` (ms), ``mqsim`` (ns), ``blkparse``, ``fiu``, ``srt``,
``vscsi``, ``fio``, ``parquet``, ``csv``; one module each. Bad input raises
:class:`storqos.base.errors.InputError` naming the file and line (``trace.csv:17``) or byte
(``trace.srt: byte 2260``) and what is wrong.
"""

from __future__ import annotations

from storqos.traces.blkparse import read_blkparse
from storqos.traces.bundled import BUNDLED, bundled
from storqos.traces.detect import detect_format
from storqos.traces.disksim import read_disksim, read_mqsim, write_disksim, write_mqsim
from storqos.traces.fio import read_fio, write_fio
from storqos.traces.fiu import read_fiu
from storqos.traces.msr import read_msr
from storqos.traces.reader import FORMATS, READERS, TIME_UNIT_FORMATS, read_trace
from storqos.traces.schema import OPTIONAL_COLUMNS, REQUIRED_COLUMNS, SCHEMA, TIME_UNITS, conform, empty_trace
from storqos.traces.spc import read_spc, write_spc
from storqos.traces.srt import read_srt, write_srt
from storqos.traces.stats import busiest_windows, busy_window_length, peak_iops, size_histogram, stats
from storqos.traces.tabular import read_csv, read_parquet, write_csv, write_parquet
from storqos.traces.transform import merge, scale_rate, split_tenants, time_window
from storqos.traces.vscsi import read_vscsi, write_vscsi

__all__ = [
    "BUNDLED",
    "FORMATS",
    "OPTIONAL_COLUMNS",
    "READERS",
    "REQUIRED_COLUMNS",
    "SCHEMA",
    "TIME_UNITS",
    "TIME_UNIT_FORMATS",
    "bundled",
    "busiest_windows",
    "busy_window_length",
    "conform",
    "detect_format",
    "empty_trace",
    "merge",
    "peak_iops",
    "read_blkparse",
    "read_csv",
    "read_disksim",
    "read_fio",
    "read_fiu",
    "read_mqsim",
    "read_msr",
    "read_parquet",
    "read_spc",
    "read_srt",
    "read_trace",
    "read_vscsi",
    "scale_rate",
    "size_histogram",
    "split_tenants",
    "stats",
    "time_window",
    "write_csv",
    "write_disksim",
    "write_fio",
    "write_mqsim",
    "write_parquet",
    "write_spc",
    "write_srt",
    "write_vscsi",
]
