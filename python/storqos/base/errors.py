"""Errors storqos reports to users: one line, naming what is wrong and where.

The CLI prints ``str(err)`` of any :class:`InputError` on one line to stderr and exits
with status 2; library users catch it as a ``ValueError``.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Iterable


class InputError(ValueError):
    """Bad user input: a trace record, a config value, a flag, a unit.

    ``where`` names the place (``"trace.csv:17"``, ``"--capacity"``, ``"byte 2260"``) and
    is put in front of the message.
    """

    def __init__(self, message: str, where: str | None = None) -> None:
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)


class UnknownKeyword(InputError, TypeError):
    """A keyword argument a function does not take (``simulate(reservation=...)``):
    a :class:`TypeError`, as Python's own is, and an :class:`InputError`, so that the CLI
    and experiment files report it in one line. The message suggests the nearest of the
    names it takes (:func:`did_you_mean`)."""

    def __init__(self, function: str, keyword: str, known: Iterable[str]) -> None:
        self.keyword = keyword
        #: ``"; did you mean 'reservations'?"`` or ``""``
        self.hint = did_you_mean(keyword, known)
        super().__init__(f"{function}() got an unexpected keyword argument {keyword!r}{self.hint}")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'reservations'?"`` for the choices nearest ``word``: those it
    begins (``sarc`` → ``sarc+avatar``), then the most alike by difflib's ratio (at least
    its default 0.6), three at most; ``""`` when none is near.

    >>> did_you_mean("reservation", ["reservations", "weights", "limits"])
    "; did you mean 'reservations'?"
    >>> did_you_mean("sarc", ["sarc+avatar", "sarc+facade", "fcfs"])
    "; did you mean 'sarc+avatar' or 'sarc+facade'?"
    """
    options = list(dict.fromkeys(choices))
    near = [c for c in options if word and c.startswith(word) and c != word]
    near += [c for c in difflib.get_close_matches(word, options, n=3) if c not in near]
    near = near[:3]
    if not near:
        return ""
    return "; did you mean " + " or ".join(repr(n) for n in near) + "?"


class CoreError(InputError):
    """Input the Rust core refused. Raised by ``storqos._core`` itself (one subclass per
    kind of core error), so Python code catches a type, not a message: ``message`` is
    the core's own line, ``str()`` puts the kind in front as the core says it."""

    #: What the core calls this kind of error, in front of the message.
    kind = "invalid input"

    def __str__(self) -> str:
        return f"{self.where}: {self.kind}: {self.message}" if self.where else f"{self.kind}: {self.message}"


class ConfigError(CoreError):
    """A parameter the core refused: out of range or inconsistent (the message names it)."""

    kind = "invalid configuration"


class DataError(CoreError):
    """Input data the core refused: a request stream or trace it cannot run."""

    kind = "invalid input"


class GatewayConfigError(CoreError):
    """A gateway configuration the NBD server refused (the message names the field)."""

    kind = "invalid gateway configuration"


class InputWarning(UserWarning):
    """Input that is accepted but probably not what the user meant (a guessed format, an
    implausible rate). The CLI prints it as one ``warning:`` line on stderr."""


def warn_input(message: str, where: str | None = None) -> None:
    """Warn about accepted but doubtful input, naming where (as :class:`InputError` does)."""
    warnings.warn(InputWarning(f"{where}: {message}" if where else message), stacklevel=2)
