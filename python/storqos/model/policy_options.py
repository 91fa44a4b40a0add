"""The command-line options of a scheduling policy, shared by ``storqos simulate`` and
``storqos serve`` (the same policy runs in simulated time and live, so it takes the
same options in both), built from the policy registry (:mod:`storqos.model.registry`):
``--policy`` and its help list the policies each command runs, and
:func:`with_policy_options` gives a command the registry's options of its parameters,
which :func:`storqos.model.specs.policy_spec` turns into a spec."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from storqos.model import registry
from storqos.model.specs import aliases_text


def policy_help(command: registry.Command) -> str:
    """``--policy``'s help: the policies ``command`` runs, and the other names each is
    taken by (nothing else is)."""
    names = " | ".join(p.name for p in registry.policies(command))
    return f"Scheduling policy: {names}. Also taken by these names: {aliases_text(command)}."


#: The policy a run without ``--policy`` gets.
DEFAULT_POLICY = registry.registry().default_policy
#: ``--policy``'s help in ``storqos simulate``.
POLICY_HELP = policy_help("simulate")
PolicyOpt = Annotated[str, typer.Option("--policy", "-p", help=POLICY_HELP)]


def _option(key: str) -> Any:
    """The typer option of the registry's option that gives ``key``."""
    o = next(o for o in registry.registry().options if o.key == key)
    return typer.Option(o.flag, help=o.help)


# The options other commands reuse one by one (``storqos ctl set``).
WeightsOpt = Annotated[str | None, _option("weights")]
ReservationsOpt = Annotated[str | None, _option("reservations")]
LimitsOpt = Annotated[str | None, _option("limits")]
AtLimitOpt = Annotated[str | None, _option("at_limit")]

_F = TypeVar("_F", bound=Callable[..., Any])


def with_policy_options(command: registry.Command, *, after: str) -> Callable[[_F], _F]:
    """Give a command function that takes ``**policy_params`` the registry's policy
    options of ``command`` (each a keyword defaulting to None, named by its parameter's
    key: ``--deadline`` arrives as ``deadlines``), listed in its ``--help`` after the
    parameter ``after``."""
    def apply(f: _F) -> _F:
        sig = inspect.signature(f, eval_str=True)  # as typer reads it, which it will not redo
        extra = [inspect.Parameter(o.key, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                   annotation=Annotated[int | None if o.count else str | None,
                                                        typer.Option(o.flag, help=o.help)])
                 for o in registry.options(command)]
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                continue
            params.append(p)
            if p.name == after:
                params += extra
        if len(params) == len(sig.parameters) - 1:
            raise TypeError(f"{f.__name__} has no parameter {after!r} to list the policy options after")
        f.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        return f
    return apply
