"""Submodules on first use: after ``import storqos``, ``storqos.planning.planner`` works as
if the whole package had been imported up front, while ``storqos --help`` still starts
without polars or the simulator."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from types import ModuleType


def submodules(package: str) -> Callable[[str], ModuleType]:
    """A module ``__getattr__`` (PEP 562) for ``package`` that imports its submodule
    ``name`` when first asked for, and is an AttributeError for any other name."""

    def __getattr__(name: str) -> ModuleType:
        if name.startswith("_") or importlib.util.find_spec(f"{package}.{name}") is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return importlib.import_module(f"{package}.{name}")

    return __getattr__
