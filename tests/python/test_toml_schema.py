"""storqos.toml_schema: where an error's key is written in a TOML file."""

from __future__ import annotations

import pytest
from storqos.toml_schema import line_of

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
