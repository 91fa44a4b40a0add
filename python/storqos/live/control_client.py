"""The gateway's control socket from Python: one JSON command per line, one JSON reply
(the protocol of ``crates/storqos-gateway/src/control.rs``; ``storqos ctl`` speaks it)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from storqos.base.errors import InputError

#: Seconds to wait for a reply (a policy change waits for the backend to empty).
TIMEOUT_S = 40.0

#: The weights a gateway takes, both ends included (its ``control::WEIGHT_RANGE``; the
#: gateway refuses the others too): up to 10^9, the span of rates (a weight is often an
#: IOPS share), down to a thousandth. 1e308 and 5e-324 were taken and served 1 : 1.
WEIGHT_RANGE = (1e-3, 1e9)
#: The rates (IOPS) a gateway takes as a reservation or a limit (its
#: ``control::RATE_RANGE``): up to 10^9 (one request per ns), down to one request in
#: 1,000 s; a reservation may also be 0.
RATE_RANGE = (1e-3, 1e9)


def check_in_range(value: float, what: str, where: str) -> float:
    """``value`` if the gateway takes it as a tenant's ``what`` (``weight``,
    ``reservation``, ``limit``); else an :class:`InputError` at ``where`` giving the range."""
    lo, hi = WEIGHT_RANGE if what == "weight" else RATE_RANGE
    if (what == "reservation" and value == 0) or lo <= value <= hi:
        return value
    unit = "" if what == "weight" else " IOPS"
    none = " (or 0: none)" if what == "reservation" else ""
    raise InputError(f"{_short(value)} is outside the range taken, {_short(lo)} to {_short(hi)}{unit}{none}", where)


def _short(x: float) -> str:
    """``1e9``, ``1e308``, ``5e-324``, ``0.001``: a number as it is typed."""
    return f"{x:g}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")


def command(path: str | Path, cmd: dict[str, Any]) -> dict[str, Any]:
    """Send ``cmd`` to the gateway whose control socket is ``path``; its reply, or an
    :class:`InputError` naming the socket (no gateway there, or the command refused)."""
    where = str(path)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(TIMEOUT_S)
            s.connect(where)
            s.sendall(json.dumps(cmd).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except FileNotFoundError:
        raise InputError("no such socket (is `storqos serve --control` running with this path?)", where) from None
    except ConnectionRefusedError:
        raise InputError("no gateway listens there (it has stopped)", where) from None
    except PermissionError:
        raise InputError("permission denied (the socket is its owner's only, mode 0600)", where) from None
    except TimeoutError:
        raise InputError(f"no reply within {TIMEOUT_S:g} s", where) from None
    try:
        reply: dict[str, Any] = json.loads(data)
    except ValueError:
        raise InputError("the gateway's reply is not JSON", where) from None
    if not reply.get("ok"):
        raise InputError(str(reply.get("error", "refused")), where)
    return reply
