"""Foundations every layer stands on: errors and warnings for bad input, units and number
formats, paths and URIs, the console and progress bars, config files and their TOML
schema, the JSON that crosses to the Rust core, and streaming tables. Imports nothing
of storqos but the Rust extension."""

from __future__ import annotations

from storqos.base.lazy import submodules

__getattr__ = submodules(__name__)
