"""storqos.base.toml_schema: where an error's key is written in a TOML file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from storqos.base.toml_schema import line_of

TEXT = """name = "x"
seed = 3

[device]
kind = "constant"
capacity = "900"

[[tenant]]
name = "a"
generator = { kind = "onoff", rate_on = "1k" }

[[tenant]]
name = "b"
  'weight' = 1

[grid]
"device.capacity" = ["1k"]
"""


@pytest.mark.parametrize(("loc", "line"), [
    (["seed"], 2),                                   # a top-level key
    (["device", "capacity"], 6),                     # a key of a table
    (["device", "servers"], 4),                      # a key the table lacks: its header
    (["tenant", 1, "weight"], 14),                   # the second [[tenant]], a quoted key
    (["tenant", 1, "slo"], 12),                      # missing there: that entry's header
    (["tenant", 0, "generator", "rate_on"], 10),     # inside an inline table: its key's line
    (["grid", "device.capacity"], 17),               # a dotted key, quoted
    (["policy"], None),                              # nowhere in the file
])
def test_line_of_finds_the_key_or_its_table(loc: list, line: int | None) -> None:
    assert line_of(TEXT, loc) == line


def test_a_nested_array_entry_gives_its_own_line() -> None:
    text = ('[[export]]\nname = "a"\n[[export.fault]]\nop = "read"\n[[export]]\nname = "b"\n'
            '[[export.fault]]\nop = "read"\n[[export.fault]]\nop = "write"\ndelay = "1s"\n')
    assert line_of(text, ["export", 1, "fault", 1, "delay"]) == 11
    assert line_of(text, ["export", 1, "fault", 0, "op"]) == 8
    assert line_of(text, ["export", 0, "fault", 0, "delay"]) == 3  # missing there: that entry's header
    assert line_of(text, ["export", 1, "name"]) == 6


def test_a_config_of_many_exports_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --check` of 4,000 exports took 117 s: the file's sections were read again
    for every export's line. Each line of the file is now matched against a header once,
    whatever the number of exports."""
    import storqos.base.toml_schema as ts
    from storqos.live.gateway_config import load

    with open(tmp_path / "a.img", "wb") as f:
        f.truncate(4096)
    n = 2000
    text = '[[tenant]]\nname = "t"\n' + "".join(f'[[export]]\nname = "e{i}"\npath = "a.img"\ntenant = "t"\n'
                                                for i in range(n))
    (tmp_path / "gw.toml").write_text(text)

    class Counting:
        def __init__(self, pattern: re.Pattern[str]) -> None:
            self.pattern, self.calls = pattern, 0

        def match(self, s: str) -> re.Match[str] | None:
            self.calls += 1
            return self.pattern.match(s)

    counting = Counting(ts._HEADER)
    monkeypatch.setattr(ts, "_HEADER", counting)
    settings = load(tmp_path / "gw.toml")
    assert len(settings.exports) == n
    assert settings.policy_key("weights").endswith(": [policy]: weights")
    assert counting.calls <= len(text.splitlines()), counting.calls


def test_a_deeply_nested_file_is_an_input_error(tmp_path: Path) -> None:
    from storqos.base.errors import InputError
    from storqos.base.toml_schema import read_toml

    f = tmp_path / "deep.toml"
    f.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(InputError, match="nested too deeply"):
        read_toml(f)


@pytest.mark.parametrize("limit", [None, 50_000])
def test_nesting_is_refused_whatever_the_recursion_limit(tmp_path: Path, limit: int | None) -> None:
    # Where the interpreter's recursion limit is raised (a library may do it), tomllib
    # parses 200 levels: the file is refused all the same, and 10 levels are read.
    import sys

    from storqos.base.errors import InputError
    from storqos.base.toml_schema import MAX_NESTING, read_toml

    old = sys.getrecursionlimit()
    if limit is not None:
        sys.setrecursionlimit(limit)
    try:
        f = tmp_path / "deep.toml"
        f.write_text("x = " + "[" * 200 + "]" * 200 + "\n")
        with pytest.raises(InputError, match=f"more than {MAX_NESTING} levels"):
            read_toml(f)
        f.write_text("x = " + "[" * 10 + "1" + "]" * 10 + "\n")
        assert read_toml(f)[1]["x"] == [[[[[[[[[[1]]]]]]]]]]
    finally:
        sys.setrecursionlimit(old)
