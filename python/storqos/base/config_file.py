"""Configuration files the user gives (experiment files, gateway configurations, device
profiles, advise problems, fio job files), read whole: a regular file of bounded size.

A FIFO, a character device or ``/proc/self/fd/0`` would otherwise be read until its end,
which ``/dev/zero`` never reaches (memory growing all the while), and a pipe no one
writes to kept the command waiting for ever.
"""

from __future__ import annotations

import stat
from pathlib import Path

from storqos.base.errors import InputError

#: Largest configuration file read: those written here are at most tens of KB (a device
#: profile, 30 KB).
MAX_CONFIG_BYTES = 16 << 20


def read_config_text(path: Path, kind: str) -> str:
    """The UTF-8 text of ``path``, a ``kind`` file (``"TOML"``, ``"fio job"``), or an
    :class:`InputError` naming it: not there, a directory, not a regular file, larger
    than :data:`MAX_CONFIG_BYTES`, not UTF-8."""
    where = str(path)
    try:
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"is a directory, expected a {kind} file", where)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"not a regular file, expected a {kind} file", where)
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise InputError("no such file", where) from None
    except PermissionError:
        raise InputError("permission denied", where) from None
    except OSError as e:
        raise InputError(f"cannot read it: {(e.strerror or type(e).__name__).lower()}", where) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise InputError(f"larger than {MAX_CONFIG_BYTES >> 20} MiB: not a {kind} file", where)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"not a {kind} text file: byte {e.start} is not UTF-8", where) from None
