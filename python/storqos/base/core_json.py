"""The JSON storqos hands the Rust core (policy, device and gateway specs).

JSON has no infinity and no NaN: Python's ``json.dumps`` writes them as ``Infinity`` and
``NaN``, which the core then refuses as "expected value at line 1 column N", naming
nothing the user wrote. :func:`core_json` refuses them first, naming the key.

>>> core_json({"kind": "wf2q", "weights": [1.0, float("inf")]}, "policy")
Traceback (most recent call last):
...
storqos.base.errors.InputError: policy.weights[1]: must be a finite number, got inf
"""

from __future__ import annotations

import json
import math
from typing import Any

from storqos.base.errors import InputError


def _check(obj: Any, path: str) -> None:
    if isinstance(obj, float) and not math.isfinite(obj):
        raise InputError(f"must be a finite number, got {obj}", path)
    if isinstance(obj, dict):
        for k, v in obj.items():
            _check(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _check(v, f"{path}[{i}]")


def core_json(obj: Any, what: str) -> str:
    """``obj`` as JSON for the core; a number that is not finite is an
    :class:`InputError` at its key (``policy.upper.p_rt``)."""
    _check(obj, what)
    return json.dumps(obj, allow_nan=False)


__all__ = ["core_json"]
