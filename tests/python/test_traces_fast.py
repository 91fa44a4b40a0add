"""The fast (typed polars) read of each delimited text format against its exact pass.

The readers parse numbers with a typed schema and check whole columns; only when that
fails do they run the exact pass (text columns / line by line) that names the bad line.
Both must give the same trace on valid input, and bad input must still be reported at
its line even when it lies past the rows the fast read samples.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
from storqos.base.errors import InputError
from storqos.traces import msr, read_trace, spc, tabular
from storqos.traces._lines import parse_lines, read_op_fields
from storqos.traces._pipeline import finish

N = 3_000  # past the typed CSV read's 1,000-row sample


def _frame(n: int = N, seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "t_ns": np.cumsum(rng.integers(0, 50_000, n)),
        "read": rng.random(n) < 0.6,
        "lba": rng.integers(0, 2**30, n),
        "sectors": rng.choice([1, 8, 16, 128], n),
        "dev": rng.integers(0, 4, n),
        "tenant": rng.integers(0, 5, n),
        "lat": rng.integers(1, 10_000, n),
    }


def _equal(a: pl.DataFrame, b: pl.DataFrame) -> None:
    assert a.schema == b.schema
    assert a.equals(b)


def _csv_variants() -> list[tuple[str, pl.DataFrame]]:
    f = _frame()
    n = len(f["t_ns"])
    word = np.where(f["read"], "Read", "write")
    word[::7] = "R"
    word[3::11] = "W"
    return [
        ("canonical", pl.DataFrame({
            "arrival_ns": f["t_ns"], "is_read": f["read"], "offset": f["lba"] * 512,
            "size": f["sectors"] * 512, "device": f["dev"].astype(str), "tenant": f["tenant"],
        })),
        ("seconds float, text op, sectors, latency", pl.DataFrame({
            "time_s": f["t_ns"] / 1e9, "op": word, "lba": f["lba"], "sectors": f["sectors"],
            "disk": f["dev"].astype(str), "latency_us": f["lat"], "comm": ["p"] * n,
            "host": ["h1"] * n, "extra": ["x"] * n,
        })),
        ("plain time, 1/0 op, ms latency floats", pl.DataFrame({
            "timestamp": f["t_ns"] // 1000, "is_read": f["read"].astype(int), "offset": f["lba"],
            "bytes": f["sectors"] * 512, "client": f["tenant"], "latency_ms": f["lat"] / 7,
        })),
    ]


@pytest.mark.parametrize("name_frame", _csv_variants(), ids=lambda v: v[0])
@pytest.mark.parametrize("options", [{}, {"sort": True}, {"limit": 1_500}, {"time_unit": "us"}])
def test_csv_typed_read_matches_exact(tmp_path: Path, name_frame: tuple[str, pl.DataFrame],
                                      options: dict[str, object]) -> None:
    _, frame = name_frame
    p = tmp_path / "t.csv"
    frame.write_csv(p)
    text = p.read_text().splitlines()
    p.write_text("\n".join(text[:500] + [""] + text[500:]) + "\n")  # a blank line
    fast = tabular._typed_csv(p, options.get("time_unit"), bool(options.get("sort")),  # type: ignore[arg-type]
                              options.get("limit"))  # type: ignore[arg-type]
    assert fast is not None, "the typed read declined a valid file"
    exact = tabular._exact_csv(p, options.get("time_unit"), bool(options.get("sort")),  # type: ignore[arg-type]
                               options.get("limit"))  # type: ignore[arg-type]
    _equal(fast, exact)
    _equal(read_trace(p, format="csv", **options), exact)  # type: ignore[arg-type]


def test_csv_integer_times_then_a_float_past_the_sample(tmp_path: Path) -> None:
    """The sample says Int64; a fractional time further on makes the whole column Float64."""
    f = _frame()
    t = [str(int(v)) for v in f["t_ns"] // 1000]
    t[2_500] = t[2_500] + ".5"
    p = tmp_path / "t.csv"
    pl.DataFrame({"time_us": t, "rw": ["r"] * N, "offset": f["lba"], "size": f["sectors"] * 512}).write_csv(p)
    assert tabular._typed_csv(p, None, False, None) is None
    df = read_trace(p, format="csv")
    assert df.schema["arrival_ns"] == pl.Int64
    _equal(df, tabular._exact_csv(p, None, False, None))


@pytest.mark.parametrize(
    ("column", "value", "fragment"),
    [
        ("size", "-4096", "must be a positive size"),
        ("size", "4096.5", "not an integer"),
        ("offset", "-1", "is negative"),
        ("offset", "18446744073709551616", "out of range"),
        ("rw", "x", "unknown op 'x'"),
        ("rw", "Write", None),  # a spelling not in the sample: valid
        ("time_us", "nan", "not a number"),
        ("time_us", "1", "before the previous one"),
    ],
)
def test_csv_value_past_the_sample(tmp_path: Path, column: str, value: str, fragment: str | None) -> None:
    f = _frame()
    cols = {
        "time_us": [str(int(v)) for v in f["t_ns"] // 1000 + 10],
        "rw": ["r" if r else "w" for r in f["read"]],
        "offset": [str(int(v)) for v in f["lba"]],
        "size": [str(int(v)) for v in f["sectors"] * 512],
    }
    cols[column][2_400] = value
    p = tmp_path / "t.csv"
    pl.DataFrame(cols).write_csv(p)
    if fragment is None:
        _equal(read_trace(p, format="csv"), tabular._exact_csv(p, None, False, None))
        return
    with pytest.raises(InputError) as e:
        read_trace(p, format="csv")
    assert e.value.where == f"{p}:{2_402}", e.value
    assert fragment in str(e.value)


def _exact(path: Path, parse, *, skip: int, factor: int, extras=None, t_dtype=None) -> pl.DataFrame:  # type: ignore[no-untyped-def]
    raw = parse_lines(path, parse, skip_lines=skip, unit_label="", ns_per_unit=factor, extras=extras,
                      sort=False, limit=None, t_dtype=t_dtype)
    return finish(raw, factor=factor, sort=False, limit=None, strict=False)


def test_spc_typed_read_matches_exact(tmp_path: Path) -> None:
    f = _frame()
    ops = np.where(f["read"], "r", "W")
    ops[::5] = "R"
    p = tmp_path / "t.spc"
    lines = [f"{d},{lba},{s * 512},{o},{t / 1e9:.9f}"
             for d, lba, s, o, t in zip(f["dev"], f["lba"], f["sectors"], ops, f["t_ns"], strict=True)]
    p.write_text("\n".join(lines) + "\n")
    cols, is_read = read_op_fields(p, spc._SCHEMA, op_words=("r", "w"), fast_types=spc._FAST_TYPES, separator=",")
    assert cols.schema["size"] == pl.UInt32()  # the typed read takes it
    assert cols.select(is_read).to_series().to_list() == list(np.isin(ops, ["r", "R"]))  # three spellings
    _equal(spc.read_spc(p), _exact(p, spc._parse_line, skip=0, factor=10**9))
    # a spelling outside the typed schema's words, past the start: still read
    lines[2_000] = lines[2_000].replace(",r,", ",x,").replace(",W,", ",x,").replace(",R,", ",x,")
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as e:
        spc.read_spc(p)
    assert e.value.where == f"{p}:2001" and "unknown op 'x'" in str(e.value)


@pytest.mark.parametrize(("fmt", "read", "write", "odd"), [
    ("spc", "r", "w", None), ("spc", "R", "W", None), ("msr", "Read", "Write", None), ("msr", "READ", "WRITE", None),
    ("spc", "r", "w", "R"), ("msr", "read", "write", "READ"),  # a line in another spelling: compared case-blind
    ("spc", "R", "W", "x"), ("msr", "Read", "Write", "Reed"),  # not an op: the exact pass names the line
])
def test_op_words_in_one_spelling_or_mixed(tmp_path: Path, fmt: str, read: str, write: str, odd: str | None) -> None:
    f = _frame()
    ops = np.where(f["read"], read, write).astype(object)
    if odd is not None:
        ops[1_234] = odd
    p = tmp_path / "t.csv"
    rows = zip(f["lba"], f["sectors"], ops, f["t_ns"], f["lat"], strict=True)
    if fmt == "spc":
        p.write_text("".join(f"0,{lba},{s * 512},{o},{t / 1e9:.9f}\n" for lba, s, o, t, _ in rows))
    else:
        p.write_text("".join(f"{128166372003061629 + t // 100},hm,0,{o},{lba * 512},{s * 512},{lat}\n"
                             for lba, s, o, t, lat in rows))
    if odd in ("x", "Reed"):
        with pytest.raises(InputError) as e:
            read_trace(p, format=fmt)
        assert e.value.where == f"{p}:1235" and f"unknown op '{odd}'" in str(e.value)
        return
    expected = list(f["read"])
    if odd is not None:
        expected[1_234] = odd.lower() in ("r", "read")
    got = read_trace(p, format=fmt)
    assert got["is_read"].to_list() == expected
    if fmt == "spc":
        _equal(got, _exact(p, spc._parse_line, skip=0, factor=10**9))
    else:
        _equal(got, _exact(p, msr._parse_line, skip=0, factor=msr.TICK_NS, extras=msr._EXTRAS, t_dtype=pl.Int64()))


@pytest.mark.parametrize("volumes", [1, 3])
def test_msr_typed_read_matches_exact(tmp_path: Path, volumes: int) -> None:
    f = _frame()
    words = np.where(f["read"], "Read", "Write")
    words[::9] = "read"
    hosts = ["src1", "hm", "web"]
    p = tmp_path / "t.csv"
    lines = [
        f"{128166372003061629 + t // 100},{hosts[i % volumes]},{i % volumes},{w},{lba * 512},{s * 512},{lat}"
        for i, (t, w, lba, s, lat) in enumerate(
            zip(f["t_ns"], words, f["lba"], f["sectors"], f["lat"], strict=True))
    ]
    p.write_text("Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n" + "\n".join(lines) + "\n")
    cols, is_read = read_op_fields(p, msr._SCHEMA, op_words=("read", "write"), fast_types=msr._FAST_TYPES,
                                   separator=",", skip_lines=1)
    assert cols.schema["offset"] == pl.UInt64()  # the typed read takes it
    assert cols.select(is_read).to_series().to_list() == list(np.isin(words, ["Read", "read"]))
    exact = _exact(p, msr._parse_line, skip=1, factor=msr.TICK_NS, extras=msr._EXTRAS, t_dtype=pl.Int64())
    _equal(msr.read_msr(p), exact)
    lines[1_000] = lines[1_000].replace("Write", "wRiTe").replace("Read", "wRiTe").replace("read", "wRiTe")
    p.write_text("\n".join(lines) + "\n")  # another spelling: the text read, same trace
    fixed = exact.with_columns(pl.when(pl.int_range(pl.len()) == 1_000).then(False)
                               .otherwise(pl.col("is_read")).alias("is_read"))
    _equal(msr.read_msr(p), fixed)


def test_a_second_volume_past_the_first_lines_is_kept(tmp_path: Path) -> None:
    # one volume on the first 5,000 lines (the reader looks at the first 4,096 first),
    # another on line 5,001: the device column is built per line, as the exact pass does
    f = _frame(6_000)
    p = tmp_path / "t.csv"
    p.write_text("".join(
        f"{128166372003061629 + t // 100},{'web,1' if i == 5_000 else 'hm,0'},Read,{lba * 512},{s * 512},{lat}\n"
        for i, (t, lba, s, lat) in enumerate(zip(f["t_ns"], f["lba"], f["sectors"], f["lat"], strict=True))))
    got = msr.read_msr(p)
    assert got["device"][5_000] == "web/1" and got["device"].value_counts().height == 2
    _equal(got, _exact(p, msr._parse_line, skip=0, factor=msr.TICK_NS, extras=msr._EXTRAS, t_dtype=pl.Int64()))


@pytest.mark.parametrize("devices", [1, 4])
def test_fiu_and_disksim_typed_reads_match_exact(tmp_path: Path, devices: int) -> None:
    from storqos.traces import disksim, fiu

    f = _frame()
    dev = f["dev"] % devices
    p = tmp_path / "t.blkparse"
    ops = np.where(f["read"], "R", "W")
    ops[::13] = "r"
    p.write_text("".join(
        f"{t} 42 nfsd {lba} {s} {o} 8 {d} 2c4787c7\n"
        for t, lba, s, o, d in zip(f["t_ns"], f["lba"], f["sectors"], ops, dev, strict=True)))
    cols, is_read = read_op_fields(p, {k: v for k, v in fiu._TYPES.items() if k != "row"}, op_words=("r", "w"),
                                   separator=" ")
    assert cols.select(is_read).to_series().to_list() == list(np.isin(ops, ["R", "r"]))
    exact = _exact(p, fiu._line_parser(False), skip=0, factor=1, extras=fiu._EXTRAS, t_dtype=pl.Int64())
    _equal(fiu.read_fiu(p), exact)
    q = tmp_path / "t.trace"
    q.write_text("".join(
        f"{t / 1e6:.6f} {d} {lba} {s} {int(r)}\n"
        for t, lba, s, r, d in zip(f["t_ns"], f["lba"], f["sectors"], f["read"], dev, strict=True)))
    _equal(disksim.read_disksim(q), _exact(q, disksim._parse_line, skip=0, factor=10**6))


@pytest.mark.parametrize(("spans", "columns"), [((5,), 1), ((300, 200), 2), ((70_000,), 1), ((3, 30_000), 2)])
def test_device_numbers_are_the_decimal_values_joined(spans: tuple[int, ...], columns: int) -> None:
    """The device named from number columns, by a table gather (at most 65,536 names) or
    per line (more): each line's values in decimal, joined, as Python writes them."""
    from storqos.traces._lines import device_numbers

    rng = np.random.default_rng(columns)
    names = [f"c{i}" for i in range(columns)]
    data = {c: rng.integers(10, 10 + span, 5_000).astype(np.uint32) for c, span in zip(names, spans, strict=True)}
    cols = pl.DataFrame(data)
    got = cols.select(device_numbers(cols, tuple(names), ",").alias("d"))["d"].to_list()
    assert got == [",".join(str(int(data[c][i])) for c in names) for i in range(5_000)]


def test_device_numbers_name_a_device_by_its_value_in_every_pass(tmp_path: Path) -> None:
    """``08``, ``+8`` and ``8`` are one device, ``8``, whether the fast read parses the
    column as numbers (every device a number) or as text (one is not); other text is
    kept as written. The exact pass names them the same way."""
    from storqos.traces import disksim, fiu

    f = _frame()
    spellings = np.array(["8", "08", "+8", "0", "000", "13"])[f["dev"] % 6]
    for text_device in (None, "sda0"):
        devs = spellings.copy()
        if text_device:
            devs[1_500] = text_device
        q = tmp_path / "t.trace"
        q.write_text("".join(
            f"{t / 1e6:.6f} {d} {lba} {s} {int(r)}\n"
            for t, lba, s, r, d in zip(f["t_ns"], f["lba"], f["sectors"], f["read"], devs, strict=True)))
        got = disksim.read_disksim(q)
        want = [{"08": "8", "+8": "8", "000": "0"}.get(d, d) for d in devs]
        assert got["device"].to_list() == want
        _equal(got, _exact(q, disksim._parse_line, skip=0, factor=10**6))
        p = tmp_path / "t.blkparse"
        p.write_text("".join(
            f"{t} 42 nfsd {lba} {s} W {d} {d} 2c4787c7\n"
            for t, lba, s, d in zip(f["t_ns"], f["lba"], f["sectors"], devs, strict=True)))
        got = fiu.read_fiu(p)
        assert got["device"].to_list() == [f"{w},{w}" for w in want]
        _equal(got, _exact(p, fiu._line_parser(False), skip=0, factor=1, extras=fiu._EXTRAS, t_dtype=pl.Int64()))


@pytest.mark.parametrize("sort", [False, True])
def test_finish_matches_a_plain_eager_conversion(sort: bool) -> None:
    """finish's lazy, streaming projection keeps row order and values on a frame of many
    morsels (against the straightforward eager conversion it replaced)."""
    from storqos.traces.schema import conform

    n = 400_000
    rng = np.random.default_rng(3)
    t = rng.random(n) * 1e4
    raw = pl.DataFrame({
        "t": t if sort else np.sort(t), "is_read": rng.random(n) < 0.5, "offset": rng.integers(0, 2**40, n),
        "size": rng.integers(1, 2**20, n), "device": rng.integers(0, 9, n).astype(str),
        "response_ns": rng.integers(0, 10**6, n), "host": rng.integers(0, 9, n).astype(str),
    })
    arrival = ((pl.col("t") - raw["t"].min()).cast(pl.Float64) * 1e6).round(0).cast(pl.Int64)
    expected = raw.with_columns(arrival.alias("arrival_ns")).drop("t")
    if sort:
        expected = expected.sort("arrival_ns", maintain_order=True)
    _equal(finish(raw, factor=10**6, sort=sort, limit=None), conform(expected))
