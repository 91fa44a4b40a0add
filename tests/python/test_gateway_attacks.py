"""One client must never freeze the other tenants: each attack of
``benches/gateway_attacks.py`` against one tenant while a real client (libnbd, 4 KiB
random reads at queue depth 1, a new connection every 0.2-0.5 s) of another tenant
runs. For each: the victim is never refused and never waits past its 5 s timeout, its
p99 under attack stays within a generous bound of its p99 alone (the benchmark quotes
the real ratio), and the gateway closes the attacker's connections within the
deadline it documents (here shortened to 2 s, so that the file runs in about a
minute; the benchmark runs the defaults).

Before these limits, every one of these attacks made the victim's requests or its
connections fail (BENCHMARKS.md, "One client against the other tenants")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "benches"))
from gateway_attacks import (  # noqa: E402  (the benchmark's attackers, victim and measure)
    PartialHeader,
    ProtocolErrors,
    Reopening,
    Result,
    SlowBody,
    UnreadReplies,
    measure,
    raise_open_files,
)

pytest.importorskip("nbd", reason="libnbd's Python binding (python3-libnbd) is the victim")

#: Each victim run (alone, then under attack), seconds.
SECONDS = 1.0
#: The shortened deadline for the attacks that hold connections (s).
DEADLINE_S = 2.0
#: How much later than its deadline the attacker may be seen closed: the deadline runs
#: from the attacker's last byte, which comes before the attack counts as in place, and
#: the sockets are looked at every 50 ms.
CLOSE_MARGIN_S = 3.0


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    raise_open_files()
    return tmp_path_factory.mktemp("attacks")


def victim_fine(r: Result) -> None:
    """The victim was never refused nor timed out, and its p99 under attack is within
    10× its p99 alone (or 5 ms: a p99 of tens of µs moves by a millisecond on a busy
    2-CPU machine without any attack; an attack that worked made requests wait for
    seconds or fail)."""
    assert r.under.errors == [], r.under.errors[:5]
    assert r.alone.errors == [], r.alone.errors[:5]
    assert r.under.ops > 100 and r.under.connects >= 2, r.under
    assert r.under.p99_us <= max(10 * r.alone.p99_us, 5_000), (r.alone, r.under)


def closed_in_time(r: Result, deadline_s: float) -> None:
    assert r.held > 0, "the gateway took none of the attacker's connections"
    assert r.closed_after_s is not None, f"{r.held} attacker connections still open after the wait"
    assert r.closed_after_s <= deadline_s + CLOSE_MARGIN_S, r.closed_after_s


def test_unread_replies_hold_only_the_attackers_share(workdir: Path) -> None:
    # 5 connections x 20,000 reads of 4 KiB (500 MiB charged) against a 128 MiB share.
    r = measure(workdir, UnreadReplies("unread-replies", ""), SECONDS, 15, {"reply_timeout_s": DEADLINE_S})
    victim_fine(r)
    closed_in_time(r, DEADLINE_S)
    assert f"took no reply for {DEADLINE_S:g} s" in r.log, r.log
    # The attacker's tenant holds at most its 128 MiB (and said so), never the victim's.
    assert "tenant 1's in-flight share of 128 MiB is spent" in r.log, r.log
    assert "tenant 0's" not in r.log
    assert r.rss_mib < 128 + 128, f"peak RSS {r.rss_mib:.0f} MiB"


def test_a_write_whose_payload_stops_is_charged_what_came_and_closed(workdir: Path) -> None:
    # 8 connections: a 32 MiB write's header and 1,000 bytes; it used to hold 256 MiB.
    r = measure(workdir, SlowBody("slow-body", ""), SECONDS, 15, {"request_timeout_s": DEADLINE_S})
    victim_fine(r)
    closed_in_time(r, DEADLINE_S)
    assert f"sent part of a request and nothing more for {DEADLINE_S:g} s" in r.log, r.log
    # 8 pieces of 64 KiB charged, not 8 x 32 MiB: the process stays small.
    assert r.rss_mib < 128, f"peak RSS {r.rss_mib:.0f} MiB"


def test_two_bytes_of_a_header_from_one_address_take_its_share_of_slots_only(workdir: Path) -> None:
    limits = {"max_connections_per_address": 16, "request_timeout_s": DEADLINE_S}
    attack = PartialHeader("partial-header", "", connections=40)
    r = measure(workdir, attack, SECONDS, 15, limits, reconnect_s=0.2)
    victim_fine(r)
    assert (attack.opened, attack.refused) == (16, 24)
    closed_in_time(r, DEADLINE_S)
    assert "address 127.0.0.2 has its limit of 16 connections" in r.log, r.log


def test_idle_connections_from_three_addresses_make_room_for_a_newcomer(workdir: Path) -> None:
    # 127.0.0.2-4 hold 16 idle connections each: the gateway (48) is full. The victim's
    # first connection takes the place of one of them, and the attacker's attempts to
    # get it back are refused (its address would no longer hold as many as the others);
    # the victim's later connections find the place its previous one gave back.
    limits = {"max_connections": 48, "max_connections_per_address": 16}
    attack = Reopening("idle-connections", "", connections=54, addresses=3, rate=200)
    r = measure(workdir, attack, SECONDS, 0, limits, reconnect_s=0.2)
    victim_fine(r)
    assert attack.opened >= 48 and attack.refused >= 6, attack.note()
    assert attack.closed_by_gateway >= 1, attack.note()
    assert "closed the newest idle connection of 127.0.0." in r.log, r.log
    assert "connection refused" in r.log, r.log


def test_slow_handshakes_are_limited_per_address(workdir: Path) -> None:
    # 100 connections from two addresses take the greeting and say nothing, reopened
    # when closed; each address may have 8 handshakes in progress.
    limits = {"max_handshakes_per_address": 8, "handshake_timeout_s": DEADLINE_S}
    attack = Reopening("slow-handshakes", "", connections=100, addresses=2, rate=200, negotiate=False)
    r = measure(workdir, attack, SECONDS, 0, limits, reconnect_s=0.2)
    victim_fine(r)
    assert "has 8 handshakes in progress, its limit" in r.log, r.log
    assert attack.closed_by_gateway >= 84, attack.note()


def test_a_flood_of_protocol_errors_refuses_no_other_client(workdir: Path) -> None:
    r = measure(workdir, ProtocolErrors("protocol-errors", "", rate=200), SECONDS, 0, reconnect_s=0.2)
    victim_fine(r)
    assert r.attack.opened > 50, r.attack.note()
