"""CLI commands beyond the core ones, one module per command (``plan``, ``allocate``...).

Each module defines ``register(app: typer.Typer) -> None``; :func:`register_all` adds
every module found here to the ``storqos`` app, in name order.
"""

from __future__ import annotations

import importlib
import pkgutil

import typer


def register_all(app: typer.Typer) -> None:
    """Import every command module of this package and let it add its commands."""
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        importlib.import_module(f"{__name__}.{mod}").register(app)
