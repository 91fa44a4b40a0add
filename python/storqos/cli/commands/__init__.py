"""The CLI's commands, one module per command (``storqos simulate`` is
:mod:`storqos.cli.commands.simulate`), plus :mod:`storqos.cli.commands.options` for the options
several share.

Each command module defines ``register(app: typer.Typer) -> None``; :func:`register_all`
adds them to the ``storqos`` app in the order of :data:`COMMANDS` (the order of
``storqos --help``).
"""

from __future__ import annotations

import importlib

import typer

#: Command modules, in the order ``storqos --help`` lists them.
COMMANDS: tuple[str, ...] = ("trace", "simulate", "plan", "advise", "run", "serve", "replay", "calibrate", "validate", "check", "ctl", "allocate", "admit", "warm", "demo")


def register_all(app: typer.Typer) -> None:
    """Import every command module and let it add its command(s) to ``app``."""
    for mod in COMMANDS:
        importlib.import_module(f"{__name__}.{mod}").register(app)
