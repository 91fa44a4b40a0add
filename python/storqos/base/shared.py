"""Where the shared public traces are: one resolver for every command, example and test.

The folder is ``$STORQOS_SHARED`` when set, else ``../shared`` seen from the current
directory (the checkout's sibling when run from the repository root, as ``make`` does).
storqos never looks for it through its own installation path, and nothing falls back
silently when it is absent: a caller that needs a shared file gets an
:class:`~storqos.base.errors.InputError` saying where it looked.
"""

from __future__ import annotations

import os
from pathlib import Path

from storqos.base.errors import InputError

#: The environment variable that names the shared folder.
ENV = "STORQOS_SHARED"


def shared_dir() -> Path | None:
    """The shared folder (``$STORQOS_SHARED``, else ``../shared``), or None when absent."""
    env = os.environ.get(ENV)
    p = Path(env).expanduser() if env else Path.cwd().parent / "shared"
    return p if p.is_dir() else None


def where() -> str:
    """Where :func:`shared_dir` looks, for messages."""
    env = os.environ.get(ENV)
    return f"${ENV} ({env})" if env else f"../shared ({Path.cwd().parent / 'shared'})"


def shared_path(relative: str | Path) -> Path:
    """``relative`` inside the shared folder (``traces/tpcc-excerpt/tpcc-small.trace``);
    an :class:`InputError` when the folder or the file is missing."""
    base = shared_dir()
    if base is None:
        raise InputError(f"needs the shared traces folder, not found at {where()}; set {ENV}", str(relative))
    p = base / relative
    if not p.exists():
        raise InputError(f"not found in the shared folder {base}", str(relative))
    return p
