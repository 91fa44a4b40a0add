"""Where the CLI writes: the result console (stdout), the message console (stderr) and
the one JSON emitter every ``--json`` goes through.

Tables take the terminal's width, ``$COLUMNS`` when set, else 80 columns when piped.
What they print holds the user's own text (a trace's first line, a tenant's or a file's
name), printed as it is: neither console turns ``:name:`` into an emoji (``root:x:0:0``
must not become ``root❌0:0``), and the results console reads no markup (a tenant named
``[red]web`` keeps its name): style there with ``style=`` or :class:`rich.text.Text`.
Messages on ``err`` are markup, their user text escaped (:func:`rich.markup.escape`).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

#: Results: tables and summaries (stdout).
out = Console(emoji=False, markup=False)
#: Messages: errors, warnings, progress (stderr).
err = Console(stderr=True, emoji=False)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON on stdout (numpy and polars scalars as numbers)."""
    sys.stdout.write(json.dumps(obj, indent=2, default=float) + "\n")
