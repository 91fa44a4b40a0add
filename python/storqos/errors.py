"""Errors storqos reports to users: one line, naming what is wrong and where.

The CLI prints ``str(err)`` of any :class:`InputError` on one line to stderr and exits
with status 2; library users catch it as a ``ValueError``.
"""

from __future__ import annotations

import warnings


class InputError(ValueError):
    """Bad user input: a trace record, a config value, a flag, a unit.

    ``where`` names the place (``"trace.csv:17"``, ``"--capacity"``, ``"byte 2260"``) and
    is put in front of the message.
    """

    def __init__(self, message: str, where: str | None = None) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)


class InputWarning(UserWarning):
    """Input that is accepted but probably not what the user meant (a guessed format, an
    implausible rate). The CLI prints it as one ``warning:`` line on stderr."""


def warn_input(message: str, where: str | None = None) -> None:
    """Warn about accepted but doubtful input, naming where (as :class:`InputError` does)."""
    warnings.warn(InputWarning(f"{where}: {message}" if where else message), stacklevel=2)
