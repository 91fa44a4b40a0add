"""Where the CLI writes: the result console (stdout), the message console (stderr) and
the one JSON emitter every ``--json`` goes through.

Tables take the terminal's width, ``$COLUMNS`` when set, else 80 columns when piped.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

#: Results: tables and summaries (stdout).
out = Console()
#: Messages: errors, warnings, progress (stderr).
err = Console(stderr=True)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON on stdout (numpy and polars scalars as numbers)."""
    sys.stdout.write(json.dumps(obj, indent=2, default=float) + "\n")
