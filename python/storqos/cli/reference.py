"""docs/reference/, generated: every policy and its parameters (the core's registry),
every option of every command (the CLI itself), every key of an experiment file and of
the gateway's config file (their schemas), each with its type, default, range and one
line, a page each. ``make test`` checks that the committed pages are current
(tests/python/test_reference_current.py).

    python -m storqos.cli.reference            # writes docs/reference/*.md
"""

from __future__ import annotations

import enum
import pathlib
import re
import sys
import types
import typing
from collections.abc import Iterator
from typing import Any

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from storqos import _core
from storqos.model import registry

#: Where the generated pages go, relative to the repository.
REFERENCE = "docs/reference"
#: The command that regenerates them.
REGENERATE = "python -m storqos.cli.reference"


def _cell(text: object) -> str:
    """One table cell on one line (pipes escaped)."""
    return " ".join(str(text).split()).replace("|", "\\|") or "—"


def _table(header: tuple[str, ...], rows: list[tuple[object, ...]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _code(text: str | None) -> str:
    return f"`{text}`" if text else "—"


# --------------------------------------------------------------------- policies


def _param_rows(params: tuple[registry.Param, ...]) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for q in params:
        kind = q.value + (f": {', '.join(q.choices)}" if q.choices else "")
        default = "required" if q.required else _code(q.default)
        rows.append((f"`{q.key}`", kind, default, q.range, q.help))
    return rows


def policies() -> list[str]:
    """The policies and their parameters."""
    reg = registry.registry()
    out = ["## Policies", "",
           "`--policy` of `storqos simulate` and `storqos serve`, `kind` of an experiment file's `[[policy]]` "
           f"and of a gateway config's `[policy]`. Without one a run gets `{reg.default_policy}`. Parameters are "
           "keys of those tables and keywords of `storqos.simulate`; per-tenant lists are in tenant order.", ""]
    out[0] = "# Policies"
    head = ("key", "type", "default", "range", "what it sets")
    for p in reg.policies:
        runs = ", ".join(c for c, ok in (("simulate", p.runs_in("simulate")), ("serve", p.serve)) if ok)
        out += [f"### `{p.name}`", "", p.summary + ".", ""]
        facts = [f"runs in: {runs}", f"core kind: `{p.kind}`"]
        if p.aliases:
            facts.append("also taken as: " + ", ".join(f"`{a}`" for a in p.aliases))
        if p.back_end:
            facts.append(f"in front of: `{p.back_end}`")
        for key, keys in p.from_tenants:
            facts.append(f"`{key}` defaults to the tenants' " + " and ".join(f"`{k}`" for k in keys))
        out += ["; ".join(facts) + ".", ""]
        if p.params:
            out += _table(head, _param_rows(p.params))
        elif p.form is not None:
            out += ["No parameters.", ""]
        if p.serve_params:
            out += ["In a gateway config's `[policy]`:", ""] + _table(head, _param_rows(p.serve_params))
    any_policy = ", ".join(f"`{k}`" for k in reg.run_params)
    out += [f"Any policy may be handed {any_policy} without using them (the device's capacity, the SLOs "
            "a run is judged on).", "", "### Value types", ""]
    out += _table(("type", "written as"), [(f"`{n}`", t) for n, t in reg.value_types])
    return out


# ---------------------------------------------------------------------- the CLI


def _commands(group: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    for name in sorted(group.commands):
        cmd = group.commands[name]
        if getattr(cmd, "hidden", False):
            continue
        if hasattr(cmd, "commands"):
            yield from _commands(cmd, f"{prefix} {name}")
        else:
            yield f"{prefix} {name}", cmd


def _first_line(text: str | None) -> str:
    """The help's first paragraph, markup and line breaks dropped."""
    para = (text or "").strip().split("\n\n")[0]
    return re.sub(r"\[/?(bold|dim|italic|yellow|red|green)\]", "", " ".join(para.split()))


def _click_type(param: Any) -> str:
    if getattr(param, "is_flag", False):
        return "flag"
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    return "text" if annotation is None else _type_name(annotation)


def _click_default(param: Any) -> str:
    default = param.default
    if callable(default) or default is None or default == () or default is False:
        return "—"
    if hasattr(default, "value"):  # an Enum
        default = default.value
    return _code(str(default))


def commands() -> list[str]:
    """Every command's options."""
    from storqos.cli.app import app

    root = typer.main.get_command(app)
    out = ["# Commands", "",
           "Every option of every command (`storqos COMMAND --help` says more). The policy options are the "
           "registry's ([policies.md](policies.md)): `--weights`, `--deadline`…", ""]
    for path, cmd in _commands(root, "storqos"):
        out += [f"### `{path}`", "", _first_line(cmd.help), ""]
        rows: list[tuple[object, ...]] = []
        for p in cmd.params:
            if getattr(p, "hidden", False):
                continue
            if getattr(p, "param_type_name", "") == "argument":
                rows.append((f"`{(p.metavar or p.name or '').upper()}` (argument)", _click_type(p),
                             "required" if p.required else _click_default(p), _first_line(getattr(p, "help", ""))))
                continue
            flags = ", ".join(f"`{o}`" for o in (*p.opts, *p.secondary_opts))
            rows.append((flags, _click_type(p), _click_default(p), _first_line(p.help)))
        out += _table(("option", "type", "default", "what it does"), rows) if rows else ["No options.", ""]
    return out


# ------------------------------------------------------------------ config files


def _type_name(tp: Any) -> str:
    """A field's type as the reference says it: ``whole number | none``, ``list of [export]``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        return " | ".join(dict.fromkeys(names))
    if origin is typing.Literal:
        return " | ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict or tp is dict:
        return "table"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return "table"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return " | ".join(f"`{m.value}`" for m in tp)
    plain: dict[Any, str] = {str: "text", int: "whole number", float: "number", bool: "true or false",
                             pathlib.Path: "path"}
    return plain.get(tp, getattr(tp, "__name__", str(tp)))


def _unit_types() -> dict[int, str]:
    """The validators of the schemas' unit-reading types, and the type each reads."""
    from storqos.base import toml_schema as t

    named = [(t.DurationNs, "duration"), (t.PositiveDurationNs, "duration > 0"),
             (t.LatencyNs, "latency (a bare number is ms)"), (t.Rate, "IOPS"), (t.RateOrZero, "IOPS, or 0"),
             (t.PositiveNumber, "number > 0")]
    return {id(m): name for alias, name in named for m in typing.get_args(alias)[1:]}


def _field_type(field: FieldInfo) -> str:
    units = _unit_types()
    found = [units[id(m)] for m in field.metadata if id(m) in units]
    if found:
        return found[0]
    for arm in typing.get_args(field.annotation):  # an optional unit type: `Rate | None`
        found = [units[id(m)] for m in typing.get_args(arm)[1:] if id(m) in units]
        if found:
            return found[0]
    return _type_name(field.annotation)


def _comments(model: type[BaseModel]) -> dict[str, str]:
    """The ``#:`` comment above each field of ``model``'s class body, as one line."""
    import ast
    import inspect

    try:
        lines = inspect.getsource(model).splitlines()
    except (OSError, TypeError):
        return {}
    tree = ast.parse("\n".join(lines))
    out: dict[str, str] = {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for node in body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above: list[str] = []
            i = node.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#:"):
                above.insert(0, lines[i].strip()[2:].strip())
                i -= 1
            if above:
                out[node.target.id] = " ".join(above)
    return out


def _range(field: FieldInfo) -> str:
    parts = []
    for m in field.metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            v = getattr(m, attr, None)
            if v is not None:
                parts.append(f"{sign} {v}")
        for attr, what in (("min_length", "at least"), ("max_length", "at most")):
            v = getattr(m, attr, None)
            if v is not None:
                parts.append(f"{what} {v} long")
    return ", ".join(parts)


def _field_default(field: FieldInfo, kind: str) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        return _code(repr(field.default_factory()))  # type: ignore[call-arg]
    if field.default is None or field.default is PydanticUndefined:
        return "—"
    if isinstance(field.default, BaseModel):
        return "—"
    if kind.startswith(("duration", "latency")) and isinstance(field.default, int):
        from storqos.base.units import fmt_duration

        return _code(fmt_duration(field.default))
    if isinstance(field.default, bool):
        return _code(str(field.default).lower())
    return _code(repr(field.default) if isinstance(field.default, str) else str(field.default))


def _models_in(tp: Any) -> list[type[BaseModel]]:
    """The models a field's type holds (a table, a list of tables, a union of them)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    return [m for a in typing.get_args(tp) for m in _models_in(a)]


def _keys(model: type[BaseModel], table: str) -> Iterator[tuple[object, ...]]:
    nested: list[tuple[str, type[BaseModel]]] = []
    comments = {k: v for m in reversed(model.__mro__) if isinstance(m, type) and issubclass(m, BaseModel)
                for k, v in _comments(m).items()}
    for name, field in model.model_fields.items():
        kind = _field_type(field)
        yield (f"`{table}{name}`" if table else f"`{name}`", kind, _field_default(field, kind), _range(field),
               field.description or comments.get(name, ""))
        for sub in _models_in(field.annotation):
            nested.append((f"{table}{name}.", sub))
    for prefix, sub in nested:
        yield from _keys(sub, prefix)


def config_files() -> list[str]:
    """Every key of an experiment file and of the gateway's config file."""
    from storqos.experiments.experiment_schema import ExperimentFile
    from storqos.live.gateway_config import GatewayFile

    head = ("key", "type", "default", "range", "what it sets")
    out = ["# Config files", "", "## Experiment files (`storqos run FILE.toml`)", "",
           "Tables are written `[name]` or `[[name]]` (a list of them); a key `a.b` is key `b` of table `a`. "
           "`[[policy]]` takes `kind` and that policy's parameters ([policies.md](policies.md)). "
           "docs/experiments.md explains them.", ""]
    out += _table(head, list(_keys(ExperimentFile, "")))
    out += ["## Gateway config files (`storqos serve --config FILE.toml`)", "",
            "`[policy]` takes `kind` and that policy's parameters ([policies.md](policies.md)). docs/gateway.md "
            "explains them.",
            ""]
    out += _table(head, list(_keys(GatewayFile, "")))
    limits = [("export name", f"{_core.GATEWAY_MAX_NAME_BYTES} bytes at most"),
              ("backend depth", f"{_core.GATEWAY_MAX_DEPTH} at most"),
              ("one request", f"{_core.GATEWAY_MAX_IO_BYTES >> 20} MiB at most (so the in-flight budget is at least "
                              "that)"),
              ("a fault rule's delay", f"{_core.GATEWAY_MAX_FAULT_DELAY_S:g} s at most")]
    out += ["The gateway's limits (its own, read from the extension):", ""]
    out += _table(("what", "limit"), limits)  # type: ignore[arg-type]
    return out


def _page(lines: list[str]) -> str:
    head, rest = lines[0], lines[1:]
    return "\n".join([head, "", f"<!-- Generated by `{REGENERATE}`: do not edit; make test checks that it is "
                      "current. -->", *rest]).rstrip("\n") + "\n"


def reference() -> dict[str, str]:
    """The pages of docs/reference/, by file name."""
    index = ["# Reference", "",
             "Every policy, command-line option and configuration key, with its type, default and range. "
             "The policies come from the core's registry (crates/storqos-core/src/spec/registry/), the options "
             "from the CLI, the keys from the files' schemas.", "",
             "- [policies.md](policies.md): every policy and its parameters",
             "- [commands.md](commands.md): every option of every command",
             "- [config-files.md](config-files.md): every key of an experiment file and of a gateway config file"]
    return {"README.md": _page(index), "policies.md": _page(policies()), "commands.md": _page(commands()),
            "config-files.md": _page(config_files())}


def main() -> None:
    """Write the pages into the folder given (default: docs/reference, from the repository's root)."""
    folder = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else REFERENCE)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in reference().items():
        (folder / name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
