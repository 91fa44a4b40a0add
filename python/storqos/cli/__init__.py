"""The command line: :mod:`storqos.cli.app` makes the ``storqos`` app and turns errors into
one line and an exit status; :mod:`storqos.cli.commands` holds one module per command.
This is the top layer: it may import every other one, and none imports it."""

from __future__ import annotations

from storqos.cli.app import main

__all__ = ["main"]
