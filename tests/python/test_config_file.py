"""storqos.base.config_file: a configuration file is a regular file of bounded size, read
whole. `storqos run /dev/zero` read until memory ran out, and a FIFO nobody writes to
kept `serve --config` waiting for ever; both, and a file too large, are one line and
exit 2 from every command that reads such a file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from storqos.base.config_file import MAX_CONFIG_BYTES
from storqos.traces import bundled

#: Every command that reads a configuration file, ``{}`` its path.
COMMANDS = (
    ("run", "{}", "--check"),
    ("serve", "--config", "{}", "--check"),
    ("advise", "{}"),
    ("simulate", str(bundled("websearch")), "--device-profile", "{}"),
)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_a_configuration_that_is_not_a_regular_file_or_too_large_is_one_line(command: tuple[str, ...],
                                                                             tmp_path: Path) -> None:
    fifo = tmp_path / "exp.toml"
    os.mkfifo(fifo)
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:
        f.truncate(MAX_CONFIG_BYTES + 1)
    for path, needle in ((Path("/dev/zero"), "/dev/zero: not a regular file, expected a TOML file"),
                         (fifo, f"{fifo}: not a regular file, expected a TOML file"),
                         (big, f"{big}: larger than 16 MiB: not a TOML file"),
                         (tmp_path, f"{tmp_path}: is a directory, expected a TOML file")):
        assert_one_line_error(run_cli(*(a.replace("{}", str(path)) for a in command)), needle)
