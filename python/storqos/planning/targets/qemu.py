"""QEMU's I/O throttling in QEMU's own syntax, from a ``qemu_throttle`` spec (the core's
model of ``util/throttle.c`` and ``block/throttle-groups.c``): the throttle-group objects
and throttle filter nodes of ``qemu-storage-daemon`` (and ``qemu-system-*``), the QMP
``block_set_io_throttle`` commands that set the same limits on a running VM's drives,
and libvirt's ``<iotune>`` elements.

The spec's limits are per tenant, or per throttle group when ``groups`` is given; each
tenant is one drive. QEMU takes whole numbers for every limit (QAPI's ``int``)."""

from __future__ import annotations

import math
from typing import Any

from storqos.base.errors import InputError

#: The spec's limit keys and QEMU's names for them: the throttle-group object's
#: ``limits.*`` properties, QMP ``block_set_io_throttle``'s arguments and libvirt's
#: ``<iotune>`` elements.
LIMITS: tuple[tuple[str, str, str, str], ...] = (
    # spec key,  throttle-group,  QMP,       libvirt
    ("iops", "iops-total", "iops", "total_iops_sec"),
    ("read_iops", "iops-read", "iops_rd", "read_iops_sec"),
    ("write_iops", "iops-write", "iops_wr", "write_iops_sec"),
    ("bps", "bps-total", "bps", "total_bytes_sec"),
    ("read_bps", "bps-read", "bps_rd", "read_bytes_sec"),
    ("write_bps", "bps-write", "bps_wr", "write_bytes_sec"),
)


def _whole(value: float, what: str) -> int:
    if not (math.isfinite(value) and value == int(value) and value >= 0):
        raise InputError(f"{what} is {value:g}; QEMU takes a whole number", what)
    return int(value)


def _entry(spec: dict[str, Any], key: str, i: int) -> Any:
    values = spec.get(key) or []
    return values[i] if i < len(values) else None


def group_of(spec: dict[str, Any], tenants: int) -> list[int]:
    """Each tenant's throttle group: the spec's ``groups``, else each its own."""
    groups = list(spec.get("groups") or [])
    if not groups:
        return list(range(tenants))
    if len(groups) < tenants:
        raise InputError(f"groups gives {len(groups)} tenant(s) of {tenants}; give each tenant its group", "--groups")
    return [int(g) for g in groups[:tenants]]


def limits(spec: dict[str, Any], state: int) -> dict[str, int]:
    """The throttle state ``state``'s (a tenant's, or a group's) limits under
    throttle-group property names (``iops-total``, ``iops-total-max``,
    ``iops-total-max-length``, ``iops-size``), only those set."""
    out: dict[str, int] = {}
    seconds = _entry(spec, "burst_seconds", state)
    for key, name, _, _ in LIMITS:
        avg, burst = _entry(spec, key, state), _entry(spec, f"{key}_burst", state)
        if avg is not None:
            out[name] = _whole(avg, f"{key} of {state}")
        if burst is not None:
            out[f"{name}-max"] = _whole(burst, f"{key}_burst of {state}")
            if seconds is not None:
                out[f"{name}-max-length"] = int(seconds)
    size = _entry(spec, "iops_size", state)
    if size is not None:
        out["iops-size"] = int(size)
    return out


def daemon_args(spec: dict[str, Any], backing: list[list[str]], exports: list[str], *,
                socket: str | None = None, address: tuple[str, int] | None = None,
                max_connections: int | None = None) -> list[str]:
    """``qemu-storage-daemon``'s arguments: per throttle state a ``throttle-group``
    object ``tgN`` with its limits, per tenant the ``--blockdev`` options of its own
    ``backing`` node (named ``dataN``), a throttle filter node ``thrN`` over it in its
    group, and an NBD export of that node named ``exports[N]``, on a Unix ``socket`` or
    an inet ``address``, taking ``max_connections`` clients at once (QEMU 10's default:
    100)."""
    tenants = len(exports)
    groups = group_of(spec, tenants)
    args: list[str] = []
    for g in sorted(set(groups)):
        props = ",".join(f"limits.{k}={v}" for k, v in limits(spec, g).items())
        args += ["--object", f"throttle-group,id=tg{g}" + (f",{props}" if props else "")]
    for i in range(tenants):
        args += ["--blockdev", ",".join([*backing[i], f"node-name=data{i}"])]
        args += ["--blockdev", f"driver=throttle,node-name=thr{i},throttle-group=tg{groups[i]},file=data{i}"]
    most = "" if max_connections is None else f",max-connections={max_connections}"
    if socket is not None:
        args += ["--nbd-server", f"addr.type=unix,addr.path={socket}{most}"]
    elif address is not None:
        args += ["--nbd-server", f"addr.type=inet,addr.host={address[0]},addr.port={address[1]}{most}"]
    for i, name in enumerate(exports):
        args += ["--export", f"type=nbd,id=export{i},node-name=thr{i},name={name},writable=on"]
    return args


def qmp_commands(spec: dict[str, Any], devices: list[str]) -> list[dict[str, Any]]:
    """QMP ``block_set_io_throttle`` for each drive (by its qdev id in ``devices``, in
    tenant order): every limit QMP takes (those unset 0, as QMP needs), the bursts, and
    the drive's group where the spec has groups."""
    groups = group_of(spec, len(devices))
    out: list[dict[str, Any]] = []
    for i, dev in enumerate(devices):
        set_ = limits(spec, groups[i])
        arguments: dict[str, Any] = {"id": dev}
        for _, name, qmp, _ in LIMITS:
            arguments[qmp] = set_.get(name, 0)
        for _, name, qmp, _ in LIMITS:
            if f"{name}-max" in set_:
                arguments[f"{qmp}_max"] = set_[f"{name}-max"]
            if f"{name}-max-length" in set_:
                arguments[f"{qmp}_max_length"] = set_[f"{name}-max-length"]
        if "iops-size" in set_:
            arguments["iops_size"] = set_["iops-size"]
        if spec.get("groups"):
            arguments["group"] = f"tg{groups[i]}"
        out.append({"execute": "block_set_io_throttle", "arguments": arguments})
    return out


def libvirt_iotune(spec: dict[str, Any], tenants: int) -> list[str]:
    """libvirt's ``<iotune>`` element for each tenant's ``<disk>``, in tenant order."""
    groups = group_of(spec, tenants)
    out: list[str] = []
    for i in range(tenants):
        set_ = limits(spec, groups[i])
        lines = []
        for _, name, _, lv in LIMITS:
            for suffix, lsuffix in (("", ""), ("-max", "_max"), ("-max-length", "_max_length")):
                if name + suffix in set_:
                    lines.append(f"  <{lv}{lsuffix}>{set_[name + suffix]}</{lv}{lsuffix}>")
        if "iops-size" in set_:
            lines.append(f"  <size_iops_sec>{set_['iops-size']}</size_iops_sec>")
        if spec.get("groups"):
            lines.append(f"  <group_name>tg{groups[i]}</group_name>")
        out.append("<iotune>\n" + "\n".join(lines) + "\n</iotune>")
    return out


__all__ = ["LIMITS", "daemon_args", "group_of", "libvirt_iotune", "limits", "qmp_commands"]
