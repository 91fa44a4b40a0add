"""storqos: a QoS toolkit for shared block storage.

Simulate real traces through QoS policies far faster than real time, plan capacity from
traces, and serve the same policies live in front of real storage (``storqos serve``, an
NBD gateway). The policies, device models, event loop and gateway are in Rust
(``storqos._core``); this package reads traces, builds specs, runs experiments and
returns polars DataFrames.

>>> import storqos
>>> trace = storqos.read_trace(storqos.bundled_trace())
>>> res = storqos.simulate(trace, "fcfs", "constant", capacity="500")
>>> res.tenants.select("tenant", "p95_ns")          # doctest: +SKIP
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from storqos.base.version import __version__ as __version__

if TYPE_CHECKING:
    from storqos.base.errors import InputError
    from storqos.model import synth
    from storqos.model.sim import ClosedClient, SimResult, simulate
    from storqos.model.specs import DEVICES, POLICIES, PolicyParams, device_spec, policy_spec
    from storqos.traces import FORMATS, detect_format, read_trace
    from storqos.traces import bundled as bundled_trace

#: Where each public name lives. They are imported on first use (PEP 562), so that a
#: command that needs neither polars nor the simulator (``storqos serve --help``, a bad
#: flag) starts without loading them: ``import storqos`` alone costs nothing.
_FROM: dict[str, tuple[str, ...]] = {
    ".base.errors": ("InputError",),
    ".model.sim": ("ClosedClient", "SimResult", "simulate"),
    ".model.specs": ("DEVICES", "POLICIES", "PolicyParams", "device_spec", "policy_spec"),
    ".traces": ("FORMATS", "detect_format", "read_trace"),
}
#: Public name → (module, attribute in it; None for the module itself).
_LAZY: dict[str, tuple[str, str | None]] = {
    **{name: (module, name) for module, names in _FROM.items() for name in names},
    "synth": (".model.synth", None),
    "bundled_trace": (".traces", "bundled"),
}


def __getattr__(name: str) -> Any:
    """The public names of :data:`__all__`, and the package's modules
    (``storqos.traces.stats`` after a bare ``import storqos``), imported when first asked
    for."""
    if name in _LAZY:
        module, attr = _LAZY[name]
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        module, attr = f".{name}", None
    else:
        raise AttributeError(f"module 'storqos' has no attribute {name!r}")
    mod = importlib.import_module(module, __name__)
    value = mod if attr is None else getattr(mod, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "ClosedClient",
    "DEVICES",
    "FORMATS",
    "InputError",
    "POLICIES",
    "PolicyParams",
    "SimResult",
    "bundled_trace",
    "detect_format",
    "device_spec",
    "policy_spec",
    "read_trace",
    "simulate",
    "synth",
]
