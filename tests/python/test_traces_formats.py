"""Each trace format on small synthetic files: exact values, detection, round trips."""

from __future__ import annotations

import struct
import warnings
from pathlib import Path

import polars as pl
import pytest
from storqos.base.errors import InputError, InputWarning
from storqos.traces import (
    FORMATS,
    bundled,
    detect_format,
    read_trace,
    stats,
    write_csv,
    write_disksim,
    write_fio,
    write_parquet,
    write_spc,
    write_srt,
    write_vscsi,
)

# A small canonical trace used to build fixtures: 5 requests, two devices, with a tie.
BASE = pl.DataFrame(
    {
        "arrival_ns": [0, 1_000_000, 1_000_000, 2_500_000, 7_000_000],
        "is_read": [True, False, True, True, False],
        "offset": [0, 4096, 1_048_576, 512, 10 * 2**30],
        "size": [4096, 8192, 512, 65_536, 4096],
        "device": ["0", "1", "0", "1", "0"],
        "tenant": [0, 0, 0, 0, 0],
    },
    schema={"arrival_ns": pl.Int64, "is_read": pl.Boolean, "offset": pl.UInt64, "size": pl.UInt32,
            "device": pl.String, "tenant": pl.UInt32},
)

SPC_TEXT = (
    "0,0,4096,r,0.000000\n1,8,8192,W,0.001000\n0,2048,512,R,0.001000\n"
    "1,1,65536,r,0.0025\n0,20971520,4096,w,0.007\n"
)
MSR_TEXT = (
    "128166386783630075,hm,0,Read,0,4096,2896\n"
    "128166386783640075,hm,1,Write,4096,8192,100\n"
    "128166386783640075,hm,0,Read,1048576,512,1\n"
    "128166386783655075,hm,1,read,512,65536,10\n"
    "128166386783700075,hm,0,WRITE,10737418240,4096,0\n"
)
DISKSIM_TEXT = "0 0 0 8 1\n1000000 1 8 16 0\n1000000 0 2048 1 1\n2500000 1 1 128 1\n7000000 0 20971520 8 0\n"
FIU_PANDAS_TEXT = (
    "\t0\t1\t2\t3\t4\t5\t6\t7\t8\n"
    "0\t100000\t42\tnfsd\t0\t8\tR\t8\t0\tabc\n"
    "1\t1100000\t42\tnfsd\t8\t16\tW\t8\t1\tdef\n"
    "2\t1100000\t7\tgzip\t2048\t1\tR\t8\t0\t012\n"
    "3\t2600000\t0\tswapper\t1\t128\tR\t8\t1\t345\n"
    "4\t7100000\t7\tgzip\t20971520\t8\tW\t8\t0\t678\n"
)
FIU_ORIGINAL_TEXT = "".join(
    " ".join(line.split("\t")[1:]) + "\n" for line in FIU_PANDAS_TEXT.splitlines()[1:]
)
BLKPARSE_TEXT = """\
  8,0    1        1     0.100000000   697  Q   R 0 + 8 [fio]
  8,0    1        2     0.100000100   697  G   R 0 + 8 [fio]
  8,0    1        3     0.100000500   697  D   R 0 + 8 [fio]
  8,16   0        1     0.101000000   698  Q  WS 8 + 16 [jbd2/sda1-8]
  8,0    1        4     0.101000000   697  Q   R 2048 + 1 [fio]
  8,0    1        5     0.101500000   697  P   N [fio]
  8,0    0        2     0.101600000     0  C   R 0 + 8 [0]
  8,16   1        6     0.102000000   699  Q  FWS [kworker/1:1H]
  8,16   1        7     0.102500000   697  Q  RA 1 + 128 [fio]
  8,0    1        8     0.103000000   697  Q   D 64 + 8 [fstrim]
  8,0    1        9     0.103100000   697  m   N cfq697 alloced
  8,0    1       10     0.107000000   697  Q   W 20971520 + 8 [fio]
CPU0 (8,0):
 Reads Queued:           3,       12KiB\t Writes Queued:           1,        4KiB
 Read Dispatches:        1,        4KiB\t Write Dispatches:        0,        0KiB
Total (8,0):
 Reads Queued:           3,       12KiB\t Writes Queued:           1,        4KiB
Throughput (R/W): 1KiB/s / 0KiB/s
Events (8,0): 12 entries
Skips: 0 forward (0 -   0.0%)
"""
FIO3_TEXT = """\
fio version 3 iolog
0 /dev/nvme0n1 add
0 /dev/nvme1n1 add
0 /dev/nvme0n1 open
0 /dev/nvme1n1 open
10 /dev/nvme0n1 read 0 4096
11 /dev/nvme1n1 write 4096 8192
11 /dev/nvme0n1 read 1048576 512
11 /dev/nvme0n1 sync 0 0
12 /dev/nvme1n1 trim 0 4096
12.5 /dev/nvme1n1 read 512 65536
17 /dev/nvme0n1 write 10737418240 4096
20 /dev/nvme0n1 close
20 /dev/nvme1n1 close
"""
FIO2_TEXT = """\
fio version 2 iolog
/dev/sda add
/dev/sda open
/dev/sda read 0 4096
/dev/sda wait 1000 0
/dev/sda write 4096 8192
/dev/sda wait 50 0
/dev/sda read 1048576 512
/dev/sda wait 1500 0
/dev/sda datasync 0 0
/dev/sda read 512 65536
/dev/sda wait 4500 0
/dev/sda write 10737418240 4096
/dev/sda close
"""
CSV_TEXT = """\
Timestamp,Type,LBA,Bytes,Disk,Client,Latency_us,extra
0.0,R,0,4096,0,3,100,x
0.001,w,8,8192,1,3,200,y
0.001,READ,2048,512,0,4,,z
0.0025,read,1,65536,1,4,50.5,w
0.007,Write,20971520,4096,0,3,1,v
"""


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content)
    return p


def _core(df: pl.DataFrame) -> pl.DataFrame:
    return df.select("arrival_ns", "is_read", "offset", "size")


# ----------------------------------------------------------------------------- readers


def test_spc(tmp_path: Path) -> None:
    df = read_trace(_write(tmp_path, "t.spc", SPC_TEXT), format="spc")
    assert _core(df).equals(_core(BASE))
    assert df["device"].to_list() == BASE["device"].to_list()
    assert df.columns == ["arrival_ns", "is_read", "offset", "size", "device", "tenant"]


def test_spc_time_unit(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.spc", SPC_TEXT)
    df = read_trace(p, format="spc", time_unit="ms")
    assert df["arrival_ns"].to_list() == [v // 1000 for v in BASE["arrival_ns"].to_list()]


def test_msr(tmp_path: Path) -> None:
    df = read_trace(_write(tmp_path, "t.csv", MSR_TEXT), format="msr")
    assert _core(df).equals(_core(BASE))
    assert df["device"].to_list() == ["hm/0", "hm/1", "hm/0", "hm/1", "hm/0"]
    assert df["host"].to_list() == ["hm"] * 5
    assert df["response_ns"].to_list() == [289_600, 10_000, 100, 1_000, 0]


def test_msr_with_header_line(tmp_path: Path) -> None:
    text = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n" + MSR_TEXT
    p = _write(tmp_path, "h.csv", text)
    assert detect_format(p) == "msr"
    assert _core(read_trace(p)).equals(_core(BASE))


def test_mqsim_is_ns_and_disksim_is_ms(tmp_path: Path) -> None:
    """The same five columns: MQSim's times are ns, DiskSim's (by its definition) ms."""
    p = _write(tmp_path, "t.trace", DISKSIM_TEXT)
    assert _core(read_trace(p, format="mqsim")).equals(_core(BASE))
    ms = read_trace(p, format="disksim")
    assert ms["arrival_ns"].to_list() == [v * 1_000_000 for v in BASE["arrival_ns"].to_list()]
    assert read_trace(p, format="mqsim", time_unit="ms").equals(ms)


def test_detection_between_disksim_and_mqsim_says_which(tmp_path: Path) -> None:
    """Integer times cannot tell the two apart: mqsim is chosen and a warning names
    --format; a fractional time is DiskSim's (ms) without a word."""
    p = _write(tmp_path, "t.trace", DISKSIM_TEXT)
    with pytest.warns(InputWarning, match="--format disksim"):
        assert detect_format(p) == "mqsim"
    q = _write(tmp_path, "d.trace", "0.5 0 0 8 1\n1.25 0 8 8 0\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert detect_format(q) == "disksim"
        assert read_trace(q)["arrival_ns"].to_list() == [0, 750_000]


def test_implausible_rate_warns_naming_time_unit(tmp_path: Path) -> None:
    """1,000 requests 1 unit apart: as ns that is 10^9 IOPS (a warning naming --time-unit);
    as DiskSim's ms it is 1,000 IOPS (silent)."""
    text = "".join(f"{i} 0 {8 * i} 8 1\n" for i in range(1000))
    p = _write(tmp_path, "t.trace", text)
    with pytest.warns(InputWarning, match="--time-unit") as rec:
        read_trace(p, format="mqsim")
    assert "1,000,000,000 IOPS" in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = read_trace(p, format="disksim")
    assert df["arrival_ns"].max() == 999 * 1_000_000


def test_write_disksim_keeps_every_nanosecond_in_ms(tmp_path: Path) -> None:
    df = BASE.with_columns(pl.col("arrival_ns") + 1)
    write_disksim(df, tmp_path / "w.trace")
    assert (tmp_path / "w.trace").read_text().split()[0] == "0.000001"
    assert read_trace(tmp_path / "w.trace", format="disksim")["arrival_ns"].to_list() == (
        (df["arrival_ns"] - 1).to_list()
    )


def test_disksim_fractional_ms(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.trace", "0.5 0 0 8 1\n1.25 0 8 8 0\n")
    assert read_trace(p, time_unit="ms")["arrival_ns"].to_list() == [0, 750_000]


def test_disksim_ragged_blanks_and_crlf(tmp_path: Path) -> None:
    messy = "\r\n".join("  " + line.replace(" ", " \t ") + "  " for line in DISKSIM_TEXT.splitlines())
    p = _write(tmp_path, "messy.trace", "\n" + messy + "\r\n\r\n")
    assert read_trace(p, format="mqsim").equals(read_trace(_write(tmp_path, "t.trace", DISKSIM_TEXT), format="mqsim"))


@pytest.mark.parametrize("text", [FIU_PANDAS_TEXT, FIU_ORIGINAL_TEXT], ids=["pandas", "original"])
def test_fiu(tmp_path: Path, text: str) -> None:
    p = _write(tmp_path, "t.blkparse", text)
    assert detect_format(p) == "fiu"
    df = read_trace(p)
    assert _core(df).equals(_core(BASE))
    assert df["device"].to_list() == ["8,0", "8,1", "8,0", "8,1", "8,0"]
    assert df["process"].to_list() == ["nfsd", "nfsd", "gzip", "swapper", "gzip"]


def test_blkparse_queue_events(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.txt", BLKPARSE_TEXT)
    assert detect_format(p) == "blkparse"
    df = read_trace(p)
    assert _core(df).equals(_core(BASE))
    assert df["device"].to_list() == ["8,0", "8,16", "8,0", "8,16", "8,0"]
    assert df["process"].to_list() == ["fio", "jbd2/sda1-8", "fio", "fio", "fio"]


@pytest.mark.parametrize(("action", "n"), [("D", 1), ("C", 1)])
def test_blkparse_other_actions(tmp_path: Path, action: str, n: int) -> None:
    df = read_trace(_write(tmp_path, "t.txt", BLKPARSE_TEXT), format="blkparse", action=action)
    assert df.height == n
    assert df["process"].to_list() == (["fio"] if action == "D" else [None])


def test_fio_v3(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.log", FIO3_TEXT)
    assert detect_format(p) == "fio"
    df = read_trace(p)
    assert _core(df).equals(_core(BASE))
    assert df["device"].to_list() == ["/dev/nvme0n1", "/dev/nvme1n1", "/dev/nvme0n1", "/dev/nvme1n1", "/dev/nvme0n1"]


def test_fio_v2_arrivals_are_summed_waits(tmp_path: Path) -> None:
    df = read_trace(_write(tmp_path, "t.log", FIO2_TEXT))
    # waits 1000, 50 (ignored: < 100 µs, as fio does), 1500, 4500 µs
    assert _core(df).equals(_core(BASE))


def test_fio_v2_without_waits_all_zero(tmp_path: Path) -> None:
    text = "fio version 2 iolog\nf add\nf open\nf read 0 4096\nf write 4096 4096\nf close\n"
    df = read_trace(_write(tmp_path, "t.log", text))
    assert df["arrival_ns"].to_list() == [0, 0]
    with pytest.raises(InputError, match="no timestamps"):
        read_trace(tmp_path / "t.log", time_unit="ms")


def test_csv_aliases(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.csv", CSV_TEXT)
    assert detect_format(p) == "csv"
    df = read_trace(p)
    assert _core(df).equals(_core(BASE))
    assert df["tenant"].to_list() == [3, 3, 4, 4, 3]
    assert df["response_ns"].to_list() == [100_000, 200_000, None, 50_500, 1_000]
    assert df["device"].to_list() == BASE["device"].to_list()


def test_csv_time_unit_and_suffix(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.csv", "time_ms,is_read,offset,size\n0,1,0,512\n2.5,0,512,512\n")
    assert read_trace(p)["arrival_ns"].to_list() == [0, 2_500_000]
    q = _write(tmp_path, "u.csv", "time,op,offset,size\n0,r,0,512\n3,w,512,512\n")
    assert read_trace(q, time_unit="us")["arrival_ns"].to_list() == [0, 3_000]
    assert read_trace(q)["arrival_ns"].to_list() == [0, 3_000_000_000]
    # --time-unit overrides a suffix (as documented), but no longer without a word.
    with pytest.warns(InputWarning, match=r"--time-unit: us overrides the unit of the column 'time_ms' \(ms\)"):
        assert read_trace(p, time_unit="us")["arrival_ns"].to_list() == [0, 2_500]
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputWarning)  # the same unit, or none on the column: nothing said
        assert read_trace(p, time_unit="ms")["arrival_ns"].to_list() == [0, 2_500_000]
        read_trace(q, time_unit="us")


def test_parquet_with_datetime_and_aliases(tmp_path: Path) -> None:
    from datetime import datetime, timedelta

    t0 = datetime(2024, 1, 1)
    src = pl.DataFrame(
        {
            "timestamp": [t0 + timedelta(microseconds=v // 1000) for v in BASE["arrival_ns"].to_list()],
            "op": ["R", "W", "R", "R", "W"],
            "lba": [v // 512 for v in BASE["offset"].to_list()],
            "bytes": BASE["size"],
            "volume": BASE["device"],
        }
    )
    p = tmp_path / "t.parquet"
    src.write_parquet(p)
    assert detect_format(p) == "parquet"
    df = read_trace(p)
    assert _core(df).equals(_core(BASE))


def _srt_bytes(records: list[tuple[int, ...]], header: bytes = b'$$TR_IOREC-1.3\nsystem = "t";\n') -> bytes:
    return header + b"\x0c" + b"".join(struct.pack(">" + "I" * (r[0] // 4), *r) for r in records)


def test_srt_written_and_variable_records(tmp_path: Path) -> None:
    p = tmp_path / "t.srt"
    write_srt(BASE, p)
    assert detect_format(p) == "srt"
    df = read_trace(p)
    assert _core(df).equals(_core(BASE))
    assert df["device"].to_list() == BASE["device"].to_list()
    # a SUSPECTIO record (type 4) is one word longer; the reader steps by the size word
    short = (56, (4 << 16) | 1, 0, 0, 10, 200, 4096, 8, 1 << 8, 4, 1, 1, 0, 1)
    suspect = (60, (4 << 16) | 4, 0, 500, 10, 300, 2048, 16, 0, 4, 1, 0, 0, 1, 0xFF)
    q = _write(tmp_path, "v.srt", _srt_bytes([short, suspect, short[:2] + (1, 0) + short[4:]]))
    v = read_trace(q)
    assert v["arrival_ns"].to_list() == [0, 500_000, 1_000_000_000]
    assert v["is_read"].to_list() == [True, False, True]
    assert v["size"].to_list() == [4096, 2048, 4096]
    assert v["offset"].to_list() == [4096, 8192, 4096]
    assert v["device"].to_list() == ["1", "0", "1"]
    assert v["response_ns"].to_list() == [200_000, 300_000, 200_000]


@pytest.mark.parametrize("version", [1, 2])
def test_vscsi_round_trip(tmp_path: Path, version: int) -> None:
    src = BASE.with_columns(pl.Series("response_ns", [1000, 2000, 3000, 4000, 5000], dtype=pl.Int64))
    p = tmp_path / f"t{version}.vscsi"
    write_vscsi(src, p, version=version)
    assert p.stat().st_size == 5 * (32 if version == 1 else 40)
    assert detect_format(p) == "vscsi"
    df = read_trace(p)
    assert _core(df).equals(_core(BASE))
    assert df["device"].to_list() == ["0"] * 5
    if version == 2:
        assert df["response_ns"].to_list() == src["response_ns"].to_list()
    else:
        assert "response_ns" not in df.columns


def test_vscsi_v1_layout_and_non_data_commands(tmp_path: Path) -> None:
    rec = struct.Struct("<IIIHHQQ")
    data = b"".join(
        [
            rec.pack(1, 4096, 1, 0x28, 0x0100, 8, 1_000),  # READ(10)
            rec.pack(2, 0, 0, 0x35, 0x0100, 0, 1_500),  # SYNCHRONIZE CACHE: skipped
            rec.pack(3, 8192, 2, 0x8A, 0x0100, 16, 2_000),  # WRITE(16)
            rec.pack(4, 512, 1, 0x08, 0x0100, 1, 2_000),  # READ(6)
        ]
    )
    df = read_trace(_write(tmp_path, "t.vscsi", data), format="vscsi")
    assert df["arrival_ns"].to_list() == [0, 1_000_000, 1_000_000]
    assert df["is_read"].to_list() == [True, False, True]
    assert df["offset"].to_list() == [4096, 8192, 512]
    assert df["size"].to_list() == [4096, 8192, 512]


# ------------------------------------------------------------------------ round trips


def _full() -> pl.DataFrame:
    return BASE.with_columns(
        pl.Series("tenant", [0, 1, 2, 1, 0], dtype=pl.UInt32),
        pl.Series("response_ns", [5, None, 7, 8, 9], dtype=pl.Int64),
        pl.Series("process", ["a", "b", None, "d,e", "f"], dtype=pl.String),
        pl.Series("host", ["h1", "h1", "h2", "h2", "h1"], dtype=pl.String),
    )


def test_parquet_round_trip(tmp_path: Path) -> None:
    df = _full()
    write_parquet(df, tmp_path / "r.parquet")
    assert read_trace(tmp_path / "r.parquet").equals(df)


def test_csv_round_trip(tmp_path: Path) -> None:
    df = _full()
    write_csv(df, tmp_path / "r.csv")
    assert detect_format(tmp_path / "r.csv") == "csv"
    assert read_trace(tmp_path / "r.csv").equals(df)


def test_text_writers_round_trip(tmp_path: Path) -> None:
    write_disksim(BASE, tmp_path / "w.trace")
    assert _core(read_trace(tmp_path / "w.trace")).equals(_core(BASE))
    write_spc(BASE, tmp_path / "w.spc")
    assert _core(read_trace(tmp_path / "w.spc")).equals(_core(BASE))
    ms = BASE.with_columns(pl.col("arrival_ns") * 1000)  # whole milliseconds
    write_fio(ms, tmp_path / "w3.log", version=3)
    assert _core(read_trace(tmp_path / "w3.log")).equals(_core(ms))
    write_fio(BASE, tmp_path / "w2.log", version=2)
    assert _core(read_trace(tmp_path / "w2.log")).equals(_core(BASE))


# ------------------------------------------------------------- options and detection


def test_sort_is_stable(tmp_path: Path) -> None:
    text = "5 0 1 8 1\n3 0 2 8 1\n5 0 3 8 1\n3 0 4 8 1\n1 0 5 8 1\n"
    df = read_trace(_write(tmp_path, "u.trace", text), sort=True)
    assert df["arrival_ns"].to_list() == [0, 2, 2, 4, 4]
    assert (df["offset"] // 512).to_list() == [5, 2, 4, 1, 3]


def test_limit(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.trace", DISKSIM_TEXT)
    assert read_trace(p, limit=2).equals(read_trace(p).head(2))
    assert read_trace(p, limit=0).height == 0
    blk = _write(tmp_path, "b.txt", BLKPARSE_TEXT)
    assert read_trace(blk, limit=3).equals(read_trace(blk).head(3))


FIXTURES = {
    "spc": ("a.spc", SPC_TEXT),
    "msr": ("a.csv", MSR_TEXT),
    "disksim": ("d.trace", "0.5 0 0 8 1\n1.25 0 8 8 0\n"),
    "mqsim": ("a.trace", DISKSIM_TEXT),
    "fiu": ("a.blkparse", FIU_PANDAS_TEXT),
    "blkparse": ("a.txt", BLKPARSE_TEXT),
    "fio": ("a.log", FIO3_TEXT),
    "csv": ("b.csv", CSV_TEXT),
}


def _fixture(tmp_path: Path, fmt: str) -> Path:
    """A small file of format ``fmt`` (five requests; two for disksim)."""
    if fmt in FIXTURES:
        return _write(tmp_path, *FIXTURES[fmt])
    p = tmp_path / "x.bin"  # the binary ones are detected by magic bytes, not by the name
    if fmt == "parquet":
        BASE.write_parquet(p)
    elif fmt == "srt":
        write_srt(BASE, p)
    else:
        write_vscsi(BASE, p)
    return p


@pytest.mark.parametrize("fmt", FORMATS)
def test_detect_every_format(tmp_path: Path, fmt: str) -> None:
    p = _fixture(tmp_path, fmt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)  # mqsim's guess is said; tested above
        assert detect_format(p) == fmt
    assert read_trace(p, format=fmt).height == (2 if fmt == "disksim" else 5)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_path_is_the_file_it_names_not_a_pattern(tmp_path: Path, fmt: str) -> None:
    """A trace named ``t[12]*.EXT`` is read from that file. Read as a glob pattern (polars'
    default), it matched nothing (no requests) or, worse, the file ``t1.EXT`` beside it,
    whose requests were then taken for the named file's without a word."""
    src = _fixture(tmp_path, fmt)
    named = tmp_path / f"t[12]*{src.suffix}"
    src.rename(named)
    decoy = tmp_path / f"t1{src.suffix}"  # what the pattern matches: the same file, less of it
    (tmp_path / "decoy").mkdir()
    decoy.write_bytes(_fixture(tmp_path / "decoy", fmt).read_bytes())
    if fmt == "parquet":
        BASE.head(1).write_parquet(decoy)
    elif fmt not in ("srt", "vscsi"):  # one request fewer: the last, or the line that holds it
        lines = decoy.read_text().splitlines(keepends=True)
        last = {"blkparse": "20971520 + 8", "fio": "10737418240"}.get(fmt)
        decoy.write_text("".join(lines[:-1] if last is None else [ln for ln in lines if last not in ln]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        assert detect_format(named) == fmt
        assert read_trace(named, format=fmt).height == (2 if fmt == "disksim" else 5)
        assert read_trace(named).height == (2 if fmt == "disksim" else 5)


@pytest.mark.parametrize("header", ["arrival_ns,arrival_ns,is_read,offset,size", "arrival_ns,is_read,offset,Size,size"])
def test_a_column_given_twice_is_named(tmp_path: Path, header: str) -> None:
    """Two columns of one name (or the same name in two cases) were read as one of them,
    which one unsaid (polars renames the second ``arrival_ns_duplicated_0``)."""
    n = header.count(",") + 1
    p = _write(tmp_path, "t.csv", f"{header}\n" + ",".join(["0", "0", "true", "0", "4096"][:n]) + "\n")
    twice = "arrival_ns" if header.startswith("arrival_ns,arrival_ns") else "size"
    for fmt in (None, "csv"):
        with pytest.raises(InputError, match=f"t.csv:1: column '{twice}' given twice: keep one"):
            read_trace(p, format=fmt)
    q = tmp_path / "t.parquet"
    BASE.with_columns(pl.col("size").alias("SIZE")).write_parquet(q)
    with pytest.raises(InputError, match="column 'size' given twice"):
        read_trace(q)


def test_unknown_format_lists_known_ones(tmp_path: Path) -> None:
    p = _write(tmp_path, "t.trace", DISKSIM_TEXT)
    with pytest.raises(InputError) as e:
        read_trace(p, format="bogus")
    for name in FORMATS:
        assert name in str(e.value)


def test_undetectable_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot detect the trace format.*--format"):
        detect_format(_write(tmp_path, "x.txt", "hello world\n"))


def test_time_unit_rejected_for_fixed_unit_formats(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="fixed time units"):
        read_trace(_write(tmp_path, "t.csv", MSR_TEXT), time_unit="ms")
    with pytest.raises(InputError, match="unknown time unit"):
        read_trace(_write(tmp_path, "t.trace", DISKSIM_TEXT), time_unit="fortnights")


def test_bundled_websearch() -> None:
    p = bundled()
    assert p == bundled("websearch")
    assert p.stat().st_size < 300_000
    assert (p.parent / "README.md").is_file()
    assert detect_format(p) == "mqsim"
    st = stats(read_trace(p, format="mqsim"))
    assert st["count"] == 8000
    assert st["devices"] == 6
    with pytest.raises(InputError, match="websearch"):
        bundled("nope")
