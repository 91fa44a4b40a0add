"""Bad input: every reader names the file and line (or byte) and says what is wrong."""

from __future__ import annotations

import random
import re
import struct
from pathlib import Path

import polars as pl
import pytest
from storqos.base.errors import InputError
from storqos.traces import read_trace, write_srt, write_vscsi

GOOD_DISKSIM = "0 0 0 8 1\n1000 1 8 16 0\n2000 0 16 8 1\n"


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content)
    return p


def _error(path: Path, **kwargs: object) -> InputError:
    with pytest.raises(InputError) as e:
        read_trace(path, **kwargs)  # type: ignore[arg-type]
    return e.value


def _assert_at(err: InputError, path: Path, line: int, *fragments: str) -> None:
    assert err.where == f"{path}:{line}", str(err)
    assert str(err).startswith(f"{path}:{line}: ")
    for frag in fragments:
        assert frag in err.message, f"{frag!r} not in {err.message!r}"


# ------------------------------------------------------------------------ empty files


@pytest.mark.parametrize("fmt", ["disksim", "spc", "msr", "fiu", "blkparse", "fio", "csv", "srt", "vscsi", "parquet"])
def test_empty_file(tmp_path: Path, fmt: str) -> None:
    p = _write(tmp_path, "empty.trace", "")
    err = _error(p, format=fmt)
    assert err.where == str(p) and "empty file" in err.message


def test_empty_file_autodetect(tmp_path: Path) -> None:
    p = _write(tmp_path, "empty.trace", "")
    assert "empty file" in str(_error(p))


@pytest.mark.parametrize(
    ("fmt", "text"),
    [
        ("disksim", "\n\n  \n"),
        ("csv", "time,op,offset,size\n"),
        ("fio", "fio version 3 iolog\n0 f add\n0 f open\n0 f close\n"),
        ("blkparse", "  8,0    1        1     0.1   697  G   R 0 + 8 [fio]\nTotal (8,0):\n"),
    ],
)
def test_file_without_requests(tmp_path: Path, fmt: str, text: str) -> None:
    p = _write(tmp_path, "t.txt", text)
    err = _error(p, format=fmt)
    assert err.where == str(p) and "no requests" in err.message


def test_missing_file(tmp_path: Path) -> None:
    err = _error(tmp_path / "nope.trace")
    assert err.where == str(tmp_path / "nope.trace") and "no such file" in err.message


# --------------------------------------------------------------- truncated binaries


def test_srt_truncated_record(tmp_path: Path) -> None:
    p = tmp_path / "t.srt"
    write_srt(pl.DataFrame({"arrival_ns": [0, 10], "is_read": [True, False], "offset": [0, 512],
                            "size": [512, 1024], "device": ["0", "0"]}), p)
    data = p.read_bytes()
    header = data.index(b"\x0c") + 1
    _write(tmp_path, "t.srt", data[:-36])  # second record keeps 20 of its 56 bytes
    err = _error(p, format="srt")
    assert err.where == f"{p}: byte {header + 56}"
    assert err.message == "truncated record: 20 of 56 bytes"


def test_srt_bad_record_size(tmp_path: Path) -> None:
    body = struct.pack(">14I", 56, (4 << 16) | 1, 0, 0, 0, 0, 512, 0, 0, 0, 0, 1, 0, 0)
    bad = struct.pack(">14I", 7, (4 << 16) | 1, 0, 0, 0, 0, 512, 0, 0, 0, 0, 1, 0, 0)
    p = _write(tmp_path, "t.srt", b'system = "x";\n\x0c' + body + bad)
    err = _error(p, format="srt")
    assert err.where == f"{p}: byte {15 + 56}" and "bad record size 7" in err.message


def test_srt_unknown_record_type(tmp_path: Path) -> None:
    rec = struct.pack(">14I", 56, (4 << 16) | 9, 0, 0, 0, 0, 512, 0, 0, 0, 0, 1, 0, 0)
    p = _write(tmp_path, "t.srt", b'system = "x";\n\x0c' + rec)
    err = _error(p, format="srt")
    assert err.where == f"{p}: byte 15" and "unknown SRT record type 9" in err.message


def test_srt_without_header_end(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.srt", b"version = 1.3;\n" + b"\x00" * 56)
    assert "form feed" in _error(p, format="srt").message


@pytest.mark.parametrize(("version", "size"), [(1, 32), (2, 40)])
def test_vscsi_truncated_record(tmp_path: Path, version: int, size: int) -> None:
    p = tmp_path / "t.vscsi"
    df = pl.DataFrame({"arrival_ns": [0, 1000, 2000], "is_read": [True, False, True],
                       "offset": [0, 512, 1024], "size": [512, 512, 512], "device": ["0"] * 3})
    write_vscsi(df, p, version=version)
    p.write_bytes(p.read_bytes()[:-(size - 20)])
    err = _error(p, format="vscsi")
    assert err.where == f"{p}: byte {2 * size}"
    assert err.message == f"truncated record: 20 of {size} bytes"


def test_vscsi_wrong_version_in_a_record(tmp_path: Path) -> None:
    rec = struct.Struct("<IIIHHQQ")
    data = rec.pack(0, 512, 1, 0x28, 0x100, 0, 0) * 2 + rec.pack(2, 512, 1, 0x28, 0x300, 0, 5)
    p = _write(tmp_path, "t.vscsi", data)
    err = _error(p, format="vscsi")
    assert err.where == f"{p}: byte 64" and "record version 3, expected 1" in err.message


def test_vscsi_not_vscsi(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.vscsi", b"\x00" * 80)
    err = _error(p, format="vscsi")
    assert err.where == f"{p}: byte 0" and "not a vscsi trace" in err.message


# -------------------------------------------------------------- non-numeric fields


@pytest.mark.parametrize(
    ("fmt", "text", "line", "fragment"),
    [
        ("disksim", "0 0 0 8 1\n100 0 x12 8 1\n", 2, "field 3 (lba) is not a number: 'x12'"),
        ("disksim", "0 0 0 8 1\n1oo 0 12 8 1\n", 2, "field 1 (time) is not a number: '1oo'"),
        ("disksim", "0 0 0 8 1\n100 0 12 8.5 1\n", 2, "field 4 (sectors) is not an integer: '8.5'"),
        ("spc", "0,10,4096,r,0.5\n0,1O,4096,r,0.6\n", 2, "field 2 (LBA) is not a number: '1O'"),
        ("msr", "128166386783630075,hm,0,Read,0,4096,2896\n128166386783630076,hm,0,Read,zero,4096,1\n", 2,
         "field 5 (offset) is not a number: 'zero'"),
        ("fiu", "\t0\t1\t2\t3\t4\t5\t6\t7\t8\n0\t1\t1\tp\t8\t8\tR\t6\t0\tm\n1\t2\t1\tp\t8\tq\tR\t6\t0\tm\n", 3,
         "field 6 (size) is not a number: 'q'"),
        ("blkparse", "  8,0  1  1  0.1  697  Q  R 0 + 8 [a]\n  8,0  1  2  0.2  697  Q  R 8 + 8x [a]\n", 2,
         "field 10 (sectors) is not a number: '8x'"),
        ("fio", "fio version 3 iolog\n0 f add\n1 f read 0 4096\n2 f read 0x10 4096\n", 4,
         "field 4 (offset) is not a number: '0x10'"),
        ("csv", "time,op,lba,size\n0.5,r,10,4096\n0.6,r,x12,4096\n", 3, "field 3 (lba) is not a number: 'x12'"),
    ],
    ids=["disksim-lba", "disksim-time", "disksim-float", "spc", "msr", "fiu", "blkparse", "fio", "csv"],
)
def test_non_numeric_field(tmp_path: Path, fmt: str, text: str, line: int, fragment: str) -> None:
    p = _write(tmp_path, "bad.trace", text)
    _assert_at(_error(p, format=fmt), p, line, fragment)


def test_non_numeric_field_deep_in_a_large_file(tmp_path: Path) -> None:
    lines = [f"{i * 1000} {i % 4} {i * 8} 8 {i % 2}" for i in range(200_000)]
    lines[123_456] = "123456000 0 12345x 8 1"
    p = _write(tmp_path, "big.trace", "\n".join(lines) + "\n")
    _assert_at(_error(p), p, 123_457, "field 3 (lba) is not a number: '12345x'")


def test_parquet_bad_value_names_the_row(tmp_path: Path) -> None:
    p = tmp_path / "t.parquet"
    pl.DataFrame({"time": ["0.1", "0.2", "abc"], "op": ["r", "w", "r"], "offset": [0, 1, 2],
                  "size": [512, 512, 512]}).write_parquet(p)
    err = _error(p)
    assert err.where == f"{p}: row 3" and "field 1 (time) is not a number: 'abc'" in err.message


# ----------------------------------------------------------- negative or zero size


@pytest.mark.parametrize(
    ("fmt", "text", "line", "fragment"),
    [
        ("disksim", GOOD_DISKSIM + "3000 0 8 0 1\n", 4, "field 4 (sectors) must be a positive size, got '0'"),
        ("spc", "0,10,4096,r,0.5\n0,10,-4096,r,0.6\n", 2, "field 3 (size) must be a positive size, got '-4096'"),
        ("msr", "128166386783630075,hm,0,Read,0,0,2896\n", 1, "field 6 (size) must be a positive size, got '0'"),
        ("fio", "fio version 3 iolog\n1 f write 0 0\n", 2, "field 5 (length) must be a positive size, got '0'"),
        ("csv", "time,op,offset,size\n0,r,0,512\n1,w,0,-1\n", 3, "field 4 (size) must be a positive size, got '-1'"),
        ("disksim", "0 0 -8 8 1\n", 1, "field 3 (lba) is negative: '-8'"),
        # the fast parse once read -1 as all bits set, a read: the line's flags are wrong
        ("disksim", GOOD_DISKSIM + "3000 0 8 8 -1\n", 4, "field 5 (flags) is negative: '-1'"),
    ],
    ids=["disksim", "spc", "msr", "fio", "csv", "negative-lba", "negative-flags"],
)
def test_bad_size(tmp_path: Path, fmt: str, text: str, line: int, fragment: str) -> None:
    p = _write(tmp_path, "bad.trace", text)
    _assert_at(_error(p, format=fmt), p, line, fragment)


def test_zero_size_in_binaries(tmp_path: Path) -> None:
    df = pl.DataFrame({"arrival_ns": [0, 1000], "is_read": [True, True], "offset": [0, 512],
                       "size": [512, 0], "device": ["0", "0"]})
    write_vscsi(df, tmp_path / "t.vscsi")
    err = _error(tmp_path / "t.vscsi")
    assert err.where == f"{tmp_path / 't.vscsi'}: byte 32" and "size 0 bytes" in err.message
    write_srt(df, tmp_path / "t.srt")
    err = _error(tmp_path / "t.srt")
    assert re.fullmatch(rf"{re.escape(str(tmp_path / 't.srt'))}: byte \d+", err.where or "")
    assert "size 0 bytes" in err.message


# ---------------------------------------------------------- timestamps going backwards

BACKWARDS = [
    ("spc", "0,10,4096,r,1.0\n0,10,4096,r,2.0\n0,10,4096,r,1.5\n", 3,
     "timestamp 1.5 s is before the previous one (2.0 s); pass --sort to sort the trace"),
    ("mqsim", "0 0 0 8 1\n2000 0 0 8 1\n1500 0 0 8 1\n", 3,
     "timestamp 1500 ns is before the previous one (2000 ns); pass --sort"),
    ("msr", "128166386783630075,hm,0,Read,0,4096,1\n128166386783630070,hm,0,Read,0,4096,1\n", 2,
     "timestamp 128166386783630070 (100-ns ticks) is before the previous one (128166386783630075 (100-ns ticks))"),
    ("fiu", "\t0\t1\t2\t3\t4\t5\t6\t7\t8\n0\t9\t1\tp\t8\t8\tR\t6\t0\tm\n1\t2\t1\tp\t8\t8\tR\t6\t0\tm\n", 3,
     "timestamp 2 ns is before the previous one (9 ns)"),
    ("blkparse", "  8,0  1  1  0.2  697  Q  R 0 + 8 [a]\n  8,0  1  2  0.1  697  Q  R 8 + 8 [a]\n", 2,
     "timestamp 0.1 s is before the previous one (0.2 s)"),
    ("fio", "fio version 3 iolog\n5 f read 0 4096\n3 f read 0 4096\n", 3,
     "timestamp 3 ms is before the previous one (5 ms)"),
    ("csv", "time_ms,op,offset,size\n5,r,0,512\n3,w,0,512\n", 3, "timestamp 3 ms is before the previous one (5 ms)"),
]


@pytest.mark.parametrize(("fmt", "text", "line", "fragment"), BACKWARDS, ids=[b[0] for b in BACKWARDS])
def test_timestamps_backwards(tmp_path: Path, fmt: str, text: str, line: int, fragment: str) -> None:
    p = _write(tmp_path, "bad.trace", text)
    _assert_at(_error(p, format=fmt), p, line, fragment, "--sort")
    df = read_trace(p, format=fmt, sort=True)
    assert df["arrival_ns"].is_sorted() and df["arrival_ns"][0] == 0


def test_timestamps_backwards_in_binaries(tmp_path: Path) -> None:
    df = pl.DataFrame({"arrival_ns": [0, 5_000_000, 3_000_000], "is_read": [True, False, True],
                       "offset": [0, 512, 1024], "size": [512, 1024, 2048], "device": ["0", "0", "1"]})
    write_vscsi(df, tmp_path / "t.vscsi")
    err = _error(tmp_path / "t.vscsi")
    assert err.where == f"{tmp_path / 't.vscsi'}: byte 64"
    assert "timestamp 3000 us is before the previous one (5000 us); pass --sort" in err.message
    write_srt(df, tmp_path / "t.srt")
    err = _error(tmp_path / "t.srt")
    assert "timestamp 0.003000 s is before the previous one (0.005000 s); pass --sort" in err.message
    for name in ("t.vscsi", "t.srt"):
        out = read_trace(tmp_path / name, sort=True)
        assert out["size"].to_list() == [512, 2048, 1024]


# --------------------------------------------------------- wrong number of fields


@pytest.mark.parametrize(
    ("fmt", "text", "line", "fragment"),
    [
        ("disksim", "0 0 0 8 1\n100 0 12 8\n", 2, "expected 5 fields (time device lba sectors flags), found 4"),
        ("disksim", "0 0 0 8 1\n100 0 12 8 1 9\n", 2, "expected 5 fields (time device lba sectors flags), found 6"),
        ("spc", "0,10,4096,r,0.5\n0,10,4096,r\n", 2, "expected 5 fields (ASU,LBA,size,opcode,timestamp), found 4"),
        ("msr", "128166386783630075,hm,0,Read,0,4096,1,extra\n", 1, "expected 7 fields"),
        ("fiu", "\t0\t1\t2\t3\t4\t5\t6\t7\t8\n0\t1\t1\tp\t8\t8\tR\t6\t0\n", 2, "expected 10 fields"),
        ("fio", "fio version 3 iolog\n1 f read 0\n", 2, "expected 5 fields"),
        ("csv", "time,op,offset,size\n0,r,0,512\n1,w,0\n", 3, "expected 4 fields (as in the header), found 3"),
        ("csv", "time,op,offset,size\n0,r,0,512\n1,w,0,512,9\n", 3, "expected 4 fields (as in the header), found 5"),
    ],
    ids=["disksim-short", "disksim-long", "spc", "msr", "fiu", "fio", "csv-short", "csv-long"],
)
def test_wrong_number_of_fields(tmp_path: Path, fmt: str, text: str, line: int, fragment: str) -> None:
    p = _write(tmp_path, "bad.trace", text)
    _assert_at(_error(p, format=fmt), p, line, fragment)


# ---------------------------------------------------------------------- unknown op


@pytest.mark.parametrize(
    ("fmt", "text", "line", "fragment"),
    [
        ("spc", "0,10,4096,r,0.5\n0,10,4096,x,0.6\n", 2, "unknown op 'x' in field 4 (opcode); expected r or w"),
        ("msr", "128166386783630075,hm,0,Trim,0,4096,1\n", 1, "unknown op 'Trim' in field 4 (type)"),
        ("fiu", "\t0\t1\t2\t3\t4\t5\t6\t7\t8\n0\t1\t1\tp\t8\t8\tX\t6\t0\tm\n", 2, "unknown op 'X' in field 7 (op)"),
        ("blkparse", "  8,0  1  1  0.1  697  Q  RZ 0 + 8 [a]\n", 1, "unknown op 'RZ' in field 7 (rwbs)"),
        ("fio", "fio version 2 iolog\nf add\nf erase 0 4096\n", 3, "unknown op 'erase' in field 2 (action)"),
        ("csv", "time,op,offset,size\n0,r,0,512\n1,delete,0,512\n", 3, "unknown op 'delete' in field 2 (op)"),
    ],
    ids=["spc", "msr", "fiu", "blkparse", "fio", "csv"],
)
def test_unknown_op(tmp_path: Path, fmt: str, text: str, line: int, fragment: str) -> None:
    p = _write(tmp_path, "bad.trace", text)
    _assert_at(_error(p, format=fmt), p, line, fragment)


def test_unknown_disksim_flag_bits_are_not_an_error(tmp_path: Path) -> None:
    # DiskSim defines more flag bits; only bit 0 (read) matters here
    p = _write(tmp_path, "t.trace", "0 0 0 8 3\n1 0 0 8 2\n")
    assert read_trace(p)["is_read"].to_list() == [True, False]
    # flags wider than 32 bits are read too (by the exact pass), bit 0 as always
    p = _write(tmp_path, "wide.trace", "0 0 0 8 4294967297\n1 0 0 8 4294967296\n")
    assert read_trace(p, format="disksim")["is_read"].to_list() == [True, False]


# ------------------------------------------------------------------- other input


def test_unknown_format_name(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.trace", GOOD_DISKSIM)
    err = _error(p, format="dsksim")
    assert err.where == "--format" and "unknown trace format 'dsksim'" in err.message
    assert "disksim" in err.message and "vscsi" in err.message


def test_bad_time_unit(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.trace", GOOD_DISKSIM)
    err = _error(p, time_unit="hours")
    assert err.where == "--time-unit" and "unknown time unit 'hours'" in err.message


def test_fio_without_header(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.log", "f read 0 4096\n")
    _assert_at(_error(p, format="fio"), p, 1, "not a fio iolog")


def test_csv_without_required_column(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.csv", "time,offset,size\n0,0,512\n")
    _assert_at(_error(p, format="csv"), p, 1, "no op column")


def test_csv_ambiguous_columns(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.csv", "time,op,offset,lba,size\n0,r,0,0,512\n")
    _assert_at(_error(p, format="csv"), p, 1, "ambiguous offset columns")


def test_size_too_large(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.trace", "0 0 0 8388608 1\n")  # 4 GiB
    _assert_at(_error(p), p, 1, "field 4 (sectors) is too large")


def test_error_is_one_line(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.trace", "0 0 0 8 1\n1 0 zz 8 1\n")
    assert "\n" not in str(_error(p))


# ------------------------------------------------- values beyond Int64: errors, never wrapped

# 2^55 + 1 sectors is 2^64 + 512 bytes: multiplied in Int64 it would wrap around to 512.
WRAPS = str(2**55 + 1)
HUGE = str(2**64)


@pytest.mark.parametrize(
    ("fmt", "text", "line", "fragment"),
    [
        ("spc", f"0,0,4096,r,0.0\n0,{WRAPS},4096,r,0.1\n", 2, "field 2 (LBA) is out of range"),
        ("spc", f"0,0,4096,r,0.0\n0,{HUGE},4096,r,0.1\n", 2, "field 2 (LBA) is out of range"),
        ("disksim", f"0 0 0 8 1\n1000 0 {WRAPS} 8 1\n", 2, "field 3 (lba) is out of range"),
        ("fiu", f"0 1 p {WRAPS} 8 R 8 0 h\n", 1, "field 4 (lba) is out of range"),
        ("msr", f"128166386783630075,hm,0,Write,{HUGE},4096,897\n", 1, "field 5 (offset) is out of range"),
        ("msr", f"128166386783630075,hm,0,Write,0,4096,{2**62}\n", 1, "field 7 (response time) is out of range"),
        ("fio", f"fio version 3 iolog\n0 f add\n0 f open\n1 f read {HUGE} 4096\n", 4, "field 4 (offset) is out of range"),
        ("blkparse", f"  8,0    1        1     0.1   697  Q   R {WRAPS} + 8 [fio]\n", 1, "field 8 (sector) is out of range"),
        ("csv", f"time_s,op,offset,size\n0,r,0,512\n1,r,{HUGE},512\n", 3, "field 3 (offset) is out of range"),
        ("csv", f"time_s,op,lba,size\n0,r,0,512\n1,r,{WRAPS},512\n", 3, "field 3 (lba) is out of range"),
        # 10^15 s after the first request is beyond 2^63 ns (292 years).
        ("spc", "0,0,4096,r,0.0\n0,0,4096,r,1e15\n", 2, "timestamp 1e15 s is out of range: more than 292 years"),
        ("mqsim", "0 0 0 8 1\n1e19 0 8 8 1\n", 2, "timestamp 1e19 ns is out of range"),
        ("fio", "fio version 3 iolog\n0 f add\n0 f open\n1 f read 0 4096\n1e17 f read 0 4096\n", 5, "timestamp 1e17 ms is out of range"),
        ("csv", "time_s,op,offset,size\n0,r,0,512\n1e300,r,0,512\n", 3, "field 1 (time_s) is out of range"),
    ],
)
def test_offset_or_time_span_beyond_int64(tmp_path: Path, fmt: str, text: str, line: int, fragment: str) -> None:
    p = _write(tmp_path, "t.trace", text)
    _assert_at(_error(p, format=fmt), p, line, fragment)


def test_time_span_beyond_int64_ns_when_sorting(tmp_path: Path) -> None:
    # With --sort the earliest request may come later in the file: the span counts.
    p = _write(tmp_path, "t.spc", "0,0,4096,r,5e9\n0,0,4096,r,1e9\n0,0,4096,r,6e9\n")
    assert read_trace(p, format="spc", sort=True)["arrival_ns"].to_list() == [0, 4 * 10**18, 5 * 10**18]
    # The same in the exact pass (a quirk, the blank-padded field, forces it).
    p = _write(tmp_path, "t.spc", "0,0,4096,r,5e9\n0,0,4096,r,1e9\n0,0,4096,r,6e9\n0,0,4096,r,  7e9\n")
    assert read_trace(p, format="spc", sort=True)["arrival_ns"].to_list() == [0, 4 * 10**18, 5 * 10**18, 6 * 10**18]
    p = _write(tmp_path, "t.spc", "0,0,4096,r,5e9\n0,0,4096,r,1e9\n0,0,4096,r,11e9\n")
    _assert_at(_error(p, format="spc", sort=True), p, 3, "timestamp 11e9 s is out of range", "(1e9 s)")


def test_uint64_parquet_offset_beyond_int64(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "t.parquet"
    table = {"arrival_ns": [0, 5], "is_read": [True, True], "size": [4096, 4096]}
    pq.write_table(pa.table({**table, "offset": pa.array([0, 2**64 - 1], pa.uint64())}), p)
    err = _error(p)
    assert err.where == f"{p}: row 2" and "field 4 (offset) is out of range: 18446744073709551615" in err.message


def test_vscsi_fields_beyond_int64(tmp_path: Path) -> None:
    rec = struct.Struct("<IIIHHQQ")  # sn len nsg cmd ver lbn ts
    p = _write(tmp_path, "t.vscsi", rec.pack(0, 512, 1, 0x28, 0x100, 0, 0) + rec.pack(1, 512, 1, 0x28, 0x100, 2**55 + 1, 5))
    err = _error(p, format="vscsi")
    assert err.where == f"{p}: byte 32" and "sector number 36028797018963969 is out of range" in err.message
    p = _write(tmp_path, "t.vscsi", rec.pack(0, 512, 1, 0x28, 0x100, 0, 0) + rec.pack(1, 512, 1, 0x28, 0x100, 0, 2**63))
    err = _error(p, format="vscsi")
    assert err.where == f"{p}: byte 32" and "timestamp (us)" in err.message


def test_damaged_parquet_is_an_input_error(tmp_path: Path) -> None:
    # Seeded byte flips of a good file: each read either succeeds or is one clean
    # InputError (polars' own reader aborted the process on some of these).
    import random

    good = tmp_path / "good.parquet"
    pl.DataFrame({"arrival_ns": list(range(0, 3000, 10)), "is_read": [True] * 300,
                  "offset": [4096 * i for i in range(300)], "size": [4096] * 300}).write_parquet(good)
    data = good.read_bytes()
    rng = random.Random(5)
    errors = 0
    for i in range(300):
        b = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        p = _write(tmp_path, f"bad{i}.parquet", bytes(b))
        try:
            read_trace(p, format="parquet")
        except InputError as e:
            errors += 1
            assert e.where is not None and e.where.startswith(str(p)) and "\n" not in str(e)
    assert errors > 100  # most damaged files are caught, none escapes as another exception


def test_scale_rate_and_merge_beyond_int64() -> None:
    from storqos.traces import conform, merge, scale_rate

    df = conform(pl.DataFrame({"arrival_ns": [0, 10**18], "is_read": [True, True], "offset": [0, 0],
                               "size": [512, 512], "device": ["0", "0"]}))
    with pytest.raises(InputError, match="rate scale factor 10.0 makes the trace span more than 2\\^63 ns"):
        scale_rate(df, 10.0)
    with pytest.raises(InputError, match="shift 9000000000000000000 ns of trace 1"):
        merge([df, df], [0, 9 * 10**18])


# --------------------------------------------------------- seeded mutations of every format


def _sample_files(tmp_path: Path) -> dict[str, Path]:
    """200 requests of the bundled trace in every format (text ones built by hand)."""
    from storqos.traces import bundled, write_csv, write_disksim, write_fio, write_parquet, write_spc

    df = read_trace(bundled("websearch")).head(200)
    out: dict[str, Path] = {}
    for fmt, writer in [("spc", write_spc), ("disksim", write_disksim), ("srt", write_srt),
                        ("vscsi", write_vscsi), ("fio", write_fio), ("csv", write_csv), ("parquet", write_parquet)]:
        out[fmt] = tmp_path / f"sample.{fmt}"
        writer(df, out[fmt])  # type: ignore[operator]
    rows = df.select("arrival_ns", "is_read", "offset", "size").rows()
    out["msr"] = _write(tmp_path, "sample.msr", "".join(
        f"{128166386783630075 + t // 100},hm,0,{'Read' if r else 'Write'},{o},{s},{s // 8}\n" for t, r, o, s in rows))
    out["fiu"] = _write(tmp_path, "sample.fiu", "".join(
        f"{t} 42 proc {o // 512} {s // 512} {'R' if r else 'W'} 8 0 md5\n" for t, r, o, s in rows))
    out["blkparse"] = _write(tmp_path, "sample.blk", "".join(
        f"  8,0    1 {i + 1:8d} {t / 1e9:14.9f}   697  Q  {'R' if r else 'W'}S {o // 512} + {s // 512} [fio]\n"
        for i, (t, r, o, s) in enumerate(rows)))
    return out


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    kind = rng.randrange(5)
    if kind == 0:  # flip a few bytes
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    elif kind == 1:  # truncate
        del b[rng.randrange(len(b) + 1):]
    elif kind == 2:  # insert an awkward token
        i = rng.randrange(len(b) + 1)
        b[i:i] = rng.choice([b"-1", b"0", b"nan", b"inf", b"1e400", b"99999999999999999999999", b",", b"\t",
                             b"\n", b"\x00", b"\xff\xfe", b"1.5", b'"', b"\r\n"])
    elif kind == 3:  # a number replaced by an extreme or a word
        lines = bytes(b).split(b"\n")
        i = rng.randrange(len(lines))
        tokens = lines[i].replace(b",", b" ").split()
        if tokens:
            lines[i] = lines[i].replace(rng.choice(tokens), rng.choice(
                [b"abc", b"-5", b"0", b"18446744073709551616", b"36028797018963969", b"1e19", b"nan"]), 1)
        b = bytearray(b"\n".join(lines))
    else:  # two lines swapped
        lines = bytes(b).split(b"\n")
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        b = bytearray(b"\n".join(lines))
    return bytes(b)


def test_seeded_mutations_of_every_format_read_or_fail_cleanly(tmp_path: Path) -> None:
    # Every damaged file either reads into a valid trace or raises one InputError naming
    # it: no other exception (before the Int64 checks: TypeError from polars; before
    # pyarrow decoded Parquet: a process abort).
    samples = _sample_files(tmp_path)
    rng = random.Random(11)
    outcomes = {"read": 0, "error": 0}
    for i in range(1_200):
        fmt = rng.choice(sorted(samples))
        p = _write(tmp_path, f"m{i}.{fmt}", _mutate(rng, samples[fmt].read_bytes()))
        try:
            df = read_trace(p, format=rng.choice([None, fmt]))
        except InputError as e:
            outcomes["error"] += 1
            assert e.where is not None and e.where.startswith(str(p)) and "\n" not in str(e), str(e)
            continue
        outcomes["read"] += 1
        assert df["arrival_ns"].is_sorted() and df["arrival_ns"].min() == 0
        assert (df["size"] > 0).all() and df["offset"].dtype == pl.UInt64
    assert outcomes["read"] > 100 and outcomes["error"] > 100, outcomes
