"""A small etcd v3 client over etcd's JSON gateway (``POST /v3/kv/range`` and the like,
keys and values base64, served by every etcd since 3.3 on its client port): what a
cluster of gateways needs of its control plane, keys under a prefix, leases, a
create-if-absent, nothing more. Each call is one HTTP request with a timeout; a failure
is an :class:`EtcdError` naming the endpoint."""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storqos.base.errors import InputError

#: Seconds an exchange with etcd may take.
TIMEOUT_S = 2.0

#: A cluster's name: what stands after the address in ``etcd://HOST:PORT/NAME``.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

#: Largest reply read from etcd (a range over a cluster's keys: 64 MiB).
MAX_REPLY_BYTES = 64 << 20


class EtcdError(InputError):
    """etcd could not be reached, or refused a request."""


@dataclass(frozen=True)
class ClusterUri:
    """``etcd://HOST:PORT/NAME``: where the cluster's control plane is, and its name."""

    endpoint: str
    name: str

    @property
    def prefix(self) -> str:
        """The keys of this cluster: ``/storqos/NAME/``."""
        return f"/storqos/{self.name}/"

    def __str__(self) -> str:
        return f"etcd://{self.endpoint.removeprefix('http://')}/{self.name}"


def parse_cluster_uri(text: str, where: str = "--cluster") -> ClusterUri:
    """``etcd://HOST:PORT/NAME`` parsed; anything else an :class:`InputError` at ``where``."""
    m = re.fullmatch(r"etcd://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})/(.*)", text)
    if not m:
        raise InputError(f"{text!r} is not etcd://HOST:PORT/NAME (e.g. etcd://127.0.0.1:2379/prod)", where)
    host, port, name = m.group(1), int(m.group(2)), m.group(3)
    if not 0 < port < 65536:
        raise InputError(f"port {port} is not 1-65535", where)
    if not NAME.fullmatch(name):
        raise InputError(f"cluster name {name!r}: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
                         where)
    return ClusterUri(f"http://{host}:{port}", name)


def _b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def _unb64(s: str) -> str:
    return base64.b64decode(s).decode()


def _prefix_end(prefix: str) -> str:
    """The end of the key range holding every key that starts with ``prefix``."""
    b = bytearray(prefix.encode())
    b[-1] += 1
    return b.decode()


class Etcd:
    """The etcd at ``endpoint`` (``http://HOST:PORT``)."""

    def __init__(self, endpoint: str, timeout_s: float = TIMEOUT_S) -> None:
        self.endpoint = endpoint
        self.timeout_s = timeout_s

    def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(self.endpoint + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        where = f"etcd at {self.endpoint}"
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                data = r.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as e:
            detail = e.read(4096).decode(errors="replace")
            try:
                detail = json.loads(detail).get("error", detail)
            except ValueError:
                pass
            raise EtcdError(f"{path} refused: HTTP {e.code} {str(detail).strip()[:200]}", where) from None
        except urllib.error.URLError as e:
            raise EtcdError(f"unreachable ({e.reason})", where) from None
        except (TimeoutError, OSError) as e:
            raise EtcdError(f"unreachable ({e})", where) from None
        if len(data) > MAX_REPLY_BYTES:
            raise EtcdError(f"{path}: a reply over {MAX_REPLY_BYTES >> 20} MiB", where)
        try:
            out: dict[str, Any] = json.loads(data)
        except ValueError:
            raise EtcdError(f"{path}: the reply is not JSON (is this etcd's client port?)", where) from None
        if "error" in out:
            raise EtcdError(f"{path} refused: {out['error']}", where)
        return out

    def put(self, key: str, value: str, lease: str | None = None) -> None:
        """Set ``key`` to ``value`` (bound to ``lease``: gone when the lease ends)."""
        body: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
        if lease:
            body["lease"] = lease
        self._call("/v3/kv/put", body)

    def get(self, key: str) -> str | None:
        """``key``'s value, or None."""
        kvs = self._call("/v3/kv/range", {"key": _b64(key)}).get("kvs", [])
        return _unb64(kvs[0].get("value", "")) if kvs else None

    def prefix(self, prefix: str) -> dict[str, str]:
        """Every key that starts with ``prefix`` (the prefix cut off) and its value."""
        kvs = self._call("/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(_prefix_end(prefix))}).get("kvs", [])
        return {_unb64(kv["key"])[len(prefix):]: _unb64(kv.get("value", "")) for kv in kvs}

    def delete(self, key: str) -> None:
        """Remove ``key``."""
        self._call("/v3/kv/deleterange", {"key": _b64(key)})

    def create(self, key: str, value: str, lease: str | None = None) -> str | None:
        """Set ``key`` to ``value`` if it does not exist (one transaction); None if it was
        set, else the value it holds."""
        put: dict[str, Any] = {"key": _b64(key), "value": _b64(value)}
        if lease:
            put["lease"] = lease
        out = self._call("/v3/kv/txn", {
            "compare": [{"key": _b64(key), "target": "CREATE", "create_revision": "0"}],
            "success": [{"request_put": put}],
            "failure": [{"request_range": {"key": _b64(key)}}]})
        if out.get("succeeded"):
            return None
        kvs = out.get("responses", [{}])[0].get("response_range", {}).get("kvs", [])
        return _unb64(kvs[0].get("value", "")) if kvs else ""

    def grant(self, ttl_s: int) -> str:
        """A new lease of ``ttl_s`` seconds; its id."""
        return str(self._call("/v3/lease/grant", {"TTL": ttl_s})["ID"])

    def keepalive(self, lease: str) -> bool:
        """Renew ``lease``; whether it was still alive."""
        out = self._call("/v3/lease/keepalive", {"ID": lease})
        return int(out.get("result", {}).get("TTL", 0)) > 0

    def revoke(self, lease: str) -> None:
        """End ``lease`` now (its keys go)."""
        self._call("/v3/lease/revoke", {"ID": lease})


class LocalEtcd:
    """A one-member etcd on loopback, its data in ``data_dir``, for trials, tests and
    benchmarks (``make etcd`` runs one in the foreground): Debian's ``etcd`` on free
    ports, with quick elections (10 ms heartbeats) so that a 1 s lease ends when its TTL
    says. Ready when constructed; :meth:`stop` kills it."""

    def __init__(self, data_dir: str | Path, timeout_s: float = 20.0) -> None:
        import shutil
        import subprocess

        exe = shutil.which("etcd")
        if exe is None:
            raise InputError("etcd is not installed (Debian's etcd-server; make test-setup installs it)", "etcd")
        self.port, peer = _free_port(), _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        peer_url = f"http://127.0.0.1:{peer}"
        self.process = subprocess.Popen(
            [exe, "--data-dir", str(Path(data_dir) / "etcd"), "--name", "local",
             "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
             "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
             "--initial-cluster", f"local={peer_url}", "--heartbeat-interval", "10", "--election-timeout", "100"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = Etcd(self.endpoint, timeout_s=1.0)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                client.get("/")
                return
            except EtcdError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise InputError(f"etcd did not start within {timeout_s:g} s", "etcd") from None
                time.sleep(0.05)

    def cluster(self, name: str) -> str:
        """``etcd://127.0.0.1:PORT/NAME``: cluster ``name`` on this etcd."""
        return f"etcd://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        """Kill it (as a crash would) and wait for it."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
