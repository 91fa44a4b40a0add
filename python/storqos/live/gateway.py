"""The live NBD QoS gateway from Python: build its configuration and serve.

The gateway itself is Rust (``crates/storqos-gateway``): an NBD server that puts the
same scheduling policies the simulator runs (``storqos.model.specs.policy_spec``) in front
of real files, on a wall clock. Each export belongs to a tenant; all tenants share
one scheduler and ``depth`` backend slots.

``parse_export("web=/srv/web.img:3")`` gives ``{"name": "web", "path": "/srv/web.img",
"tenant": 3}`` (the file must exist); :func:`gateway_config` builds the whole document
and :func:`serve` runs it.
"""

from __future__ import annotations

import json
import re
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from storqos import _core
from storqos.base.core_json import core_json
from storqos.base.errors import InputError
from storqos.model.specs import check_tenant_lists

#: Default listen address (the IANA NBD port on loopback).
DEFAULT_LISTEN = "127.0.0.1:10809"
#: Default backend depth on a real device (I/Os outstanding at once).
DEFAULT_DEPTH = 8
#: How the gateway can read direct exports' files: on its I/O threads (the default),
#: or submitted through io_uring by its scheduler loop.
DIRECT_READS = ("threads", "io_uring")

_EXPORT = re.compile(r"(?P<name>[^=]+)=(?P<rest>.+)")


def parse_export(text: str, default_tenant: int = 0, where: str = "--export") -> dict[str, Any]:
    """``NAME=PATH[:TENANT]`` → an export entry; the path must be an existing file."""
    m = _EXPORT.fullmatch(text.strip())
    if not m or not m.group("name").strip():
        raise InputError(f"expected NAME=PATH[:TENANT], e.g. web=/srv/web.img:0, got {text!r}", where)
    name, path, tenant = m.group("name").strip(), m.group("rest"), default_tenant
    head, sep, tail = path.rpartition(":")
    if sep and tail.strip().isdigit():
        path, tenant = head, int(tail)
    elif sep and not Path(path).exists() and (tail.strip().lstrip("-").isdigit() or Path(head).is_file()):
        # PATH:TENANT with a tenant that is not an id (a name, -1): the file before it exists
        raise InputError(f"tenant must be an id, an integer >= 0, got {tail!r} in {text!r}"
                         " (tenant names are for config files' [[tenant]] tables)", where)
    p = Path(path)
    check_export_file(p, name, where)
    if tenant >= _core.MAX_TENANTS:
        raise InputError(f"tenant must be below {_core.MAX_TENANTS}, got {tenant} in {text!r}", where)
    return {"name": name, "path": str(p), "tenant": tenant}


def check_export_file(path: Path, name: str, where: str) -> None:
    """An export's backing file must exist and be a regular file."""
    if not path.exists():
        raise InputError(f"{path}: no such file (export {name!r}; create it first, e.g. truncate -s 1G {path})", where)
    if not path.is_file():
        raise InputError(f"{path}: not a regular file (export {name!r})", where)


def gateway_config(
    exports: Sequence[str | dict[str, Any]],
    policy: dict[str, Any],
    *,
    listen: str = DEFAULT_LISTEN,
    depth: int = DEFAULT_DEPTH,
    iops: float | None = None,
    duration_s: float | None = None,
    window_s: float | None = None,
    tenants: int | None = None,
    limits: dict[str, Any] | None = None,
    metrics: str | None = None,
    slos: dict[int, float] | None = None,
    control: str | None = None,
    tenant_names: dict[int, str] | None = None,
    tls: dict[str, Any] | None = None,
    cost: dict[str, Any] | None = None,
    tiers: dict[str, Any] | None = None,
    direct_reads: str | None = None,
) -> dict[str, Any]:
    """The gateway's JSON configuration. ``exports`` are ``NAME=PATH[:TENANT]`` strings
    (tenant defaults to the position in the list) or ready dicts; ``window_s`` asks for
    the per-window series and the policy's gauges (``windows``, ``gauges`` in the
    statistics); ``tenants`` counts tenants that may have no export (a config file's);
    ``limits`` is the gateway's ``limits`` object (connections, timeouts, in-flight bytes);
    ``metrics`` a ``HOST:PORT`` for Prometheus metrics; ``slos`` latency targets (s) by
    tenant for the SLO metrics; ``control`` the path of the control socket
    (``storqos ctl``); ``tenant_names`` the tenants' names by id, for it; ``tls`` the
    gateway's ``tls`` object (``mode`` off / on / require, ``cert``, ``key``,
    ``client_ca``); ``cost`` the backend's cost model (``enabled``, ``op_time_s``,
    ``bytes_per_s``); ``tiers`` the tiered exports' emulated devices (``fast``, ``slow``:
    ``iops``, ``depth``); ``direct_reads`` how direct exports' files are read (one of
    :data:`DIRECT_READS`; None: the gateway's default, the I/O threads)."""
    if not exports:
        raise InputError("give at least one export, e.g. --export web=/srv/web.img", "--export")
    ex = [e if isinstance(e, dict) else parse_export(e, default_tenant=i) for i, e in enumerate(exports)]
    if depth < 1:
        raise InputError(f"must be >= 1, got {depth}", "--depth")
    check_tenant_lists(policy, max(max(int(e["tenant"]) for e in ex) + 1, tenants or 0))
    cfg = {"listen": listen, "exports": ex, "policy": policy, "depth": int(depth), "iops": iops,
           "duration_s": duration_s, "window_s": window_s}
    if limits is not None:
        cfg["limits"] = limits
    if metrics is not None:
        cfg["metrics"] = metrics
    if slos:
        cfg["slos"] = {str(t): s for t, s in slos.items()}
    if control is not None:
        cfg["control"] = control
    if tenant_names:
        cfg["tenant_names"] = {str(t): n for t, n in tenant_names.items()}
    if tls is not None:
        cfg["tls"] = tls
    if cost is not None:
        cfg["cost"] = cost
    if tiers is not None:
        cfg["tiers"] = tiers
    if direct_reads is not None:
        cfg["direct_reads"] = direct_reads
    return cfg


def uri(info: _core.GatewayInfo, export: str | None = None) -> str:
    """The NBD URI a client opens for ``export`` of a gateway whose ready ``info`` this
    is (without ``export``: the server's): see :func:`nbd_uri`."""
    return nbd_uri(info.listen, info.tls, export)


def nbd_uri(listen: str, tls: str = "off", export: str | None = None) -> str:
    """The NBD URI of ``export`` on a gateway listening on ``listen`` with ``tls``
    (without ``export``: the server's): ``nbd://HOST:PORT/NAME``, ``nbds://`` with
    TLS, ``nbd+unix:///NAME?socket=PATH`` on a Unix socket."""
    scheme = "nbds" if tls != "off" else "nbd"
    name = export or ""
    if listen.startswith("unix:"):
        return f"{scheme}+unix:///{name}?socket={listen.removeprefix('unix:')}"
    return f"{scheme}://{listen}/{name}" if export is not None else f"{scheme}://{listen}"


def check(config: dict[str, Any]) -> _core.GatewayInfo:
    """Check ``config`` as :func:`serve` would before listening (fields, export files,
    policy); return what it would serve (``listen`` as given). Bad: :class:`InputError`."""
    return _core.check_gateway(core_json(config, "gateway"))


def serve(
    config: dict[str, Any],
    on_ready: Callable[[_core.GatewayInfo], None] | None = None,
    on_window: Callable[[list[_core.WindowRow], list[_core.GaugeRow]], None] | None = None,
    on_reload: Callable[[], dict[str, Any]] | None = None,
) -> _core.GatewayStats:
    """Serve until ``duration_s``, SIGTERM or Ctrl-C; return the statistics (per tenant
    in ``tenants``).

    ``on_ready(info)`` is called once the gateway listens (``info.listen`` is the
    bound address, useful with port 0); with a ``window_s``, ``on_window(rows, gauges)``
    gets the rows and gauge samples of each window as it closes (within 0.1 s; they are
    handed over, and the returned ``windows`` and ``gauges`` are then empty); on SIGHUP, ``on_reload()``
    gives the configuration to apply (the policy and the tenants' SLOs change live).
    Bad configuration raises :class:`InputError`.
    """
    reload = None if on_reload is None else (lambda: json.dumps(on_reload()))
    # Ctrl-C only records the signal while serving: the gateway stops at its next poll
    # (0.1 s) and the callbacks are never interrupted halfway (a window half written).
    stop = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda _signum, _frame: stop.set())
    try:
        return _core.serve(core_json(config, "gateway"), on_ready, on_window, reload, stop.is_set)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
