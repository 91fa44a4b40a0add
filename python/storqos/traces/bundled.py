"""Small traces shipped inside the package, so demos and tests run without ``../shared``.

``websearch``: the first 8,000 requests of the UMass/SPC WebSearch excerpt that MQSim
ships as ``traces/wsrch-small.trace`` (MIT licence): format ``mqsim``, DiskSim's layout with ns times.
See ``storqos/data/README.md`` for origin and licence.
"""

from __future__ import annotations

from pathlib import Path

from storqos.base.errors import InputError

#: Bundled trace name → file name in ``storqos/data``.
BUNDLED: dict[str, str] = {"websearch": "websearch-excerpt.mqsim"}

_DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def bundled(name: str = "websearch") -> Path:
    """Path of a bundled trace (read it with :func:`~storqos.traces.read_trace`)."""
    if name not in BUNDLED:
        raise InputError(f"no bundled trace {name!r}; bundled: {', '.join(BUNDLED)}")
    path = _DATA_DIR / BUNDLED[name]
    if not path.is_file():
        raise InputError("bundled trace missing from the installation", str(path))
    return path
