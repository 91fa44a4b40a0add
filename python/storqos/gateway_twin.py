"""The simulated twin of a live gateway experiment (issue 17, point 5): one experiment
description, a gateway config file (``storqos serve --config``) plus the fio job file of
its clients, run live (the gateway, fio's nbd engine) or simulated (the same policy
spec, the emulated capacity as the simulator's constant-rate device, fio's jobs as
closed-loop clients).

What is read from the fio file, per job: ``uri`` (its export, hence its tenant),
``iodepth`` (requests kept in flight), ``startdelay`` (when it starts), ``runtime``
(how long it runs), ``bs`` (request size), ``rw`` (``randread`` / ``read``: reads;
``randwrite`` / ``write``: writes; ``randrw`` / ``rw``: ``rwmixread`` percent reads,
default 50). Values in ``[global]`` apply to every job. fio's time units: a bare number
of ``startdelay`` / ``runtime`` is seconds.

Used by ``examples/gateway/fclb_step.py`` and ``tests/python/test_gateway_fclb.py``
(seed 003's step case live and simulated).
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from .errors import InputError
from .gateway_config import load, merged
from .sim import ClosedClient, SimResult, simulate
from .units import parse_duration, parse_size


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

    def client(self) -> ClosedClient:
        """The job as the simulator's closed-loop client (no think time, offsets uniform
        over the export)."""
        return ClosedClient(tenant=self.tenant, outstanding=self.iodepth, size=self.size,
                            read_fraction=self.read_fraction, span="16MiB", start=f"{self.start_ns}ns",
                            stop=f"{self.start_ns + self.runtime_ns}ns")


_READS = {"read": 1.0, "randread": 1.0, "write": 0.0, "randwrite": 0.0}


def read_fio_jobs(fio: str | Path, tenants_by_export: dict[str, int]) -> list[FioJob]:
    """The jobs of a fio job file, each mapped to its export's tenant."""
    path = Path(fio)
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    try:
        parser.read_string(path.read_text(), source=str(path))
    except (OSError, configparser.Error) as e:
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
        export = urlparse(uri).path.lstrip("/")
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
            size=parse_size(opts.get("bs", 4096), f"{where}: bs"), read_fraction=reads))
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

    def simulate(self, window: str | float, seed: int = 1) -> SimResult:
        """Run the experiment in simulated time: the config's policy spec in front of its
        emulated capacity (the simulator's constant-rate device), the jobs as closed-loop
        clients, summaries per ``window``."""
        iops = self.config.get("iops")
        if iops is None:
            raise InputError("the twin simulates an emulated capacity: give iops in the config file", "iops")
        depth = int(self.config.get("depth", 1))
        if depth != 1:
            raise InputError(f"the twin models the emulated server's one slot: give depth = 1, got {depth}", "depth")
        # Tenants no job drives (e.g. ones admission control refuses) send nothing: the
        # per-tenant lists stop at the last tenant a job drives, as the simulator asks.
        n = max(j.tenant for j in self.jobs) + 1
        policy = _trimmed(self.config["policy"], n)
        return simulate(policy=policy, device={"kind": "constant", "iops": float(iops)},
                        closed=[j.client() for j in self.jobs], window=window, seed=seed,
                        until=f"{self.duration_ns()}ns")


def _trimmed(spec: dict[str, Any], n: int) -> dict[str, Any]:
    """``spec`` with its per-tenant lists (``workloads``, ``weights``, nested back ends)
    cut to the first ``n`` tenants."""
    out = dict(spec)
    for key in ("workloads", "weights"):
        if isinstance(out.get(key), list):
            out[key] = out[key][:n]
    if isinstance(out.get("then"), dict):
        out["then"] = _trimmed(out["then"], n)
    return out


__all__ = ["Experiment", "FioJob", "read_fio_jobs"]
