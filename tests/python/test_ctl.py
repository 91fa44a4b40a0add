"""`storqos ctl`: the control socket of a running gateway, from the
command line: stats, a tenant's weight changed live (the Rust test
`weights_changed_live_move_the_shares_within_2_s_and_lose_nothing` measures the shares),
bad commands as one line and exit 2, and drain stopping the gateway by itself."""

from __future__ import annotations

import json
import re
import stat
import time
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from test_gateway_config import gw  # noqa: F401  (the example config beside its images)
from test_serve import Server, _image, _qemu_io


@pytest.mark.untimed
def test_ctl_stats_set_and_drain(gw: Path, tmp_path: Path) -> None:  # noqa: F811
    sock = tmp_path / "gw.sock"
    s = Server("--config", str(gw), "--listen", "127.0.0.1:0", "--control", str(sock))
    _, port = s.ready()
    try:
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
        assert _qemu_io(port, "web", "write 0 64k").returncode == 0
        r = run_cli("ctl", "stats", "--socket", str(sock), "--json")
        st = json.loads(r.out)
        assert r.code == 0 and st["policy"] == {"kind": "wf2q", "weights": [3.0, 1.0]}, r.out
        assert [t["ops"] for t in st["tenants"]] == [1, 0] and st["names"] == {"0": "web", "1": "batch"}
        r = run_cli("ctl", "set", "batch", "--weight", "5", "--slo", "20ms", "--socket", str(sock))
        assert r.code == 0 and "tenant 1: weight, slo changed; policy now wf2q+" in r.out, (r.out, r.err)
        st = json.loads(run_cli("ctl", "stats", "--socket", str(sock), "--json").out)
        assert st["policy"]["weights"] == [3.0, 5.0]
        assert_one_line_error(run_cli("ctl", "set", "nobody", "--weight", "2", "--socket", str(sock)),
                              f"{sock}: no tenant named \"nobody\" (known: web, batch)")
        assert_one_line_error(run_cli("ctl", "set", "web", "--limit", "1k", "--socket", str(sock)),
                              f"{sock}: wf2q takes no limits")
        for w in ("-1", "0", "inf", "nan", "1e400"):  # checked before it is sent
            assert_one_line_error(run_cli("ctl", "set", "web", "--weight", w, "--socket", str(sock)),
                                  "--weight: must be a finite number > 0")
        # The refused changes left the policy as it was.
        assert json.loads(run_cli("ctl", "stats", "--socket", str(sock), "--json").out)["policy"]["weights"] == [3.0, 5.0]
        r = run_cli("ctl", "drain", "--socket", str(sock))
        assert r.code == 0 and "draining: 0 connection(s) still open" in r.out, r.out
        t0 = time.monotonic()
        code = s.p.wait(timeout=10)
        assert code == 0 and time.monotonic() - t0 < 5
    finally:
        if s.p.poll() is None:
            s.p.kill()
    _, out, err = s.finish()
    assert "storqos serve: wf2q+" in out and "drained" in err, (out, err)
    assert not sock.exists()
    assert_one_line_error(run_cli("ctl", "stats", "--socket", str(sock)), f"{sock}: no such socket")


@pytest.mark.untimed
def test_a_policy_started_without_its_lists_takes_them_live(tmp_path: Path) -> None:
    """``serve --policy wf2q`` without --weights weighs every tenant 1; ``ctl set`` then
    gave "wf2q has no weights" and the weights could not be changed live. The list is
    written out (the others at 1) and the change applies; a tenant no export serves is
    refused, and so is a list the policy does not take."""
    sock = tmp_path / "gw.sock"
    a, b = _image(tmp_path / "a.img"), _image(tmp_path / "b.img")
    s = Server("-e", f"a={a}:0", "-e", f"b={b}:1", "--policy", "wf2q", "--listen", "127.0.0.1:0",
               "--control", str(sock))
    s.ready()
    try:
        def policy() -> dict:
            return json.loads(run_cli("ctl", "stats", "--socket", str(sock), "--json").out)["policy"]

        assert policy() == {"kind": "wf2q"}
        r = run_cli("ctl", "set", "1", "--weight", "3", "--socket", str(sock))
        assert r.code == 0 and "tenant 1: weight changed; policy now wf2q+" in r.out, (r.out, r.err)
        assert policy() == {"kind": "wf2q", "weights": [1.0, 3.0]}
        assert_one_line_error(run_cli("ctl", "set", "7", "--weight", "2", "--socket", str(sock)),
                              f"{sock}: tenant 7 is not served (tenants: 0, 1)")
        assert_one_line_error(run_cli("ctl", "set", "0", "--reservation", "100", "--socket", str(sock)),
                              f"{sock}: wf2q takes no reservations")
        # A whole policy's lists have one entry per tenant, as serve's (3 weights for 2
        # tenants were taken).
        assert_one_line_error(run_cli("ctl", "policy", "--policy", "wf2q", "--weights", "1,2,3", "--socket", str(sock)),
                              "--weights: 3 value(s) for 2 tenant(s)")
        assert policy() == {"kind": "wf2q", "weights": [1.0, 3.0]}
        r = run_cli("ctl", "policy", "--policy", "mclock", "--socket", str(sock))
        assert r.code == 0, r.err
        r = run_cli("ctl", "set", "1", "--reservation", "100", "--limit", "500", "--socket", str(sock))
        assert r.code == 0, r.err
        assert policy() == {"kind": "mclock", "reservations": [0.0, 100.0], "limits": [None, 500.0]}
    finally:
        s.p.kill()
        s.p.wait(timeout=10)


def test_sighup_reloads_the_config_file_and_a_bad_one_changes_nothing(gw: Path, tmp_path: Path) -> None:  # noqa: F811
    import signal

    sock = tmp_path / "gw.sock"
    s = Server("--config", str(gw), "--listen", "127.0.0.1:0", "--control", str(sock))
    s.ready()
    weights = lambda: json.loads(run_cli("ctl", "stats", "--socket", str(sock), "--json").out)["policy"]["weights"]  # noqa: E731
    try:
        text = gw.read_text()
        gw.write_text(text.replace("weight = 1\n", "weight = 2\n", 1))
        s.p.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while weights() != [3.0, 2.0]:
            assert time.monotonic() < deadline, weights()
            time.sleep(0.1)
        # Each reload is waited for by the line it ends with: two SIGHUPs before the first
        # is handled would be one reload, of the second file.
        gw.write_text(text.replace('iops = "2k"', 'iops = "3k"', 1))  # cannot change while serving
        s.p.send_signal(signal.SIGHUP)
        s.said("reload failed: ")
        gw.write_text(text.replace("weight = 3", "wieght = 3", 1))  # does not check
        s.p.send_signal(signal.SIGHUP)
        s.said("reload failed: ", count=2)
        assert weights() == [3.0, 2.0] and s.p.poll() is None
    finally:
        code, _out, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    assert "SIGHUP: configuration reloaded (policy wf2q+)" in err
    assert "reload failed: iops cannot change while serving (restart for that); nothing changed" in err
    assert re.search(r"reload failed: .*gw\.toml:\d+: \[\[tenant\]\] 1 \(web\): unknown key 'wieght'", err), err


def test_exports_added_and_removed_live_with_ctl_and_sighup(gw: Path, tmp_path: Path) -> None:  # noqa: F811
    import signal

    sock = tmp_path / "gw.sock"
    extra = _image(tmp_path / "extra.img", 1 << 20)
    s = Server("--config", str(gw), "--listen", "127.0.0.1:0", "--control", str(sock))
    _, port = s.ready()
    try:
        r = run_cli("ctl", "add-export", "extra", str(extra), "--tenant", "batch", "--socket", str(sock))
        assert r.code == 0 and "export extra served (tenant 1)" in r.out, r.out + r.err
        q = _qemu_io(port, "extra", "write -P 0x6b 0 64k", "read -P 0x6b 0 64k")
        assert q.returncode == 0 and "Pattern verification failed" not in q.stdout, q.stdout + q.stderr
        assert_one_line_error(run_cli("ctl", "add-export", "extra", str(extra), "--socket", str(sock)),
                              "already served")
        assert_one_line_error(run_cli("ctl", "add-export", "x", str(tmp_path / "none.img"), "--socket", str(sock)),
                              "PATH", "no such file")
        r = run_cli("ctl", "remove-export", "extra", "--socket", str(sock))
        assert r.code == 0 and "export extra removed; 0 connection(s) still use it" in r.out, r.out + r.err
        assert _qemu_io(port, "extra", "read 0 4k").returncode != 0
        # A reload adds what the file adds (and removes what it drops).
        text = gw.read_text()
        gw.write_text(text + f'\n[[export]]\nname = "late"\npath = "{extra}"\ntenant = "web"\n')
        s.p.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 5
        while _qemu_io(port, "late", "read -P 0x6b 0 4k").returncode != 0:
            assert time.monotonic() < deadline, "the reloaded export is not served"
            time.sleep(0.1)
    finally:
        code, out, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    assert "SIGHUP: configuration reloaded" in err


@pytest.mark.untimed
def test_the_control_socket_never_replaces_a_file_that_is_not_a_socket(tmp_path: Path) -> None:
    """`--control PATH` removed whatever PATH named to put its socket there (a config
    file given by mistake, or /dev/zero); only a stale socket is replaced now."""
    img = _image(tmp_path / "a.img")
    keep = tmp_path / "gw.toml"
    keep.write_text("# the operator's config\n")
    assert_one_line_error(run_cli("serve", "--export", f"a={img}", "--control", str(keep), "--for", "1s"),
                          f"control: cannot create the socket {keep}: a file that is not a socket is there")
    assert keep.read_text() == "# the operator's config\n"


@pytest.mark.untimed
def test_weights_reservations_and_limits_outside_their_range_are_refused(tmp_path: Path) -> None:
    """`ctl set` took weights of 1e308 or 5e-324 (which then served the tenants 1 : 1):
    outside 0.001 to 1e9 (reservations and limits in IOPS: the same range, a reservation
    also 0) they are refused, by `storqos ctl` before it sends them and by the
    gateway's control socket for any client; the policy stays as it was."""
    from storqos.base.errors import InputError
    from storqos.live.control_client import RATE_RANGE, WEIGHT_RANGE, command

    sock = tmp_path / "gw.sock"
    a, b = _image(tmp_path / "a.img"), _image(tmp_path / "b.img")
    s = Server("-e", f"a={a}:0", "-e", f"b={b}:1", "--policy", "mclock", "--weights", "1,1", "--listen",
               "127.0.0.1:0", "--control", str(sock))
    s.ready()

    def policy() -> dict:
        return json.loads(run_cli("ctl", "stats", "--socket", str(sock), "--json").out)["policy"]

    try:
        for flag, value in (("--weight", "1e308"), ("--weight", "5e-324"), ("--weight", "0.0009"),
                            ("--reservation", "0.0001"), ("--limit", "0.0005")):
            assert_one_line_error(run_cli("ctl", "set", "1", flag, value, "--socket", str(sock)),
                                  f"{flag}: ", "is outside the range taken, 0.001 to 1e9")
        # The same values sent by another client: the gateway refuses them itself.
        for key, value in (("weight", 1e308), ("weight", 5e-324), ("reservation", 1e-4), ("limit", 2e9)):
            with pytest.raises(InputError, match=f"{key}: .* is outside the range taken, 0.001 to 1e9"):
                command(sock, {"cmd": "set", "tenant": 1, key: value})
        with pytest.raises(InputError, match=r"policy: weights\[1\]: 1e\+308 is outside the range taken"):
            command(sock, {"cmd": "policy", "spec": {"kind": "wf2q", "weights": [1, 1e308]}})
        assert policy() == {"kind": "mclock", "weights": [1.0, 1.0]}
        # Both ends of each range are taken, by both.
        assert (WEIGHT_RANGE, RATE_RANGE) == ((1e-3, 1e9), (1e-3, 1e9))
        for flag, value in (("--weight", "0.001"), ("--weight", "1e9"), ("--reservation", "0.001"),
                            ("--reservation", "0"), ("--limit", "1G")):
            r = run_cli("ctl", "set", "1", flag, value, "--socket", str(sock))
            assert r.code == 0, (flag, value, r.err)
        assert policy() == {"kind": "mclock", "weights": [1.0, 1e9], "reservations": [0.0, 0.0], "limits": [None, 1e9]}
        command(sock, {"cmd": "set", "tenant": 0, "weight": 1e-3, "limit": 1e-3})
        assert policy()["weights"] == [1e-3, 1e9] and policy()["limits"] == [1e-3, 1e9]
    finally:
        s.p.kill()
        s.p.wait(timeout=10)
