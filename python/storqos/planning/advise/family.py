"""Device families: a device model whose capacity is the unknown advise searches
(constant, array of N, disk model, tiered, or a device profile from
``storqos calibrate``), read from an advise file's ``[device]`` table.

A family turns a capacity into the core's device spec (:meth:`DeviceFamily.spec`):

- ``constant`` (seed 000's server): one server of C IOPS, 1/C per request;
- ``exponential`` (seed 004's simulation): one server, Exp(1/C) service;
- ``array``: N servers sharing C IOPS, exponential service;
- ``disk`` (seeds 001, 003): N striped disk models; the capacity is the whole number N;
- ``tiered`` (seeds 002, 004): SSD + HDD, both scaled, in a fixed ratio;
- ``profile``: a device measured by ``storqos calibrate``
  (:mod:`storqos.model.device_profile`): k servers drawing service times from the measured
  quantiles. Its scale was measured, not chosen, so advise searches it by scaling the
  measured capacity: at C IOPS every service time is × measured / C and the k servers
  stay (the parallelism is the device's, not a knob). Answers are IOPS and a multiple
  of the measured device.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storqos import _core
from storqos.base.errors import InputError
from storqos.base.units import parse_rate
from storqos.model import registry
from storqos.model.device_profile import DeviceProfile, load_profile

#: Device families (``[device] kind``) and what their capacity is.
FAMILIES: dict[str, str] = {
    "constant": "one server of C IOPS (1/C per request)",
    "exponential": "one server, Exp(1/C) service",
    "array": "N servers (servers = N) sharing C IOPS, exponential service",
    "disk": "N striped disk models (profile, queue); N is searched",
    "tiered": "SSD + HDD; capacity = FAST,SLOW gives the ratio, both scale; hit_ratio",
    "profile": "a device profile from storqos calibrate (path = FILE), its service times scaled; k servers kept",
}
#: The keys each family takes in ``[device]``.
FAMILY_KEYS: dict[str, set[str]] = {
    "constant": {"capacity"}, "exponential": {"capacity"}, "array": {"capacity", "servers"},
    "disk": {"profile", "queue"}, "tiered": {"capacity", "hit_ratio"}, "profile": {"path"},
}
#: The disk stripe over N disks (bytes): a RAID chunk of the usual size.
DISK_STRIPE_BYTES = 65536
#: A tiered device's fast share of the IOPS when ``capacity`` gives no ratio.
DEFAULT_FAST_SHARE = 0.9


@dataclass(frozen=True)
class DeviceFamily:
    """A device model whose capacity is the unknown: :meth:`spec` builds the core's device
    spec at a capacity (IOPS; for ``disk`` a number of disks)."""

    kind: str
    servers: int = 1
    profile: str = "enterprise-10k"
    queue: str = "sptf"
    fast_share: float = DEFAULT_FAST_SHARE
    hit_ratio: float | None = None
    #: the measured device (``profile`` family)
    measured: DeviceProfile | None = None
    #: where the measured device's profile was read from (``profile`` family)
    source: str = ""

    @property
    def integer(self) -> bool:
        """Whether the capacity is a count (disks)."""
        return self.kind == "disk"

    def spec(self, capacity: float) -> dict[str, Any]:
        """The core device spec at ``capacity``."""
        c = float(capacity)
        if self.kind == "constant":
            return {"kind": "constant", "iops": c}
        if self.kind == "exponential":
            return {"kind": "exponential", "iops": c}
        if self.kind == "array":
            return {"kind": "array", "servers": self.servers, "assign": "shared",
                    "service": {"kind": "exponential", "iops": c / self.servers}}
        if self.kind == "disk":
            return {"kind": "array", "servers": max(1, int(round(c))), "assign": "striped",
                    "stripe_bytes": DISK_STRIPE_BYTES,
                    "service": {"kind": "disk", "profile": self.profile, "queue": self.queue}}
        if self.kind == "profile":
            assert self.measured is not None
            return self.measured.sim_device(capacity_iops=c)
        spec: dict[str, Any] = {"kind": "tiered", "fast": {"kind": "exponential", "iops": c * self.fast_share},
                                "slow": {"kind": "exponential", "iops": c * (1 - self.fast_share)}}
        if self.hit_ratio is not None:
            spec["hit_ratio"] = self.hit_ratio
        return spec

    def multiple(self, capacity: float) -> float | None:
        """A capacity as a multiple of the measured device (``profile`` family), else None."""
        if self.measured is None:
            return None
        return capacity / self.measured.capacity_iops

    def unit(self, capacity: float) -> str:
        """The capacity as a reader wants it: ``12,340 IOPS``, ``6 disks`` or, for a
        profile, ``12,340 IOPS = 1.23× measured``."""
        if self.integer:
            n = int(round(capacity))
            return f"{n} disk" + ("s" if n != 1 else "")
        m = self.multiple(capacity)
        return f"{capacity:,.0f} IOPS" + ("" if m is None else f" = {m:.3g}× measured")

    def describe(self) -> str:
        """One line: what is searched."""
        if self.kind == "array":
            return f"array of {self.servers} servers"
        if self.kind == "disk":
            return f"striped {self.profile} disks ({self.queue})"
        if self.kind == "tiered":
            return f"tiered, {100 * self.fast_share:g} % of the IOPS in the fast tier"
        if self.kind == "profile" and self.measured is not None:
            return (f"device profile {Path(self.source).name} ({self.measured.capacity_iops:,.0f} IOPS measured, "
                    f"{self.measured.parallelism} at once), scaled")
        return f"{self.kind} server"


def device_family(table: dict[str, Any], where: str = "[device]", base: Path = Path(".")) -> DeviceFamily:
    """An advise file's ``[device]`` table → :class:`DeviceFamily` (its ``capacity`` is
    what advise searches; for ``tiered`` it gives the fast : slow ratio; a profile's
    ``path`` is relative to ``base``, the file's folder)."""
    t = dict(table)
    kind = str(t.pop("kind", "constant")).strip().lower()
    if kind not in FAMILIES:
        raise InputError(f"kind: unknown device family {kind!r} (known: {', '.join(FAMILIES)})", where)
    known = FAMILY_KEYS[kind]
    extra = sorted(set(t) - known)
    if extra:
        raise InputError(f"{kind} does not take {', '.join(extra)} (it takes {', '.join(sorted(known)) or 'nothing'})",
                         where)
    if kind == "array":
        servers = t.get("servers", 1)
        if not isinstance(servers, int) or not 1 <= servers <= _core.MAX_SERVERS:
            raise InputError(f"servers: expected a whole number 1-{_core.MAX_SERVERS}, got {servers!r}", where)
        return DeviceFamily("array", servers=servers)
    if kind == "disk":
        profile = str(t.get("profile", "enterprise-10k"))
        queue = str(t.get("queue", "sptf"))
        fam = DeviceFamily("disk", profile=profile, queue=queue)
        _check_spec(fam, 1, where)
        return fam
    if kind == "profile":
        if not isinstance(t.get("path"), str) or not t["path"].strip():
            raise InputError("path: a profile family needs path = \"FILE.toml\" (a profile from storqos calibrate)",
                             where)
        path = Path(t["path"]).expanduser()
        path = path if path.is_absolute() else base / path
        if not path.is_file():
            raise InputError(f"path: no device profile at {path} (make one with `storqos calibrate`)", where)
        prof = load_profile(path, where=f"{where} path")
        fam = DeviceFamily("profile", measured=prof, source=str(path))
        _check_spec(fam, prof.capacity_iops, where)
        return fam
    if kind == "tiered":
        share = DEFAULT_FAST_SHARE
        if "capacity" in t:
            parts = [p for p in str(t["capacity"]).split(",") if p.strip()]
            if len(parts) != 2:
                raise InputError("capacity: a tiered device takes FAST,SLOW (e.g. \"5k,200\") for the ratio", where)
            fast, slow = (parse_rate(p, f"{where} capacity") for p in parts)
            share = fast / (fast + slow)
        hit = t.get("hit_ratio")
        if hit is not None and not (isinstance(hit, (int, float)) and 0 <= hit <= 1):
            raise InputError(f"hit_ratio: must be in [0, 1], got {hit!r}", where)
        return DeviceFamily("tiered", fast_share=share, hit_ratio=None if hit is None else float(hit))
    return DeviceFamily(kind)


def _check_spec(fam: DeviceFamily, capacity: float, where: str) -> None:
    """The core accepts the family's device (a bad disk profile name, a bad measured
    table: one line naming ``[device]``)."""
    from storqos.model.specs import check

    try:
        check({"kind": registry.default().kind}, fam.spec(capacity))
    except InputError as e:
        raise InputError(e.message, where) from None


__all__ = ["FAMILIES", "DeviceFamily", "device_family"]
