"""Experiments: an experiment file (its schema and runs), sweeps over parameters run in
parallel, and the reports and output folders they write. Stands on the model layer."""

from __future__ import annotations

from storqos.base.lazy import submodules

__getattr__ = submodules(__name__)
