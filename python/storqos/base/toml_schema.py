"""Typed TOML files: what storqos' file schemas (experiments, the gateway's config) share.

- value types read once by :mod:`storqos.base.units` (durations in ns, rates in IOPS, …);
- :class:`Table`, a table whose every key is known;
- :func:`validate`: a parsed file as its pydantic model, or one :class:`InputError` line
  that names the file, the line, the table (``[[tenant]] 2 (batch)``) and the key, with
  the keys a table takes when one is unknown.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from storqos.base.config_file import read_config_text
from storqos.base.errors import InputError
from storqos.base.units import parse_duration, parse_rate

#: A number, or a number with a unit ("1.2k", "10ms", "64KiB"), checked where it is read.
Quantity = Annotated[str | int | float, Field(union_mode="left_to_right")]


def unit(parse: Callable[..., Any], **kw: Any) -> BeforeValidator:
    """A field read by one of :mod:`storqos.base.units`' parsers (its message, without a place)."""
    return BeforeValidator(lambda v: parse(v, "", **kw))


def _positive_duration(v: Any) -> int:
    ns = parse_duration(v, "")
    if ns <= 0:
        raise InputError(f"must be > 0, got {v!r}")
    return ns


def _latency(v: Any) -> int:
    ns = parse_duration(v, "", default_unit="ms")
    if ns <= 0:
        raise InputError(f"must be a latency > 0, e.g. \"10ms\", got {v!r}")
    return ns


def _positive_number(v: Any) -> float:
    try:
        x = float(v) if not isinstance(v, bool) else float("nan")
    except (TypeError, ValueError):
        x = float("nan")
    if not 0 < x < float("inf"):
        raise InputError(f"must be a number > 0, got {v!r}")
    return x


def _rate_or_zero(v: Any) -> float:
    return 0.0 if v in (0, "0") and not isinstance(v, bool) else parse_rate(v, "")


def one_or_many(v: Any) -> Any:
    """A table or array of tables as a list: ``[trace]`` (one table) reads as ``[[trace]]`` with one entry."""
    return [v] if isinstance(v, dict) else v


#: Nanoseconds, from a duration ("30s", "250us"; a bare number is seconds).
DurationNs = Annotated[int, unit(parse_duration)]
#: Nanoseconds > 0.
PositiveDurationNs = Annotated[int, BeforeValidator(_positive_duration)]
#: A latency target in ns > 0 (a bare number is ms).
LatencyNs = Annotated[int, BeforeValidator(_latency)]
#: IOPS in (0, 10^9] ("1.2k", "500").
Rate = Annotated[float, unit(parse_rate)]
#: IOPS in [0, 10^9] (a reservation may be 0).
RateOrZero = Annotated[float, BeforeValidator(_rate_or_zero)]
#: A positive real number (a weight, a rate factor).
PositiveNumber = Annotated[float, BeforeValidator(_positive_number)]

M = TypeVar("M", bound=BaseModel)


class Table(BaseModel):
    """A TOML table whose keys are all known (an unknown key is an error)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def given(self) -> dict[str, Any]:
        """The keys the file gave, as given (for the code that reads them further)."""
        return self.model_dump(exclude_unset=True, exclude_none=True)


def read_toml(path: Path) -> tuple[str, dict[str, Any]]:
    """A TOML file's text and its parsed tables, or an InputError naming the file (not
    there, a directory, not a regular file, too large, not UTF-8 text, a syntax error,
    nested too deeply)."""
    text = read_config_text(path, "TOML")
    too_deep = InputError(f"arrays or inline tables nested too deeply to read (more than {MAX_NESTING} levels; "
                          "a few are all any of storqos' files uses)", str(path))
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"TOML syntax error: {e}", str(path)) from None
    except RecursionError:
        # tomllib reads nested arrays and inline tables recursively: a few hundred
        # levels exhaust Python's stack where its recursion limit is the default.
        raise too_deep from None
    if _depth(parsed) > MAX_NESTING:
        # Where the recursion limit is higher, the parse succeeds and what reads the
        # tables next (pydantic, the gateway's JSON) would recurse as deep.
        raise too_deep
    return text, parsed


#: The deepest nesting of tables, arrays and inline tables a file may have: storqos'
#: own files nest three levels; this leaves room and stays far from any stack's limit.
MAX_NESTING = 64


def _depth(value: object) -> int:
    """How deeply ``value``'s dicts and lists nest (1 for a flat table), counted
    without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            children: list[object] = list(v.values())
        elif isinstance(v, list):
            children = v
        else:
            continue
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in children)
    return deepest


# ----------------------------------------------------------------------------- errors


def entry_where(where: str, table: str, index: int, name: str | None) -> str:
    """``exp.toml: [[tenant]] 2 (batch)``: the place of the ``index``-th entry (0-based)."""
    return f"{where}: [[{table}]] {index + 1}" + (f" ({name})" if name else "")


def validate(model: type[M], raw: dict[str, Any], where: str, text: str | None = None) -> M:
    """``raw`` (a parsed TOML file) as ``model``, or an InputError naming the file (with
    the line, given the file's ``text``), the table and the key of the first thing wrong."""
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        err = _first(e.errors())
        if text is not None:
            line = line_of(text, [p for p in err["loc"] if isinstance(p, int) or _is_key(p)])
            where = f"{where}:{line}" if line else where
        raise _error(model, err, raw, where) from None


def _first(errors: list[Any]) -> Any:
    """The error to report: the first, unless it is only a union branch that did not fit
    (``fallback = {kind = ...}`` is a generator table, not a misspelt string)."""
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]  # a misspelt key, before what it leaves missing
    return next((e for e in unknown + errors if not _branch_miss(e)), errors[0])


#: Names pydantic puts in an error's location for the branch of a union it tried.
_TYPE_BRANCHES = ("str", "int", "float", "bool", "list", "dict")


def _branch_miss(err: Any) -> bool:
    """A value of the wrong type for one branch of a union (``str | int | float``)."""
    return bool(err["type"].endswith("_type") and err["loc"] and err["loc"][-1] in ("str", "int", "float"))


def _is_key(p: Any) -> bool:
    """Whether a location part is a key of the file (not a union branch pydantic tried)."""
    return isinstance(p, str) and "[" not in p and p not in _TYPE_BRANCHES


def _error(model: type[BaseModel], err: Any, raw: dict[str, Any], where: str) -> InputError:
    tags = _tags(model)
    loc = [p for p in err["loc"] if isinstance(p, int) or (_is_key(p) and p not in tags)]
    kind, ctx = err["type"], err.get("ctx", {})
    head = str(loc[0]) if loc else ""
    field = _field_kind(model, head)
    if len(loc) == 1 and field == "table" and kind in ("missing", "model_type"):
        return InputError(f"needs a [{head}] table", where)
    if len(loc) == 1 and field == "array" and kind in ("missing", "too_short"):
        return InputError(f"needs at least one [[{head}]]", where)
    place, table = where, _field_model(model, [])
    if field == "array" and len(loc) > 1 and isinstance(loc[1], int):
        entries = one_or_many(raw.get(head))
        entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else {}
        name = entry.get("name") if isinstance(entry, dict) else None
        place = entry_where(where, head, loc[1], None if name is None else str(name))
        keys = [str(p) for p in loc[2:]]
        table = _field_model(model, [head])
    elif field == "mapping" and len(loc) > 1:  # a key of its own choosing: quoted whole
        place, keys, table = f"{where}: [{head}] {loc[1]!r}", [str(p) for p in loc[2:]], None
    elif field in ("table", "mapping"):
        place, keys, table = f"{where}: [{head}]", [str(p) for p in loc[1:]], _field_model(model, [head])
    else:
        keys = [str(p) for p in loc]
    if kind == "extra_forbidden":
        known = _known(table, keys[:-1], _tag(err, tags))
        return InputError(_prefix(keys[:-1]) + f"unknown key {keys[-1]!r} (known: {', '.join(known)})", place)
    if kind == "missing":
        return InputError(_prefix(keys[:-1]) + f"needs a {keys[-1]}", place)
    if kind == "union_tag_invalid":
        expected = str(ctx.get("expected_tags")).replace("'", "")
        return InputError(_prefix(keys) + f"unknown kind {ctx.get('tag')!r} (known: {expected})", place)
    if kind == "union_tag_not_found":
        return InputError(_prefix(keys) + "needs a kind", place)
    if _branch_miss(err):
        return InputError(_prefix(keys) + f"expected a number or a number with a unit (e.g. 10ms, 1.2k, 64KiB), "
                          f"got {err.get('input')!r}", place)
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        sign = {"greater_than_equal": "≥", "less_than_equal": "≤", "greater_than": ">", "less_than": "<"}[kind]
        bound = next(iter(ctx.values()), "?")
        return InputError(_prefix(keys) + f"must be {sign} {bound}, got {err.get('input')!r}", place)
    if kind == "value_error":
        cause = ctx.get("error")
        msg = cause.message if isinstance(cause, InputError) else str(cause)
        return InputError(_prefix(keys) + msg, place)
    what = {"model_type": "a table", "model_attributes_type": "a table", "dict_type": "a table",
            "list_type": "a list", "string_type": "a string", "bool_type": "true or false",
            "int_type": "a whole number", "int_from_float": "a whole number", "int_parsing": "a whole number",
            "float_type": "a number", "float_parsing": "a number", "too_short": "a non-empty list"}.get(kind)
    msg = f"expected {what}, got {err.get('input')!r}" if what else str(err["msg"])
    return InputError(_prefix(keys) + msg, place)


def _prefix(keys: list[str]) -> str:
    return "".join(f"{k}: " for k in keys)


def _strip(tp: Any) -> Any:
    """``Annotated[X, ...]`` → X."""
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def _field_kind(model: type[BaseModel], key: str) -> str | None:
    """How a top-level key is written: ``table`` ([key]), ``array`` ([[key]]), ``mapping``
    ([key] of keys the file chooses), else None (a plain value)."""
    field = model.model_fields.get(key)
    if field is None:
        return None
    tp = _strip(field.annotation)
    if get_origin(tp) is list and _models_in(get_args(tp)[0]):
        return "array"
    if get_origin(tp) is dict:
        return "mapping"
    return "table" if _models_in(tp) else None


def _tags(model: type[BaseModel]) -> set[str]:
    """Every ``kind`` literal of a discriminated union below ``model`` (pydantic puts the
    variant's tag in an error's location)."""
    out: set[str] = set()
    seen: set[type[BaseModel]] = set()
    todo = [model]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        kind = m.model_fields.get("kind")
        if kind is not None and get_origin(kind.annotation) is Literal:
            out.update(str(a) for a in get_args(kind.annotation))
        for f in m.model_fields.values():
            todo.extend(_models_in(f.annotation))
    return out


def _tag(err: Any, tags: set[str]) -> str | None:
    """The union variant an error's location went through."""
    return next((str(p) for p in err["loc"] if p in tags), None)


def _field_model(model: type[BaseModel], path: list[str], raw_tag: str | None = None) -> type[BaseModel] | None:
    """The table type at ``path`` below ``model`` (through lists, optionals and unions)."""
    for key in path:
        field = model.model_fields.get(key)
        if field is None:
            return None
        found = _models_in(field.annotation)
        if raw_tag is not None:
            found = [m for m in found if getattr(m.model_fields.get("kind"), "annotation", None) == Literal[raw_tag]] or found
        if not found:
            return None
        model = found[0]
    return model


def _models_in(tp: Any) -> list[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return [tp]
    if get_origin(tp) is None:
        return []
    return [m for arg in get_args(tp) for m in _models_in(arg)]


def _known(model: type[BaseModel] | None, keys: list[str], raw_tag: str | None) -> list[str]:
    """The keys a table takes: its own first, then those it shares with other tables."""
    target = _field_model(model, keys, raw_tag) if model is not None else None
    if target is None:
        return []

    def depth(key: str) -> int:
        return next(i for i, c in enumerate(target.__mro__) if key in getattr(c, "__annotations__", {}))
    return sorted(target.model_fields, key=depth)


# ----------------------------------------------------------------------------- lines

_HEADER = re.compile(r"^\s*\[(\[)?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


class _Section:
    """A run of lines under one header (``[name]`` or ``[[name]]``), or the top of the
    file: lines ``start`` to ``end`` (1-based, ``end`` excluded) of the text."""

    def __init__(self, lines: list[str], name: str | None, array: bool, line: int | None, start: int) -> None:
        self.lines, self.name, self.array, self.line = lines, name, array, line
        self.start = self.end = start
        #: the tables and arrays of tables written under this [[name]] entry
        #: (``[[export.fault]]`` under ``[[export]]``), until the next ``[[name]]``
        self.nested: list[_Section] = []

    def key_line(self, keys: list[Any]) -> int | None:
        key = next((str(k) for k in keys if not isinstance(k, int)), None)
        if key is None:
            return None
        pattern = re.compile(rf"^\s*[\"']?{re.escape(key)}[\"']?\s*=")
        return next((n for n in range(self.start, self.end) if pattern.match(self.lines[n - 1])), None)


class SourceLines:
    """Where the keys of one TOML text are written: its sections read once, indexed by
    name, so that each look-up costs the entry it looks in (a file of 20,000 [[export]]
    tables was read again for each of them, and checked in minutes)."""

    def __init__(self, text: str) -> None:
        lines = text.splitlines()
        self.top = _Section(lines, None, False, None, 1)
        self.arrays: dict[str, list[_Section]] = {}
        self.tables: dict[str, _Section] = {}
        #: the [[name]] entry each name's nested sections belong to, as they are read
        current: dict[str, _Section] = {}
        sec = self.top
        for n, ln in enumerate(lines, start=1):
            m = _HEADER.match(ln) if "[" in ln else None
            if not m:
                continue
            sec.end = n
            sec = _Section(lines, m.group(2).strip().strip("\"'"), bool(m.group(1)), n, n + 1)
            name = sec.name or ""
            if sec.array:
                self.arrays.setdefault(name, []).append(sec)
            else:
                self.tables.setdefault(name, sec)
            head, dot, _ = name.partition(".")
            if dot and head in current:
                current[head].nested.append(sec)
            elif sec.array:
                current[name] = sec
            elif not dot:
                current.pop(name, None)
        sec.end = len(lines) + 1

    def line(self, loc: list[Any]) -> int | None:
        """The 1-based line where the key at ``loc`` is written (see :func:`line_of`)."""
        if not loc or isinstance(loc[0], int):
            return None
        head = str(loc[0])
        arrays = self.arrays.get(head, [])
        if len(loc) >= 2 and isinstance(loc[1], int):
            if loc[1] < len(arrays):
                entry, rest = arrays[loc[1]], loc[2:]
                if len(rest) >= 2 and isinstance(rest[1], int):
                    nested = [s for s in entry.nested if s.array and s.name == f"{head}.{rest[0]}"]
                    if rest[1] < len(nested):
                        return nested[rest[1]].key_line(rest[2:]) or nested[rest[1]].line
                return entry.key_line(rest) or entry.line
            return self.top.key_line([head]) or (arrays[0].line if arrays else None)
        table = self.tables.get(head)
        if table is not None:
            return table.key_line(loc[1:]) or table.line
        return self.top.key_line([head]) or (arrays[0].line if arrays else None)


def line_of(text: str, loc: list[Any]) -> int | None:
    """The 1-based line of ``text`` where the key at ``loc`` (``["tenant", 1, "slo"]``,
    ``["device", "capacity"]``, ``["seed"]``) is written; its table's header line when the
    key is not there (a missing key); None when neither is found. A key inside an inline
    table gives the line of the key that holds the table; a key of an array nested in
    an array entry (``["export", 1, "fault", 0, "delay"]``: ``[[export.fault]]``) the
    line in that nested entry. (For many look-ups in one text, build its
    :class:`SourceLines` once.)"""
    return SourceLines(text).line(loc)
