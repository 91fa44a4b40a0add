"""Reading an advise file: the tenants and their SLOs, the device family. An advise
file is an experiment file (docs/experiments.md, read by
:mod:`storqos.experiments.experiment`) whose tenants' ``slo`` may read ``p99<=10ms`` (a percentile
per tenant), whose ``[device]`` names a family without a capacity (:mod:`.family`) and
whose ``[[policy]]`` tables are ignored (advise chooses the policies). Everything wrong
is one :class:`~storqos.base.errors.InputError` line, before any search; the planner's bounds
and the checks against the device are :mod:`.bounds`.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import polars as pl

from storqos.base.errors import InputError, warn_input
from storqos.base.units import parse_duration, parse_percent, parse_rate
from storqos.model import registry
from storqos.planning.advise.bounds import prepare
from storqos.planning.advise.family import device_family
from storqos.planning.advise.problem import DEFAULT_HEADROOM, MAX_HEADROOM, Problem, Slo, TenantInfo

#: ``p99<=10ms``, ``99.9% <= 5ms``, ``p99≤250us``.
_SLO = re.compile(r"^\s*(?:p(?P<p>[0-9.]+)|(?P<pc>[0-9.]+)\s*%)\s*(?:<=|≤)\s*(?P<d>.+?)\s*$", re.I)
#: The percentile a bare latency (``slo = "10ms"``) is judged at, unless the file's ``percentile`` says.
DEFAULT_PERCENTILE = 0.95


def parse_slo(text: str | int | float, default_percentile: float, where: str = "slo") -> Slo:
    """``"p99<=10ms"``, ``"99.9%<=5ms"`` or a bare latency (``"10ms"``, judged at
    ``default_percentile``) → :class:`Slo`."""
    if isinstance(text, str):
        m = _SLO.match(text)
        if m:
            p = parse_percent(m.group("p") or m.group("pc"), where)
            d = parse_duration(m.group("d"), where, default_unit="ms")
            if d <= 0:
                raise InputError(f"the latency bound must be > 0, got {text!r}", where)
            return Slo(p, d)
        if "<" in text or "≤" in text:
            raise InputError(f"malformed SLO {text!r} (expected e.g. p99<=10ms)", where)
    d = parse_duration(text, where, default_unit="ms")
    if d <= 0:
        raise InputError(f"the latency bound must be > 0, got {text!r}", where)
    return Slo(default_percentile, d)


def parse_headroom(value: str | float, where: str = "--headroom") -> float:
    """The extra load every answer must hold at, as a fraction of the load: a string is
    a percentage (``"10%"``, ``"10"``, ``"0"`` for none), a number a fraction (``0.1``);
    from 0 to :data:`MAX_HEADROOM`. A string of at most 1 without ``%`` (``"0.1"``) reads
    as a percentage where a fraction may be meant: a warning says what is taken."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(f"expected a percentage such as 10% (or 0 for none), got {value!r}", where)
    if isinstance(value, str):
        text = value.strip()
        try:
            h = float(text.removesuffix("%").strip()) / 100
        except ValueError:
            raise InputError(f"malformed headroom {value!r} (expected a percentage such as 10% or 0)", where) from None
        if "%" not in text and 0 < h <= 0.01:
            warn_input(f"the value is a percentage: planning for {100 * h:g} % more load (for 10 % give 10)", where)
    else:
        h = float(value)
    if not 0 <= h <= MAX_HEADROOM:  # also NaN
        raise InputError(f"headroom must be between 0 % and {100 * MAX_HEADROOM:g} %, got {value!r}", where)
    return h


def load_problem(path: str | Path, *, max_capacity: str | float | None = None,
                 headroom: str | float = DEFAULT_HEADROOM) -> Problem:
    """Read an advise file (an experiment file whose tenants' ``slo`` may read
    ``p99<=10ms``, whose ``[device]`` names a family without a capacity, and whose
    ``[[policy]]`` tables are optional) and check it (one-line :class:`InputError`).
    ``headroom`` (:func:`parse_headroom`; default 10 %): every answer must also meet
    every SLO with every tenant's load that much higher."""
    from storqos.base.toml_schema import read_toml

    path = Path(path)
    text, raw = read_toml(path)
    return problem_from_dict(raw, base=path.parent, where=path.name, text=text, name=path.stem,
                             max_capacity=max_capacity, headroom=headroom)


def problem_from_dict(raw: dict[str, Any], *, base: Path = Path("."), where: str = "advise", text: str | None = None,
                      name: str = "advise", max_capacity: str | float | None = None,
                      headroom: str | float = DEFAULT_HEADROOM) -> Problem:
    """:func:`load_problem` on a parsed file."""
    h = parse_headroom(headroom)
    from storqos.base.toml_schema import entry_where, one_or_many
    from storqos.experiments import experiment

    raw = dict(raw)
    family = device_family(raw.pop("device", {}) or {}, f"{where}: [device]", base)
    raw.pop("policy", None)  # advise chooses the policies (--policy)
    default_p = parse_percent(raw["percentile"], f"{where}: percentile") if "percentile" in raw else DEFAULT_PERCENTILE
    # Each entry's SLO: "pP<=D" is read here (per-tenant percentiles); the experiment
    # reader gets the latency alone.
    slos: dict[tuple[str, int], Slo | None] = {}
    for table in ("trace", "tenant"):
        if table not in raw:
            continue
        entries = [dict(e) if isinstance(e, dict) else e for e in one_or_many(raw[table])]
        for i, e in enumerate(entries):
            if not isinstance(e, dict):
                continue
            w = entry_where(where, table, i, e.get("name"))
            s = parse_slo(e["slo"], default_p, f"{w}: slo") if "slo" in e else None
            slos[(table, i)] = s
            if s is not None:
                e["slo"] = f"{s.latency_ns}ns"
        raw[table] = entries
    raw["device"] = {"kind": "constant", "capacity": "1"}
    raw["policy"] = [{"kind": registry.default().kind}]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        exp = experiment.from_dict(raw, base=base, where=where, text=text)
    run = exp.runs[0]
    if run.closed:
        raise InputError("advise needs open-loop tenants (traces or generators): a closed-loop client's load "
                         "follows the capacity, so it has no capacity to plan for", where)
    # Tenants → their entry's SLO: [[trace]] entries first (one or, split, several tenants each), then [[tenant]].
    file_slos: list[Slo | None] = []
    traces = one_or_many(raw.get("trace", []))
    names = [t.name for t in run.tenants]
    k = 0
    for i, e in enumerate(traces):
        label = e.get("name") or str(e["path"]).rsplit("/", 1)[-1].rsplit(".", 1)[0]
        while k < len(names) and (names[k] == label or names[k].startswith(label + "/")):
            file_slos.append(slos.get(("trace", i)))
            k += 1
    for i, _ in enumerate(one_or_many(raw.get("tenant", []))):
        file_slos.append(slos.get(("tenant", i)))
    frames = []
    if run.trace_key is not None:
        frames.append(exp.traces[run.trace_key])
    if run.generators:
        from storqos.model.synth import to_frame

        g = to_frame(run.generators)
        frames.append(g.select("arrival_ns", "size", "offset", "is_read", "tenant"))
    if not frames:
        raise InputError("no tenant has any request", where)
    df = pl.concat(frames, how="vertical_relaxed").sort("arrival_ns", maintain_order=True)
    df = df.select(pl.col("arrival_ns").cast(pl.Int64), pl.col("size").cast(pl.UInt32),
                   pl.col("offset").cast(pl.UInt64), pl.col("is_read").cast(pl.Boolean), pl.col("tenant").cast(pl.UInt32))
    span_ns = int(df.select(pl.col("arrival_ns").max()).item() or 0) + 1
    counts = dict(df.group_by("tenant").len().iter_rows())
    tenants: list[TenantInfo] = []
    for tid, (t, s) in enumerate(zip(run.tenants, file_slos, strict=True)):
        n = int(counts.get(tid, 0))
        if n == 0:
            raise InputError(f"tenant {t.name!r} has no requests (an empty trace, or none within the duration)", where)
        tenants.append(TenantInfo(name=t.name, slo=s, reservation=t.reservation or None, limit=t.limit,
                                  weight=t.weight, requests=n, mean_iops=n / (span_ns / 1e9)))
    p = Problem(name=str(raw.get("name", name)), trace=df, tenants=tenants, family=family,
                seed=int(raw.get("seed", 1)), span_ns=span_ns, headroom=h)
    cap = None if max_capacity is None else parse_rate(max_capacity, "--max-capacity")
    prepare(p, cap, where)
    return p


__all__ = ["DEFAULT_PERCENTILE", "load_problem", "parse_headroom", "parse_slo", "problem_from_dict"]
