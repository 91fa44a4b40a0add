"""The policy registry: every policy's name, aliases, summary and parameters (type,
default, range, one line of help), and the options of ``storqos simulate`` and
``storqos serve`` that give them, read once from the core's declaration
(``storqos_core::spec::registry``) as frozen values.

This is the one place the Python layer learns which policies exist: ``--policy``'s
names and help, the aliases, the keys experiment files and gateway configs take, the
options of both commands and the option an error names for a key all come from here,
and no other module names a policy (tests/python/test_policy_registry.py checks it).

>>> lookup("WF2Q+").name
'wf2q'
>>> flag_of("deadlines"), param_of_flag("--control-window")
('--deadline', 'control_window')
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from storqos import _core

#: Where a policy runs: ``simulate`` (the simulator, experiment files, the Python API)
#: or ``serve`` (the live gateway and its config file).
Command = Literal["simulate", "serve"]


@dataclass(frozen=True)
class Bound:
    """An end of a parameter's range."""

    value: float
    inclusive: bool


@dataclass(frozen=True)
class Param:
    """A parameter a policy takes, as users write it (``storqos_core``'s ``Param``)."""

    key: str
    #: its type's name (one of :data:`Registry.value_types`)
    value: str
    default: str | None
    min: Bound | None
    max: Bound | None
    choices: tuple[str, ...]
    required: bool
    help: str

    @property
    def range(self) -> str:
        """The range as the reference gives it: ``> 0``, ``[0, 1]``, ``(-1, 1)``, or ``""``."""
        lo, hi = self.min, self.max
        if lo is not None and hi is not None:
            return f"{'[' if lo.inclusive else '('}{lo.value:g}, {hi.value:g}{']' if hi.inclusive else ')'}"
        if lo is not None:
            return f"{'≥' if lo.inclusive else '>'} {lo.value:g}"
        if hi is not None:
            return f"{'≤' if hi.inclusive else '<'} {hi.value:g}"
        return ""


@dataclass(frozen=True)
class Policy:
    """A policy: its names, what it is, its core kind and what it takes."""

    name: str
    aliases: tuple[str, ...]
    #: the core spec's ``kind``
    kind: str
    summary: str
    #: the builder of its spec from :attr:`params` (:mod:`storqos.model.specs`); None:
    #: not run by ``simulate``
    form: str | None
    params: tuple[Param, ...]
    #: the gateway's own builder (None: :attr:`form`) and its config's keys
    serve_form: str | None
    serve_params: tuple[Param, ...]
    serve: bool
    #: the policy its classes or buckets feed, by name
    back_end: str | None
    #: parameters that default to the tenants' QoS keys: (parameter, tenant keys)
    from_tenants: tuple[tuple[str, tuple[str, ...]], ...]
    #: the systems whose QoS it models (``storqos advise --target``, ``storqos check``);
    #: empty for storqos' own policies
    targets: tuple[str, ...] = ()

    @property
    def takes(self) -> tuple[str, ...]:
        """The keys of :attr:`params`."""
        return tuple(p.key for p in self.params)

    def runs_in(self, command: Command) -> bool:
        """Whether ``command`` runs it."""
        return self.form is not None if command == "simulate" else self.serve

    def default_from_tenants(self, param: str) -> tuple[str, ...]:
        """The tenant keys ``param`` defaults to (none: it does not)."""
        return next((keys for key, keys in self.from_tenants if key == param), ())


@dataclass(frozen=True)
class Option:
    """A command-line option that gives a policy parameter."""

    key: str
    flag: str
    #: whether its value is a whole number (else text the policy's builder parses)
    count: bool
    help: str
    commands: tuple[str, ...]


@dataclass(frozen=True)
class Registry:
    """The whole registry."""

    policies: tuple[Policy, ...]
    options: tuple[Option, ...]
    #: the policy a run without one gets
    default_policy: str
    #: keys any policy may be handed without using them
    run_params: tuple[str, ...]
    #: keys whose option is not ``--`` and the key with ``-`` for ``_``
    irregular_flags: dict[str, str]
    #: every value type and how the reference describes it
    value_types: tuple[tuple[str, str], ...]


def _bound(raw: dict[str, Any] | None) -> Bound | None:
    return None if raw is None else Bound(float(raw["value"]), bool(raw["inclusive"]))


def _param(raw: dict[str, Any]) -> Param:
    return Param(key=raw["key"], value=raw["value"], default=raw["default"], min=_bound(raw["min"]),
                 max=_bound(raw["max"]), choices=tuple(raw["choices"]), required=raw["required"], help=raw["help"])


def _policy(raw: dict[str, Any]) -> Policy:
    return Policy(name=raw["name"], aliases=tuple(raw["aliases"]), kind=raw["kind"], summary=raw["summary"],
                  form=raw["form"], params=tuple(_param(p) for p in raw["params"]), serve_form=raw["serve_form"],
                  serve_params=tuple(_param(p) for p in raw["serve_params"]), serve=raw["serve"],
                  back_end=raw["back_end"],
                  from_tenants=tuple((key, tuple(keys)) for key, keys in raw["from_tenants"]),
                  targets=tuple(raw["targets"]))


@cache
def registry() -> Registry:
    """The registry, read from the core once."""
    raw = json.loads(_core.policy_registry())
    return Registry(
        policies=tuple(_policy(p) for p in raw["policies"]),
        options=tuple(Option(o["key"], o["flag"], o["count"], o["help"], tuple(o["commands"])) for o in raw["options"]),
        default_policy=raw["default_policy"],
        run_params=tuple(raw["run_params"]),
        irregular_flags=dict(raw["irregular_flags"]),
        value_types=tuple((name, text) for name, text in raw["value_types"]),
    )


def policies(command: Command = "simulate") -> tuple[Policy, ...]:
    """The policies ``command`` runs, in the registry's order."""
    return tuple(p for p in registry().policies if p.runs_in(command))


def default() -> Policy:
    """The policy a run without one gets: one queue served in arrival order (FCFS), so
    also the baseline the analyses run a trace through when no policy is the question."""
    return policy(registry().default_policy)


def lookup(name: str, command: Command | None = None) -> Policy | None:
    """The policy called ``name`` or one of its aliases (case and spaces aside), among
    those ``command`` runs (None: any); None if there is none."""
    key = name.strip().lower()
    return next((p for p in registry().policies if (key == p.name or key in p.aliases)
                 and (command is None or p.runs_in(command))), None)


def policy(name: str) -> Policy:
    """The policy called ``name`` exactly (a name the registry gives, e.g. a back end)."""
    found = lookup(name)
    if found is None or found.name != name:
        raise KeyError(name)
    return found


def aliases(command: Command = "simulate") -> dict[str, str]:
    """Every alias of the policies ``command`` runs, and the policy it names."""
    return {a: p.name for p in policies(command) for a in p.aliases}


def targets() -> tuple[str, ...]:
    """Every system a policy models, in the registry's order (``qemu``, ``libvirt``,
    ``cgroup``, ...)."""
    return tuple(dict.fromkeys(t for p in registry().policies for t in p.targets))


def for_target(target: str) -> tuple[Policy, ...]:
    """The policies that model ``target``'s QoS (``cgroup``: blk-throttle and BFQ), in
    the registry's order; empty for a system none models."""
    key = target.strip().lower()
    return tuple(p for p in registry().policies if key in p.targets)


def with_form(form: str) -> tuple[str, ...]:
    """The names of the policies built by ``form`` (:attr:`Policy.form`)."""
    return tuple(p.name for p in registry().policies if p.form == form)


def options(command: Command) -> tuple[Option, ...]:
    """The policy options of ``command``, in its ``--help``'s order."""
    return tuple(o for o in registry().options if command in o.commands)


def flag_of(key: str) -> str:
    """The option that gives a parameter: ``deadlines`` → ``--deadline``."""
    return registry().irregular_flags.get(key, "--" + key.replace("_", "-"))


def param_of_flag(flag: str) -> str:
    """The parameter an option gives: ``--control-window`` → ``control_window``,
    ``--deadline`` → ``deadlines``."""
    return next((k for k, f in registry().irregular_flags.items() if f == flag), flag.lstrip("-").replace("-", "_"))


def takers(key: str, command: Command = "simulate") -> tuple[str, ...]:
    """The names of the policies ``command`` runs that take ``key``."""
    return tuple(p.name for p in policies(command)
                 if key in p.takes or (command == "serve" and any(q.key == key for q in p.serve_params)))


def tenant_key_users(tenant_key: str) -> tuple[str, ...]:
    """The names of the policies one of whose parameters defaults to the tenants'
    ``tenant_key`` (``weight``, ``reservation``, ``limit``, ``slo``)."""
    return tuple(p.name for p in registry().policies if any(tenant_key in keys for _, keys in p.from_tenants))
