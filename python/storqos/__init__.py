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

from . import synth
from .errors import InputError
from .sim import ClosedClient, SimResult, simulate
from .specs import DEVICES, POLICIES, device_spec, policy_spec
from .traces import FORMATS, detect_format, read_trace
from .traces import bundled as bundled_trace

__all__ = [
    "ClosedClient",
    "DEVICES",
    "FORMATS",
    "InputError",
    "POLICIES",
    "SimResult",
    "bundled_trace",
    "detect_format",
    "device_spec",
    "policy_spec",
    "read_trace",
    "simulate",
    "synth",
]

__version__ = "0.1.0"
