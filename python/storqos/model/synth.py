"""Synthetic workloads (the generators live in the Rust core, ``sim::generate``).

Each function returns a *spec* (a dict) when ``materialize=False`` — pass a list of them
to ``storqos.simulate(generators=...)`` to stream arrivals without holding them — or a
trace DataFrame in the canonical schema when ``materialize=True`` (default).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from storqos import _core
from storqos.base.core_json import core_json
from storqos.base.errors import InputError
from storqos.base.units import parse_count, parse_duration, parse_rate, parse_size

#: 2**64 − 1: "no limit" for counts and stop times.
_UNBOUNDED = 2**64 - 1


def _shape(tenant: int, size: str | int, read_fraction: float, span: str | int | None, seed: int) -> dict[str, Any]:
    if not 0 <= read_fraction <= 1:
        raise InputError(f"read fraction must be in [0, 1], got {read_fraction}", "--read-fraction")
    return {
        "tenant": int(tenant),
        "bytes": parse_size(size, "--size"),
        "read_fraction": float(read_fraction),
        "span_bytes": 0 if span is None else parse_size(span, "--span"),
        "seed": int(seed),
    }


def _bounds(count: int | None, duration: str | float | None) -> dict[str, int]:
    if count is None and duration is None:
        raise InputError("give a request count or a duration")
    return {
        "count": _UNBOUNDED if count is None else parse_count(count, "--count"),
        "until_ns": _UNBOUNDED if duration is None else parse_duration(duration, "--duration"),
    }


def to_frame(specs: list[dict[str, Any]]) -> pl.DataFrame:
    """Materialise generator specs (merged by time) into a canonical trace DataFrame."""
    r = _core.generate(core_json(specs, "generator"))
    df = pl.DataFrame({"arrival_ns": r.arrival_ns, "is_read": r.is_read, "offset": r.offset, "size": r.size,
                       "tenant": r.tenant})
    return df.select(
        pl.col("arrival_ns").cast(pl.Int64),
        "is_read",
        pl.col("offset").cast(pl.UInt64),
        pl.col("size").cast(pl.UInt32),
        pl.col("tenant").cast(pl.Utf8).alias("device"),
        pl.col("tenant").cast(pl.UInt32),
    )


def poisson(
    rate: str | float,
    count: int | None = None,
    duration: str | float | None = None,
    *,
    tenant: int = 0,
    size: str | int = 4096,
    read_fraction: float = 1.0,
    span: str | int | None = None,
    seed: int = 0,
    materialize: bool = True,
) -> pl.DataFrame | dict[str, Any]:
    """Poisson arrivals at ``rate`` IOPS (``count`` requests or for ``duration``)."""
    spec = {"kind": "poisson", "rate": parse_rate(rate, "--rate"), **_bounds(count, duration),
            **_shape(tenant, size, read_fraction, span, seed)}
    return to_frame([spec]) if materialize else spec


def onoff(
    rate_on: str | float,
    rate_off: str | float,
    mean_on: str | float,
    mean_off: str | float,
    count: int | None = None,
    duration: str | float | None = None,
    *,
    tenant: int = 0,
    size: str | int = 4096,
    read_fraction: float = 1.0,
    span: str | int | None = None,
    seed: int = 0,
    materialize: bool = True,
) -> pl.DataFrame | dict[str, Any]:
    """Bursty on/off arrivals (2-state MMPP): ``rate_on`` for Exp(``mean_on``), then
    ``rate_off`` (may be 0) for Exp(``mean_off``)."""
    # The OFF state may be silent: 0 is a valid rate here, anything else parses as usual.
    r_off = 0.0 if str(rate_off).strip() in ("0", "0.0", "0iops") else parse_rate(rate_off, "--rate-off")
    spec = {
        "kind": "onoff",
        "rate_on": parse_rate(rate_on, "--rate-on"),
        "rate_off": r_off,
        "mean_on_ns": parse_duration(mean_on, "--mean-on"),
        "mean_off_ns": parse_duration(mean_off, "--mean-off"),
        **_bounds(count, duration),
        **_shape(tenant, size, read_fraction, span, seed),
    }
    return to_frame([spec]) if materialize else spec


def diurnal(
    peak_rate: str | float,
    days: int,
    *,
    hourly: list[float] | None = None,
    weekend_factor: float = 0.3,
    tenant: int = 0,
    size: str | int = 4096,
    read_fraction: float = 1.0,
    span: str | int | None = None,
    seed: int = 0,
    materialize: bool = True,
) -> pl.DataFrame | dict[str, Any]:
    """Diurnal arrivals with a weekly cycle: rate = ``peak_rate`` × hourly profile (24
    values in [0, 1], default a bi-modal working day) × ``weekend_factor`` on days 5–6."""
    spec: dict[str, Any] = {
        "kind": "diurnal",
        "peak_rate": parse_rate(peak_rate, "--peak-rate"),
        "days": int(days),
        "weekend_factor": float(weekend_factor),
        **_shape(tenant, size, read_fraction, span, seed),
    }
    if hourly is not None:
        spec["hourly"] = [float(h) for h in hourly]
    return to_frame([spec]) if materialize else spec
