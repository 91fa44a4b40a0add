"""Measure a storage target with fio and make its device profile (``storqos calibrate``).

The target is an NBD URI (fio's ``nbd`` engine, through libnbd), a regular file or a
block device (fio's ``libaio`` engine, ``O_DIRECT`` unless asked for the page cache).
Each point is one short fio run: every class of request (read / write, random /
sequential, each size) at queue depth 1, then 4 KiB random reads at each queue depth.
The fitted models are :mod:`storqos.device_profile`'s.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .device_profile import PERCENTILES, PROFILE_VERSION, DepthPoint, DeviceProfile, Op, Pattern, ServicePoint, fit
from .errors import InputError

#: Sizes measured by default (bytes).
DEFAULT_SIZES = (4096, 16384, 65536, 262144, 1048576)
#: Queue depths of the parallelism curve.
DEFAULT_DEPTHS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class Target:
    """What fio is pointed at."""

    text: str
    engine: str
    args: tuple[str, ...]

    @property
    def is_nbd(self) -> bool:
        return self.engine == "nbd"


def target(text: str, direct: bool) -> Target:
    """The fio arguments for ``text`` (an NBD URI, a file or a block device)."""
    if "://" in text:
        if not text.startswith(("nbd://", "nbds://", "nbd+unix://", "nbds+unix://")):
            raise InputError(f"not an NBD URI, file or block device: {text!r}", "TARGET")
        return Target(text, "nbd", ("--ioengine=nbd", f"--uri={text}"))
    path = Path(text)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{text}: no such file or device", "TARGET") from None
    if stat.S_ISREG(st.st_mode):
        if st.st_size < (64 << 20):
            raise InputError(f"{text}: {st.st_size:,} bytes; give a file of at least 64 MiB "
                             "(e.g. truncate -s 1G FILE, or write it full for real reads)", "TARGET")
        size = [f"--size={st.st_size}"]
    elif stat.S_ISBLK(st.st_mode):
        size = []
    else:
        raise InputError(f"{text}: not a regular file or a block device", "TARGET")
    return Target(text, "libaio", ("--ioengine=libaio", f"--filename={text}", f"--direct={int(direct)}", *size))


def _fio() -> str:
    exe = shutil.which("fio")
    if exe is None:
        raise InputError("fio is not installed (Debian: apt-get install fio)", "calibrate")
    return exe


def run_point(tgt: Target, op: str, pattern: str, size: int, qd: int, seconds: float, workdir: Path) -> dict[str, Any]:
    """One fio run; returns fio's statistics of the op (``read`` or ``write``)."""
    rw = {("read", "random"): "randread", ("read", "sequential"): "read",
          ("write", "random"): "randwrite", ("write", "sequential"): "write"}[(op, pattern)]
    out = workdir / "fio.json"
    cmd = [
        _fio(), "--name=calibrate", "--output-format=json", f"--output={out}", *tgt.args,
        f"--rw={rw}", f"--bs={size}", f"--iodepth={qd}", "--time_based", f"--runtime={max(round(seconds * 1000), 50)}ms",
        "--ramp_time=0.1s", "--lat_percentiles=1", "--randrepeat=0", "--norandommap",
        "--percentile_list=" + ":".join(f"{p:g}" for p in PERCENTILES),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir, timeout=max(60.0, 10 * seconds))
    text = out.read_text() if out.exists() else ""
    if proc.returncode != 0 or "{" not in text:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        why = next((ln for ln in lines if "error" in ln.lower() or "fail" in ln.lower()), lines[-1] if lines else "")
        hint = (" (O_DIRECT may be unsupported here: try --buffered)"
                if "Invalid argument" in why and not tgt.is_nbd else "")
        raise InputError(f"fio failed on {tgt.text} ({rw}, {size} B, depth {qd}): {why.strip()}{hint}", "calibrate")
    job = json.loads(text[text.index("{"):])["jobs"][0]
    if job.get("error"):
        raise InputError(f"fio failed on {tgt.text} ({rw}, {size} B): error {job['error']}", "calibrate")
    return dict(job[op])


def _service(op: Op, pattern: Pattern, size: int, st: dict[str, Any]) -> ServicePoint:
    lat = st["lat_ns"]
    pct = lat.get("percentile") or {}
    pts = sorted((float(k), v / 1e3) for k, v in pct.items())
    if not st.get("total_ios") or not pts:
        raise InputError(f"the target completed no {pattern} {op} of {size} B in the time given (raise --time)",
                         "calibrate")
    fixed: list[tuple[float, float]] = []
    for q, us in pts:  # fio's buckets can tie; keep the table rising
        fixed.append((q, max(us, fixed[-1][1] if fixed else 0.0, lat["min"] / 1e3)))
    return ServicePoint(op=op, pattern=pattern, size=size, iops=float(st["iops"]), mean_us=lat["mean"] / 1e3,
                        min_us=max(lat["min"] / 1e3, 1e-3), percentiles_us=fixed)


def calibrate(
    text: str,
    *,
    sizes: Sequence[int] = DEFAULT_SIZES,
    depths: Sequence[int] = DEFAULT_DEPTHS,
    writes: bool = False,
    direct: bool = True,
    seconds: float = 1.0,
    progress: Callable[[int, int, str], None] | None = None,
) -> DeviceProfile:
    """Measure ``text`` and return its profile. Writes are measured only with
    ``writes`` (they overwrite the target's data); without, the profile has reads only
    and the simulator serves writes with read times."""
    from . import __version__

    tgt = target(text, direct)
    if not sizes or any(s <= 0 or s % 512 for s in sizes):
        raise InputError(f"sizes must be positive multiples of 512 bytes, got {list(sizes)}", "--sizes")
    if not depths or any(d < 1 or d > 1024 for d in depths):
        raise InputError(f"queue depths must be in 1..1024, got {list(depths)}", "--queue-depths")
    ops: tuple[Op, ...] = ("read", "write") if writes else ("read",)
    pats: tuple[Pattern, ...] = ("random", "sequential")
    plan = [(op, pat, s) for op in ops for pat in pats for s in sorted(set(sizes))]
    qds = sorted(set(depths))
    total = len(plan) + len(qds)
    service: list[ServicePoint] = []
    curve: list[DepthPoint] = []
    with tempfile.TemporaryDirectory(prefix="storqos-calibrate-") as tmp:
        work = Path(tmp)
        for i, (op, pat, s) in enumerate(plan):
            if progress:
                progress(i, total, f"{pat} {op} {s // 1024} KiB")
            service.append(_service(op, pat, s, run_point(tgt, op, pat, s, 1, seconds, work)))
        for j, qd in enumerate(qds):
            if progress:
                progress(len(plan) + j, total, f"4 KiB random read, depth {qd}")
            st = run_point(tgt, "read", "random", 4096, qd, seconds, work)
            pt = _service("read", "random", 4096, st)
            p = dict(pt.percentiles_us)
            curve.append(DepthPoint(qd=qd, iops=pt.iops, mean_us=pt.mean_us, p50_us=p.get(50.0, pt.mean_us),
                                    p99_us=p.get(99.0, pt.mean_us)))
        if progress:
            progress(total, total, "done")
    return DeviceProfile(
        version=PROFILE_VERSION, storqos_version=__version__, target=text, engine=tgt.engine,
        direct=direct if not tgt.is_nbd else False,
        created=dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat(),
        time_per_point_s=seconds, service=service, queue_depth=curve, **fit(service, curve),
    )


__all__ = ["DEFAULT_DEPTHS", "DEFAULT_SIZES", "Target", "calibrate", "run_point", "target"]
