"""One gateway of a cluster whose tenants' promises are global: a tenant's reservation
and limit hold for its total service over every gateway that serves it, while each
gateway sees only its own part. Stock NBD clients carry nothing that says what a tenant
got elsewhere, so each window (500 ms by default) every member publishes what each of its
tenants asked of it, reads what the others published, and sets in its own mClock its
share of each tenant's global reservation, weight and limit, split by demand with the
rule of the cluster simulator's ``split`` coordination (:func:`storqos._core.split_share`:
1 % of an even share as a floor, the rest in proportion to demand), as bQueue and pShift
do: a tenant's weight at each gateway in proportion to what it asks there keeps the
cluster weighted-fair. The shares change in place (the control socket's ``shares``),
without the pause of a policy change.

The control plane is etcd (:mod:`storqos.live.etcd`); under ``/storqos/NAME/``:

- ``tenants/T``: tenant T's global promises, ``{"reservation", "limit", "weight"}`` (IOPS;
  ``limit`` null: none), seeded by the first gateway whose configuration gives them, then
  changed by ``storqos ctl set --cluster``;
- ``members/ID``: each gateway under its lease: its address, tenants, last window's
  demand and the time it was written;
- ``exports/NAME``: which gateway serves each export, under that gateway's lease.

Windows are aligned to the wall clock (the members' clocks are assumed in step, as NTP
keeps them, to well within a window). A gateway that stops revokes its lease; one that
dies loses it within its TTL, and the others stop counting it once its record is
:data:`STALE_WINDOWS` windows old, whichever comes first, so its shares go to them
within 2 s. A gateway that loses etcd keeps
serving with its last shares, logs it once and counts it (``storqos_cluster_etcd_up``,
``storqos_cluster_etcd_failures_total``); when etcd is back, it takes up its lease or a
new one and claims its exports again.
"""

from __future__ import annotations

import json
import math
import os
import socket as socket_mod
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from storqos import _core
from storqos.base.errors import InputError
from storqos.live.control_client import command
from storqos.live.etcd import ClusterUri, Etcd, EtcdError

#: Allocation window when none is given (seconds).
DEFAULT_WINDOW_S = 0.5
#: A member whose record is this many windows old no longer counts in the split.
STALE_WINDOWS = 3
#: Lease of a member's keys (seconds; etcd's smallest whole TTL).
LEASE_TTL_S = 1
#: The parameters of a tenant's global promises.
SPEC_KEYS = ("reservation", "limit", "weight")


@dataclass
class Promise:
    """A tenant's global reservation and limit (IOPS; limit None: none) and weight."""

    reservation: float = 0.0
    limit: float | None = None
    weight: float = 1.0

    @classmethod
    def parse(cls, text: str, where: str) -> Promise:
        """A promise as etcd holds it (JSON); a wrong one an :class:`InputError`."""
        try:
            d = json.loads(text)
            if not isinstance(d, dict) or set(d) - set(SPEC_KEYS):
                raise ValueError
            p = cls(float(d.get("reservation", 0.0)), None if d.get("limit") is None else float(d["limit"]),
                    float(d.get("weight", 1.0)))
        except (ValueError, TypeError):
            raise InputError(f"not a tenant's promises {{{', '.join(SPEC_KEYS)}}}: {text[:120]!r}", where) from None
        return p.check(where)

    def check(self, where: str) -> Promise:
        """Itself if its numbers make sense, else an :class:`InputError` at ``where``."""
        for what, v in (("reservation", self.reservation), ("limit", self.limit), ("weight", self.weight)):
            if v is not None and not (math.isfinite(v) and v >= 0 and (v > 0 or what == "reservation")):
                raise InputError(f"{what} {v:g} must be a finite number > 0 (a reservation may be 0)", where)
        if self.limit is not None and self.reservation > self.limit:
            raise InputError(f"reservation {self.reservation:g} IOPS exceeds the limit {self.limit:g} IOPS", where)
        return self

    def json(self) -> str:
        return json.dumps({"reservation": self.reservation, "limit": self.limit, "weight": self.weight})


def local_promises(cfg: dict[str, Any]) -> dict[int, Promise]:
    """The promises a gateway configuration gives its tenants (its mClock lists), by
    tenant id; none if it gives no reservation, limit or weight list."""
    policy = cfg.get("policy") or {}
    lists = {k: policy.get(k) for k in ("reservations", "limits", "weights")}
    if all(v is None for v in lists.values()):
        return {}
    def at(key: str, t: int, default: Any) -> Any:
        v = lists[key]
        return v[t] if v is not None and t < len(v) else default

    return {t: Promise(float(at("reservations", t, 0.0)), at("limits", t, None), float(at("weights", t, 1.0)))
            for t in sorted({int(e["tenant"]) for e in cfg["exports"]})}


def default_member_id(listen: str) -> str:
    """``HOST/ADDRESS`` for a gateway listening at ``listen``; with port 0 (picked at
    start) its process id stands in for the port."""
    host = socket_mod.gethostname()
    return f"{host}/pid{os.getpid()}" if listen.endswith(":0") else f"{host}/{listen}"


@dataclass
class MemberState:
    """What the member last saw of its control plane (reported to the gateway's metrics)."""

    etcd_up: bool = True
    members: int = 1
    etcd_failures: int = 0
    conflicts: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"etcd_up": self.etcd_up, "members": self.members, "etcd_failures": self.etcd_failures,
                "conflicts": self.conflicts}


@dataclass
class ClusterMember:
    """A gateway's membership of cluster ``uri``: :meth:`join` before it serves (any
    conflict is an :class:`InputError`, exit 2), :meth:`start` once it listens,
    :meth:`stop` when it ends."""

    uri: ClusterUri
    cfg: dict[str, Any]
    member_id: str
    window_s: float = DEFAULT_WINDOW_S
    log: Any = field(default=None, repr=False)
    state: MemberState = field(default_factory=MemberState)
    #: tenant id -> its name in the cluster (a configuration's name, else the id)
    names: dict[int, str] = field(default_factory=dict)
    lease: str | None = None
    listen: str = ""
    #: the shares set last, by tenant id: (reservation, weight, limit)
    shares: dict[int, tuple[float, float, float | None]] = field(default_factory=dict)
    _etcd: Etcd = field(init=False, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _arrived: dict[int, int] = field(default_factory=dict, repr=False)
    #: Tenants whose clients send dmClock reports to this gateway (given their whole promise).
    _reported: set[int] = field(default_factory=set, repr=False)
    _demand: dict[str, float] = field(default_factory=dict, repr=False)
    #: the window whose start the last record was published at (wall clock / window)
    epoch: int = 0

    def __post_init__(self) -> None:
        self._etcd = Etcd(self.uri.endpoint)
        given = {int(k): str(v) for k, v in (self.cfg.get("tenant_names") or {}).items()}
        self.names = {int(e["tenant"]): given.get(int(e["tenant"]), str(e["tenant"])) for e in self.cfg["exports"]}
        if self.log is None:
            self.log = lambda line: (sys.stderr.write(line + "\n"), sys.stderr.flush())

    def key(self, *parts: str) -> str:
        return self.uri.prefix + "/".join(parts)

    # -- at the start --------------------------------------------------------------------

    def join(self) -> None:
        """Check the configuration against the cluster and claim this gateway's place:
        its id, its exports, its tenants' promises (seeded where the cluster has none).
        A conflict undoes the claims made and is an :class:`InputError` at ``--cluster``."""
        where = f"--cluster {self.uri}"
        kind = (self.cfg.get("policy") or {}).get("kind")
        if kind != "mclock":
            raise InputError(f"a cluster's gateways run mclock (their shares of each tenant's reservation and limit); "
                             f"this one is configured with {kind}", where)
        self.lease = self._etcd.grant(LEASE_TTL_S)
        self.epoch = math.floor(time.time() / self.window_s)
        try:
            self._claim(where)
            self._promises(where)
        except BaseException:
            self._leave()
            raise

    def _claim(self, where: str) -> None:
        held = self._etcd.create(self.key("members", self.member_id), self._record(), self.lease)
        if held is not None:
            raise InputError(f"gateway id {self.member_id!r} is already a live member (another gateway uses it: "
                             f"give each one its own --cluster-id)", where)
        for e in self.cfg["exports"]:
            owner = self._etcd.create(self.key("exports", e["name"]), self.member_id, self.lease)
            if owner is not None and owner != self.member_id:
                raise InputError(f"export {e['name']!r} is already served by gateway {owner!r} of cluster "
                                 f"{self.uri.name} (export names are the cluster's: give this one another)", where)

    def _promises(self, where: str) -> None:
        mine = local_promises(self.cfg)
        for t, name in sorted(self.names.items()):
            key = self.key("tenants", name)
            text = self._etcd.get(key)
            if text is None:
                if t in mine:
                    self._etcd.create(key, mine[t].json())
                continue
            theirs = Promise.parse(text, f"{where}: tenant {name}")
            if t in mine and mine[t] != theirs:
                raise InputError(f"tenant {name}: the configuration promises {_words(mine[t])}, the cluster "
                                 f"{_words(theirs)} (change the cluster's with storqos ctl set --cluster, or "
                                 f"drop the lists from this configuration)", where)

    def _record(self) -> str:
        return json.dumps({"listen": self.listen, "tenants": sorted(self.names.values()), "demand": self._demand,
                           "epoch": self.epoch, "window_s": self.window_s})

    # -- while serving -------------------------------------------------------------------

    def start(self, control: Path | str, listen: str) -> None:
        """Run the allocator every window in a thread, through the control socket
        ``control`` of the gateway that listens at ``listen``."""
        self.listen = listen
        self._thread = threading.Thread(target=self._run, args=(str(control),), name="storqos-cluster", daemon=True)
        self._thread.start()

    def _run(self, control: str) -> None:
        # Windows are aligned to the wall clock, so that every member measures its demand
        # over the same intervals: at each window's start a member publishes what it saw
        # in the last one; half a window later, once every member has, each reads them
        # all and sets its shares from the same figures (so the shares sum to the total).
        w = self.window_s
        epoch = math.floor(time.time() / w) + 1
        while not self._stop.is_set():
            for phase in (0.0, 0.5):
                if self._stop.wait(max(0.0, (epoch + phase) * w - time.time())):
                    return
                try:
                    if phase == 0.0:
                        self.publish(control, epoch)
                    else:
                        self.allocate(control, epoch)
                except InputError as e:  # the gateway stopping under us, a refused share
                    if self._stop.is_set():
                        return
                    self.state.conflicts += 1
                    self.log(f"cluster {self.uri.name}: {e}")
            epoch = max(epoch + 1, math.floor(time.time() / w))

    def publish(self, control: str, epoch: int) -> None:
        """At window ``epoch``'s start: read the gateway's demand over the last window
        and publish it (renewing the lease; a new one, with the claims, if it ended)."""
        self._set(control, [])
        self.epoch = epoch
        self._etcd_call(lambda: self._publish())

    def allocate(self, control: str, epoch: int) -> None:
        """Half a window later: every member's demand of ``epoch`` read, this gateway's
        shares of each tenant's promises set (the last ones stand without etcd)."""
        got = self._etcd_call(lambda: self._read(epoch))
        if got is None:
            return
        specs, members = got
        self.state.members = len(members)
        shares = []
        for t, name in sorted(self.names.items()):
            text = specs.get(name)
            if text is None:
                continue
            try:
                p = Promise.parse(text, f"tenant {name}")
            except InputError as e:
                self.state.conflicts += 1
                self.log(f"cluster {self.uri.name}: {e}: its last shares stand")
                continue
            if t in self._reported:
                # Its clients report the service they get elsewhere (dmClock): this
                # gateway's mClock keeps its whole promise, and the reports its total.
                shares.append({"tenant": t, "reservation": p.reservation, "weight": p.weight, "limit": p.limit})
                continue
            serving = sorted({*(m for m, rec in members.items() if name in rec.get("tenants", ())), self.member_id})
            demand = [float(members[m].get("demand", {}).get(name, 0.0)) if m in members else 0.0 for m in serving]
            me = serving.index(self.member_id)
            r = _core.split_share(p.reservation, demand, me)
            w = _core.split_share(p.weight, demand, me)
            limit = None if p.limit is None else _core.split_share(p.limit, demand, me)
            shares.append({"tenant": t, "reservation": r, "weight": w, "limit": limit})
        self._set(control, shares)

    def _etcd_call(self, call: Any) -> Any:
        """``call()``; an :class:`EtcdError` counted and logged (once until etcd is
        back), None for it."""
        try:
            out = call()
        except EtcdError as e:
            self.state.etcd_failures += 1
            if self.state.etcd_up:
                self.log(f"cluster {self.uri.name}: lost etcd ({e}): serving with the last shares")
            self.state.etcd_up = False
            return None
        if not self.state.etcd_up:
            self.log(f"cluster {self.uri.name}: etcd is back")
        self.state.etcd_up = True
        return out

    def _publish(self) -> None:
        assert self.lease is not None
        if not self._etcd.keepalive(self.lease):
            self.lease = self._etcd.grant(LEASE_TTL_S)
            self.log(f"cluster {self.uri.name}: the lease had ended; joined again")
            for e in self.cfg["exports"]:
                owner = self._etcd.create(self.key("exports", e["name"]), self.member_id, self.lease)
                if owner is not None and owner != self.member_id:
                    self.state.conflicts += 1
                    self.log(f"cluster {self.uri.name}: export {e['name']!r} was claimed by {owner!r} meanwhile")
        self._etcd.put(self.key("members", self.member_id), self._record(), self.lease)

    def _read(self, epoch: int) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        """The promises, and the members that published within :data:`STALE_WINDOWS`
        windows of ``epoch``."""
        specs = self._etcd.prefix(self.key("tenants", ""))
        members: dict[str, dict[str, Any]] = {}
        for m, text in self._etcd.prefix(self.key("members", "")).items():
            try:
                rec = json.loads(text)
                if int(rec["epoch"]) > epoch - STALE_WINDOWS:
                    members[m] = rec
            except (ValueError, KeyError, TypeError):
                continue
        return specs, members

    def _set(self, control: str, shares: list[dict[str, Any]]) -> None:
        """Send ``shares`` (and the member's state) to the gateway; keep the demand each
        tenant brought since the last call (requests arrived, and those in the gateway)."""
        reply = command(control, {"cmd": "shares", "tenants": shares, "cluster": self.state.as_json()})
        for s in shares:
            self.shares[int(s["tenant"])] = (s["reservation"], s["weight"], s["limit"])
        if shares:
            return
        arrived = {int(k): int(v) for k, v in reply.get("arrived", {}).items()}
        inflight = {int(k): int(v) for k, v in reply.get("inflight", {}).items()}
        self._demand = {name: float(arrived.get(t, 0) - self._arrived.get(t, 0) + inflight.get(t, 0))
                        for t, name in self.names.items()}
        self._arrived = arrived
        self._reported = {int(t) for t in reply.get("reported", ())}

    # -- at the end ----------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the allocator and leave: the lease revoked, the claims go with it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._leave()

    def _leave(self) -> None:
        if self.lease is not None:
            try:
                self._etcd.revoke(self.lease)
            except EtcdError:
                pass  # gone with etcd, or ending by itself within its TTL
            self.lease = None


def _words(p: Promise) -> str:
    limit = "no limit" if p.limit is None else f"limit {p.limit:g} IOPS"
    return f"reservation {p.reservation:g} IOPS, {limit}, weight {p.weight:g}"
