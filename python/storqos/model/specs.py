"""Policy and device specs: user-facing names and parameters → the JSON schema of
``storqos_core::spec`` (one schema for the CLI, the Python API, experiment files and the
gateway).

>>> policy_spec("wf2q", weights=[2, 1])
{'kind': 'wf2q', 'weights': [2.0, 1.0]}
>>> device_spec("constant", capacity=500)
{'kind': 'constant', 'iops': 500.0}
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypedDict, TypeVar, Unpack

from storqos import _core
from storqos.base.core_json import core_json
from storqos.base.errors import InputError, UnknownKeyword, did_you_mean, warn_input
from storqos.base.units import parse_bandwidth, parse_count, parse_duration, parse_percent, parse_rate, parse_size
from storqos.model import registry
from storqos.model.fclb.spec import fclb_spec
from storqos.model.twolevel.spec import twolevel_spec

#: Policy names and what they are (``storqos simulate --policy``; the registry's).
POLICIES: dict[str, str] = {p.name: p.summary for p in registry.policies("simulate")}
#: The parameters each policy takes; any other given to it is an error, not ignored.
POLICY_PARAMS: dict[str, tuple[str, ...]] = {p.name: p.takes for p in registry.policies("simulate")}
#: Parameters any policy may be handed without using them: the device's capacity (rtt-fq's
#: total), and the SLO and percentile the run is judged on.
_RUN_PARAMS = registry.registry().run_params

#: The other names a policy may be given by (``--policy``, ``kind`` in files, the Python
#: API), each the same algorithm under its usual name, the core's, or seed 001's name of
#: the baseline: the registry's one table of aliases; nothing else is taken for a policy
#: (``wfq``, the Demers-Keshav-Shenker WFQ, is not WF2Q+).
POLICY_ALIASES: dict[str, str] = registry.aliases("simulate")


def aliases_text(command: registry.Command = "simulate") -> str:
    """The aliases as help and docs give them: ``wf2q+ (wf2q), fifo (fcfs), …``."""
    return ", ".join(f"{a} ({k})" for a, k in registry.aliases(command).items())


#: Device names and what they model (``storqos simulate --device``).
DEVICES: dict[str, str] = {
    "constant": "one server of C IOPS, 1/C s per request (--capacity)",
    "exponential": "one server, Exp(1/C) service (--capacity)",
    "array": "k servers with an internal queue (--servers, --capacity per server; or --profile for striped disks)",
    "disk": "a mechanical disk model (seek + rotation + transfer) (--profile)",
    "tiered": "SSD + HDD tiers, tier from a hit ratio or the trace (--capacity SSD,HDD, --hit-ratio)",
}


def canonical_policy(name: str, command: registry.Command = "simulate") -> str:
    """The canonical policy name for ``name`` (a policy ``command`` runs, or an alias of
    one), or an :class:`InputError` listing them, with the nearest.

    >>> canonical_policy("WF2Q+")
    'wf2q'
    >>> canonical_policy("wfq")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    storqos.base.errors.InputError: --policy: unknown policy 'wfq'; did you mean 'wf2q' or ...? (known: fcfs, edf, ...)
    """
    found = registry.lookup(name, command)
    if found is None:
        known = [p.name for p in registry.policies(command)]
        near = did_you_mean(name.strip().lower(), known)
        raise InputError(f"unknown policy {name!r}{near} (known: {', '.join(known)})", "--policy")
    return found.name


def _weights(weights: Sequence[float] | str | None) -> list[float] | None:
    if weights is None:
        return None
    if isinstance(weights, str):
        try:
            weights = [float(w) for w in weights.replace(":", ",").split(",") if w.strip()]
        except ValueError:
            raise InputError(f"malformed weights {weights!r} (expected e.g. 2,1)", "--weights") from None
    out = [float(w) for w in weights]
    if not out or any(not (w > 0 and math.isfinite(w)) for w in out):
        raise InputError(f"weights must all be finite and > 0, got {weights!r}", "--weights")
    return out


def _listed(values: Sequence[Any] | str) -> list[Any]:
    """A list given as a list or as a comma-separated string (empty entries dropped)."""
    if isinstance(values, str):
        return [v for v in values.split(",") if v.strip()]
    return list(values)


def _iops_list(values: Sequence[Any] | str, where: str, *, allow_none: bool) -> list[float | None]:
    """``"300,0,1.5k"`` or ``[300, None, "1.5k"]`` → IOPS (``none``/``null``/``-`` = no value)."""
    items = values.split(",") if isinstance(values, str) else list(values)
    out: list[float | None] = []
    for v in items:
        if v is None or (isinstance(v, str) and v.strip().lower() in ("none", "null", "-", "")):
            if not allow_none:
                raise InputError(f"every entry must be an IOPS value, got {values!r}", where)
            out.append(None)
        else:
            out.append(0.0 if str(v).strip() in ("0", "0.0") else parse_rate(v, where))
    return out


def mclock_spec(
    *,
    reservations: Sequence[Any] | str | None = None,
    weights: Sequence[float] | str | None = None,
    limits: Sequence[Any] | str | None = None,
    cost: str | int | None = None,
    limit_break: bool | None = None,
    at_limit: str | None = None,
    by: str | None = None,
    kind: str | None = None,
) -> dict[str, Any]:
    """mClock's spec (the registry's ``tags`` form; ``kind`` the core kind, default the
    one policy of that form): per-tenant ``reservations`` (IOPS, 0 = none), ``weights`` and
    ``limits`` (IOPS, ``None`` = no limit); ``cost`` ``"iops"`` or a reference size
    (``"512KiB"``: a request of b bytes costs 1 + b / size); ``at_limit`` what a request
    beyond its tenant's limit gets: ``wait`` (default), ``allow`` (served when the device
    would idle) or ``reject[:THRESHOLD]`` (refused at once, to retry, when its limit tag
    lies beyond THRESHOLD, default 0, ahead: dmclock's ``AtLimit::Reject``).

    >>> mclock_spec(reservations="300,0", weights=[1, 2], limits=[None, "1k"])
    {'kind': 'mclock', 'reservations': [300.0, 0.0], 'weights': [1.0, 2.0], 'limits': [None, 1000.0]}
    >>> mclock_spec(limits="200", at_limit="reject:50ms")["reject_threshold_ns"]
    50000000
    """
    spec: dict[str, Any] = {"kind": kind or registry.policy(registry.with_form("tags")[0]).kind}
    if reservations is not None:
        spec["reservations"] = _iops_list(reservations, "--reservations", allow_none=False)
    w = _weights(weights)
    if w is not None:
        spec["weights"] = w
    if limits is not None:
        spec["limits"] = _iops_list(limits, "--limits", allow_none=True)
    if cost is not None and str(cost).lower() != "iops":
        spec["cost"] = {"size": parse_size(cost, "cost")}
    if limit_break:
        spec["limit_break"] = True
    if at_limit is not None:
        mode, _, threshold = str(at_limit).strip().lower().partition(":")
        if mode not in AT_LIMIT:
            raise InputError(f"expected wait, allow, reject or reject:THRESHOLD (e.g. reject:50ms), got {at_limit!r}",
                             "--at-limit")
        if threshold and mode != "reject":
            raise InputError(f"a threshold is for reject (reject:{threshold}), got {at_limit!r}", "--at-limit")
        if limit_break and mode == "reject":
            raise InputError("limit_break and at_limit reject contradict each other", "--at-limit")
        spec["at_limit"] = mode
        if threshold:
            spec["reject_threshold_ns"] = parse_duration(threshold, "--at-limit", default_unit="ms")
    if by is not None:
        spec["by"] = by
    return spec


#: What mClock does with a request beyond its tenant's limit.
AT_LIMIT = ("wait", "allow", "reject")


class PolicyParams(TypedDict, total=False):
    """The parameters of a policy, as keyword arguments of :func:`policy_spec` and
    :func:`storqos.simulate` (each policy takes those :data:`POLICY_PARAMS` lists; any
    other given to it is an error, not ignored). Times and rates take units (``"10ms"``,
    ``"1.5k"`` IOPS); per-tenant lists are in tenant order, one entry per tenant, as a
    list or a comma-separated string.

    - ``weights``: per-tenant weights (wf2q, sfq, yfq, mclock; fclb's back end), ``[2, 1]``.
    - ``depth``: SFQ(D)'s dispatch depth D (sfq; default 1).
    - ``deadlines``: edf's per-tenant relative deadlines (``["10ms", "50ms"]``); miser and
      rtt-fq: the one deadline δ of the primary class (``"10ms"``).
    - ``by``: what the fair queues and mclock share between, ``"tenant"`` (default) or
      ``"class"``.
    - ``cost``: what a request costs the fair queues and mclock, ``"iops"`` (default) or a
      reference size (``"512KiB"``: a request of b bytes costs 1 + b / size).
    - ``cmin``: the primary class's capacity Cmin in IOPS (miser, rtt-fq).
    - ``total_capacity``: the device's capacity Cmin + ΔC in IOPS (rtt-fq; :func:`storqos.simulate`
      takes it from ``capacity``).
    - ``batch``: YFQ's batch size (yfq, fclb).
    - ``workloads``: fclb's per-tenant workloads, ``"IOPS:RT[:bucket]"`` (``"40:35ms:8"``) or
      dicts (:func:`storqos.model.fclb.spec.workload_spec`).
    - ``gain``: fclb's controller gain K in IOPS/ms, or ``"online"`` (the plant gain measured
      by the loop); ``pole``: the closed-loop pole to place instead; ``plant_gain``: the plant
      gain G in ms/IOPS; ``mode``: ``feedback`` (default), ``fixed`` or ``off``.
    - ``slo``: the two-level policies' per-tenant SLOs, ``"web:160iops@400ms,oltp:190iops@900ms"``;
      ``percentile``: the latency percentile they are judged at (default 95).
    - ``period``: SARC's credit period T_SARC (default 100 ms); ``control_window``: AVATAR's
      and Facade's control window (default 1 s); ``p_rt``, ``p_inc``, ``p_dec``: ADAPTIVE's
      margins (adaptive+avatar); ``facade_overload``: how Facade detects overload,
      ``"per_class"`` or ``"total"`` (sarc+facade).
    - ``reservations``: mclock's per-tenant reservations in IOPS (0 = none); ``limits``: its
      per-tenant limits in IOPS (``None`` or ``"none"`` = no limit); ``limit_break``: serve
      beyond the limits when the device would idle; ``at_limit``: what a request beyond its
      tenant's limit gets, ``"wait"`` (default), ``"allow"`` or ``"reject[:THRESHOLD]"``.
    - The models of the systems operators run (qemu-throttle, blk-throttle, bfq, nbdkit-rate,
      spdk-qos, ceph-mclock, rbd-qos) take their systems' settings: per-tenant limits
      ``iops``, ``read_iops``, ``write_iops`` (IOPS) and ``bps``, ``read_bps``, ``write_bps``
      (bytes/s, ``"100MiB/s"``), each with a burst rate ``*_burst`` lasting
      ``burst_seconds``; QEMU's ``iops_size`` and throttle ``groups``; the kernel's
      ``rotational``; BFQ's ``slice_idle`` and ``low_latency``; nbdkit's ``burstiness``;
      Ceph's ``mclock_profile``, per-tenant ``classes`` and a custom profile's
      ``client_res`` … ``best_effort_lim``.
    """

    weights: Sequence[float] | str | None
    depth: int | None
    deadlines: Sequence[str | float] | str | None
    by: str | None
    cost: str | None
    cmin: str | float | None
    total_capacity: str | float | None
    batch: int | None
    workloads: Sequence[Any] | str | None
    gain: float | str | None
    pole: float | None
    plant_gain: float | None
    mode: str | None
    slo: str | Sequence[Any] | None
    percentile: str | float | None
    period: str | float | None
    control_window: str | float | None
    p_rt: float | None
    p_inc: float | None
    p_dec: float | None
    facade_overload: str | None
    reservations: Sequence[Any] | str | None
    limits: Sequence[Any] | str | None
    limit_break: bool | None
    at_limit: str | None
    iops: Sequence[Any] | str | None
    read_iops: Sequence[Any] | str | None
    write_iops: Sequence[Any] | str | None
    bps: Sequence[Any] | str | None
    read_bps: Sequence[Any] | str | None
    write_bps: Sequence[Any] | str | None
    iops_burst: Sequence[Any] | str | None
    read_iops_burst: Sequence[Any] | str | None
    write_iops_burst: Sequence[Any] | str | None
    bps_burst: Sequence[Any] | str | None
    read_bps_burst: Sequence[Any] | str | None
    write_bps_burst: Sequence[Any] | str | None
    burst_seconds: Sequence[Any] | str | None
    iops_size: Sequence[Any] | str | None
    groups: Sequence[Any] | str | None
    classes: Sequence[Any] | str | None
    rotational: bool | str | None
    slice_idle: str | float | None
    low_latency: bool | str | None
    burstiness: str | float | None
    threads: str | int | None
    mclock_profile: str | None
    client_res: str | float | None
    client_wgt: str | float | None
    client_lim: str | float | None
    recovery_res: str | float | None
    recovery_wgt: str | float | None
    recovery_lim: str | float | None
    best_effort_res: str | float | None
    best_effort_wgt: str | float | None
    best_effort_lim: str | float | None


def check_keywords(function: str, given: Mapping[str, Any], *takes: type) -> None:
    """``given`` has only keys of the TypedDicts ``takes``: else an :class:`UnknownKeyword`
    (a :class:`TypeError`) naming the first other one and the nearest it may have meant,
    as Python would for a function's own parameters."""
    known = [k for t in takes for k in t.__annotations__]
    for key in given:
        if key not in known:
            raise UnknownKeyword(function, key, known)


_F = TypeVar("_F", bound=Callable[..., Any])


def with_keywords(*takes: type) -> Callable[[_F], _F]:
    """Show a function's ``**params`` (typed by the TypedDicts ``takes``) as the keyword
    parameters they are, each defaulting to None, to :func:`help` and :func:`inspect.signature`."""
    def apply(f: _F) -> _F:
        sig = inspect.signature(f)
        params = [q for q in sig.parameters.values() if q.kind is not inspect.Parameter.VAR_KEYWORD]
        params += [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None,
                                     annotation=getattr(a, "__forward_arg__", a))  # as written, not ForwardRef(…)
                   for t in takes for k, a in t.__annotations__.items()]
        f.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        return f
    return apply


@with_keywords(PolicyParams)
def policy_spec(name: str | dict[str, Any], **params: Unpack[PolicyParams]) -> dict[str, Any]:
    """Build a policy spec from a name and its parameters (a dict is passed through);
    the parameters are :class:`PolicyParams`' (a keyword it does not know is a
    :class:`TypeError` suggesting the nearest, one the policy does not take an
    :class:`InputError`).

    >>> policy_spec("mclock", reservation=[100, 0])
    Traceback (most recent call last):
    ...
    storqos.base.errors.UnknownKeyword: policy_spec() got an unexpected keyword argument 'reservation'; did you mean 'reservations'?
    """
    check_keywords("policy_spec", params, PolicyParams)
    if isinstance(name, dict):
        return name
    entry = registry.policy(canonical_policy(name))
    kind = entry.name
    for param, value in params.items():
        if value is not None and param not in entry.takes and param not in _RUN_PARAMS:
            takes = ", ".join(entry.takes) or "no parameters"
            raise InputError(f"{kind} does not take {param} (it takes {takes})", flag_of(param))
    percentile, slo = params.get("percentile"), params.get("slo")
    if percentile is not None:
        parse_percent(percentile, "--percentile")
        if slo is None:  # alone it changes nothing
            raise InputError("give --slo too: the percentile is the one the SLOs are judged at", "--percentile")
    assert entry.form is not None  # canonical_policy found a policy simulate runs
    return _FORMS[entry.form](entry, dict(params))


def _plain_spec(entry: registry.Policy, params: dict[str, Any]) -> dict[str, Any]:
    """A policy without parameters."""
    return {"kind": entry.kind}


def _fair_queue_spec(entry: registry.Policy, params: dict[str, Any]) -> dict[str, Any]:
    """A fair queue: per-tenant weights, what it shares between and what a request
    costs, and the dispatch depth or the batch size where the policy has one."""
    spec: dict[str, Any] = {"kind": entry.kind}
    w = _weights(params.get("weights"))
    if w is not None:
        spec["weights"] = w
    for key in ("by", "cost"):
        if params.get(key) is not None:
            spec[key] = params[key]
    if "depth" in entry.takes:
        depth = params.get("depth")
        d = 1 if depth is None else parse_count(depth, "--depth", maximum=2**32 - 1)
        if d < 1:
            raise InputError(f"dispatch depth must be >= 1, got {depth}", "--depth")
        spec["depth"] = d
    if "batch" in entry.takes and params.get("batch") is not None:
        spec["batch"] = parse_count(params["batch"], "--batch", minimum=1, maximum=2**32 - 1)
    return spec


def _deadlines_spec(entry: registry.Policy, params: dict[str, Any]) -> dict[str, Any]:
    """Per-tenant relative deadlines; classes beyond the list get the last."""
    deadlines = params.get("deadlines")
    if deadlines is None:
        raise InputError(f"{entry.name} needs per-tenant deadlines, e.g. --deadline 10ms,50ms", "--deadline")
    listed = _listed(deadlines)
    ns = [parse_duration(d, "--deadline", default_unit="ms") for d in listed]
    if not ns:
        raise InputError(f"{entry.name} needs at least one deadline, e.g. --deadline 10ms,50ms, got {deadlines!r}",
                         "--deadline")
    if any(d <= 0 for d in ns):
        raise InputError("deadlines must be > 0", "--deadline")
    return {"kind": entry.kind, "deadlines_ns": ns, "default_deadline_ns": ns[-1]}


def _decomposition_spec(entry: registry.Policy, params: dict[str, Any]) -> dict[str, Any]:
    """RTT's decomposition at Cmin for the one deadline δ; with a back end, RTT in
    front of it, its two classes weighted Cmin : ΔC (ΔC = the total capacity − Cmin)."""
    kind, cmin, deadlines = entry.name, params.get("cmin"), params.get("deadlines")
    if cmin is None or deadlines is None:
        raise InputError(f"{kind} needs --cmin (the primary-class capacity, IOPS) and --deadline (δ)", "--cmin")
    c = parse_rate(cmin, "--cmin")
    listed = _listed(deadlines)
    if len(listed) != 1:  # one δ for the primary class: more were dropped without a word
        raise InputError(f"{kind} takes one deadline δ (the primary class's), got {len(listed)}: "
                         f"{deadlines!r}", "--deadline")
    delta = parse_duration(listed[0], "--deadline", default_unit="ms")
    if delta <= 0:
        raise InputError("the deadline must be > 0", "--deadline")
    if entry.back_end is None:
        return {"kind": entry.kind, "capacity_iops": c, "deadline_ns": delta}
    total_capacity = params.get("total_capacity")
    if total_capacity is None:
        raise InputError(f"{kind} needs the total capacity Cmin + ΔC (--capacity)", "--capacity")
    total = parse_rate(total_capacity, "--capacity")
    if total <= c:
        raise InputError(f"--capacity ({total:g}) must exceed --cmin ({c:g}): ΔC = capacity − Cmin > 0", "--capacity")
    back = registry.policy(entry.back_end)
    return {"kind": entry.kind, "capacity_iops": c, "deadline_ns": delta,
            "then": {"kind": back.kind, "weights": [c, total - c], "by": "class"}}


def _tags_spec(entry: registry.Policy, params: dict[str, Any]) -> dict[str, Any]:
    """Per-tenant reservations, weights and limits (:func:`mclock_spec`)."""
    return mclock_spec(reservations=params.get("reservations"), weights=params.get("weights"),
                       limits=params.get("limits"), cost=params.get("cost"), limit_break=params.get("limit_break"),
                       at_limit=params.get("at_limit"), by=params.get("by"), kind=entry.kind)


def _leaky_bucket_spec(entry: registry.Policy, params: dict[str, Any]) -> dict[str, Any]:
    """Per-tenant workloads' buckets, their rates under feedback control, in front of
    the back end (built from the weights and batch size, as that policy is)."""
    assert entry.back_end is not None
    back_entry = registry.policy(entry.back_end)
    back_params = {k: params.get(k) for k in back_entry.takes}
    back = _FORMS[back_entry.form or "plain"](back_entry, back_params)
    workloads = params.get("workloads")
    if workloads is None:
        raise InputError(f"{entry.name} needs its workloads, e.g. 40:35ms:8,20:38ms:4 (IOPS:RT[:bucket])",
                         "--workloads")
    return fclb_spec(workloads, backend=back, gain=params.get("gain"), pole=params.get("pole"),
                     plant_gain=params.get("plant_gain"), mode=params.get("mode"))


def _two_level_spec(entry: registry.Policy, params: dict[str, Any]) -> dict[str, Any]:
    """Per-class SLOs over a two-level scheduler (:func:`twolevel_spec`)."""
    return twolevel_spec(entry.name, params.get("slo"), percentile=params.get("percentile"),
                         period=params.get("period"), window=params.get("control_window"), p_rt=params.get("p_rt"),
                         p_inc=params.get("p_inc"), p_dec=params.get("p_dec"),
                         facade_overload=params.get("facade_overload"))


#: The per-tenant list types of the registry, and what parses one entry of each (None:
#: the entry is ``none``, no value).
_PER_TENANT = ("rates", "byte_rates", "sizes", "counts", "numbers", "fractions", "choices", "durations")
#: Parameters the settings form hands the core under another key, and the option that
#: gives them where it is not their own.
_CORE_KEYS = {"total_capacity": "capacity_iops", "mclock_profile": "profile"}
_OPTIONS = {"total_capacity": "--capacity"}


def _is_none(v: Any) -> bool:
    return v is None or (isinstance(v, str) and v.strip().lower() in ("none", "null", "-", ""))


def _bool(v: Any, where: str) -> bool:
    if isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise InputError(f"expected true or false, got {v!r}", where)


def _setting(param: registry.Param, value: Any, where: str) -> Any:
    """One entry of ``param``'s value, parsed by its type (bytes, IOPS, ns, a word...),
    and checked against its range and choices."""
    kind = param.value
    if kind in ("rate", "rates"):
        x: Any = 0.0 if str(value).strip() in ("0", "0.0") else parse_rate(value, where)
    elif kind == "byte_rates":
        text = str(value).strip()
        x = float(parse_size(text[:-2] if text.endswith("/s") else value, where))
    elif kind == "sizes":
        x = parse_size(value, where)
    elif kind in ("count", "counts"):
        x = parse_count(value, where)
    elif kind in ("number", "numbers", "fraction", "fractions"):
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise InputError(f"expected a number, got {value!r}", where) from None
        if not math.isfinite(x):
            raise InputError(f"expected a finite number, got {value!r}", where)
        if kind.startswith("fraction") and not 0.0 <= x <= 1.0:
            raise InputError(f"expected a fraction in [0, 1], got {value!r}", where)
    elif kind in ("choice", "choices"):
        x = str(value).strip().lower()
        if x not in param.choices:
            raise InputError(f"expected one of {', '.join(param.choices)}, got {value!r}", where)
        return x
    elif kind in ("duration", "durations"):
        x = parse_duration(value, where, default_unit="ms")
    elif kind == "bool":
        return _bool(value, where)
    else:  # a type no settings policy takes
        raise InputError(f"{param.key} takes {kind}, which the settings form does not read", where)
    lo, hi = param.min, param.max
    if lo is not None and (x < lo.value or (x == lo.value and not lo.inclusive)):
        raise InputError(f"{value!r} is out of range: {param.key} must be {param.range}", where)
    if hi is not None and (x > hi.value or (x == hi.value and not hi.inclusive)):
        raise InputError(f"{value!r} is out of range: {param.key} must be {param.range}", where)
    return x


def _settings_spec(entry: registry.Policy, params: dict[str, Any]) -> dict[str, Any]:
    """A system's own settings (the registry's ``settings`` form), each given one passed
    to the core under its key, parsed by its type: per-tenant lists entry by entry
    (``none`` where a tenant has no value), durations in ns under ``KEY_ns``. What the
    system itself would refuse, the core's spec of its model refuses."""
    spec: dict[str, Any] = {"kind": entry.kind}
    for param in entry.params:
        value = params.get(param.key)
        where = _OPTIONS.get(param.key) or flag_of(param.key)
        if value is None:
            if param.required:
                raise InputError(f"{entry.name} needs {param.key}: {param.help}", where)
            continue
        if param.value in _PER_TENANT:
            items = value.split(",") if isinstance(value, str) else list(value)
            if not items:
                raise InputError(f"{param.key} needs one value per tenant, got none", where)
            parsed = [None if _is_none(v) else _setting(param, v, where) for v in items]
            if None in parsed and param.value in ("choices", "numbers", "fractions", "durations"):
                raise InputError(f"every entry of {param.key} needs a value, got {value!r}", where)
            out: Any = parsed
        else:
            out = _setting(param, value, where)
        key = _CORE_KEYS.get(param.key, param.key)
        if param.value in ("duration", "durations"):
            key += "_ns"
        spec[key] = out
    return spec


#: The builder of each form (the registry's ``Form``): a policy's user parameters → its core spec.
_FORMS: dict[str, Callable[[registry.Policy, dict[str, Any]], dict[str, Any]]] = {
    "plain": _plain_spec,
    "fair_queue": _fair_queue_spec,
    "deadlines": _deadlines_spec,
    "decomposition": _decomposition_spec,
    "tags": _tags_spec,
    "leaky_bucket": _leaky_bucket_spec,
    "two_level": _two_level_spec,
    "settings": _settings_spec,
}


#: What each device kind reads of :func:`device_spec`'s settings, and their options.
_DEVICE_TAKES: dict[str, set[str]] = {
    "constant": {"capacity", "bandwidth"},
    "exponential": {"capacity"},
    "array": {"capacity", "servers", "profile", "queue", "depth"},
    "disk": {"profile", "queue"},
    "tiered": {"capacity", "hit_ratio", "depth"},
}
_DEVICE_FLAGS = {"capacity": "--capacity", "servers": "--servers", "profile": "--profile", "queue": "--queue",
                 "hit_ratio": "--hit-ratio", "depth": "--device-depth", "bandwidth": "bandwidth"}


def device_spec(
    name: str | dict[str, Any],
    *,
    capacity: str | float | Sequence[str | float] | None = None,
    servers: int | None = None,
    profile: str | None = None,
    queue: str | None = None,
    hit_ratio: float | None = None,
    depth: int | None = None,
    bandwidth: float | None = None,
) -> dict[str, Any]:
    """Build a device spec from a name and its parameters (a dict is passed through)."""
    if isinstance(name, dict):
        return name
    kind = name.strip().lower()
    if kind not in DEVICES:
        raise InputError(f"unknown device {name!r} (known: {', '.join(DEVICES)})", "--device")
    given = {"capacity": capacity, "servers": servers, "profile": profile, "queue": queue, "hit_ratio": hit_ratio,
             "depth": depth, "bandwidth": bandwidth}
    takes = _DEVICE_TAKES[kind] - ({"capacity"} if kind == "array" and profile is not None else set())
    unused = sorted(k for k, v in given.items() if v is not None and k not in takes)
    if unused:  # a setting the device would ignore: said, not dropped
        key = unused[0]
        if kind == "array" and key == "capacity":
            raise InputError("an array of disk models (a profile) takes no capacity: its disks set its speed",
                             _DEVICE_FLAGS[key])
        users = [k for k, t in _DEVICE_TAKES.items() if key in t]
        verb = "does" if len(users) == 1 else "do"
        raise InputError(f"device {kind!r} takes no {key.replace('_', ' ')} ({', '.join(users)} {verb})",
                         _DEVICE_FLAGS[key])

    def cap(value: Any) -> float:
        if value is None:
            raise InputError(f"device {kind!r} needs a capacity, e.g. --capacity 500", "--capacity")
        return parse_rate(value, "--capacity")

    if kind == "constant":
        spec: dict[str, Any] = {"kind": "constant", "iops": cap(capacity)}
        if bandwidth is not None:
            spec["bandwidth"] = parse_bandwidth(bandwidth, "bandwidth")
        return spec
    if kind == "exponential":
        return {"kind": "exponential", "iops": cap(capacity)}
    if kind == "array":
        k = 1 if servers is None else parse_count(servers, "--servers")
        if not 1 <= k <= _core.MAX_SERVERS:
            raise InputError(f"an array needs between 1 and {_core.MAX_SERVERS} servers, got {servers}", "--servers")
        if profile is not None:
            # A RAID-0-like array of disk models, striped by offset (seed 001's array).
            service: dict[str, Any] = {"kind": "disk", "profile": profile}
            if queue is not None:
                service["queue"] = queue
            spec = {"kind": "array", "servers": k, "assign": "striped", "service": service}
        else:
            spec = {"kind": "array", "servers": k, "assign": "shared",
                    "service": {"kind": "exponential", "iops": cap(capacity)}}
        if depth is not None:
            spec["depth"] = parse_count(depth, _DEVICE_FLAGS["depth"], minimum=1, maximum=2**63 - 1)
        return spec
    if kind == "disk":
        spec = {"kind": "disk"}
        if profile is not None:
            spec["profile"] = profile
        if queue is not None:
            spec["queue"] = queue
        return spec
    # tiered: capacity "SSD,HDD"
    if isinstance(capacity, str):
        parts = [p for p in capacity.split(",") if p.strip()]
    elif isinstance(capacity, (list, tuple)):
        parts = list(capacity)
    else:
        parts = []
    if len(parts) != 2:
        raise InputError("tiered device needs two capacities, fast then slow, e.g. --capacity 5000,100", "--capacity")
    spec = {
        "kind": "tiered",
        "fast": {"kind": "exponential", "iops": cap(parts[0])},
        "slow": {"kind": "exponential", "iops": cap(parts[1])},
    }
    if hit_ratio is not None:
        if not 0 <= hit_ratio <= 1:
            raise InputError(f"hit ratio must be in [0, 1], got {hit_ratio}", "--hit-ratio")
        spec["hit_ratio"] = float(hit_ratio)
    if depth is not None:
        spec["depth"] = parse_count(depth, _DEVICE_FLAGS["depth"], minimum=1, maximum=2**63 - 1)
    return spec


def param_of_flag(flag: str) -> str:
    """The parameter an option gives (in :class:`PolicyParams`, experiment files' and
    gateway configs' keys, :func:`storqos.simulate`'s keywords): ``--control-window`` →
    ``control_window``, ``--deadline`` → ``deadlines`` (the registry's)."""
    return registry.param_of_flag(flag)


def flag_of(param: str) -> str:
    """The option that gives a parameter: ``deadlines`` → ``--deadline``."""
    return registry.flag_of(param)


#: An option in a message, and the example value after it if there is one (a word with a
#: digit in it: ``--deadline 10ms,50ms``, not ``--slo too``).
_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)(?: (?=[\w.:]*\d)([^\s(),;]+(?:,[^\s(),;]+)*))?")


def python_names(text: str) -> str:
    """``text`` with the options it names said as :func:`storqos.simulate`'s keyword
    arguments: ``--reservations`` → ``reservations=``, an example value with it
    (``--deadline 10ms,50ms``) → ``deadlines="10ms,50ms"``.

    >>> python_names("give --slo too; e.g. --capacity 500, or --deadline 10ms,50ms")
    'give slo= too; e.g. capacity="500", or deadlines="10ms,50ms"'
    """
    def say(m: re.Match[str]) -> str:
        name = param_of_flag("--" + m.group(1))
        return f'{name}="{m.group(2)}"' if m.group(2) else f"{name}="

    return _FLAG.sub(say, text)


def in_python_names(e: InputError) -> InputError:
    """The same error, its options said as :func:`python_names` says them (the error
    itself when it names none)."""
    where = None if e.where is None else python_names(e.where)
    message = python_names(e.message)
    if (where, message) == (e.where, e.message) or isinstance(e, UnknownKeyword):
        return e
    return type(e)(message, where)


#: Per-tenant lists of a policy spec, and the option that gives each (the parameter is
#: :func:`param_of_flag`'s).
TENANT_LISTS: dict[str, str] = {
    "weights": "--weights",
    "reservations": "--reservations",
    "limits": "--limits",
    "slo": "--slo",
    "workloads": "--workloads",
    "deadlines_ns": "--deadline",
}


def check_tenant_lists(policy: dict[str, Any], tenants: int, *, flags: bool = True) -> None:
    """Every per-tenant list of ``policy`` has one entry per tenant: a list of another
    length is an :class:`InputError` naming the option (``--weights``; with ``flags``
    false the file's key, ``weights``) and both counts (it was padded or cut without a
    word). A back end over the same tenants (fclb's YFQ, ``then``) is checked too;
    lists keyed by class (``by = "class"``: RTT's fair queue between its two classes)
    are checked by the core."""
    if tenants <= 0:
        return
    inner = policy.get("then")
    if isinstance(inner, dict):
        check_tenant_lists(inner, tenants, flags=flags)
    if policy.get("by", "tenant") != "tenant":
        return
    for key, option in TENANT_LISTS.items():
        values = policy.get(key)
        if isinstance(values, list) and len(values) != tenants:
            ids = "id 0" if tenants == 1 else f"ids 0-{tenants - 1}"
            raise InputError(
                f"{len(values)} value(s) for {tenants} tenant(s) ({ids}); give one per tenant, in tenant order",
                option if flags else param_of_flag(option),
            )


def device_capacity_iops(device: dict[str, Any]) -> float | None:
    """What a device spec serves at most, in IOPS, where its spec says (a constant or
    exponential server, a shared array of them); None for disk models and measured
    service times, whose speed depends on the requests."""
    kind = device.get("kind")
    if kind in ("constant", "exponential"):
        return float(device["iops"])
    if kind == "array" and device.get("assign", "shared") == "shared":
        one = device_capacity_iops(device.get("service", {}))
        return None if one is None else one * int(device.get("servers", 1))
    return None


def check_reservations(policy: dict[str, Any], capacity_iops: float | None, *, reservations: str = "--reservations",
                       capacity: str = "--capacity") -> None:
    """Warn (the run goes on) when mClock's reservations add up to more than the
    device's capacity (``capacity_iops``; None: not known): the device cannot serve
    every tenant its reservation, and some fall short of what they were promised.
    ``reservations`` and ``capacity`` name where each was given (the options, a file's
    keys, the keyword arguments)."""
    if policy.get("kind") not in _RESERVING or not capacity_iops:
        return
    total = sum(float(r) for r in policy.get("reservations") or [] if r)
    if total > capacity_iops * (1 + 1e-9):
        warn_input(f"they add up to {total:,.6g} IOPS, more than the device's {capacity_iops:,.6g} IOPS "
                   f"({capacity}): they cannot all be met", reservations)


def check(policy: dict[str, Any], device: dict[str, Any]) -> tuple[str, str]:
    """Validate both specs in the core; return their display names."""
    return _core.check_policy(core_json(policy, "policy")), _core.check_device(core_json(device, "device"))


#: Core kinds of the policies that take per-tenant reservations.
_RESERVING = frozenset(p.kind for p in registry.registry().policies if "reservations" in p.takes)
#: Policies whose per-tenant weights default to the tenants' ``weight``.
WEIGHTED = registry.with_form("fair_queue")
#: Policies whose per-class SLOs default to the tenants' ``reservation`` and ``slo``.
TWO_LEVEL = registry.with_form("two_level")
#: What a tenant without the key counts as in a list made of the tenants' key.
_TENANT_KEY_DEFAULTS: dict[str, float | None] = {"weight": 1.0, "reservation": 0.0, "limit": None}


class TenantQos(Protocol):
    """A tenant's QoS keys, as experiment files and the gateway's config give them."""

    @property
    def name(self) -> str: ...
    @property
    def weight(self) -> float | None: ...
    @property
    def reservation(self) -> float | None: ...
    @property
    def limit(self) -> float | None: ...
    @property
    def slo_ns(self) -> int | None: ...


def policy_for_tenants(kind: str, params: dict[str, Any], tenants: Sequence[TenantQos],
                       percentile: float = 0.95) -> dict[str, Any]:
    """The spec of policy ``kind`` with ``params``, its per-tenant parameters not given
    filled from the tenants' QoS keys (in tenant order): mClock's weights, reservations
    and limits; the weights of the fair queues; the per-class SLOs (R_i at D_i, judged at
    ``percentile``) of the two-level schedulers."""
    try:
        kind = canonical_policy(kind)
    except InputError as e:  # the caller names where the kind was given
        raise InputError(e.message) from None
    params = dict(params)
    try:
        entry = registry.policy(kind)
        for param, keys in entry.from_tenants if tenants else ():
            if param in params:
                continue
            if len(keys) == 2:  # per-class SLOs: R_i at D_i
                missing = [t.name for t in tenants if not (t.reservation and t.slo_ns)]
                if missing:
                    raise InputError(f"{kind} needs every tenant's reservation (R_i) and slo (D_i); "
                                     f"missing for {', '.join(missing)}")
                params[param] = ",".join(f"{_slo_name(t.name)}:{t.reservation}iops@{t.slo_ns}ns" for t in tenants)
                params.setdefault("percentile", percentile * 100)
                continue
            key = keys[0]
            values = [getattr(t, key) for t in tenants]
            # mClock's weights and reservations are always the tenants' (1 and 0 where a
            # tenant gives none); a fair queue's weights and mClock's limits only when
            # some tenant gives one.
            if (entry.form == "tags" and key != "limit") or any(values):
                fill = _TENANT_KEY_DEFAULTS[key]
                params[param] = [v if key == "limit" else (v or fill) for v in values]
        return policy_spec(kind, **params)
    except UnknownKeyword as e:  # a file's key: said as one
        raise InputError(f"unknown parameter {e.keyword!r}{e.hint}") from None
    except TypeError as e:  # a value of a type the parameter's parser does not take
        raise InputError(f"a parameter of the wrong type ({e})") from None


def _slo_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)
