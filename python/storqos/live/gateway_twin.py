"""The simulated twin of a live gateway experiment: one experiment
description, a gateway config file (``storqos serve --config``) plus the fio job file of
its clients, run live (the gateway, fio's nbd engine) or simulated (the same policy
spec, the emulated capacity as the simulator's constant-rate device, fio's jobs as
closed-loop clients).

**Tiered exports** (``[export.tier]`` with ``[tiers.fast]`` / ``[tiers.slow]``, e.g.
seed 004's BAA live): the device is the simulator's tiered device, each tier a
constant-rate server of its emulated capacity (one server, as the gateway emulates it),
the config's ``depth`` slots for both tiers together. Tenant ``t``'s hit ratio is its
export's ``pin`` as a request sees it (the fraction of the export's ``bs``-aligned
requests whose blocks are all placed; ``pin`` itself when ``bs`` ≤ the map's block)
times its jobs' read fraction (writes are write-through, served by the slow tier).
Sequential jobs (``rw=read``, ``write``, ``rw``) spread each tenant's hits evenly over
its requests (the core's ``"hits": "spread"``: the gateway's placement read in order,
the same hit ratio in every monitor window); any random job draws them at random.
Not modelled: ``lru = true`` (a cache: see ``storqos.live.tier_warming``), tiers of more
than one server, plain exports beside tiered ones; each is a one-line error.

What is read from the fio file, per job: ``uri`` (its export, hence its tenant),
``iodepth`` (requests kept in flight), ``startdelay`` (when it starts), ``runtime``
(how long it runs), ``bs`` (request size), ``rw`` (``randread`` / ``read``: reads;
``randwrite`` / ``write``: writes; ``randrw`` / ``rw``: ``rwmixread`` percent reads,
default 50). Values in ``[global]`` apply to every job. fio's time units: a bare number
of ``startdelay`` / ``runtime`` is seconds.

Used by ``examples/gateway/fclb_step.py`` and ``tests/python/test_gateway_fclb.py``
(seed 003's step case live and simulated), ``examples/gateway/baa_twin.py`` and
``tests/python/test_gateway_twin_baa.py`` (seed 004's Example III).
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from storqos.base.config_file import read_config_text
from storqos.base.errors import InputError
from storqos.base.units import parse_duration, parse_size
from storqos.base.uri import split_nbd
from storqos.live.gateway_config import load, merged
from storqos.model.sim import ClosedClient, SimResult, simulate


@dataclass(frozen=True)
class FioJob:
    """One fio job of an experiment: its export, tenant and closed-loop shape."""

    name: str
    export: str
    tenant: int
    iodepth: int
    start_ns: int
    runtime_ns: int
    size: int
    read_fraction: float
    sequential: bool

    def client(self) -> ClosedClient:
        """The job as the simulator's closed-loop client (no think time, offsets uniform
        over the export)."""
        return ClosedClient(tenant=self.tenant, outstanding=self.iodepth, size=self.size,
                            read_fraction=self.read_fraction, span="16MiB", start=f"{self.start_ns}ns",
                            stop=f"{self.start_ns + self.runtime_ns}ns")


_READS = {"read": 1.0, "randread": 1.0, "write": 0.0, "randwrite": 0.0}
_SEQUENTIAL = ("read", "write", "rw", "readwrite")


def read_fio_jobs(fio: str | Path, tenants_by_export: dict[str, int]) -> list[FioJob]:
    """The jobs of a fio job file, each mapped to its export's tenant."""
    path = Path(fio)
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    text = read_config_text(path, "fio job")
    try:
        parser.read_string(text, source=str(path))
    except configparser.Error as e:
        raise InputError(f"cannot read the fio job file: {e}".replace("\n", " "), str(path)) from None
    glob = dict(parser["global"]) if parser.has_section("global") else {}
    jobs: list[FioJob] = []
    for name in parser.sections():
        if name == "global":
            continue
        opts: dict[str, Any] = {**glob, **dict(parser[name])}
        where = f"{path}: [{name}]"
        uri = opts.get("uri")
        if not uri:
            raise InputError("every job needs uri=nbd://HOST:PORT/EXPORT", where)
        export = split_nbd(uri, where).path.lstrip("/")
        if export not in tenants_by_export:
            raise InputError(f"uri names export {export!r}, not in the config (known: "
                             f"{', '.join(tenants_by_export)})", where)
        rw = str(opts.get("rw", "read")).lower()
        if rw in _READS:
            reads = _READS[rw]
        elif rw in ("rw", "randrw", "readwrite"):
            reads = float(opts.get("rwmixread", 50)) / 100
        else:
            raise InputError(f"rw={rw} is not one the twin reads (read, randread, write, randwrite, randrw)", where)
        if "runtime" not in opts:
            raise InputError("every job needs a runtime (the twin runs for a time, not a size)", where)
        jobs.append(FioJob(
            name=name, export=export, tenant=tenants_by_export[export],
            iodepth=int(opts.get("iodepth", 1)),
            start_ns=parse_duration(opts.get("startdelay", 0), f"{where}: startdelay", default_unit="s"),
            runtime_ns=parse_duration(opts["runtime"], f"{where}: runtime", default_unit="s"),
            size=parse_size(opts.get("bs", 4096), f"{where}: bs"), read_fraction=reads,
            sequential=rw in _SEQUENTIAL))
    if not jobs:
        raise InputError("no jobs", str(path))
    return jobs


@dataclass
class Experiment:
    """A gateway config file and the fio jobs that drive it."""

    config: dict[str, Any]
    jobs: list[FioJob]

    @classmethod
    def load(cls, config: str | Path, fio: str | Path) -> Experiment:
        """Read the config file (checked as ``storqos serve --config`` checks it) and the
        fio job file."""
        settings = load(config)
        cfg = merged(settings)
        tenants = {str(e["name"]): int(e["tenant"]) for e in cfg["exports"]}
        return cls(config=cfg, jobs=read_fio_jobs(fio, tenants))

    def duration_ns(self) -> int:
        """When the last job ends."""
        return max(j.start_ns + j.runtime_ns for j in self.jobs)

    def simulate(self, window: str | float, seed: int = 1, keep_requests: bool = False) -> SimResult:
        """Run the experiment in simulated time: the config's policy spec in front of its
        emulated device (:meth:`device`), the jobs as closed-loop clients, summaries per
        ``window``; ``keep_requests`` keeps the request log (which tier served each
        request, for :meth:`tier_utilisation`)."""
        device = self.device()
        # Tenants no job drives (e.g. ones admission control refuses) send nothing: the
        # per-tenant lists stop at the last tenant a job drives, as the simulator asks.
        n = max(j.tenant for j in self.jobs) + 1
        policy = _trimmed(self.config["policy"], n)
        return simulate(policy=policy, device=device, closed=[j.client() for j in self.jobs], window=window,
                        seed=seed, until=f"{self.duration_ns()}ns", keep_requests=keep_requests)

    def device(self) -> dict[str, Any]:
        """The simulator's device spec of the gateway's emulated backend: the tiered
        device when the config has tiered exports (see the module notes), else the
        emulated capacity ``iops`` as a constant-rate server."""
        if any(e.get("tier") for e in self.config["exports"]):
            return self._tiered_device()
        iops = self.config.get("iops")
        if iops is None:
            raise InputError("the twin simulates an emulated capacity: give iops in the config file", "iops")
        depth = int(self.config.get("depth", 1))
        if depth != 1:
            raise InputError(f"the twin models the emulated server's one slot: give depth = 1, got {depth}", "depth")
        return {"kind": "constant", "iops": float(iops)}

    def _tiered_device(self) -> dict[str, Any]:
        tiers = self.config.get("tiers") or {}
        dev: dict[str, Any] = {"kind": "tiered", "depth": int(self.config["depth"])}
        for t in ("fast", "slow"):
            d = tiers.get(t) or {}
            if d.get("iops") is None:
                raise InputError(f"the twin simulates emulated tiers: give [tiers.{t}] iops", f"tiers.{t}")
            if int(d.get("depth", 1)) != 1:
                raise InputError(f"the twin models one server per tier: give [tiers.{t}] depth = 1, got {d['depth']}",
                                 f"tiers.{t}")
            dev[t] = {"kind": "constant", "iops": float(d["iops"])}
        exports = {str(e["name"]): e for e in self.config["exports"]}
        hits: dict[int, tuple[float, str]] = {}
        for j in self.jobs:
            e = exports[j.export]
            tier = e.get("tier") or (exports[e["shares"]].get("tier") if e.get("shares") else None)
            where = f"export {j.export!r}"
            if tier is None:
                raise InputError("has no [export.tier]: the twin of a config with tiered exports models "
                                 "tiered exports only", where)
            if tier.get("lru"):
                raise InputError("lru = true caches misses: the BAA twin models placed blocks only (give "
                                 "lru = false; storqos.live.tier_warming is the twin of an LRU tier)", where)
            h = j.read_fraction * _placed_fraction(float(tier["pin"]), int(tier["block_bytes"]), j.size,
                                                   Path(e["path"]).stat().st_size)
            seen = hits.setdefault(j.tenant, (h, j.name))
            if abs(seen[0] - h) > 1e-9:
                raise InputError(f"jobs {seen[1]!r} and {j.name!r} of tenant {j.tenant} see hit ratios {seen[0]:.3g} "
                                 f"and {h:.3g}: the twin has one hit ratio per tenant", where)
        n = max(j.tenant for j in self.jobs) + 1
        dev["tenant_hit_ratios"] = [hits.get(t, (0.0, ""))[0] for t in range(n)]
        dev["hits"] = "spread" if all(j.sequential for j in self.jobs) else "random"
        return dev

    def tenant_iops(self, result: SimResult, start_ns: int, end_ns: int) -> list[float]:
        """Each tenant's mean IOPS (tenant ids 0, 1, ...) over the windows of ``result``
        that start at or after ``start_ns`` and end by ``end_ns``."""
        w = result.windows
        all_starts = np.unique(w["start_ns"].to_numpy())
        if len(all_starts) < 2:
            raise InputError("tenant IOPS need at least two summary windows", "window")
        span = int(np.diff(all_starts).min())
        steady = w.filter((pl.col("start_ns") >= start_ns) & (pl.col("start_ns") + span <= end_ns))
        starts = steady["start_ns"].n_unique()
        if not starts:
            raise InputError(f"no whole window between {start_ns / 1e9:g} s and {end_ns / 1e9:g} s", "window")
        n = max(j.tenant for j in self.jobs) + 1
        by = dict(steady.group_by("tenant").agg(pl.col("completed").sum()).iter_rows())
        return [by.get(t, 0) * 1e9 / (span * starts) for t in range(n)]

    def tier_utilisation(self, result: SimResult, start_ns: int, end_ns: int) -> dict[str, float]:
        """Busy fraction of each tier (``slow``, ``fast``): the requests it completed in
        [``start_ns``, ``end_ns``) over its emulated capacity. ``result`` must come from
        :meth:`simulate` with ``keep_requests=True``."""
        if result.requests is None:
            raise InputError("tier utilisation needs the request log: simulate(keep_requests=True)")
        done = result.requests.filter((pl.col("finish_ns") >= start_ns) & (pl.col("finish_ns") < end_ns))
        served = dict(done.group_by("target").len().iter_rows())
        secs = (end_ns - start_ns) / 1e9
        tiers = self.config.get("tiers") or {}
        if not all((tiers.get(t) or {}).get("iops") for t in ("slow", "fast")):
            raise InputError("tier utilisation needs both tiers' emulated iops", "tiers")
        return {t: served.get(k, 0) / (float(tiers[t]["iops"]) * secs) for t, k in (("slow", 1), ("fast", 0))}


def _placed_fraction(pin: float, block: int, size: int, export_bytes: int) -> float:
    """The fraction of an export's ``size``-aligned requests that hit: every block they
    cover placed (block ``b`` is placed iff ⌊(b+1)·pin⌋ > ⌊b·pin⌋, the gateway's rule)."""
    if size <= block or pin in (0.0, 1.0):
        return pin
    per = -(-size // block)
    requests = export_bytes // (per * block)
    if requests == 0:
        return pin
    b = np.arange(requests * per, dtype=np.float64)
    placed = np.floor((b + 1) * pin) > np.floor(b * pin)
    return float(placed.reshape(requests, per).all(axis=1).mean())


def _trimmed(spec: dict[str, Any], n: int) -> dict[str, Any]:
    """``spec`` with its per-tenant lists (``workloads``, ``weights``, ``hit_ratios``, nested back ends)
    cut to the first ``n`` tenants."""
    out = dict(spec)
    for key in ("workloads", "weights", "hit_ratios"):
        if isinstance(out.get(key), list):
            out[key] = out[key][:n]
    if isinstance(out.get("then"), dict):
        out["then"] = _trimmed(out["then"], n)
    return out


def read_live_series(series: Path) -> tuple[dict[float, dict[int, float]], dict[float, dict[str, float]]]:
    """A live run's per-window series as ``storqos serve --out series.json`` writes it
    (and its ``series.gauges.json`` beside): IOPS by window start (s) and tenant, and
    the policy's gauges by window start and name, to set beside the twin's."""
    import json

    iops: dict[float, dict[int, float]] = {}
    for row in json.loads(series.read_text()):
        iops.setdefault(row["start_s"], {})[row["tenant"]] = row["iops"]
    gauges: dict[float, dict[str, float]] = {}
    for g in json.loads(series.with_name("series.gauges.json").read_text()):
        gauges.setdefault(g["start_s"], {})[g["name"]] = g["value"]
    return iops, gauges


__all__ = ["Experiment", "FioJob", "read_fio_jobs", "read_live_series"]
