"""The experiment file's schema: every table and key of an experiment TOML file, typed
(pydantic), with the units read once (durations in ns, rates in IOPS, percentiles as
fractions) and one-line errors that name the table and the key.

``docs/experiments.md`` documents these keys; :func:`json_schema` gives them to editors
(``storqos run --schema``). What a key's value must be beyond its type (a generator's
rates, a closed client's sizes, a device's parameters, a policy's parameters) is checked
by the code that reads it, and its errors name the key the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from .errors import InputError
from .slo import DEFAULT_PERCENTILE
from .units import check_seed, parse_count, parse_duration, parse_percent, parse_rate

#: A number, or a number with a unit ("1.2k", "10ms", "64KiB"), checked where it is read.
Quantity = Annotated[str | int | float, Field(union_mode="left_to_right")]


def _unit(parse: Callable[..., Any], **kw: Any) -> BeforeValidator:
    """A field read by one of :mod:`storqos.units`' parsers (its message, without a place)."""
    return BeforeValidator(lambda v: parse(v, "", **kw))


def _positive_duration(v: Any) -> int:
    ns = parse_duration(v, "")
    if ns <= 0:
        raise InputError(f"must be > 0, got {v!r}")
    return ns


def _slo(v: Any) -> int:
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


def _reservation(v: Any) -> float:
    return 0.0 if v in (0, "0") and not isinstance(v, bool) else parse_rate(v, "")


def one_or_many(v: Any) -> Any:
    """A table or array of tables as a list: ``[trace]`` (one table) reads as ``[[trace]]`` with one entry."""
    return [v] if isinstance(v, dict) else v


#: Nanoseconds, from a duration ("30s", "250us"; a bare number is seconds).
DurationNs = Annotated[int, _unit(parse_duration)]
#: Nanoseconds > 0.
PositiveDurationNs = Annotated[int, BeforeValidator(_positive_duration)]
#: IOPS in (0, 10^9] ("1.2k", "500").
Rate = Annotated[float, _unit(parse_rate)]
#: A positive real number (a weight, a rate factor).
PositiveNumber = Annotated[float, BeforeValidator(_positive_number)]


class Table(BaseModel):
    """A TOML table whose keys are all known (an unknown key is an error)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def given(self) -> dict[str, Any]:
        """The keys the file gave, as given (for the code that reads them further)."""
        return self.model_dump(exclude_unset=True, exclude_none=True)


class Qos(Table):
    """A tenant's QoS keys, read by the policies that use them."""

    weight: Annotated[PositiveNumber | None, Field(description="share of wf2q, sfq, yfq, mclock (default 1)")] = None
    reservation: Annotated[float | None, BeforeValidator(_reservation),
                           Field(description="IOPS: mclock's reservation, sarc+avatar's R_i")] = None
    limit: Annotated[Rate | None, Field(description="IOPS: mclock's limit")] = None
    slo: Annotated[int | None, BeforeValidator(_slo),
                   Field(description="latency target in ns (a bare number is ms); sarc+avatar's D_i")] = None


class TraceReading(Qos):
    """How a trace file is read (a [[trace]], or a [[tenant]] with a trace)."""

    format: str | None = None
    time_unit: str | None = None
    sort: bool = False
    max_requests: Annotated[int | None, _unit(parse_count, minimum=1, maximum=2**63 - 1)] = None
    start: DurationNs | None = None
    end: DurationNs | None = None
    rate_scale: Annotated[PositiveNumber | None, Field(description="2.0 = twice the request rate")] = None


class TraceFile(TraceReading):
    """A [[trace]]: a trace file, one tenant or (``split``) one per key."""

    path: str
    name: str | None = None
    fallback: str | None = None
    split: str | None = None
    keys: list[str | int] | None = None

    @property
    def label(self) -> str:
        """Its tenant's name (with ``split``, their prefix): ``name``, else the file's stem."""
        return self.name if self.name is not None else self.path.rsplit("/", 1)[-1].rsplit(".", 1)[0]


class _Arrivals(Table):
    """What every generator takes besides its rates."""

    size: Quantity | None = None
    read_fraction: float | None = None
    span: Quantity | None = None
    seed: int | None = None


class _Bounded(_Arrivals):
    """A generator that stops after ``count`` requests or ``duration``."""

    count: Quantity | None = None
    duration: Quantity | None = None


class Poisson(_Bounded):
    """Poisson arrivals at ``rate``."""

    kind: Literal["poisson"]
    rate: Quantity


class OnOff(_Bounded):
    """A two-state MMPP: ``rate_on`` for exponential ``mean_on`` periods, then ``rate_off``."""

    kind: Literal["onoff"]
    rate_on: Quantity
    rate_off: Quantity
    mean_on: Quantity
    mean_off: Quantity


class Diurnal(_Arrivals):
    """A day-shaped rate: ``peak_rate`` × an hourly profile, over ``days``."""

    kind: Literal["diurnal"]
    peak_rate: Quantity
    days: int
    hourly: list[float] | None = None
    weekend_factor: float | None = None


#: A synthetic open-loop tenant (streamed by the core, never materialised).
Generator = Annotated[Poisson | OnOff | Diurnal, Field(discriminator="kind")]


class Closed(Table):
    """A closed-loop client: ``outstanding`` requests in flight, ``think`` between them."""

    outstanding: Quantity | None = None
    think: Quantity | None = None
    think_exponential: bool | None = None
    size: Quantity | None = None
    read_fraction: float | None = None
    span: Quantity | None = None
    start: Quantity | None = None
    stop: Quantity | None = None
    on: Quantity | None = None
    off: Quantity | None = None
    target: int | None = None


class TenantEntry(TraceReading):
    """A [[tenant]]: one tenant from exactly one of a trace, a generator, a closed client."""

    name: str
    trace: str | None = None
    generator: Generator | None = None
    closed: Closed | None = None
    fallback: str | Generator | None = Field(default=None, union_mode="left_to_right")

    @property
    def source(self) -> str:
        """``trace``, ``generator`` or ``closed``."""
        return next(k for k in ("trace", "generator", "closed") if getattr(self, k) is not None)

    @model_validator(mode="after")
    def _one_source(self) -> TenantEntry:
        if sum(getattr(self, k) is not None for k in ("trace", "generator", "closed")) != 1:
            raise ValueError("needs exactly one of trace, generator or closed")
        return self


class Device(Table):
    """[device]: the storage model (storqos.specs.device_spec's parameters)."""

    kind: str | None = None
    capacity: Quantity | None = None
    servers: Quantity | None = None
    profile: str | None = None
    queue: str | None = None
    hit_ratio: float | None = None
    depth: Quantity | None = None
    bandwidth: Quantity | None = None
    spec: dict[str, Any] | None = None


class Policy(BaseModel):
    """A [[policy]]: ``kind`` and that kind's parameters (checked by storqos.specs.policy_spec)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    kind: str | None = None
    name: str | None = None
    spec: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        """How runs and tables name it: ``name``, else ``kind``."""
        return self.name or self.kind or ""

    @property
    def params(self) -> dict[str, Any]:
        """The kind's parameters as given."""
        return dict(self.model_extra or {})


class ExperimentFile(Table):
    """The whole file (see the module docs of storqos.experiment for an example)."""

    name: str | None = None
    description: str = ""
    seed: Annotated[int, BeforeValidator(lambda v: check_seed(v, ""))] = 1
    duration: PositiveDurationNs | None = None
    window: PositiveDurationNs = 1_000_000_000
    percentile: Annotated[float, _unit(parse_percent)] = DEFAULT_PERCENTILE
    device: Device
    trace: Annotated[list[TraceFile], BeforeValidator(one_or_many)] = []
    tenant: Annotated[list[TenantEntry], BeforeValidator(one_or_many)] = []
    policy: Annotated[list[Policy], BeforeValidator(one_or_many), Field(min_length=1)]
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] = {}

    @model_validator(mode="after")
    def _whole(self) -> ExperimentFile:
        if not self.trace and not self.tenant:
            raise ValueError("needs at least one [[trace]] or [[tenant]]")
        labels = [p.label for p in self.policy]
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            raise ValueError(f"[[policy]] name(s) {', '.join(dup)} given twice: give each a distinct name")
        return self


# ----------------------------------------------------------------------------- errors

#: Tables that are arrays ([[name]]), whose entries errors name by number and name.
ARRAYS = ("trace", "tenant", "policy")


def entry_where(where: str, table: str, index: int, name: str | None) -> str:
    """``exp.toml: [[tenant]] 2 (batch)``: the place of the ``index``-th entry (0-based)."""
    return f"{where}: [[{table}]] {index + 1}" + (f" ({name})" if name else "")


def validate(raw: dict[str, Any], where: str) -> ExperimentFile:
    """``raw`` (a parsed TOML file) as an :class:`ExperimentFile`, or an InputError naming
    the file, the table and the key of the first thing wrong."""
    try:
        return ExperimentFile.model_validate(raw)
    except ValidationError as e:
        raise _error(_first(e.errors()), raw, where) from None


#: Names pydantic puts in an error's location for the branch of a union it tried.
_BRANCHES = {"str", "int", "float", "bool", "list", "dict", "poisson", "onoff", "diurnal"}


def _first(errors: list[Any]) -> Any:
    """The error to report: the first, unless it is only a union branch that did not fit
    (``fallback = {kind = ...}`` is a generator table, not a misspelt string)."""
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]  # a misspelt key, before what it leaves missing
    return next((e for e in unknown + errors if not _branch_miss(e)), errors[0])


def _branch_miss(err: Any) -> bool:
    """A value of the wrong type for one branch of a union (``str | int | float``)."""
    return bool(err["type"].endswith("_type") and err["loc"] and err["loc"][-1] in ("str", "int", "float"))


def _error(err: Any, raw: dict[str, Any], where: str) -> InputError:
    loc = [p for p in err["loc"] if isinstance(p, int) or ("[" not in p and p not in _BRANCHES)]  # keys only
    kind, ctx = err["type"], err.get("ctx", {})
    if loc in (["device"],) and kind in ("missing", "model_type"):
        return InputError("needs a [device] table (e.g. kind = \"constant\", capacity = \"1k\")", where)
    if loc == ["policy"] and kind in ("missing", "too_short"):
        return InputError("needs at least one [[policy]]", where)
    place, model = where, _field_model(ExperimentFile, [])
    if loc and loc[0] in ARRAYS and len(loc) > 1 and isinstance(loc[1], int):
        entries = one_or_many(raw.get(loc[0]))
        entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else {}
        name = entry.get("name") if isinstance(entry, dict) else None
        place = entry_where(where, str(loc[0]), loc[1], None if name is None else str(name))
        keys = [str(p) for p in loc[2:]]
        model = _field_model(ExperimentFile, [str(loc[0])])
    elif len(loc) > 1 and loc[0] == "grid":  # a grid key is a dotted name: quoted whole
        place, keys = f"{where}: [grid] {loc[1]!r}", [str(p) for p in loc[2:]]
        model = None
    elif loc and loc[0] in ("device", "grid"):
        place, keys = f"{where}: [{loc[0]}]", [str(p) for p in loc[1:]]
        model = _field_model(ExperimentFile, [str(loc[0])])
    else:
        keys = [str(p) for p in loc]
    if kind == "extra_forbidden":
        known = _known(model, keys[:-1], raw_tag=_tag(err))
        return InputError(_prefix(keys[:-1]) + f"unknown key {keys[-1]!r} (known: {', '.join(known)})", place)
    if kind == "missing":
        return InputError(_prefix(keys[:-1]) + f"needs a {keys[-1]}", place)
    if kind == "union_tag_invalid":
        return InputError(_prefix(keys) + f"unknown kind {ctx.get('tag')!r} (known: {str(ctx.get('expected_tags')).replace(chr(39), '')})", place)
    if kind == "union_tag_not_found":
        return InputError(_prefix(keys) + "needs a kind (poisson, onoff, diurnal)", place)
    if _branch_miss(err):
        return InputError(_prefix(keys) + f"expected a number or a number with a unit (e.g. 10ms, 1.2k, 64KiB), "
                          f"got {err.get('input')!r}", place)
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


def _tag(err: Any) -> str | None:
    """The generator kind an error's location went through (``tagged-union[...]`` → variant)."""
    for p in err["loc"]:
        if p in ("poisson", "onoff", "diurnal"):
            return str(p)
    return None


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
    origin = get_origin(tp)
    if origin is None:
        return []
    return [m for arg in get_args(tp) for m in _models_in(arg)]


def _known(model: type[BaseModel] | None, keys: list[str], raw_tag: str | None) -> list[str]:
    """The keys a table takes, in the order the docs give them."""
    target = _field_model(model, keys, raw_tag) if model is not None else None
    if target is None:
        return []

    def depth(key: str) -> int:  # a table's own keys first, then those it shares with others
        return next(i for i, c in enumerate(target.__mro__) if key in getattr(c, "__annotations__", {}))
    return sorted(target.model_fields, key=depth)


def json_schema() -> dict[str, Any]:
    """JSON Schema of the experiment file (for editors: taplo, Even Better TOML)."""
    return ExperimentFile.model_json_schema(mode="validation")
