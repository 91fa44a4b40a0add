"""URIs the user gives (NBD targets, Dask scheduler addresses), split with one-line
errors: Python's ``urllib`` raises a bare ``ValueError`` for an unclosed IPv6 bracket
or a port that is not a number from 0 to 65535."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from storqos.base.errors import InputError

#: The schemes of an NBD URI (the NBD URI specification; libnbd's ``nbd_connect_uri``).
NBD_SCHEMES = ("nbd", "nbds", "nbd+unix", "nbds+unix")

NBD_EXPECTED = "expected nbd://HOST:PORT/EXPORT or nbd+unix:///EXPORT?socket=PATH"


def split(text: str, where: str) -> SplitResult:
    """``urlsplit(text)`` with its host and port checked: an :class:`InputError` naming
    ``where`` for an unclosed ``[`` or a bad port instead of a ``ValueError``."""
    try:
        parts = urlsplit(text)
        _ = parts.port  # urllib checks the port only when asked for it
    except ValueError as e:
        raise InputError(f"malformed URI {text!r}: {e}", where) from None
    return parts


def split_nbd(text: str, where: str) -> SplitResult:
    """:func:`split` for an NBD URI: also an error when the scheme is not NBD's."""
    parts = split(text, where)
    if parts.scheme not in NBD_SCHEMES:
        raise InputError(f"not an NBD URI: {text!r} ({NBD_EXPECTED})", where)
    return parts
