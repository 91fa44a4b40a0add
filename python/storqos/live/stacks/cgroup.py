"""Linux's blk-cgroup controllers on a loop device, for the live checks of the
``blk-throttle`` and ``bfq`` models: one cgroup v1 ``blkio`` group per tenant, with its
``blkio.throttle.*_device`` limits or its ``blkio.bfq.weight``, and each tenant's
requests issued from a thread inside its group (:func:`storqos.live.local_device.replay_device`),
so that the kernel charges them to it as it charges a container's.

The device is a loop device with direct I/O (``losetup --direct-io=on``) over a file
filled with data (holes would read as zeroes without touching anything), in ``/dev/shm``
where it can: a memory-backed device, out of the reach of the host's disk. Its scheduler
is BFQ for the ``bfq`` model and ``none`` otherwise (blk-throttle acts above any
scheduler); ``queue/rotational`` is set to the model's ``rotational`` (a loop device says
rotational by default, which changes BFQ's idling). The groups are made directly under
the ``blkio`` hierarchy's root and removed at the end, with the loop device and its file.

This needs root, the cgroup v1 ``blkio`` controller mounted at :data:`BLKIO_ROOT` (with
the throttle files, and BFQ's weight in child groups), ``losetup`` (util-linux) and loop
devices; :func:`require` says which is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import polars as pl

from storqos.base.errors import InputError
from storqos.live.local_device import replay_device

#: Where the cgroup v1 blkio hierarchy is mounted.
BLKIO_ROOT = Path("/sys/fs/cgroup/blkio")
#: The loop device's backing file (bytes): every request's offset wraps into it.
IMAGE_BYTES = 64 << 20
#: Requests in flight per tenant at most: more than a check ever has.
DEPTH = 4096
#: The model's throttle keys and the v1 files they set.
THROTTLE_FILES = {"read_iops": "blkio.throttle.read_iops_device", "write_iops": "blkio.throttle.write_iops_device",
                  "read_bps": "blkio.throttle.read_bps_device", "write_bps": "blkio.throttle.write_bps_device"}
#: The core kinds of the two models, and the one that runs under BFQ.
THROTTLE_KIND, BFQ_KIND = "blk_throttle", "bfq"


def require(*, kind: str | None = None) -> str:
    """``losetup``'s path, or an :class:`InputError` that says what is missing: root,
    the blkio controller, losetup, loop devices and, for the model of kind ``kind``
    BFQ's, the BFQ scheduler."""
    if os.geteuid() != 0:
        raise InputError("the blk-cgroup check makes cgroups and a loop device: run it as root", "cgroup")
    if not (BLKIO_ROOT / "blkio.throttle.read_iops_device").exists():
        raise InputError(f"no cgroup v1 blkio controller with throttling at {BLKIO_ROOT} (mount -t cgroup -o blkio "
                         f"blkio {BLKIO_ROOT}; the kernel needs CONFIG_BLK_DEV_THROTTLING)", "cgroup")
    losetup = shutil.which("losetup")
    if losetup is None:
        raise InputError("losetup is not installed (Debian: apt-get install util-linux)", "cgroup")
    if not Path("/dev/loop-control").exists():
        raise InputError("no loop devices (/dev/loop-control; modprobe loop)", "cgroup")
    if kind == BFQ_KIND:
        sched = Path("/sys/block/loop0/queue/scheduler")
        if sched.exists() and "bfq" not in sched.read_text():
            raise InputError("the kernel has no BFQ scheduler (CONFIG_IOSCHED_BFQ; modprobe bfq)", "cgroup")
    return losetup


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text + "\n")
    except OSError as e:
        raise InputError(f"the kernel refused {text!r} in {path}: {e.strerror}", "cgroup") from None


class CgroupDevice:
    """``with CgroupDevice(spec, tenants) as d: d.run(trace, warmup=False)`` — a loop
    device whose tenants each have a blkio cgroup set from ``spec`` (a ``blk_throttle``
    or ``bfq`` core spec; ``{}``: no limits, no scheduler)."""

    #: :func:`storqos.live.stacks.check.check` measures the device's service times under
    #: the trace's own load: spaced reads of a loop device take longer than loaded ones.
    probe_under_load = True

    @staticmethod
    def unlimited(spec: dict[str, Any]) -> dict[str, Any]:
        """The set-up of ``spec``'s system without its QoS, for the check's probe: no
        limits for blk-throttle; for BFQ, BFQ itself with equal weights and no idling
        (its path is the model's device's, its QoS is not)."""
        if spec.get("kind") != BFQ_KIND:
            return {}
        return {"kind": BFQ_KIND, "weights": [], "slice_idle_ns": 0,
                **{k: spec[k] for k in ("rotational", "low_latency") if k in spec}}

    def __init__(self, spec: dict[str, Any], tenants: int, *, image_bytes: int = IMAGE_BYTES) -> None:
        if tenants < 1:
            raise InputError("the trace has no tenants", "cgroup")
        kind = spec.get("kind")
        if kind not in (None, THROTTLE_KIND, BFQ_KIND):
            raise InputError(f"{kind!r} is no model of blk-cgroup (blk-throttle or bfq)", "cgroup")
        self.spec, self.tenants, self.image_bytes = spec, tenants, image_bytes
        self.kind = kind
        self.device: str | None = None
        self.groups: list[Path] = []
        self._file: Path | None = None

    @property
    def bfq(self) -> bool:
        """Whether the model is BFQ's (the loop device's scheduler is then BFQ)."""
        return self.kind == BFQ_KIND

    def __enter__(self) -> CgroupDevice:
        losetup = require(kind=self.kind)
        try:
            self._start(losetup)
        except BaseException:
            self._cleanup()
            raise
        return self

    def _start(self, losetup: str) -> None:
        shm = Path("/dev/shm")
        where = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
        fd, name = tempfile.mkstemp(prefix="storqos-loop-", suffix=".img", dir=where)
        self._file = Path(name)
        block = bytes(range(256)) * 4096  # 1 MiB of data: a hole would read as zeroes
        with os.fdopen(fd, "wb") as f:
            for _ in range(self.image_bytes // len(block)):
                f.write(block)
        done = subprocess.run([losetup, "--find", "--show", "--direct-io=on", name], capture_output=True,
                              text=True, timeout=20, check=False)
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise InputError(f"losetup could not make a loop device: {said}", "cgroup")
        self.device = done.stdout.strip()
        sysfs = Path("/sys/block") / Path(self.device).name
        if (sysfs / "loop" / "dio").read_text().strip() != "1":
            raise InputError(f"{self.device} refused direct I/O over {where} (the file system has no O_DIRECT)",
                             "cgroup")
        majmin = (sysfs / "dev").read_text().strip()
        _write(sysfs / "queue" / "rotational", "1" if self.spec.get("rotational") else "0")
        # A loop device outlives its detach: a BFQ left on it by an earlier run keeps
        # its tunables, so it is switched off first and BFQ starts at its defaults.
        _write(sysfs / "queue" / "scheduler", "none")
        if self.bfq:
            _write(sysfs / "queue" / "scheduler", "bfq")
            iosched = sysfs / "queue" / "iosched"
            if "slice_idle_ns" in self.spec:
                _write(iosched / "slice_idle_us", str(int(self.spec["slice_idle_ns"]) // 1000))
            if "low_latency" in self.spec:
                _write(iosched / "low_latency", "1" if self.spec["low_latency"] else "0")
        tag = f"storqos-{os.getpid()}-{time.monotonic_ns() % 1_000_000}"
        for t in range(self.tenants):
            group = BLKIO_ROOT / f"{tag}-t{t}"
            group.mkdir()
            self.groups.append(group)
            if self.bfq:
                weights = self.spec.get("weights") or []
                if not (group / "blkio.bfq.weight").exists():
                    raise InputError(f"{group} has no blkio.bfq.weight (the kernel lacks CONFIG_BFQ_GROUP_IOSCHED)",
                                     "cgroup")
                _write(group / "blkio.bfq.weight", str(int(weights[t] if t < len(weights) else 100)))
            for key, file in THROTTLE_FILES.items():
                values = self.spec.get(key) or []
                if t < len(values) and values[t] is not None:
                    _write(group / file, f"{majmin} {int(values[t])}")

    def run(self, trace: pl.DataFrame, *, warmup: bool) -> pl.DataFrame:
        """:meth:`storqos.live.stacks.check.Served.run` on the loop device, each tenant
        from its group (``warmup`` is not needed: there is no connection to open)."""
        assert self.device is not None, "run inside `with`"
        res = replay_device(trace, self.device, cgroups=[str(g) for g in self.groups], depth=DEPTH,
                            writes=True)
        if res.errors:
            raise InputError(f"{sum(res.errors.values())} request(s) failed on {self.device}: {res.first_error}",
                             "check")
        return res.requests

    def _cleanup(self) -> None:
        for group in self.groups:
            for _ in range(100):  # the io_uring workers of a tenant thread leave it a little after
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.groups = []
        if self.device is not None:
            subprocess.run(["losetup", "-d", self.device], capture_output=True, timeout=20, check=False)
            self.device = None
        if self._file is not None:
            self._file.unlink(missing_ok=True)
            self._file = None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._cleanup()


__all__ = ["BLKIO_ROOT", "CgroupDevice", "require"]
