"""Service level objectives ⟨R_i, D_i⟩ of seed 001 (SARC + AVATAR, §3.1).

Class ``i`` promises: while it arrives at no more than ``R_i`` IOPS, the 95th percentile
(configurable) of its response times stays within ``D_i``; when it arrives faster, it is
served at least ``R_i`` IOPS and owed no latency. The promise is judged per 1 s interval:

- arrivals > R_i·interval → ``"throughput met"`` iff served ≥ R_i·interval;
- arrivals ≤ R_i·interval → ``"latency met"`` iff the interval's percentile ≤ D_i;
- otherwise ``"violated"``.

>>> [s.rate_iops for s in parse_slo("web:160iops@400ms,oltp:190iops@900ms")]
[160.0, 190.0]
>>> slo_fields("web:160iops@400ms")["slo"]
[{'rate_iops': 160.0, 'latency_ns': 400000000}]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from storqos.base.errors import InputError
from storqos.base.units import parse_duration, parse_percent, parse_rate

if TYPE_CHECKING:  # polars is imported where the judging is (the SLO parsing, which every
    import polars as pl  # policy spec uses, does not need it)

#: The percentile of the paper's statistical latency guarantee (§3.1: 95 %).
DEFAULT_PERCENTILE = 0.95
#: The SLO interval of the paper's evaluation (§3.1: 1 s).
SLO_INTERVAL_NS = 1_000_000_000
#: Window percentile columns ``SimResult.windows`` carries, by percentile.
_WINDOW_COLUMNS = {0.5: "p50_ns", 0.95: "p95_ns", 0.99: "p99_ns"}

_ENTRY = re.compile(r"^(?:(?P<name>[A-Za-z_][\w.-]*)\s*:)?\s*(?P<rate>[^@]+?)\s*@\s*(?P<lat>.+)$")


@dataclass(frozen=True)
class ClassSlo:
    """One class's ⟨R_i, D_i⟩ (class index = position in the SLO list = tenant)."""

    name: str
    rate_iops: float
    latency_ns: int

    def spec(self) -> dict[str, float | int]:
        """The core's JSON form."""
        return {"rate_iops": self.rate_iops, "latency_ns": self.latency_ns}


def parse_slo(text: str | Sequence[ClassSlo], where: str = "--slo") -> list[ClassSlo]:
    """Parse ``"web:160iops@400ms,oltp:190iops@900ms"`` (names optional: ``160@400ms``).

    Rates accept ``1.5k`` and an ``iops`` suffix; latencies need a unit or are read in
    ms. Errors are one line naming the entry.
    """
    if not isinstance(text, str):
        return list(text)
    entries = [e.strip() for e in text.split(",")]
    if not text.strip() or any(not e for e in entries):
        raise InputError(f"malformed SLO list {text!r} (expected e.g. web:160iops@400ms,oltp:190iops@900ms)", where)
    out: list[ClassSlo] = []
    for i, e in enumerate(entries):
        m = _ENTRY.match(e)
        if not m:
            raise InputError(f"malformed SLO entry {i + 1} {e!r} (expected NAME:RATEiops@LATENCY, e.g. web:160iops@400ms)", where)
        name = m.group("name") or str(i)
        ctx = f"{where} entry {i + 1} ({name})"
        rate = parse_rate(m.group("rate"), ctx)
        lat = parse_duration(m.group("lat"), ctx, default_unit="ms")
        if lat <= 0:
            raise InputError(f"latency must be > 0, got {m.group('lat')!r}", ctx)
        out.append(ClassSlo(name, rate, lat))
    names = [s.name for s in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise InputError(f"class name(s) {', '.join(sorted(dup))} given twice", where)
    return out


def slo_fields(text: str | Sequence[ClassSlo], percentile: str | float | None = None) -> dict[str, object]:
    """The spec fields a two-level policy takes from an SLO string: ``{"slo": [...],
    "percentile": 0.95}`` (merge into ``policy_spec("sarc+avatar", ...)``'s dict).

    ``percentile`` accepts ``95``, ``"99%"`` or a fraction (``0.95``).
    """
    slos = parse_slo(text)
    out: dict[str, object] = {"slo": [s.spec() for s in slos]}
    if percentile is not None:
        out["percentile"] = _fraction(percentile)
    return out


def _fraction(p: str | float) -> float:
    if isinstance(p, (int, float)) and 0 < float(p) <= 1:
        return float(p)
    return parse_percent(p, "--percentile")


def judge(
    windows: pl.DataFrame,
    slo: str | Sequence[ClassSlo],
    *,
    percentile: str | float = DEFAULT_PERCENTILE,
    interval_ns: int = SLO_INTERVAL_NS,
    requests: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Judge every (window, class) row of ``SimResult.windows`` (class = tenant).

    The windows must be the SLO interval long (``simulate(window="1s")``). The
    percentile comes from the ``p50_ns``/``p95_ns``/``p99_ns`` columns, or, for any other
    percentile, from the per-request log (``simulate(keep_requests=True)``), by window of
    completion like the simulator's. Returns ``start_s, tenant, name, arrivals, served,
    rate_iops, latency_ms, pct_ms, verdict`` (``"throughput met"``, ``"latency met"``,
    ``"violated"``).
    """
    import polars as pl

    slos = parse_slo(slo)
    q = _fraction(percentile)
    need = {"start_ns", "tenant", "arrivals", "completed"}
    missing = need - set(windows.columns)
    if missing:
        raise InputError(f"windows table lacks column(s) {', '.join(sorted(missing))}")
    col = _WINDOW_COLUMNS.get(round(q, 6))
    if col is not None:
        w = windows.select("start_ns", "tenant", "arrivals", "completed", pl.col(col).alias("pct_ns"))
    else:
        if requests is None:
            raise InputError(
                f"percentile {q:g} needs the per-request log: simulate(..., keep_requests=True) and pass requests=",
                "--percentile",
            )
        pct = (
            requests.with_columns(((pl.col("finish_ns") // interval_ns) * interval_ns).alias("start_ns"))
            .group_by("start_ns", "tenant")
            .agg(pl.col("response_ns").quantile(q, interpolation="higher").cast(pl.UInt64).alias("pct_ns"))
        )
        w = windows.select("start_ns", "tenant", "arrivals", "completed").join(
            pct.with_columns(pl.col("start_ns").cast(windows["start_ns"].dtype), pl.col("tenant").cast(windows["tenant"].dtype)),
            on=["start_ns", "tenant"],
            how="left",
        )
    n = len(slos)
    table = pl.DataFrame(
        {
            "tenant": list(range(n)),
            "name": [s.name for s in slos],
            "rate_iops": [s.rate_iops for s in slos],
            "latency_ns": [s.latency_ns for s in slos],
        },
        schema={"tenant": pl.UInt32, "name": pl.Utf8, "rate_iops": pl.Float64, "latency_ns": pl.UInt64},
    )
    w = w.with_columns(pl.col("tenant").cast(pl.UInt32).clip(0, n - 1).alias("_cls"), pl.col("tenant").cast(pl.UInt32))
    w = w.join(table.rename({"tenant": "_cls"}), on="_cls", how="left").drop("_cls")
    owed = pl.col("rate_iops") * (interval_ns / 1e9)
    has_pct = pl.col("completed") > 0
    verdict = (
        pl.when(pl.col("arrivals") > owed)
        .then(pl.when(pl.col("completed") >= owed).then(pl.lit("throughput met")).otherwise(pl.lit("violated")))
        .when(has_pct & (pl.col("pct_ns") > pl.col("latency_ns")))
        .then(pl.lit("violated"))
        .when(~has_pct & (pl.col("arrivals") > 0))
        .then(pl.lit("violated"))
        .otherwise(pl.lit("latency met"))
    )
    return w.select(
        (pl.col("start_ns") / 1e9).alias("start_s"),
        "tenant",
        "name",
        "arrivals",
        pl.col("completed").alias("served"),
        "rate_iops",
        (pl.col("latency_ns") / 1e6).alias("latency_ms"),
        pl.when(has_pct).then(pl.col("pct_ns") / 1e6).otherwise(None).alias("pct_ms"),
        verdict.alias("verdict"),
    ).sort("start_s", "tenant")


def compliance(verdicts: pl.DataFrame) -> pl.DataFrame:
    """Per class: intervals judged, the share of each verdict, and the share met."""
    import polars as pl

    return (
        verdicts.group_by("tenant", "name")
        .agg(
            pl.len().alias("intervals"),
            (pl.col("verdict") == "latency met").mean().alias("latency_met"),
            (pl.col("verdict") == "throughput met").mean().alias("throughput_met"),
            (pl.col("verdict") == "violated").mean().alias("violated"),
        )
        .with_columns((1 - pl.col("violated")).alias("met"))
        .sort("tenant")
    )
