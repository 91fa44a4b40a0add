"""The gateway's config file: what ``storqos serve --config gw.toml`` serves, typed
(pydantic, on :mod:`storqos.base.toml_schema`) and checked before anything starts, with
errors that name the file, the line, the table and the key.

A complete file (paths are relative to the file)::

    listen = "127.0.0.1:10809"   # HOST:PORT, or unix:/run/storqos/nbd.sock
    depth = 1                    # I/Os outstanding on the backend (default 8, 1 with iops)
    iops = "2k"                  # emulate a device of this capacity
    window = "1s"                # keep a per-window series and the policy's gauges
    direct_reads = "threads"     # direct exports' reads: threads (default) | io_uring

    [policy]                     # any `storqos simulate --policy` kind and its parameters
    kind = "wf2q"                # per-tenant lists default to the [[tenant]] keys below

    [[tenant]]                   # in tenant-id order: the first is tenant 0
    name = "web"
    weight = 3                   # wf2q / sfq / yfq / mclock share
    reservation = "300"          # IOPS (mclock; sarc+avatar's R_i)
    limit = "1k"                 # IOPS (mclock)
    slo = "10ms"                 # latency target (sarc+avatar's D_i)

    [[tenant]]
    name = "batch"
    weight = 1

    [[export]]
    name = "web"                 # the NBD export name: nbd://HOST:PORT/web
    path = "web.img"             # an existing regular file
    tenant = "web"               # a [[tenant]] name, or a tenant id

    [[export]]
    name = "batch"
    path = "batch.img"
    tenant = "batch"

    [tls]                        # NBD STARTTLS (x509, PEM files)
    mode = "require"             # off | on (plain clients too) | require
    cert = "server-cert.pem"
    key = "server-key.pem"
    client_ca = "ca-cert.pem"    # optional: clients must show a certificate it signed

    [cost]                       # what an I/O costs the backend (real storage, no iops)
    op_time = "100us"            # per operation: a seek, the overheads
    bandwidth = "1GiB/s"         # plus its bytes over this

A tiered export (the export's ``path`` is its slow tier's file; docs/gateway-seeds.md,
"Tiered exports and BAA")::

    [tiers.fast]                 # the emulated devices every tiered export shares
    iops = "1k"
    [tiers.slow]
    iops = 200

    [[export]]
    name = "p"
    path = "p.img"               # the slow tier: always complete and current
    tenant = "p"
    [export.tier]
    fast = "p-fast.img"          # the fast tier's file (scratch: rebuilt at start)
    pin = 0.75                   # fraction of the blocks placed on it for good
    block = "4KiB"
    lru = true                   # copy the blocks reads miss into the rest of it

    [policy]
    kind = "baa"                 # seed 004's two-level scheduler: baa | drf | fq weights
    allocator = "baa"
    period = "1s"                # re-allocate this often
    window = "2s"                # from the hit ratios measured over this

Flags of ``storqos serve`` override the file: ``--export`` replaces its exports,
``--policy`` its kind (and the file's parameters of another kind), a policy flag the
parameter of that name, ``--listen``/``--depth``/``--iops``/``--for``/``--window``/
``--tls``/``--tls-cert``/``--tls-key``/``--tls-client-ca``/``--direct-reads`` theirs.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, model_validator

from storqos import _core
from storqos.base.core_json import core_json
from storqos.base.errors import ConfigError, InputError
from storqos.base.toml_schema import PositiveDurationNs, Rate, SourceLines, Table, entry_where, one_or_many, read_toml, unit
from storqos.base.toml_schema import validate as toml_validate
from storqos.base.units import parse_bandwidth, parse_duration, parse_rate, parse_size
from storqos.experiments.experiment_schema import Policy, Qos
from storqos.live.gateway import DEFAULT_DEPTH, DEFAULT_LISTEN, DIRECT_READS, check_export_file
from storqos.model import registry
from storqos.model.device_profile import DeviceProfile

#: Deepest backend queue the gateway takes (the gateway's own bound).
MAX_DEPTH = _core.GATEWAY_MAX_DEPTH
#: Longest NBD export name (the protocol's limit, as the gateway enforces it).
MAX_NAME_BYTES = _core.GATEWAY_MAX_NAME_BYTES
#: Smallest in-flight budget: one request of the largest size the gateway takes.
MIN_INFLIGHT_BYTES = _core.GATEWAY_MAX_IO_BYTES


class TenantTable(Qos):
    """A [[tenant]]: a name and its QoS keys (weight, reservation, limit, slo)."""

    name: str


def _network(v: Any) -> str:
    if not isinstance(v, str):
        raise InputError(f"expected an address or a network such as \"10.0.0.0/8\", got {v!r}")
    try:
        ipaddress.ip_network(v, strict=False)
    except ValueError:
        raise InputError(f"{v!r} is not an address or a network such as 10.0.0.0/8") from None
    return v


def _some_clients(v: list[str]) -> list[str]:
    """An ``allow`` list names at least one client: the gateway reads an empty one as no
    restriction, the opposite of what ``allow = []`` says."""
    if not v:
        raise InputError("an empty list would let every client in: list the addresses or networks allowed, "
                         "or leave allow out to serve any client")
    return v


def _choice(*allowed: str) -> Any:
    def check(v: Any) -> str:
        if v not in allowed:
            raise InputError(f"expected one of {', '.join(allowed)}, got {v!r}")
        return str(v)
    return BeforeValidator(check)


def _bytes(v: Any) -> int:
    return parse_size(v, "")


def _rate(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
        raise InputError(f"must be a fraction in (0, 1], got {v!r}")
    return float(v)


#: Longest delay a fault rule may add (ns): the gateway's ``MAX_DELAY_S``.
MAX_FAULT_DELAY_NS = round(_core.GATEWAY_MAX_FAULT_DELAY_S * 1e9)


def _fault_delay(v: Any) -> int:
    ns = parse_duration(v, "")
    if ns > MAX_FAULT_DELAY_NS:
        raise InputError(f"must be at most {MAX_FAULT_DELAY_NS / 60e9:g} min (a slow disk, not a hung one), got {v!r}")
    return ns


class FaultTable(Table):
    """A fault rule of an export ([[export.fault]]): requests it fails or slows on purpose."""

    op: Annotated[str, _choice("read", "write", "flush", "any")]
    error: Annotated[str | None, _choice("eio", "enospc", "short")] = None
    delay: Annotated[int, BeforeValidator(_fault_delay)] = 0
    offset: Annotated[int, BeforeValidator(_bytes)] = 0
    length: Annotated[int | None, BeforeValidator(_bytes), Field(gt=0)] = None
    rate: Annotated[float, BeforeValidator(_rate)] = 1.0

    @model_validator(mode="after")
    def _does_something(self) -> FaultTable:
        if self.error is None and self.delay == 0:
            raise ValueError("a fault rule needs an error, a delay or both")
        return self

    def to_json(self) -> dict[str, Any]:
        """The gateway's fault object."""
        return {"op": self.op, "error": self.error, "delay_s": self.delay / 1e9, "offset": self.offset,
                "length": self.length, "rate": self.rate}


def _fraction(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
        raise InputError(f"must be a fraction in [0, 1], got {v!r}")
    return float(v)


class TierTable(Table):
    """[export.tier]: a fast file in front of the export's file (the slow tier), with a
    block map: ``pin`` of the blocks placed on it for good, the rest an LRU cache."""

    fast: str
    block: Annotated[int, BeforeValidator(_bytes)] = 4096
    pin: Annotated[float, BeforeValidator(_fraction)] = 0.0
    lru: bool = True


class TierDeviceTable(Table):
    """[tiers.fast] / [tiers.slow]: the emulated device of a tier."""

    iops: Rate | None = None
    depth: Annotated[int, Field(ge=1, le=MAX_DEPTH)] = 1

    def to_json(self) -> dict[str, Any]:
        """The gateway's tier device object."""
        return {"iops": self.iops, "depth": self.depth}


class TiersTable(Table):
    """[tiers]: the fast and slow tiers' emulated devices, shared by the tiered exports."""

    fast: TierDeviceTable = TierDeviceTable()
    slow: TierDeviceTable = TierDeviceTable()

    def to_json(self) -> dict[str, Any]:
        """The gateway's ``tiers`` object."""
        return {"fast": self.fast.to_json(), "slow": self.slow.to_json()}


class ExportTable(Table):
    """An [[export]]: an NBD export name served from an existing file for one tenant."""

    name: Annotated[str, Field(min_length=1, max_length=MAX_NAME_BYTES)]
    path: str
    tenant: str | int = 0
    read_only: bool = False
    # (default_factory, not `= []`: pydantic deep-copies a default for each of 20,000 exports)
    allow: Annotated[list[Annotated[str, BeforeValidator(_network)]], AfterValidator(_some_clients),
                     Field(default_factory=list)]
    fault: Annotated[list[FaultTable], BeforeValidator(one_or_many), Field(default_factory=list)]
    tier: TierTable | None = None
    #: an earlier tiered export whose file and block map this one serves for its own
    #: tenant (a background job's view of the users' volume, seed 002)
    shares: str | None = None
    #: read and write the file with O_DIRECT, past the host's page cache
    direct: bool = False


def _inflight(v: Any) -> int:
    n = parse_size(v, "")
    if n < MIN_INFLIGHT_BYTES:
        raise InputError(f"must be at least {MIN_INFLIGHT_BYTES >> 20}MiB (one request of the largest size), got {v!r}")
    return n


class LimitsTable(Table):
    """[limits]: what keeps a shared gateway serving when clients misbehave."""

    max_connections: Annotated[int, Field(ge=1)] = 1024
    #: at once from one client address (an IPv4 address, an IPv6 /64)
    max_connections_per_address: Annotated[int, Field(ge=1)] = 128
    #: handshakes in progress at once from one client address
    max_handshakes_per_address: Annotated[int, Field(ge=1)] = 32
    max_connections_per_export: Annotated[int | None, Field(ge=1)] = None
    handshake_timeout: PositiveDurationNs = 10_000_000_000
    #: once a request's first byte came, the longest wait for its next byte
    request_timeout: PositiveDurationNs = 10_000_000_000
    #: the longest a client with replies waiting may take no byte of them
    reply_timeout: PositiveDurationNs = 30_000_000_000
    idle_timeout: PositiveDurationNs | None = None
    max_inflight: Annotated[int, BeforeValidator(_inflight)] = 256 << 20

    def to_json(self) -> dict[str, Any]:
        """The gateway's ``limits`` object."""
        return {"max_connections": self.max_connections, "max_connections_per_export": self.max_connections_per_export,
                "max_connections_per_address": self.max_connections_per_address,
                "max_handshakes_per_address": self.max_handshakes_per_address,
                "handshake_timeout_s": self.handshake_timeout / 1e9,
                "request_timeout_s": self.request_timeout / 1e9, "reply_timeout_s": self.reply_timeout / 1e9,
                "idle_timeout_s": None if self.idle_timeout is None else self.idle_timeout / 1e9,
                "max_inflight_bytes": self.max_inflight}


#: TLS modes of the gateway.
TLS_MODES = ("off", "on", "require")


def one_of(choices: tuple[str, ...], v: Any, where: str | None = None) -> str:
    """``v`` if it is one of ``choices``; else an error that lists them."""
    if v not in choices:
        raise InputError(f"expected one of {', '.join(choices)}, got {v!r}", where)
    return str(v)


TlsMode = Annotated[str, BeforeValidator(lambda v: one_of(TLS_MODES, v))]
DirectReadsMode = Annotated[str, BeforeValidator(lambda v: one_of(DIRECT_READS, v))]


class TlsTable(Table):
    """[tls]: NBD STARTTLS with x509 certificates (PEM files, relative to the file)."""

    mode: TlsMode | None = None
    cert: str | None = None
    key: str | None = None
    client_ca: str | None = None


def _listen(v: Any) -> str:
    if not isinstance(v, str) or not v.strip():
        raise InputError(f"expected HOST:PORT or unix:/PATH, got {v!r}")
    return v


class CostTable(Table):
    """[cost]: what an I/O costs the backend (a time per operation plus its bytes over
    the bandwidth), so that a tenant of large requests cannot fill the backend."""

    enabled: bool = True
    op_time: Annotated[int, unit(parse_duration, default_unit="us")] = 100_000
    bandwidth: Annotated[float, unit(parse_bandwidth)] = float(1 << 30)

    def to_json(self) -> dict[str, Any]:
        """The gateway's ``cost`` object."""
        return {"enabled": self.enabled, "op_time_s": self.op_time / 1e9, "bytes_per_s": self.bandwidth}


class ClusterTable(Table):
    """[cluster]: the cluster this gateway belongs to (``storqos serve --cluster``)."""

    #: the cluster's etcd and name, etcd://HOST:PORT/NAME
    url: Annotated[str, BeforeValidator(lambda v: _cluster_url(v))]
    #: this gateway's name in the cluster (default: its listen address)
    id: Annotated[str, Field(min_length=1, max_length=255)] | None = None


def _cluster_url(v: Any) -> str:
    from storqos.live.etcd import parse_cluster_uri

    if not isinstance(v, str):
        raise InputError(f"expected etcd://HOST:PORT/NAME, got {v!r}")
    try:
        parse_cluster_uri(v)
    except InputError as e:
        raise InputError(e.message) from None
    return v


class BackgroundTable(Table):
    """[background]: a job the gateway runs itself in the periods its day model predicts
    Low (storqos.live.background_job): the export it reads, how fast, on what clock."""

    #: the export the job reads end to end, wrapping, as that export's tenant
    export: Annotated[str, Field(min_length=1, max_length=MAX_NAME_BYTES)]
    #: the job's IOPS while it runs (and the warm-up's)
    rate: Rate = 100.0
    #: the day model's minute on the gateway's clock (shorter compresses days)
    interval: PositiveDurationNs = 60_000_000_000
    #: lead before a predicted High, in intervals (default: the warm-up's time,
    #: warm_bytes at rate, with a warm_export; else 30)
    t_fast: Annotated[float | None, Field(ge=0)] = None
    #: day model file from storqos warm --save (default: learned from the users' counts)
    model: str | None = None
    #: file that keeps the users' counts per interval across restarts
    state: str | None = None
    #: tenants whose requests make the day (default: every tenant but the job's)
    users: list[str | int] | None = None
    #: export warmed before a predicted High (a tiered export's view)
    warm_export: str | None = None
    #: bytes of warm_export warmed (default: the whole export)
    warm_bytes: Annotated[int, BeforeValidator(_bytes)] | None = None
    #: bytes per read of the job
    block: Annotated[int, BeforeValidator(_bytes), Field(ge=512, le=32 << 20)] = 4096


class GatewayFile(Table):
    """The whole file."""

    listen: Annotated[str, BeforeValidator(_listen)] | None = None
    metrics: str | None = None
    control: str | None = None
    depth: Annotated[int | None, Field(ge=1, le=MAX_DEPTH)] = None
    iops: Rate | None = None
    duration: PositiveDurationNs | None = None
    window: PositiveDurationNs | None = None
    policy: Policy | None = None
    limits: LimitsTable | None = None
    cost: CostTable | None = None
    tls: TlsTable | None = None
    tiers: TiersTable | None = None
    direct_reads: DirectReadsMode | None = None
    cluster: ClusterTable | None = None
    background: BackgroundTable | None = None
    tenant: Annotated[list[TenantTable], Field(default_factory=list)]
    export: Annotated[list[ExportTable], Field(default_factory=list)]

    @model_validator(mode="before")
    @classmethod
    def _arrays(cls, raw: Any) -> Any:
        """``[export]`` (one table) reads as ``[[export]]`` with one entry."""
        if isinstance(raw, dict):
            raw = {k: one_or_many(v) if k in ("tenant", "export") else v for k, v in raw.items()}
        return raw

    @model_validator(mode="after")
    def _names(self) -> GatewayFile:
        for what, names in (("tenant", [t.name for t in self.tenant]), ("export", [e.name for e in self.export])):
            dup = sorted(n for n, k in Counter(names).items() if k > 1)
            if dup:
                raise ValueError(f"[[{what}]] name(s) {', '.join(dup)} given twice")
        return self


@dataclass(frozen=True)
class Tenant:
    """A tenant of the gateway: its id (position) and QoS keys."""

    name: str
    weight: float | None = None
    reservation: float | None = None
    limit: float | None = None
    slo_ns: int | None = None


@dataclass(frozen=True)
class GatewaySettings:
    """A checked config file: what it sets, with paths resolved and tenants numbered."""

    path: Path
    text: str
    file: GatewayFile
    tenants: list[Tenant]
    exports: list[dict[str, Any]]
    #: where the file's keys are written (its sections, indexed once)
    lines: SourceLines

    def policy_key(self, key: str | None = None) -> str:
        """Where the file gives a [policy] key (or the table): ``gw.toml:12: [policy]: weights``."""
        line = self.lines.line(["policy"] + ([key] if key else []))
        return f"{self.path}{f':{line}' if line else ''}: [policy]" + (f": {key}" if key else "")


def load(path: str | Path) -> GatewaySettings:
    """Read and check a gateway config file (InputError naming the file, line and key).

    Each export costs the same whatever the number of exports: the file's sections are
    indexed once and a line is looked up only for an error (19,000 exports check in
    under 2 s; BENCHMARKS.md)."""
    path = Path(path)
    text, raw = read_toml(path)
    file = toml_validate(GatewayFile, raw, str(path), text)
    lines = SourceLines(text)
    tenants = [Tenant(t.name, t.weight, t.reservation, t.limit, t.slo) for t in file.tenant]
    ids = {t.name: i for i, t in enumerate(tenants)}
    exports: list[dict[str, Any]] = []
    by_name: dict[str, dict[str, Any]] = {}
    for i, x in enumerate(file.export):
        def at(*key: str | int, i: int = i, x: ExportTable = x) -> str:
            """``gw.toml:31: [[export]] 2 (batch)``: where the export gives ``key``."""
            return entry_where(f"{path}:{lines.line(['export', i, *key])}", "export", i, x.name)

        if isinstance(x.tenant, str):
            if x.tenant not in ids:
                known = ", ".join(ids) or "none: add [[tenant]] tables, or give a tenant id"
                raise InputError(f"tenant: no [[tenant]] named {x.tenant!r} (known: {known})", at("tenant"))
            tid = ids[x.tenant]
        elif not 0 <= x.tenant < _core.MAX_TENANTS:
            raise InputError(f"tenant: must be an id in [0, {_core.MAX_TENANTS}), got {x.tenant}", at("tenant"))
        else:
            tid = x.tenant
        p = Path(x.path).expanduser()
        p = p if p.is_absolute() else path.parent / p
        if not p.is_file():  # which it is not, said by check_export_file
            check_export_file(p, x.name, at("path") + ": path")
        entry = {"name": x.name, "path": str(p), "tenant": tid, "read_only": x.read_only, "allow": list(x.allow)}
        if x.direct:
            if x.tier is not None or x.shares is not None:
                raise InputError("a tiered export goes through the page cache; direct I/O is for plain exports",
                                 at("direct") + ": direct")
            entry["direct"] = True
        if x.fault:
            size = p.stat().st_size
            for j, f in enumerate(x.fault):
                if f.offset >= size:  # a range past the export's end: no request ever matches it
                    raise InputError(f"fault: {j}: offset: {f.offset:,} bytes is past the end of the export "
                                     f"({size:,} bytes): the rule would never apply", at("fault", j, "offset"))
            entry["faults"] = [f.to_json() for f in x.fault]
        if x.tier is not None:
            fast = Path(x.tier.fast).expanduser()
            fast = fast if fast.is_absolute() else path.parent / fast
            if not fast.is_file():
                check_export_file(fast, x.name, at("tier", "fast") + ": tier: fast")
            entry["tier"] = {"fast": str(fast), "block_bytes": x.tier.block, "pin": x.tier.pin, "lru": x.tier.lru}
        if x.shares is not None:
            swhere = at("shares") + ": shares"
            owner = by_name.get(x.shares)
            if owner is None:
                known = ", ".join(e["name"] for e in exports) or "none"
                raise InputError(f"no earlier [[export]] named {x.shares!r} (earlier: {known})", swhere)
            if "tier" not in owner:
                raise InputError(f"export {x.shares!r} has no [export.tier] to share", swhere)
            if x.tier is not None:
                raise InputError("an export that shares another's tier has no [export.tier] of its own", swhere)
            if not p.samefile(owner["path"]):
                raise InputError(f"{p} is not the file of export {x.shares!r} ({owner['path']})", swhere)
            entry["shares"] = x.shares
        exports.append(entry)
        by_name[x.name] = entry
    return GatewaySettings(path=path, text=text, file=file, tenants=tenants, exports=exports, lines=lines)


def _relative(settings: GatewaySettings, path: str | None) -> str | None:
    """A path the file gives, relative to the file."""
    if path is None:
        return None
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else settings.path.parent / p)


def _control_path(settings: GatewaySettings | None) -> str | None:
    """The file's control socket, relative to the file."""
    return None if settings is None else _relative(settings, settings.file.control)


def _listen_at(settings: GatewaySettings | None, flag: str | None) -> str:
    """Where to listen: the flag, the file's (a unix: path relative to the file), the default."""
    if flag:
        return flag
    if settings is None or settings.file.listen is None:
        return DEFAULT_LISTEN
    listen = settings.file.listen
    if listen.startswith("unix:") and listen != "unix:":
        return "unix:" + str(_relative(settings, listen.removeprefix("unix:")))
    return listen


def tls_settings(settings: GatewaySettings | None, mode: str | None = None, cert: str | None = None,
                 key: str | None = None, client_ca: str | None = None) -> dict[str, Any] | None:
    """The gateway's ``tls`` object from the file's [tls] and the --tls* flags over it
    (None: TLS off). The mode defaults to ``require`` once a certificate is given."""
    t = settings.file.tls if settings is not None and settings.file.tls is not None else None
    merged_tls = {
        "mode": mode or (t.mode if t else None),
        "cert": cert or (_relative(settings, t.cert) if t and settings else None),
        "key": key or (_relative(settings, t.key) if t and settings else None),
        "client_ca": client_ca or (_relative(settings, t.client_ca) if t and settings else None),
    }
    if mode is not None:
        one_of(TLS_MODES, mode, "--tls")
    why = ""
    if merged_tls["mode"] is None:  # a certificate of either side given: TLS meant
        given = [k for k in ("cert", "key", "client_ca") if merged_tls[k]]
        merged_tls["mode"] = "require" if given else "off"
        why = f" (a {given[0].replace('_', ' ')} was given)" if given else ""
    if merged_tls["mode"] == "off":
        flag = next((k for k, v in (("cert", cert), ("key", key), ("client_ca", client_ca)) if v), None)
        if flag is not None:  # a certificate given on the command line that TLS off would not use
            name = "--tls-" + flag.replace("_", "-")
            raise InputError(f"TLS is off: the {flag.replace('_', ' ')} would not be used (give --tls on or "
                             "require, or leave it out)", name)
        return None
    if merged_tls["mode"] != "off":
        for k in ("cert", "key"):
            if not merged_tls[k]:
                where = f"{settings.path}: [tls]: {k}" if t is not None and settings else f"--tls-{k}"
                raise InputError(f"TLS is {merged_tls['mode']}{why}: give the server's {k} (a PEM file)", where)
    return merged_tls


def _served_by(form: str) -> registry.Policy:
    """The policy the gateway builds with its own ``form`` (the registry's ``serve_form``)."""
    return next(p for p in registry.policies("serve") if p.serve_form == form)


def _serve_param(policy: registry.Policy, key: str) -> registry.Param:
    return next(q for q in policy.serve_params if q.key == key)


def _serve_default(policy: registry.Policy, key: str) -> str:
    """The default of a key of the gateway's own builder (one it has)."""
    default = _serve_param(policy, key).default
    if default is None:
        raise KeyError(f"{policy.name}: {key} has no default")
    return default


#: The gateway's own policy: seed 004's two-level scheduler over the tiers.
_TIERS = _served_by("tiers")
BAA_KIND = _TIERS.kind
#: Allocators of the ``baa`` kind (seed 004: BAA and its two baselines).
BAA_ALLOCATORS = _serve_param(_TIERS, "allocator").choices
#: Default re-allocation period and hit-ratio window of the ``baa`` kind (ns).
BAA_PERIOD_NS = parse_duration(_serve_default(_TIERS, "period"), "period")
BAA_WINDOW_NS = parse_duration(_serve_default(_TIERS, "window"), "window")


def baa_policy(params: dict[str, Any], tiers: TiersTable | None, where: str) -> dict[str, Any]:
    """The core spec of ``[policy] kind = "baa"``: the allocator (``baa``, ``drf``,
    ``fq``) recomputed every ``period`` from the hit ratios measured over ``window``,
    allocating the tiers' capacities (``[tiers.slow] iops`` the HDD's, ``[tiers.fast]
    iops`` the SSD's, or ``hdd_iops`` / ``ssd_iops`` for real devices)."""
    known = tuple(q.key for q in _TIERS.serve_params)
    for k in params:
        if k not in known:
            raise InputError(f"unknown key {k!r} for kind {_TIERS.name} (known: {', '.join(known)})", where)
    allocator = str(params.get("allocator", _serve_default(_TIERS, "allocator"))).lower()
    if allocator not in BAA_ALLOCATORS:
        raise InputError(f"allocator: expected one of {', '.join(BAA_ALLOCATORS)}, got {allocator!r}", where)
    caps: dict[str, float] = {}
    for key, tier in (("hdd_iops", "slow"), ("ssd_iops", "fast")):
        given = params.get(key)
        emulated = getattr(tiers, tier).iops if tiers is not None else None
        if given is None and emulated is None:
            raise InputError(f"kind {_TIERS.name} allocates the tiers' capacities: give [tiers.{tier}] iops (or {key})",
                             where)
        caps[key] = parse_rate(given, key) if given is not None else float(emulated)  # type: ignore[arg-type]
    period = parse_duration(params["period"], "period") if "period" in params else BAA_PERIOD_NS
    window = parse_duration(params["window"], "window") if "window" in params else max(BAA_WINDOW_NS, period)
    spec: dict[str, Any] = {"kind": BAA_KIND, **caps, "allocator": allocator, "period_ns": int(period),
                            "window_ns": int(window)}
    if "hit_ratios" in params:
        hits = params["hit_ratios"]
        if not isinstance(hits, list) or not all(isinstance(h, int | float) and 0 <= h <= 1 for h in hits):
            raise InputError(f"hit_ratios: expected a list of fractions in [0, 1], got {hits!r}", where)
        spec["hit_ratios"] = [float(h) for h in hits]
    _core.check_policy(core_json(spec, "policy"))
    return spec


#: The gateway's FCLB: seed 003's feedback-controlled leaky bucket over YFQ, its
#: workloads the [[tenant]] tables (reservation = demanded IOPS_i, slo = demanded p95 RT_i).
_BUCKETS = _served_by("tenant_buckets")
FCLB_KIND = _BUCKETS.kind
#: Keys of its ``[policy]``.
FCLB_KEYS = tuple(q.key for q in _BUCKETS.serve_params)
#: The seed's control period (§3.1): 1 s.
FCLB_PERIOD_NS = parse_duration(_serve_default(_BUCKETS, "period"), "period")
#: ``gain = "online"``: the plant gain G measured by the loop itself (recursive least
#: squares with forgetting, per tenant, from the start value ``plant_gain``) and the pole
#: placed on it every period, K = (1 − p)/Ĝ (``storqos_core::fclb::estimator``).
ONLINE_GAIN = "online"


def knee_gain_ms_per_iops(period_ns: int, capacity_iops: float) -> float:
    """The plant gain G (ms of p95 per IOPS) of a constant-rate server of ``capacity_iops``
    at its knee, over one control period: a release rate δ IOPS above the capacity for one
    period of T s queues δ·T more requests, each 1/C s of service, so the response time
    grows by δ·T/C s: G = 1000·T/C ms per IOPS. (Below the knee the open-loop profile of
    ``storqos admit`` is flat, G = 0: its tuner rightly refuses to place a pole there.)"""
    return 1000.0 * (period_ns / 1e9) / capacity_iops


def fclb_policy(params: dict[str, Any], tenants: list[Tenant], capacity: float | None,
                device_profile: DeviceProfile | None, where: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The core spec of ``[policy] kind = "fclb"`` and the gateway's ``admission`` object
    (None with ``admission = false``). Workload i is tenant i: ``reservation`` its
    demanded IOPS (the bucket's floor), ``slo`` its demanded p95; YFQ weights from the
    tenants' ``weight`` (default: their reservations, as ``storqos admit``). The gain K:
    ``gain``, or ``pole`` (default the core's 0.4) over ``plant_gain`` G (default, on an
    emulated capacity, :func:`knee_gain_ms_per_iops`; else the core's default, the
    paper's 0.3 ms/IOPS); ``gain = "online"`` (:data:`ONLINE_GAIN`) measures G per
    tenant from that start value and places the pole on the estimate every period.
    Admission control at connect time drives the mix on the emulated capacity's
    constant-rate server or the device profile's device."""
    from storqos.model.fclb.spec import MODES

    for k in params:
        if k not in FCLB_KEYS:
            raise InputError(f"unknown key {k!r} for kind {_BUCKETS.name} (known: {', '.join(FCLB_KEYS)})", where)
    if not tenants:
        raise InputError(f"kind {_BUCKETS.name} serves the [[tenant]] tables as its workloads: give them", where)
    missing = [t.name for t in tenants if not (t.reservation and t.slo_ns)]
    if missing:
        raise InputError(f"kind {_BUCKETS.name} needs every tenant's reservation (demanded IOPS_i) and slo (demanded p95 "
                         f"RT_i); missing for {', '.join(missing)}", where)
    period = parse_duration(params["period"], f"{where}: period") if "period" in params else FCLB_PERIOD_NS
    if period <= 0:
        raise InputError(f"period: the control period must be > 0, got {params['period']!r}", where)
    mode = str(params.get("mode", "feedback")).lower()
    if mode not in MODES:
        raise InputError(f"mode: expected one of {', '.join(MODES)}, got {params['mode']!r}", where)
    buckets = params.get("buckets")
    if buckets is not None and (not isinstance(buckets, list) or len(buckets) != len(tenants)
                                or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 1
                                           for b in buckets)):
        raise InputError(f"buckets: expected one whole number >= 1 of tokens per tenant ({len(tenants)}), "
                         f"got {buckets!r}", where)
    weights = params.get("weights")
    if weights is None:
        weights = [t.weight if t.weight is not None else t.reservation for t in tenants]
    elif not isinstance(weights, list) or len(weights) != len(tenants) or not all(
            isinstance(w, int | float) and not isinstance(w, bool) and w > 0 for w in weights):
        raise InputError(f"weights: expected one number > 0 per tenant ({len(tenants)}), got {weights!r}", where)
    workloads: list[dict[str, Any]] = []
    for i, t in enumerate(tenants):
        w: dict[str, Any] = {"iops": float(t.reservation or 0), "rt_ns": int(t.slo_ns or 0)}
        if buckets is not None:
            w["bucket"] = float(buckets[i])
        workloads.append(w)
    spec: dict[str, Any] = {"kind": FCLB_KIND, "workloads": workloads, "mode": mode, "period_ns": int(period),
                            "then": {"kind": registry.policy(_BUCKETS.back_end or "").kind,
                                     "weights": [float(x) for x in weights]}}
    for key, core_key in (("gain", "gain_iops_per_ms"), ("pole", "pole"), ("plant_gain", "plant_gain_ms_per_iops")):
        if key in params:
            v = params[key]
            if key == "gain" and isinstance(v, str):
                if v.strip().lower() != ONLINE_GAIN:
                    raise InputError(f'gain: expected a number (IOPS/ms) or "{ONLINE_GAIN}", got {v!r}', where)
                spec[core_key] = ONLINE_GAIN
                continue
            if isinstance(v, bool) or not isinstance(v, int | float):
                what = 'a number (IOPS/ms) or "online"' if key == "gain" else "a number"
                raise InputError(f"{key}: expected {what}, got {v!r}", where)
            spec[core_key] = float(v)
    if "plant_gain_ms_per_iops" not in spec and capacity is not None and device_profile is None:
        spec["plant_gain_ms_per_iops"] = knee_gain_ms_per_iops(period, capacity)
    try:
        _core.check_policy(core_json(spec, "policy"))
    except ConfigError as e:
        raise InputError(str(e).removeprefix("invalid configuration: "), where) from None
    admission = params.get("admission", True)
    if not isinstance(admission, bool):
        raise InputError(f"admission: expected true or false, got {admission!r}", where)
    if not admission:
        return spec, None
    if device_profile is not None:
        device: dict[str, Any] = device_profile.sim_device()
    elif capacity is not None:
        device = {"kind": "constant", "iops": float(capacity)}
    else:
        raise InputError(f"{_BUCKETS.name}'s admission control drives the mix on a storage model: give iops (emulated), "
                         "--device-profile, or admission = false", where)
    adm: dict[str, Any] = {"device": device}
    if "admission_profile" in params:
        d = parse_duration(params["admission_profile"], f"{where}: admission_profile")
        if d <= 0:
            raise InputError(f"admission_profile: the profile's length must be > 0, got {params['admission_profile']!r}",
                             where)
        adm["duration_s"] = d / 1e9
    return spec, adm


def _key(flag: str) -> str:
    """A policy flag's parameter name in the file: ``--control-window`` →
    ``control_window`` (:func:`storqos.model.specs.param_of_flag`)."""
    from storqos.model.specs import param_of_flag

    return param_of_flag(flag)


def merged(settings: GatewaySettings | None, *, exports: list[str] | None = None, policy: str | None = None,
           policy_params: dict[str, Any] | None = None, listen: str | None = None, depth: int | None = None,
           iops: float | None = None, duration_s: float | None = None, window_s: float | None = None,
           metrics: str | None = None, control: str | None = None,
           tls: dict[str, str | None] | None = None, device_profile: DeviceProfile | None = None) -> dict[str, Any]:
    """The gateway's JSON configuration from a config file (or none) and the flags that
    override it (None = not given). ``policy_params`` are the policy flags by parameter
    name (``weights``, ``deadlines``…): each overrides the file's parameter of that name;
    ``tls`` the --tls* flags by key (``mode``, ``cert``, ``key``, ``client_ca``);
    ``device_profile`` a measured profile of the backend (``storqos calibrate``): its
    cost model, its parallelism as the default depth and its capacity for the
    policies that need one."""
    from storqos.model.specs import canonical_policy, check_reservations, check_tenant_lists, policy_for_tenants

    file = settings.file if settings else None
    where = settings.policy_key() if settings else "--policy"
    fpol = file.policy if file else None
    if fpol is not None and fpol.spec is not None:
        raise InputError("spec: a core spec is for experiment files; give kind and its parameters", where)
    kind = policy or (fpol.kind if fpol else None) or registry.registry().default_policy
    fclb_file = fpol is not None and (fpol.kind or "").lower() == _BUCKETS.name
    if kind.lower() == _BUCKETS.name and settings is not None and settings.tenants and (fclb_file or policy) \
            and not any(v is not None for v in (policy_params or {}).values()):
        cap = iops if iops is not None else (file.iops if file else None)
        spec, adm = fclb_policy(fpol.params if fpol is not None and fclb_file else {}, settings.tenants,
                                cap, device_profile, where)
        if depth is None:
            # The emulated constant-rate server serves its slots FIFO: at depth 1 the
            # queue, and YFQ's share, stay in the policy.
            depth = file.depth if file and file.depth is not None else (1 if cap is not None else None)
        cfg = _with_policy(settings, spec, exports=exports, listen=listen, depth=depth, iops=iops,
                           duration_s=duration_s, window_s=window_s, metrics=metrics, control=control, tls=tls)
        if adm is not None:
            cfg["admission"] = adm
        return cfg
    if kind.lower() == _TIERS.name:
        return _with_policy(settings, baa_policy(fpol.params if fpol is not None and (fpol.kind or "").lower() == _TIERS.name
                                                 else {}, file.tiers if file else None, where),
                            exports=exports, listen=listen, depth=depth, iops=iops, duration_s=duration_s,
                            window_s=window_s, metrics=metrics, control=control, tls=tls)
    try:
        kind = canonical_policy(kind)
        fkind = canonical_policy(fpol.kind) if fpol and fpol.kind and fpol.kind.lower() != _TIERS.name else None
    except InputError as e:
        raise InputError(e.message, "--policy" if policy or settings is None else settings.policy_key("kind")) from None
    from_file = fpol.params if fpol is not None and fkind == kind else {}
    if "depth" in from_file:
        raise InputError("give depth at the top of the file: it is the backend's depth and SFQ(D)'s D",
                         settings.policy_key("depth") if settings else where)
    flags = {k: v for k, v in (policy_params or {}).items() if v is not None}
    cap = iops if iops is not None else (file.iops if file else None)
    if device_profile is not None and cap is not None:
        raise InputError("give --iops (an emulated device) or --device-profile (the measured one), not both",
                         "--device-profile")
    depth = depth if depth is not None else (file.depth if file and file.depth is not None else None)
    if depth is None and device_profile is not None:
        depth = device_profile.parallelism
    if depth is None:
        # An emulated constant-rate server serves its slots FIFO: deeper than 1, the queue
        # (and QoS) moves from the policy into the device.
        depth = 1 if cap is not None else DEFAULT_DEPTH
    if depth < 1:
        raise InputError(f"must be >= 1, got {depth}", "--depth")
    params: dict[str, Any] = {**from_file, **flags, "total_capacity": cap if device_profile is None
                              else device_profile.capacity_iops}
    if "depth" in registry.policy(kind).takes:
        params["depth"] = depth  # --depth is the backend's; it is also SFQ(D)'s D
    tenants = settings.tenants if settings else []
    try:
        spec = policy_for_tenants(kind, params, tenants)
    except InputError as e:
        if e.where == "--capacity":  # here the device's capacity is the emulated one
            raise InputError(e.message.replace("--capacity", "--iops"), "--iops") from None
        key = _key(e.where or "")
        if settings is not None and key not in flags and (key in from_file or not policy):
            # A parameter the file gives, or one its [policy] lacks: said in the file's words.
            message = re.sub(r"--[a-z][a-z-]*", lambda m: _key(m.group(0)), e.message)
            raise InputError(message, settings.policy_key(key if key in from_file else None)) from None
        raise
    if file is not None and exports is None:
        ex: list[str | dict[str, Any]] = list(settings.exports) if settings else []
    else:
        ex = list(exports or [])
    if tenants and ex:
        top = max(int(x["tenant"]) if isinstance(x, dict) else 0 for x in ex)
        if top >= len(tenants):
            raise InputError(f"an export is tenant {top}, but only {len(tenants)} [[tenant]] table(s) are given",
                             str(settings.path) if settings else "--export")
    if settings is not None and exports is None:
        # The file's per-tenant lists against its tenants, named where the file gives them.
        count = len(tenants) or max(int(x["tenant"]) for x in settings.exports) + 1 if settings.exports else 0
        try:
            check_tenant_lists(spec, count, flags=False)
        except InputError as e:
            if e.where in from_file and e.where not in flags:
                raise InputError(e.message, settings.policy_key(e.where)) from None
            raise InputError(e.message, f"--{str(e.where).replace('_', '-')}") from None
    served = device_profile.capacity_iops if device_profile is not None else cap
    if served is not None:  # mClock's reservations beyond what the device serves: said, not served short silently
        given_at = ("--reservations" if "reservations" in flags or settings is None else
                    settings.policy_key("reservations") if "reservations" in from_file else
                    f"{settings.path}: [[tenant]] reservation")
        cap_at = ("--device-profile" if device_profile is not None else "--iops" if iops is not None or settings is None
                  else f"{settings.path}: iops")
        check_reservations(spec, served, reservations=given_at, capacity=cap_at)
    return _assemble(settings, spec, ex, listen=listen, depth=depth, cap=cap, duration_s=duration_s,
                     window_s=window_s, metrics=metrics, control=control, tls=tls,
                     cost=device_profile.cost() if device_profile is not None else None)


def _with_policy(settings: GatewaySettings | None, spec: dict[str, Any], *, exports: list[str] | None,
                 listen: str | None, depth: int | None, iops: float | None, duration_s: float | None,
                 window_s: float | None, metrics: str | None, control: str | None,
                 tls: dict[str, str | None] | None) -> dict[str, Any]:
    """The gateway's JSON configuration with a policy spec built here (``baa``, ``fclb``)."""
    file = settings.file if settings else None
    ex: list[str | dict[str, Any]] = list(settings.exports) if settings and exports is None else list(exports or [])
    cap = iops if iops is not None else (file.iops if file else None)
    depth = depth if depth is not None else (file.depth if file and file.depth is not None else DEFAULT_DEPTH)
    return _assemble(settings, spec, ex, listen=listen, depth=depth, cap=cap, duration_s=duration_s,
                     window_s=window_s, metrics=metrics, control=control, tls=tls, cost=None)


def _assemble(settings: GatewaySettings | None, spec: dict[str, Any], ex: list[str | dict[str, Any]], *,
              listen: str | None, depth: int, cap: float | None, duration_s: float | None, window_s: float | None,
              metrics: str | None, control: str | None, tls: dict[str, str | None] | None,
              cost: dict[str, Any] | None) -> dict[str, Any]:
    """The gateway's JSON configuration: the policy ``spec``, exports ``ex``, the given
    settings and, for what is not given, the file's (``cost`` None: the file's cost
    model, if any)."""
    from storqos.live.gateway import gateway_config

    file = settings.file if settings else None
    tenants = settings.tenants if settings else []
    duration = duration_s if duration_s is not None else (file.duration / 1e9 if file and file.duration else None)
    window = window_s if window_s is not None else (file.window / 1e9 if file and file.window else None)
    if cost is None and file is not None and file.cost is not None:
        cost = file.cost.to_json()
    return gateway_config(ex, spec, listen=_listen_at(settings, listen), depth=depth, iops=cap, duration_s=duration,
                          window_s=window, tenants=len(tenants),
                          limits=file.limits.to_json() if file is not None and file.limits is not None else None,
                          metrics=metrics or (file.metrics if file else None),
                          slos={i: t.slo_ns / 1e9 for i, t in enumerate(tenants) if t.slo_ns},
                          control=control or _control_path(settings),
                          tenant_names={i: t.name for i, t in enumerate(tenants)},
                          tls=tls_settings(settings, **(tls or {})), cost=cost,
                          tiers=file.tiers.to_json() if file is not None and file.tiers is not None else None,
                          direct_reads=file.direct_reads if file is not None else None)


__all__ = ["GatewayFile", "GatewaySettings", "Tenant", "load", "merged"]
