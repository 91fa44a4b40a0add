"""nbdkit's rate filter in nbdkit's own syntax, from an ``nbdkit_rate`` spec (the core's
model of nbdkit's ``filters/rate``): one nbdkit per tenant's export, its ``rate`` in
bits per second (the spec's ``bps`` × 8) and the bucket's ``burstiness`` in seconds."""

from __future__ import annotations

import math
import shlex
from typing import Any

from storqos.base.errors import InputError


def rate_args(spec: dict[str, Any], tenant: int) -> list[str]:
    """The rate filter's parameters for ``tenant`` (none: no limit)."""
    bps = (spec.get("bps") or [])
    limit = bps[tenant] if tenant < len(bps) else None
    if limit is None:
        return []
    bits = limit * 8
    if not (math.isfinite(bits) and bits >= 1):
        raise InputError(f"bps of tenant {tenant} is {limit:g}; nbdkit's rate takes at least 1 bit/s", "--bps")
    args = [f"rate={int(round(bits))}"]
    if spec.get("burstiness") is not None:
        args.append(f"burstiness={spec['burstiness']:g}")
    return args


def command_line(spec: dict[str, Any], tenant: int, plugin: list[str], *, socket: str | None = None,
                 filters: tuple[str, ...] = ()) -> list[str]:
    """``nbdkit``'s arguments for ``tenant``'s export: the rate filter outermost (the
    first a request meets), then ``filters``, over ``plugin`` (its name and
    parameters)."""
    args = ["nbdkit", "--filter=rate", *(f"--filter={f}" for f in filters)]
    if spec.get("threads") is not None:
        args += ["--threads", str(int(spec["threads"]))]
    if socket is not None:
        args += ["--unix", socket]
    return [*args, *plugin, *rate_args(spec, tenant)]


def shell_line(spec: dict[str, Any], tenant: int, plugin: list[str], port: int) -> str:
    """``tenant``'s nbdkit command line, ready to paste, serving ``plugin`` on ``port``."""
    argv = command_line(spec, tenant, plugin)
    return shlex.join([argv[0], "--port", str(port), *argv[1:]])


__all__ = ["command_line", "rate_args", "shell_line"]
