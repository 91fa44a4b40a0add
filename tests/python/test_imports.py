"""The storqos package's imports: no cycles, counting the imports hidden inside functions
and under ``TYPE_CHECKING`` (a cycle there still ties two modules into one); and the
command line starts without the heavy libraries its command may not need."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import storqos

PACKAGE = Path(storqos.__file__).resolve().parent


def _modules(root: Path) -> dict[str, Path | None]:
    """Dotted module name → file, for every module of the package rooted at ``root``
    (compiled extensions are modules without a file to read)."""
    mods: dict[str, Path | None] = {}
    for f in root.rglob("*.py"):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    for f in root.rglob("*.so"):
        parts = list(f.relative_to(root.parent).parts)
        parts[-1] = parts[-1].split(".")[0]
        mods[".".join(parts)] = None
    return mods


def _targets(mod: str, is_pkg: bool, node: ast.Import | ast.ImportFrom, mods: dict[str, Path | None]) -> set[str]:
    """The package's modules one import statement of ``mod`` loads (``from a import b``
    loads ``a.b`` when that is a module, else ``a``)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            pkg = mod if is_pkg else mod.rsplit(".", 1)[0]
            for _ in range(node.level - 1):
                pkg = pkg.rsplit(".", 1)[0]
            base = f"{pkg}.{base}" if base else pkg
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    return {n for n in names if n in mods and n != mod}


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module → the package's modules it imports anywhere in its source."""
    mods = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        if f is None:
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[m] |= _targets(m, f.name == "__init__.py", node, mods)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_checker_finds_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import x\n    return x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import y\nx = 1\n")
    (pkg / "d.py").write_text("from . import c\n")
    assert cycles(import_graph(pkg)) == [["pkg.a", "pkg.c", "pkg.sub.b"]]


def test_no_import_cycles_in_storqos() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 50  # the whole package was read
    assert cycles(graph) == []


#: The package's layers, lowest first: a module may import its own layer and lower ones,
#: never a higher one. The package's root (its lazy public names) stands above them all.
LAYERS = ("storqos._core", "storqos.base", "storqos.traces", "storqos.model", "storqos.experiments",
          "storqos.planning", "storqos.live", "storqos.cli")


def layer_of(module: str) -> int:
    """The rank of ``module``'s layer in :data:`LAYERS` (the root: above every layer)."""
    for rank, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            return rank
    assert module == "storqos", f"{module} is in no layer of LAYERS"
    return len(LAYERS)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a higher layer by a lower one, as ``low -> high``."""
    return sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if layer_of(d) > layer_of(m))


def test_the_layer_checker_finds_an_upward_import(tmp_path: Path) -> None:
    pkg = tmp_path / "storqos"
    for sub in ("base", "live"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "live" / "gw.py").write_text("from storqos.base import units\n")
    (pkg / "base" / "units.py").write_text("def f():\n    from storqos.live import gw\n")
    assert upward_imports(import_graph(pkg)) == ["storqos.base.units -> storqos.live.gw"]


def test_every_module_is_in_a_layer_folder() -> None:
    """The package's root holds only its public names; every module is in a layer."""
    for module in import_graph(PACKAGE):
        layer_of(module)


def test_no_layer_imports_a_higher_one() -> None:
    assert upward_imports(import_graph(PACKAGE)) == []


HEAVY = ("polars", "numpy", "pyarrow", "pydantic", "pandas", "matplotlib", "sklearn", "distributed")


def _loaded_after(code: str) -> list[str]:
    """The heavy libraries loaded by a fresh interpreter after running ``code``."""
    probe = f"import sys\n{code}\nprint(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def test_the_cli_starts_without_polars_numpy_or_pydantic() -> None:
    """``storqos --help`` or a mistyped flag loads the app and every command's options; the
    libraries a command needs (polars to read a trace, pydantic for a config) are loaded
    when it runs: loaded at start they made ``storqos --help`` take 0.48 s, 0.23 s without."""
    assert _loaded_after("import storqos, storqos.cli") == []


@pytest.mark.parametrize("name", storqos.__all__)
def test_the_public_names_load_on_first_use(name: str) -> None:
    assert name in dir(storqos)
    assert getattr(storqos, name) is not None


def test_a_typo_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'simulat'"):
        storqos.simulat  # noqa: B018  (as for any module)


def test_a_module_of_the_package_is_there_after_a_bare_import() -> None:
    """``import storqos`` then ``storqos.traces.stats``, as when the package imported its
    modules up front; a name that is neither a module nor public is still an error."""
    code = ("import storqos\nassert callable(storqos.traces.stats) and callable(storqos.planning.planner.arrivals)\n"
            "try:\n    storqos.no_such_module\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit(1)")
    assert "polars" in _loaded_after(code)
