"""The gateway's control socket from Python: one JSON command per line, one JSON reply
(the protocol of ``crates/storqos-gateway/src/control.rs``; ``storqos ctl`` speaks it)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from .errors import InputError

#: Seconds to wait for a reply (a policy change waits for the backend to empty).
TIMEOUT_S = 40.0


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
