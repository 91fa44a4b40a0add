"""The experiment file's schema: every table and key of an experiment TOML file, typed
(pydantic, on :mod:`storqos.base.toml_schema`), with the units read once (durations in ns,
rates in IOPS, percentiles as fractions) and one-line errors that name the file, the
line, the table and the key.

``docs/experiments.md`` documents these keys; :func:`json_schema` gives them to editors
(``storqos run --schema``). What a key's value must be beyond its type (a generator's
rates, a closed client's sizes, a device's parameters, a policy's parameters) is checked
by the code that reads it, and its errors name the key the same way.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from storqos.base.errors import InputError
from storqos.base.toml_schema import (
    DurationNs,
    LatencyNs,
    PositiveDurationNs,
    PositiveNumber,
    Quantity,
    Rate,
    RateOrZero,
    Table,
    one_or_many,
    unit,
)
from storqos.base.toml_schema import validate as toml_validate
from storqos.base.units import check_seed, parse_count, parse_percent
from storqos.model import registry
from storqos.model.slo import DEFAULT_PERCENTILE


def _users(tenant_key: str) -> str:
    """The policies whose parameters default to the tenants' ``tenant_key`` (the registry's)."""
    return ", ".join(registry.tenant_key_users(tenant_key))


class Qos(Table):
    """A tenant's QoS keys, read by the policies that use them (the registry says which)."""

    weight: Annotated[PositiveNumber | None, Field(description=f"share of {_users('weight')} (default 1)")] = None
    reservation: Annotated[RateOrZero | None,
                           Field(description=f"IOPS: the reservation (R_i) of {_users('reservation')}")] = None
    limit: Annotated[Rate | None, Field(description=f"IOPS: the limit of {_users('limit')}")] = None
    slo: Annotated[LatencyNs | None,
                   Field(description=f"latency target in ns (a bare number is ms); D_i of {_users('slo')}")] = None


class TraceReading(Qos):
    """How a trace file is read (a [[trace]], or a [[tenant]] with a trace)."""

    format: str | None = None
    time_unit: str | None = None
    sort: bool = False
    max_requests: Annotated[int | None, unit(parse_count, minimum=1, maximum=2**63 - 1)] = None
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
    """[device]: the storage model (storqos.model.specs.device_spec's parameters)."""

    kind: str | None = None
    capacity: Quantity | None = None
    servers: Quantity | None = None
    profile: str | None = None
    queue: str | None = None
    hit_ratio: float | None = None
    depth: Quantity | None = None
    bandwidth: Quantity | None = None
    spec: dict[str, Any] | None = None


class ClusterTable(Table):
    """[cluster]: many servers, each a copy of [device] behind its own copy of the policy
    (storqos.model.cluster.Cluster's fields)."""

    servers: Annotated[int, unit(parse_count, minimum=1, maximum=2**16),
                       Field(description="servers, each a copy of the device")]
    placement: Annotated[Literal["hash", "device"], Field(description="hash of the object, or the trace's device")] = \
        "hash"
    replicas: Annotated[int, unit(parse_count, minimum=1, maximum=16),
                        Field(description="copies of each object (hash placement)")] = 1
    object_size: Annotated[str | int, Field(description="bytes of the objects hash placement places")] = "4MiB"
    seed: Annotated[int, BeforeValidator(lambda v: check_seed(v, "")), Field(description="seed of the hash")] = 0
    coordination: Annotated[Literal["none", "dmclock", "split"],
                            Field(description="how the servers keep each tenant's total reservation and limit")] = \
        "none"
    period: Annotated[PositiveDurationNs, Field(description="ns: how often split re-divides the shares")] = 500_000_000


def _kinds_schema(schema: dict[str, Any]) -> None:
    """The registry's policies in the [[policy]] schema (for editors): the kinds (names
    and aliases) and, per kind, the keys it takes."""
    names = [n for p in registry.policies("simulate") for n in (p.name, *p.aliases)]
    schema["properties"]["kind"]["examples"] = names
    schema["description"] += " Keys per kind: " + "; ".join(
        f"{p.name}: {', '.join(p.takes) or 'none'}" for p in registry.policies("simulate")) + "."


class Policy(BaseModel):
    """A [[policy]]: ``kind`` and that kind's parameters (checked by storqos.model.specs.policy_spec)."""

    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra=_kinds_schema)

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


#: Most grid points an experiment file may have (each is a run per policy, expanded and
#: checked before any runs).
MAX_GRID_POINTS = 100_000


class ExperimentFile(Table):
    """The whole file (see the module docs of storqos.experiments.experiment for an example)."""

    name: str | None = None
    description: str = ""
    seed: Annotated[int, BeforeValidator(lambda v: check_seed(v, ""))] = 1
    duration: PositiveDurationNs | None = None
    window: PositiveDurationNs = 1_000_000_000
    percentile: Annotated[float, unit(parse_percent)] = DEFAULT_PERCENTILE
    device: Device
    cluster: ClusterTable | None = None
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


def check_grid(grid: dict[str, list[Any]], where: str) -> None:
    """A [grid] names each value of a key once (the same runs twice over were counted as
    one grid point) and has at most :data:`MAX_GRID_POINTS` points."""
    points = 1
    for key, values in grid.items():
        seen: set[str] = set()
        for v in values:
            shown = json.dumps(v, sort_keys=True, default=str)
            if shown in seen:
                raise InputError(f"[grid] {key!r}: {shown} given twice", where)
            seen.add(shown)
        points *= len(values)
    if points > MAX_GRID_POINTS:
        sizes = " × ".join(str(len(v)) for v in grid.values())
        raise InputError(f"[grid] has {points:,} points ({sizes}); at most {MAX_GRID_POINTS:,}: "
                         "split the sweep into several files", where)


def validate(raw: dict[str, Any], where: str, text: str | None = None) -> ExperimentFile:
    """``raw`` (a parsed TOML file) as an :class:`ExperimentFile`, or an InputError naming
    the file (and line, given its ``text``), the table and the key of the first thing wrong."""
    return toml_validate(ExperimentFile, raw, where, text)


def json_schema() -> dict[str, Any]:
    """JSON Schema of the experiment file (for editors: taplo, Even Better TOML)."""
    return ExperimentFile.model_json_schema(mode="validation")
