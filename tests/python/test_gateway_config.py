"""`storqos serve --config gw.toml`: the gateway's config file is
typed and checked before anything starts, errors name the file, the line and the key,
`--check` only checks, and flags override the file."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO, assert_one_line_error, run_cli
from storqos.base.errors import InputError
from storqos.live.gateway_config import load, merged

EXAMPLE = REPO / "examples" / "gateway" / "gw.toml"
# Checks and one real client's bytes: nothing here measures time, so it runs with the
# parallel tests (conftest.LIVE_FILES).
pytestmark = pytest.mark.untimed


@pytest.fixture
def gw(tmp_path: Path) -> Path:
    """The example config beside its two (sparse) images."""
    shutil.copy(EXAMPLE, tmp_path / "gw.toml")
    for name in ("web.img", "batch.img"):
        with open(tmp_path / name, "wb") as f:
            f.truncate(16 << 20)
    return tmp_path / "gw.toml"


def test_the_example_config_checks_and_its_tenants_fill_the_policy(gw: Path) -> None:
    s = load(gw)
    cfg = merged(s)
    # [[tenant]] web (weight 3) is tenant 0, batch (weight 1) tenant 1; exports name them.
    assert cfg["policy"] == {"kind": "wf2q", "weights": [3.0, 1.0]}
    assert [(e["name"], e["tenant"], Path(e["path"]).name) for e in cfg["exports"]] == [
        ("web", 0, "web.img"), ("batch", 1, "batch.img")]
    assert (cfg["listen"], cfg["depth"], cfg["iops"], cfg["window_s"]) == ("127.0.0.1:10809", 1, 2000.0, 1.0)
    assert cfg["exports"][0]["allow"] == ["127.0.0.1", "::1"] and not cfg["exports"][1]["read_only"]
    assert cfg["limits"] == {"max_connections": 256, "max_connections_per_export": None, "handshake_timeout_s": 10.0,
                             "max_connections_per_address": 128, "max_handshakes_per_address": 32,
                             "request_timeout_s": 10.0, "reply_timeout_s": 30.0,
                             "idle_timeout_s": 1800.0, "max_inflight_bytes": 256 << 20}
    r = run_cli("serve", "--config", str(gw), "--check")
    assert r.code == 0, r.err
    assert "ok, would serve 2 export(s) on nbd://127.0.0.1:10809 (policy wf2q+, depth 1, emulated 2k IOPS)" in r.out
    assert re.search(r"web: tenant 0, 16 MiB, allow 127.0.0.1/32 ::1/128, .*web\.img", r.out), r.out
    assert re.search(r"batch: tenant 1, 16 MiB, /", r.out), r.out


def test_flags_override_the_file(gw: Path, tmp_path: Path) -> None:
    s = load(gw)
    # Another kind: the file's wf2q parameters do not apply, its tenants' keys do.
    cfg = merged(s, policy="mclock", policy_params={"reservations": "100,50"}, listen="127.0.0.1:0", depth=2)
    assert cfg["policy"]["kind"] == "mclock" and cfg["policy"]["weights"] == [3.0, 1.0]
    assert cfg["policy"]["reservations"] == [100.0, 50.0]
    assert (cfg["listen"], cfg["depth"]) == ("127.0.0.1:0", 2)
    # A policy flag overrides the parameter of that name only.
    assert merged(s, policy_params={"weights": "1,1"})["policy"]["weights"] == [1.0, 1.0]
    # --export replaces the file's exports.
    other = tmp_path / "other.img"
    other.write_bytes(b"\0" * 4096)
    assert [e["name"] for e in merged(s, exports=[f"solo={other}:0"])["exports"]] == ["solo"]
    r = run_cli("serve", "--config", str(gw), "--check", "--policy", "fcfs", "--iops", "5k")
    assert r.code == 0 and "(policy fcfs, depth 1, emulated 5k IOPS)" in r.out, (r.out, r.err)


#: (old, new) in the example, the text of the line the error must name (None: no line), the message.
BAD = [
    (("weight = 3", "wieght = 3"), "wieght = 3", "[[tenant]] 1 (web): unknown key 'wieght' (known: name, weight, reservation, limit, slo)"),
    (('tenant = "batch"', 'tenant = "bach"'), 'tenant = "bach"', "[[export]] 2 (batch): tenant: no [[tenant]] named 'bach' (known: web, batch)"),
    (('path = "batch.img"', 'path = "nope.img"'), 'path = "nope.img"', "[[export]] 2 (batch): path:"),
    (('kind = "wf2q"', 'kind = "wf2q"\nweights = [1, 2, 3]'), "weights = [1, 2, 3]", "[policy]: weights: 3 value(s) for 2 tenant(s)"),
    (('kind = "wf2q"', 'kind = "miser"'), "[policy]", "[policy]: miser needs cmin (the primary-class capacity, IOPS) and deadlines"),
    (('kind = "wf2q"', 'kind = "lottery"'), 'kind = "lottery"', "[policy]: kind: unknown policy 'lottery'"),
    (("depth = 1", "depth = 0"), "depth = 0", "depth: must be ≥ 1, got 0"),
    (('slo = "10ms"', 'slo = "soon"'), 'slo = "soon"', "[[tenant]] 1 (web): slo: malformed duration 'soon'"),
    (('[[export]]\nname = "batch"', '[[export]]\nname = "web"'), None, "[[export]] name(s) web given twice"),
    (('iops = "2k"', 'iops = "5kiops"'), 'iops = "5kiops"', "iops: malformed rate '5kiops'"),
    (('allow = ["127.0.0.1", "::1"]', 'allow = ["300.1.1.1"]'), "allow =",
     "[[export]] 1 (web): allow: 0: '300.1.1.1' is not an address or a network such as 10.0.0.0/8"),
    # The gateway reads an empty list as no restriction: the opposite of what it says.
    (('allow = ["127.0.0.1", "::1"]', "allow = []"), "allow =",
     "[[export]] 1 (web): allow: an empty list would let every client in"),
    (('max_inflight = "256MiB"', 'max_inflight = "1MiB"'), "max_inflight",
     "[limits]: max_inflight: must be at least 32MiB (one request of the largest size), got '1MiB'"),
    (('max_connections = 256', 'max_connection = 256'), "max_connection =", "[limits]: unknown key 'max_connection'"),
    (('max_inflight = "256MiB"', 'max_inflight = "256MiB"\n[cost]\nbandwidth = "fast"'), 'bandwidth = "fast"',
     "[cost]: bandwidth: malformed bandwidth 'fast'"),
    (('max_inflight = "256MiB"', 'max_inflight = "256MiB"\n[cost]\nseek = "5ms"'), 'seek = "5ms"',
     "[cost]: unknown key 'seek'"),
    (('tenant = "batch"\n', 'tenant = "batch"\n[[export.fault]]\nop = "read"\n'), "[[export.fault]]",
     "[[export]] 2 (batch): fault: 0: a fault rule needs an error, a delay or both"),
    (('tenant = "batch"\n', 'tenant = "batch"\n[[export.fault]]\nop = "read"\ndelay = "soon"\n'), 'delay = "soon"',
     "[[export]] 2 (batch): fault: 0: delay: malformed duration 'soon'"),
    (('tenant = "batch"\n', 'tenant = "batch"\n[[export.fault]]\nop = "read"\ndelay = "2min"\n'), 'delay = "2min"',
     "[[export]] 2 (batch): fault: 0: delay: must be at most 1 min (a slow disk, not a hung one), got '2min'"),
    # A rule past the end of the 16 MiB export never applied, unsaid.
    (('tenant = "batch"\n', 'tenant = "batch"\n[[export.fault]]\nop = "read"\nerror = "eio"\noffset = "16MiB"\n'),
     'offset = "16MiB"', "[[export]] 2 (batch): fault: 0: offset: 16,777,216 bytes is past the end of the export"),
]


def test_the_cost_table_reaches_the_gateway(gw: Path) -> None:
    gw.write_text(gw.read_text() + '\n[cost]\nop_time = "250us"\nbandwidth = "200MiB/s"\n')
    assert merged(load(gw))["cost"] == {"enabled": True, "op_time_s": 250e-6, "bytes_per_s": 200 * 2**20}
    gw.write_text(gw.read_text() + "enabled = false\n")
    assert merged(load(gw))["cost"]["enabled"] is False
    assert run_cli("serve", "--config", str(gw), "--check").code == 0


def test_a_delay_rule_reaches_the_gateway(gw: Path) -> None:
    gw.write_text(gw.read_text().replace('tenant = "batch"\n', 'tenant = "batch"\n[[export.fault]]\nop = "read"\n'
                                          'delay = "2ms"\nrate = 0.5\n', 1))
    assert merged(load(gw))["exports"][1]["faults"] == [
        {"op": "read", "error": None, "delay_s": 0.002, "offset": 0, "length": None, "rate": 0.5}]
    assert run_cli("serve", "--config", str(gw), "--check").code == 0


@pytest.mark.parametrize(("change", "at", "message"), BAD, ids=[b[2][:40] for b in BAD])
def test_bad_config_is_one_line_naming_file_line_and_key(gw: Path, change: tuple[str, str], at: str | None,
                                                         message: str) -> None:
    old, new = change
    text = gw.read_text()
    assert old in text, old
    text = text.replace(old, new, 1)
    gw.write_text(text)
    r = run_cli("serve", "--config", str(gw), "--check")
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith(at)) if at else None
    assert_one_line_error(r, f"{gw}:{line}: " if line else f"{gw}: ", message)
    with pytest.raises(InputError):
        merged(load(gw))


def test_a_missing_or_binary_config_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("serve", "--config", str(tmp_path / "none.toml"), "--check"), "none.toml: no such file")
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe\x00")
    assert_one_line_error(run_cli("serve", "--config", str(tmp_path / "bin.toml")), "bin.toml: not a TOML text file")


def test_serving_a_config_file_with_a_real_client(gw: Path) -> None:
    """The file's exports are served to qemu-io; what it writes lands in the file the
    config names (relative to the config)."""
    import signal

    from test_serve import Server, _qemu_io

    s = Server("--config", str(gw), "--listen", "127.0.0.1:0")
    line, port = s.ready()
    try:
        assert "(policy wf2q+, depth 1, emulated 2k IOPS)" in line, line
        r = _qemu_io(port, "batch", "write -P 0x5a 4096 8k", "flush")
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        code, out, err = s.finish(signal.SIGTERM)
    assert code == 0, err
    data = (gw.parent / "batch.img").read_bytes()
    assert data[4096:12288] == b"\x5a" * 8192 and data[:4096] == bytes(4096)
    assert (gw.parent / "web.img").read_bytes() == bytes(16 << 20)


def _config(tmp_path: Path, **top: str) -> Path:
    """A config of one export with the given top-level keys (strings)."""
    img = tmp_path / "a.img"
    if not img.exists():
        with open(img, "wb") as f:
            f.truncate(1 << 20)
    keys = "".join(f'{k} = "{v}"\n' for k, v in top.items())
    cfg = tmp_path / "gw.toml"
    cfg.write_text(keys + '[[export]]\nname = "a"\npath = "a.img"\n')
    return cfg


def test_check_refuses_the_sockets_the_start_refuses(tmp_path: Path) -> None:
    """`--check` took a control path that the start then refused; both ask one function
    now, and say the same line: a file that is not a socket (never replaced), a missing
    directory, a path longer than a socket's address holds, for the control socket and
    for a Unix listen socket."""
    keep = tmp_path / "notes.txt"
    keep.write_text("keep me")
    long = tmp_path / ("d" * 60) / ("s" * 60)
    long.parent.mkdir()
    cases = [
        ({"listen": "127.0.0.1:0", "control": str(keep)}, "control: cannot create the socket",
         "a file that is not a socket is there: not replacing it"),
        ({"listen": "127.0.0.1:0", "control": str(tmp_path / "none" / "gw.sock")}, "control: cannot create the socket",
         "no directory"),
        ({"listen": "127.0.0.1:0", "control": str(long)}, "control: cannot create the socket",
         "longer than the 107 a Unix socket's address holds"),
        ({"listen": f"unix:{keep}"}, "listen: cannot listen on", "a file that is not a socket is there"),
        ({"listen": f"unix:{tmp_path / 'none' / 'nbd.sock'}"}, "listen: cannot listen on", "no directory"),
    ]
    for top, *needles in cases:
        cfg = _config(tmp_path, **top)
        checked = run_cli("serve", "--config", str(cfg), "--check")
        started = run_cli("serve", "--config", str(cfg), "--for", "1s")
        assert_one_line_error(checked, *needles)
        assert_one_line_error(started, *needles)
        assert checked.err == started.err, (checked.err, started.err)
    assert keep.read_text() == "keep me"
    # Two sockets at one place: the start's second bind is refused; the check says why.
    same = tmp_path / "nbd.sock"
    cfg = _config(tmp_path, listen=f"unix:{same}", control=str(same))
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"),
                          f"control: {same} is also the listen socket")
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--for", "1s"), "control: cannot create the socket")
    cfg = _config(tmp_path, listen="127.0.0.1:19109", metrics="127.0.0.1:19109")
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"),
                          "metrics: 127.0.0.1:19109 is also the listen address")


def test_check_warns_of_a_control_socket_a_running_gateway_answers_on(tmp_path: Path) -> None:
    """A socket a gateway answers on: the start is refused, the check warns (it may be
    the running gateway's own file, checked before a reload)."""
    import signal

    from test_serve import Server

    sock = tmp_path / "gw.sock"
    cfg = _config(tmp_path, listen="127.0.0.1:0", control=str(sock))
    s = Server("--config", str(cfg))
    s.ready()
    try:
        r = run_cli("serve", "--config", str(cfg), "--check")
        assert r.code == 0, r.err
        assert r.err.strip() == (f"warning: control: a running gateway answers on {sock} now: a start would be "
                                 "refused (that gateway's reload keeps it)"), r.err
        assert_one_line_error(run_cli("serve", "--config", str(cfg), "--for", "1s"),
                              f"control: cannot create the socket {sock}: a running gateway already uses it")
    finally:
        assert s.finish(signal.SIGTERM)[0] == 0


def test_a_deeply_nested_file_is_one_line(tmp_path: Path) -> None:
    """Nested arrays or inline tables gave `internal error: RecursionError`, exit 1."""
    for value in ("[" * 5000 + "]" * 5000, "{a = " * 400 + "1" + "}" * 400):
        cfg = tmp_path / "deep.toml"
        cfg.write_text(f'listen = "127.0.0.1:0"\nx = {value}\n')
        assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"),
                              f"{cfg}: arrays or inline tables nested too deeply to read")


def test_more_exports_than_the_open_files_limit_holds_are_refused_at_check(tmp_path: Path) -> None:
    """Each export keeps its file open: past the process's limit the start failed at
    the export whose file did not open (`Too many open files`), and the check, which
    opens them all, with it. Both say it up front now; close to the limit, the check
    warns of the connections left."""
    import resource
    import subprocess
    import sys

    img = tmp_path / "a.img"
    with open(img, "wb") as f:
        f.truncate(1 << 20)

    def check(n: int) -> subprocess.CompletedProcess[str]:
        cfg = tmp_path / f"gw{n}.toml"
        cfg.write_text('listen = "127.0.0.1:0"\n' + "".join(f'[[export]]\nname = "e{i}"\npath = "a.img"\n'
                                                             for i in range(n)))
        return subprocess.run([sys.executable, "-m", "storqos.cli", "serve", "--config", str(cfg), "--check"],
                              capture_output=True, text=True, timeout=120, cwd=REPO,
                              preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)))

    refused = check(250)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert ("exports: 250 export(s) keep 250 file(s) open, and this process may have 256 open at once"
            in refused.stderr), refused.stderr
    ok = check(150)
    assert ok.returncode == 0, ok.stderr
    assert ok.stderr.strip() == ("warning: 150 export(s) keep 150 file(s) open: with a limit of 256 open files "
                                 "(ulimit -n), 42 connection(s) can be open at once, not "
                                 "limits.max_connections = 1024"), ok.stderr
