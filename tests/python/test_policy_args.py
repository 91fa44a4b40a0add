"""A policy's arguments are never accepted silently: a name that is not a policy or one
of its listed aliases, a per-tenant list of the wrong length, a single-valued option
given several values are one-line errors; mClock's reservations beyond the device's
capacity are a warning. In the CLI (simulate, serve, experiment files) and in Python,
where the errors name the keyword argument (``reservations=``), an unknown keyword
suggests the nearest, and the keywords are typed for mypy."""

from __future__ import annotations

import inspect
import re
import textwrap
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import storqos
from conftest import REPO, assert_one_line_error, run_cli
from storqos.base.errors import InputError, InputWarning
from storqos.model import registry
from storqos.model.specs import POLICIES, POLICY_ALIASES, POLICY_PARAMS, PolicyParams, policy_spec

#: Two tenants, 40 requests each, 10 ms apart (an MQSim trace: time ns, device, lba, sectors, read).
TWO_TENANTS = "".join(f"{i * 10_000_000} {i % 2} {8 * i} 8 1\n" for i in range(80))


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    p = tmp_path / "two.trace"
    p.write_text(TWO_TENANTS)
    return p


def _simulate(trace: Path, *args: str) -> list[str]:
    return ["simulate", str(trace), "--format", "mqsim", "--split-by", "device", "--capacity", "500", *args]


# --------------------------------------------------------------------------- names


def test_wfq_is_not_taken_for_wf2q(trace: Path) -> None:
    """WFQ is another algorithm than WF2Q+: refused, with the names it may have meant."""
    assert_one_line_error(run_cli(*_simulate(trace, "--policy", "wfq", "--weights", "2,1")),
                          "--policy", "unknown policy 'wfq'", "did you mean 'wf2q'")
    assert_one_line_error(run_cli(*_simulate(trace, "--policy", "sarc+")),
                          "--policy", "did you mean 'sarc+avatar' or 'sarc+facade'")


@pytest.mark.parametrize("alias", sorted(POLICY_ALIASES))
def test_every_listed_alias_is_its_policy(alias: str) -> None:
    """Each alias builds the spec of the policy it stands for (checked by the core)."""
    kind = POLICY_ALIASES[alias]
    params: dict[str, object] = {
        "miser": {"cmin": 300, "deadlines": "10ms"},
        "rtt-fq": {"cmin": 300, "deadlines": "10ms", "total_capacity": 500},
        "sarc+avatar": {"slo": "a:100iops@50ms"}, "sarc+facade": {"slo": "a:100iops@50ms"},
        "fixed+avatar": {"slo": "a:100iops@50ms"}, "adaptive+avatar": {"slo": "a:100iops@50ms"},
        "ceph-mclock": {"total_capacity": 1000},
    }.get(kind, {})
    assert policy_spec(alias, **params) == policy_spec(kind, **params)  # type: ignore[arg-type]


def test_help_and_docs_list_every_alias() -> None:
    r = run_cli("simulate", "--help", columns=400)
    assert r.code == 0, r.err
    text = " ".join(r.out.replace("│", " ").split())  # the option's help, unwrapped
    for alias, kind in POLICY_ALIASES.items():
        assert f"{alias} ({kind})" in text, alias
    serve = " ".join(run_cli("serve", "--help", columns=400).out.replace("│", " ").split())
    assert all(f"{alias} ({kind})" in serve for alias, kind in registry.aliases("serve").items())
    docs = " ".join((REPO / "README.md").read_text().split())
    for alias, kind in POLICY_ALIASES.items():
        assert f"`{alias}` ({kind})" in docs, alias
    assert all(f"`{kind}`" in docs for kind in POLICIES)


def test_an_accepted_alias_runs_its_policy(trace: Path) -> None:
    r = run_cli(*_simulate(trace, "--policy", "wf2q+", "--weights", "2,1", "--json"))
    assert r.code == 0, r.err
    assert '"policy": "wf2q+"' in r.out


def test_a_config_file_kind_is_checked_alike(tmp_path: Path) -> None:
    (tmp_path / "a.img").write_bytes(b"\0" * 4096)
    cfg = tmp_path / "gw.toml"
    cfg.write_text('iops = "500"\n[policy]\nkind = "wfq"\n[[export]]\nname = "a"\npath = "a.img"\ntenant = 0\n')
    assert_one_line_error(run_cli("serve", "--config", str(cfg), "--check"),
                          "gw.toml:3: [policy]", "kind", "unknown policy 'wfq'", "did you mean 'wf2q'")


# --------------------------------------------------------------- per-tenant lists


#: (policy arguments with a list of three for two tenants, the option named).
THREE_FOR_TWO = [
    (["--policy", "wf2q", "--weights", "1,2,3"], "--weights"),
    (["--policy", "edf", "--deadline", "10ms,50ms,5ms"], "--deadline"),
    (["--policy", "mclock", "--reservations", "10,20,30"], "--reservations"),
    (["--policy", "mclock", "--limits", "none,100,200"], "--limits"),
    (["--policy", "sarc+avatar", "--slo", "a:10iops@50ms,b:10iops@50ms,c:10iops@50ms"], "--slo"),
]


@pytest.mark.parametrize(("args", "option"), THREE_FOR_TWO)
def test_a_per_tenant_list_of_the_wrong_length_is_an_error(trace: Path, args: list[str], option: str) -> None:
    assert_one_line_error(run_cli(*_simulate(trace, *args)), f"{option}:", "3 value(s) for 2 tenant(s)")


@pytest.mark.parametrize(("args", "option"), THREE_FOR_TWO)
def test_serve_checks_the_lists_alike(tmp_path: Path, args: list[str], option: str) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.img").write_bytes(b"\0" * 4096)
    r = run_cli("serve", "-e", f"a={tmp_path / 'a.img'}:0", "-e", f"b={tmp_path / 'b.img'}:1", "--iops", "500",
                "--check", *args)
    assert_one_line_error(r, f"{option}:", "3 value(s) for 2 tenant(s)")


def test_fclb_backend_weights_are_per_tenant(trace: Path) -> None:
    """fclb's YFQ back end serves the same tenants: its weights are counted too."""
    spec = policy_spec("fclb", workloads="40:35ms,20:38ms", weights=[2, 1, 1])
    with pytest.raises(InputError, match=r"^--weights: 3 value\(s\) for 2 tenant"):
        storqos.model.specs.check_tenant_lists(spec, 2)


def test_an_experiment_file_names_its_key(tmp_path: Path) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text(textwrap.dedent("""\
        name = "x"
        duration = "1s"
        [device]
        kind = "constant"
        capacity = "500"
        [[tenant]]
        name = "a"
        generator = { kind = "poisson", rate = "50" }
        [[tenant]]
        name = "b"
        generator = { kind = "poisson", rate = "50" }
        [[policy]]
        kind = "edf"
        deadlines = ["10ms", "20ms", "30ms"]
        """))
    assert_one_line_error(run_cli("run", str(exp), "--out", str(tmp_path / "out")),
                          "[[policy]] 1 (edf)", "deadlines: 3 value(s) for 2 tenant(s)")
    assert not (tmp_path / "out").exists()
    # A value the parser refuses is said under the file's key too (not --deadline's "deadline").
    exp.write_text(exp.read_text().replace('["10ms", "20ms", "30ms"]', '["10ms", "0ms"]'))
    assert_one_line_error(run_cli("run", str(exp), "--check"), "[[policy]] 1 (edf): deadlines: deadlines must be > 0")


@pytest.mark.parametrize("policy", ["miser", "rtt-fq"])
def test_the_rtt_policies_take_one_deadline(trace: Path, policy: str) -> None:
    """Miser's δ is one value: a second one was dropped without a word."""
    assert_one_line_error(run_cli(*_simulate(trace, "--policy", policy, "--cmin", "300", "--deadline", "10ms,20ms")),
                          "--deadline:", f"{policy} takes one deadline", "got 2")


# ------------------------------------------------------------ mClock reservations


def _warnings(r_err: str) -> list[str]:
    return [ln for ln in r_err.splitlines() if ln.startswith("warning:")]


def test_reservations_beyond_the_capacity_are_warned_of(trace: Path) -> None:
    r = run_cli(*_simulate(trace, "--policy", "mclock", "--reservations", "300,250"))
    assert r.code == 0, r.err
    said = _warnings(r.err)
    assert said == ["warning: --reservations: they add up to 550 IOPS, more than the device's 500 IOPS "
                    "(--capacity): they cannot all be met"], r.err
    # Exactly the capacity is served: nothing to say.
    r = run_cli(*_simulate(trace, "--policy", "mclock", "--reservations", "300,200"))
    assert r.code == 0 and not _warnings(r.err), r.err


def test_serve_warns_of_reservations_beyond_its_device(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / f"{name}.img").write_bytes(b"\0" * 4096)
    r = run_cli("serve", "-e", f"a={tmp_path / 'a.img'}:0", "-e", f"b={tmp_path / 'b.img'}:1", "--iops", "1k",
                "--policy", "mclock", "--reservations", "600,600", "--check")
    assert r.code == 0, r.err
    assert _warnings(r.err) == ["warning: --reservations: they add up to 1,200 IOPS, more than the device's 1,000 "
                                "IOPS (--iops): they cannot all be met"], r.err
    cfg = tmp_path / "gw.toml"
    cfg.write_text(textwrap.dedent("""\
        iops = "1k"
        [policy]
        kind = "mclock"
        [[tenant]]
        name = "a"
        reservation = "700"
        [[tenant]]
        name = "b"
        reservation = "400"
        [[export]]
        name = "a"
        path = "a.img"
        tenant = "a"
        [[export]]
        name = "b"
        path = "b.img"
        tenant = "b"
        """))
    r = run_cli("serve", "--config", str(cfg), "--check")
    assert r.code == 0, r.err
    assert _warnings(r.err) == [f"warning: {cfg}: [[tenant]] reservation: they add up to 1,100 IOPS, more than the "
                                f"device's 1,000 IOPS ({cfg}: iops): they cannot all be met"], r.err


def test_an_experiment_warns_of_reservations_beyond_its_device(tmp_path: Path) -> None:
    exp = tmp_path / "exp.toml"
    exp.write_text(textwrap.dedent("""\
        name = "x"
        duration = "1s"
        [device]
        kind = "constant"
        capacity = "500"
        [[tenant]]
        name = "a"
        generator = { kind = "poisson", rate = "50" }
        reservation = "400"
        [[tenant]]
        name = "b"
        generator = { kind = "poisson", rate = "50" }
        reservation = "300"
        [[policy]]
        kind = "mclock"
        """))
    r = run_cli("run", str(exp), "--out", str(tmp_path / "out"))
    assert r.code == 0, r.err
    assert _warnings(r.err) == ["warning: mclock: reservations: they add up to 700 IOPS, more than the device's 500 "
                                "IOPS ([device] capacity): they cannot all be met"], r.err


# ------------------------------------------------------------------ Python API


def _frame() -> pl.DataFrame:
    n = 80
    return pl.DataFrame({"arrival_ns": np.arange(n, dtype=np.int64) * 10_000_000,
                         "tenant": pl.Series(np.arange(n) % 2, dtype=pl.UInt32),
                         "size": pl.Series([4096] * n, dtype=pl.UInt32)})


def test_an_unknown_keyword_suggests_the_nearest() -> None:
    with pytest.raises(TypeError, match=r"^simulate\(\) got an unexpected keyword argument 'reservation'; "
                                        r"did you mean 'reservations'\?$"):
        storqos.simulate(_frame(), "mclock", capacity=500, reservation=[100, 0])  # type: ignore[call-arg]
    with pytest.raises(InputError, match="did you mean 'hit_ratio'"):  # an InputError too: one line in the CLI
        storqos.simulate(_frame(), "fcfs", "tiered", capacity="5k,100", hitratio=0.5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^policy_spec\(\) got an unexpected keyword argument 'deadline'; "
                                        r"did you mean 'deadlines'\?$"):
        policy_spec("edf", deadline="10ms")  # type: ignore[call-arg]


@pytest.mark.parametrize(("kwargs", "param"), [
    ({"policy": "edf", "deadlines": "10ms,50ms,5ms"}, "deadlines="),
    ({"policy": "mclock", "reservations": "300,x"}, "reservations="),
    ({"policy": "wf2q", "weights": [1]}, "weights="),
    ({"policy": "fcfs", "window": "0s"}, "window="),
    ({"policy": "mclock", "at_limit": "stop"}, "at_limit="),
])
def test_errors_name_the_keyword_argument(kwargs: dict[str, object], param: str) -> None:
    with pytest.raises(InputError) as e:
        storqos.simulate(_frame(), capacity=500, **kwargs)  # type: ignore[arg-type]
    text = str(e.value)
    assert text.startswith(f"{param}: "), text
    assert "--" not in text, text


def test_messages_say_options_as_keywords() -> None:
    """An option in the text of a message is said as the keyword argument."""
    with pytest.raises(InputError, match=r'^cmin=: rtt-fq needs cmin= \(the primary-class capacity, IOPS\) and '
                                         r'deadlines= \(δ\)$'):
        storqos.simulate(_frame(), "rtt-fq", capacity=500, cmin=300)
    with pytest.raises(InputError, match=r'^percentile=: give slo= too'):
        storqos.simulate(_frame(), "fcfs", capacity=500, percentile=90)


def test_warnings_name_the_keyword_arguments() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        storqos.simulate(_frame(), "mclock", capacity=500, reservations=[300, 250])
    said = [str(w.message) for w in caught if issubclass(w.category, InputWarning)]
    assert said == ["reservations=: they add up to 550 IOPS, more than the device's 500 IOPS (capacity=): they "
                    "cannot all be met"]


def test_the_keywords_are_in_the_signature() -> None:
    """Every parameter a policy takes is a keyword of simulate and policy_spec, typed."""
    sim = inspect.signature(storqos.simulate).parameters
    spec = inspect.signature(policy_spec).parameters
    taken = {p for params in POLICY_PARAMS.values() for p in params}
    assert taken <= set(PolicyParams.__annotations__)
    for name in taken:
        for params in (sim, spec):
            assert params[name].kind is inspect.Parameter.KEYWORD_ONLY and params[name].default is None, name
            assert "None" in str(params[name].annotation), name
    assert "servers" in sim and "device_depth" in sim
    assert set(POLICIES) <= set(storqos.POLICIES)
    assert "reservations" in (storqos.simulate.__doc__ or "")


def test_the_old_call_style_still_works() -> None:
    res = storqos.simulate(_frame(), "wf2q", "constant", capacity="500", weights=[3, 1])
    assert res.policy == "wf2q+" and int(res.tenants["completed"].sum()) == 80
    res = storqos.simulate(_frame(), {"kind": "fcfs"}, {"kind": "constant", "iops": 500.0})
    assert int(res.tenants["completed"].sum()) == 80


def test_mypy_sees_the_keywords(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """mypy checks simulate's keywords: a misspelt one and a value of the wrong type are
    errors, the documented ones pass."""
    from mypy import api

    # storqos from the checkout, the site's packages (numpy, polars) not read: the
    # keywords' types are storqos' own, and mypy takes 1 s, not 12, on a cold cache.
    monkeypatch.setenv("MYPYPATH", str(REPO / "python"))

    src = tmp_path / "use.py"
    src.write_text(textwrap.dedent("""\
        import storqos

        storqos.simulate(None, "mclock", capacity=500, reservations=[300, 0], limits=[None, "1k"], weights="1,2")
        storqos.simulate(None, "mclock", capacity=500, reservation=[300, 0])
        storqos.simulate(None, "sfq", capacity=500, depth="deep")
        """))
    out, err, status = api.run([str(src), "--cache-dir", str(tmp_path / "cache"), "--no-error-summary",
                                "--follow-imports", "silent", "--no-site-packages", "--ignore-missing-imports"])
    errors = [ln for ln in out.splitlines() if ": error:" in ln]
    lines = sorted({int(m.group(1)) for ln in errors if (m := re.search(r"use\.py:(\d+):", ln))})
    assert lines == [4, 5], out + err
    assert any('Unexpected keyword argument "reservation"' in ln for ln in errors), out
    assert any('"depth"' in ln and "int | None" in ln for ln in errors), out
