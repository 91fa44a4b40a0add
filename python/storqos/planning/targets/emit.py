"""A model's settings in its system's own syntax, ready to paste: what ``storqos advise
--target`` prints for the cheapest answer. Device numbers, pools and VM drive ids are
the site's: they appear as ``<MAJ:MIN>``, ``<pool>`` and ``drive-<tenant>``."""

from __future__ import annotations

import json
from typing import Any

from storqos.base.errors import InputError
from storqos.planning.targets import nbdkit, qemu

#: The systems ``--target`` takes.
TARGETS = ("qemu", "libvirt", "cgroup", "nbdkit", "spdk", "ceph", "rbd")


def _at(values: list[Any] | None, i: int) -> Any:
    return values[i] if values and i < len(values) else None


def _cgroup(spec: dict[str, Any], names: list[str]) -> list[str]:
    out: list[str] = []
    if spec["kind"] == "bfq":
        out.append("# the device's scheduler: echo bfq > /sys/block/<dev>/queue/scheduler")
        for i, name in enumerate(names):
            w = int(_at(spec.get("weights"), i) or 100)
            out.append(f"echo {w} > /sys/fs/cgroup/{name}/io.bfq.weight        # v2")
            out.append(f"echo {w} > /sys/fs/cgroup/blkio/{name}/blkio.bfq.weight  # v1")
        return out
    keys = (("read_iops", "riops", "read_iops_device"), ("write_iops", "wiops", "write_iops_device"),
            ("read_bps", "rbps", "read_bps_device"), ("write_bps", "wbps", "write_bps_device"))
    for i, name in enumerate(names):
        parts = [f"{v2}={int(_at(spec.get(k), i))}" for k, v2, _ in keys if _at(spec.get(k), i) is not None]
        if parts:
            out.append(f"echo '<MAJ:MIN> {' '.join(parts)}' > /sys/fs/cgroup/{name}/io.max  # v2")
        for k, _, v1 in keys:
            v = _at(spec.get(k), i)
            if v is not None:
                out.append(f"echo '<MAJ:MIN> {int(v)}' > /sys/fs/cgroup/blkio/{name}/blkio.throttle.{v1}  # v1")
    return out


def _spdk(spec: dict[str, Any], names: list[str]) -> list[str]:
    out = []
    for i, name in enumerate(names):
        params: dict[str, Any] = {"name": name}
        if _at(spec.get("iops"), i) is not None:
            params["rw_ios_per_sec"] = int(spec["iops"][i])
        for key, rpc in (("bps", "rw_mbytes_per_sec"), ("read_bps", "r_mbytes_per_sec"),
                         ("write_bps", "w_mbytes_per_sec")):
            if _at(spec.get(key), i) is not None:
                params[rpc] = int(spec[key][i]) >> 20
        out.append(json.dumps({"jsonrpc": "2.0", "method": "bdev_set_qos_limit", "id": i + 1, "params": params}))
    return out


def _ceph(spec: dict[str, Any]) -> list[str]:
    out = [f"ceph config set osd osd_mclock_profile {spec.get('profile', 'balanced')}"]
    if spec.get("profile") == "custom":
        for cls, prefix in (("client", "client"), ("recovery", "background_recovery"),
                            ("best_effort", "background_best_effort")):
            for suffix in ("res", "wgt", "lim"):
                v = spec.get(f"{cls}_{suffix}")
                if v is not None:
                    out.append(f"ceph config set osd osd_mclock_scheduler_{prefix}_{suffix} {v:g}")
    out.append(f"ceph config set osd osd_mclock_max_capacity_iops_ssd {spec['capacity_iops']:.0f}  # or _hdd")
    return out


def _rbd(spec: dict[str, Any], names: list[str]) -> list[str]:
    out = []
    keys = ("iops", "read_iops", "write_iops", "bps", "read_bps", "write_bps")
    for i, name in enumerate(names):
        for k in keys:
            for suffix in ("", "_burst"):
                v = _at(spec.get(k + suffix), i)
                if v is not None:
                    out.append(f"rbd config image set <pool>/{name} rbd_qos_{k}_{'limit' if not suffix else 'burst'}"
                               f" {int(v)}")
        seconds = _at(spec.get("burst_seconds"), i)
        if seconds is not None:
            for k in keys:
                if _at(spec.get(k + "_burst"), i) is not None:
                    out.append(f"rbd config image set <pool>/{name} rbd_qos_{k}_burst_seconds {int(seconds)}")
    return out


def settings(target: str, spec: dict[str, Any], names: list[str]) -> list[str]:
    """``spec`` (a model of ``target``'s QoS) in ``target``'s syntax, one line per command
    or element, for the tenants ``names``."""
    if target == "qemu":
        args = qemu.daemon_args(spec, [["driver=file", f"filename={n}.img"] for n in names], names,
                                address=("0.0.0.0", 10809))
        pairs = [f"  {args[i]} {args[i + 1]}" for i in range(0, len(args), 2)]  # each option with its value
        lines = ["qemu-storage-daemon \\", *(f"{p} \\" for p in pairs[:-1]), pairs[-1], ""]
        lines.append("# or, on a running VM (QMP):")
        lines += [json.dumps(c) for c in qemu.qmp_commands(spec, [f"drive-{n}" for n in names])]
        return lines
    if target == "libvirt":
        return [line for name, xml in zip(names, qemu.libvirt_iotune(spec, len(names)), strict=True)
                for line in [f"<!-- {name}'s <disk> -->", *xml.splitlines()]]
    if target == "cgroup":
        return _cgroup(spec, names)
    if target == "nbdkit":
        return [nbdkit.shell_line(spec, t, ["file", f"{name}.img"], 10809 + t) for t, name in enumerate(names)]
    if target == "spdk":
        return _spdk(spec, names)
    if target == "ceph":
        return _ceph(spec)
    if target == "rbd":
        return _rbd(spec, names)
    raise InputError(f"unknown system {target!r} (known: {', '.join(TARGETS)})", "--target")


__all__ = ["TARGETS", "settings"]
