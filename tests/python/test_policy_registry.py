"""A policy is declared once, in the core's registry (``storqos_core::spec::registry``):
the Python layer takes its names, aliases, parameters and options from
``storqos.model.registry``, and no other module spells a policy's name as a value.

What "spells a name" means here: a string literal, outside docstrings and comments,
that is a policy's name or its core kind (``"mclock"``, ``"sarc_avatar"``), the form a
module uses to dispatch on a policy. Prose that mentions an algorithm in a message or a
help line ("SFQ(D)'s D") is not counted: it names no value a new policy would have to be
added to. A module that is by nature the Python side of particular seed policies (seed
001's spec builder, seed 003's) is their owner, listed with its reason, and may name
those policies and their back ends only. The modules below that still dispatch on some policy's name are listed with
those names; the list may only shrink (a new module or a new name fails the test, and so
does an entry that no longer occurs)."""

from __future__ import annotations

import ast
from typing import Any

import pytest
import typer
from conftest import REPO
from storqos.model import registry
from storqos.model.specs import POLICIES, POLICY_ALIASES, PolicyParams, canonical_policy, policy_spec

PACKAGE = REPO / "python" / "storqos"

#: The one module that may name every policy: the registry (it reads them from the core).
REGISTRY_MODULE = "model/registry.py"

#: Modules that are by nature the Python side of particular seed policies, with the
#: policies each owns and why. Such a module may spell the names and core kinds of the
#: policies it owns and of the back ends they feed (the registry's ``back_end``), and
#: no other policy's.
OWN_MODULES: dict[str, tuple[tuple[str, ...], str]] = {
    "model/miser.py": (("miser",), "seed 000's Miser: the ΔC·δ ≥ 1 slack its guarantee needs"),
    "model/twolevel/spec.py": (("sarc+avatar", "sarc+facade", "fixed+avatar", "adaptive+avatar"),
                               "seed 001's spec builder: ADAPTIVE's gains and Facade's overload test each belong to "
                               "one of its policies"),
    "model/twolevel/analysis.py": (("sarc+avatar",), "seed 001's runs on the paper's array, SARC+AVATAR by default"),
    "model/cluster.py": (("mclock",), "a cluster's dmclock and split coordination keep mClock's reservations and "
                                      "limits across its servers (dmClock, OSDI'10 §4)"),
    "live/cluster_member.py": (("mclock",), "a cluster's gateways set their shares of each tenant's reservation and "
                                            "limit in mClock"),
    "model/fclb/spec.py": (("fclb",), "seed 003's builders of FCLB's spec and of its YFQ back end's"),
    "model/fclb/cases.py": (("fclb",), "seed 003 §4.5 compares FCLB, a fixed bucket and its YFQ back end alone"),
    "planning/planner.py": (("miser", "rtt-fq"), "seed 000's recombiners of RTT's classes: Miser, and fair queuing "
                                                "(rtt-fq, over WF2Q+)"),
    "planning/targets/derive.py": (("qemu-throttle", "blk-throttle", "bfq", "nbdkit-rate", "spdk-qos", "ceph-mclock",
                                    "rbd-qos"), "each real system's settings derived from SLOs, in its own units"),
    "planning/targets/emit.py": (("bfq",), "the kernel's BFQ weights are written where its throttle limits are not"),
    "live/stacks/cgroup.py": (("blk-throttle", "bfq"), "the kernel's blk-cgroup set up for either model: throttle "
                                                       "files, or BFQ as the scheduler and its weights"),
}

#: Modules outside the registry and the owners that still name policies as values, and
#: which: advise's candidates (its default search, the policies it derives parameters
#: for, their display names and the prose of its advice, per policy) and the demo's
#: fair queue.
STILL_NAMED: dict[str, set[str]] = {
    "planning/advise/advice.py": {"edf", "fcfs", "fclb", "mclock", "miser", "sarc+avatar", "sfq", "wf2q", "yfq"},
    "planning/advise/policies.py": {"edf", "fcfs", "fclb", "mclock", "miser", "sarc+avatar", "sfq", "wf2q", "yfq"},
    "planning/noisy_neighbour.py": {"wf2q"},
}


def owned(module: str) -> set[str]:
    """The names and kinds ``module`` may spell as its policies' own module."""
    mine = [registry.policy(n) for n in OWN_MODULES.get(module, ((), ""))[0]]
    mine += [registry.policy(p.back_end) for p in mine if p.back_end is not None]
    return {p.name for p in mine} | {p.kind for p in mine}


def named_policies(source: str, names: set[str]) -> set[str]:
    """The ``names`` that ``source`` has as a whole string literal outside docstrings."""
    tree = ast.parse(source)
    # Docstrings, and attribute docstrings: string constants that are a statement alone.
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return {n.value.strip().lower() for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            and n.value.strip().lower() in names}


def test_the_scan_finds_a_name_in_code_and_not_in_docs_or_comments() -> None:
    source = '"""The mclock module."""\n# mclock\nx = 1\n"""wf2q, an attribute\'s doc."""\nif k == "MClock": pass\n'
    assert named_policies(source, {"mclock", "wf2q"}) == {"mclock"}
    assert named_policies('help = "mclock: per-tenant limits"\n', {"mclock"}) == set()


def test_no_module_but_the_registry_names_a_policy() -> None:
    names = {p.name for p in registry.registry().policies} | {p.kind for p in registry.registry().policies}
    assert {"mclock", "sarc_avatar", "rtt-fq", "rtt"} <= names
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        hits = named_policies(path.read_text(), names) - owned(module)
        if hits and module != REGISTRY_MODULE:
            found[module] = hits
    new = {m: sorted(h - STILL_NAMED.get(m, set())) for m, h in found.items() if h - STILL_NAMED.get(m, set())}
    assert not new, f"policy names spelled outside the registry (take them from storqos.model.registry): {new}"
    gone = {m: sorted(n - found.get(m, set())) for m, n in STILL_NAMED.items() if n - found.get(m, set())}
    assert not gone, f"no longer named there: remove them from STILL_NAMED: {gone}"
    # An owner's own policies exist, and no module both owns policies and is listed.
    assert all(registry.policy(n) for names, _ in OWN_MODULES.values() for n in names)
    assert not set(OWN_MODULES) & set(STILL_NAMED)
    # The modules that build specs, options and configs name none.
    for module in ("model/specs.py", "model/policy_options.py", "cli/commands/simulate.py", "cli/commands/serve.py",
                   "experiments/experiment_schema.py", "live/gateway_config.py"):
        assert module not in found, (module, found.get(module))


def test_an_owner_may_name_its_policies_and_their_back_ends_only() -> None:
    # FCLB feeds YFQ and RTT's classes feed WF2Q+ (seed 003 §2, seed 000 §3.3.2).
    assert owned("model/fclb/spec.py") == {"fclb", "yfq"}
    assert owned("planning/planner.py") == {"miser", "rtt-fq", "rtt", "wf2q"}
    assert owned("model/sim.py") == set()
    source = 'a = {"kind": "yfq"}\nb = "mclock"\n'
    assert named_policies(source, {"yfq", "mclock"}) - owned("model/fclb/spec.py") == {"mclock"}


def test_the_default_policy_is_plain_fcfs() -> None:
    """A run without a policy, and the analyses' baseline, get one queue in arrival order."""
    assert (registry.default().name, registry.default().kind, registry.default().form) == ("fcfs", "fcfs", "plain")
    assert registry.default().name == registry.registry().default_policy


def test_the_typed_keywords_are_the_registry_parameters() -> None:
    """policy_spec's typed keywords (a TypedDict, for mypy) are exactly the parameters the
    registry's policies take, and the ones any policy is handed."""
    taken = {k for p in registry.policies("simulate") for k in p.takes} | set(registry.registry().run_params)
    assert set(PolicyParams.__annotations__) == taken


def test_names_and_aliases_come_from_the_registry() -> None:
    assert list(POLICIES) == [p.name for p in registry.policies("simulate")]
    assert POLICY_ALIASES["wf2q+"] == "wf2q" and POLICY_ALIASES["fifo"] == "fcfs"
    assert "wfq" not in POLICY_ALIASES  # another algorithm (Demers-Keshav-Shenker), not WF2Q+
    # The gateway's config-only policy: served, not simulated.
    assert canonical_policy("BAA", "serve") == "baa"
    with pytest.raises(Exception, match="unknown policy 'baa'"):
        canonical_policy("baa")


def _command(name: str) -> Any:
    """The click command typer builds for ``storqos NAME``."""
    from storqos.cli.app import app

    return typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", ["simulate", "serve"])
def test_each_command_has_the_registry_options(command: registry.Command) -> None:
    opts = {o: p for p in _command(command).params for o in p.opts}
    for option in registry.options(command):
        param = opts[option.flag]
        assert param.help == option.help, option.flag
        assert param.name == option.key  # handed to policy_spec under its key
    assert ("--depth" in opts) and ("--deadline" in opts) and ("--deadlines" not in opts)
    policy_help = opts["--policy"].help or ""
    assert ("| baa." in policy_help) == (command == "serve"), policy_help


def test_flags_and_keys_map_both_ways() -> None:
    assert registry.flag_of("deadlines") == "--deadline"
    assert registry.flag_of("control_window") == "--control-window"
    assert registry.param_of_flag("--workload") == "workloads"
    for option in registry.registry().options:
        assert registry.param_of_flag(option.flag) == option.key
        assert registry.flag_of(option.key) == option.flag


def test_a_form_builds_what_the_policy_takes() -> None:
    """Each simulated policy builds through its form into a spec the core accepts, its
    kind the registry's."""
    needs: dict[str, dict[str, object]] = {
        "deadlines": {"deadlines": "10ms,50ms"},
        "decomposition": {"cmin": 300, "deadlines": "10ms", "total_capacity": 500},
        "leaky_bucket": {"workloads": "40:35ms,20:38ms"},
        "two_level": {"slo": "a:100iops@50ms"},
        "settings": {"total_capacity": 500},
    }
    from storqos.model.specs import check

    for p in registry.policies("simulate"):
        assert p.form is not None
        params = {k: v for k, v in needs.get(p.form, {}).items() if k in p.takes or k == "total_capacity"}
        spec = policy_spec(p.name, **params)  # type: ignore[arg-type]
        assert spec["kind"] == p.kind, p.name
        check(spec, {"kind": "constant", "iops": 500.0})


def test_the_gateway_limits_are_the_gateways() -> None:
    from storqos import _core
    from storqos.live import gateway_config

    assert gateway_config.MAX_DEPTH == _core.GATEWAY_MAX_DEPTH == 4096
    assert gateway_config.MAX_NAME_BYTES == 4096  # the NBD protocol's longest export name
    assert gateway_config.MIN_INFLIGHT_BYTES == 32 * 2**20  # NBD's largest request
    assert gateway_config.MAX_FAULT_DELAY_NS == 60 * 10**9

