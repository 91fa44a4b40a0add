"""The compiled core hands its results over typed: read-only classes whose fields the
stub (python/storqos/_core.pyi) declares, never a dict."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
from storqos import _core

STUB = Path(__file__).resolve().parents[2] / "python" / "storqos" / "_core.pyi"


def _stub() -> ast.Module:
    return ast.parse(STUB.read_text())


def _properties(cls: ast.ClassDef) -> set[str]:
    return {f.name for f in cls.body if isinstance(f, ast.FunctionDef)
            and any(isinstance(d, ast.Name) and d.id == "property" for d in f.decorator_list)}


def test_no_function_of_the_stub_returns_a_dict() -> None:
    returns = []
    for node in ast.walk(_stub()):
        if isinstance(node, ast.FunctionDef) and node.returns is not None:
            returns.append((node.name, ast.unparse(node.returns)))
    assert returns, "the stub declares functions"
    assert [(n, r) for n, r in returns if "dict" in r] == []


def test_every_result_class_of_the_stub_is_the_module_s_with_the_same_fields() -> None:
    classes = [c for c in _stub().body if isinstance(c, ast.ClassDef) and _properties(c)]
    assert len(classes) >= 20
    for c in classes:
        runtime = getattr(_core, c.name)
        fields = {k for k, v in vars(runtime).items() if type(v).__name__ in ("getset_descriptor", "member_descriptor")}
        assert fields == _properties(c), c.name


def _run(keep_requests: bool = False) -> _core.SimOutput:
    # Three requests of tenant 0 and one of tenant 1, 1 ms apart, on a 1,000 IOPS server.
    arrival = np.array([0, 1_000_000, 2_000_000, 3_000_000], dtype=np.uint64)
    tenant = np.array([0, 0, 1, 0], dtype=np.uint32)
    size = np.full(4, 4096, dtype=np.uint32)
    return _core.simulate(arrival, tenant, size, np.zeros(4, np.uint64), np.ones(4, bool), None,
                          json.dumps({"kind": "fcfs"}), json.dumps({"kind": "constant", "iops": 1000.0}),
                          keep_requests=keep_requests)


def test_a_simulation_s_result_reads_as_fields_and_cannot_be_changed() -> None:
    out = _run()
    assert (out.arrived, out.unfinished, out.rejected) == (4, 0, [])
    # Per tenant: ids 0 and 1, 3 and 1 completions; the whole run one row of 4.
    assert out.tenants.id.tolist() == [0, 1]
    assert out.tenants.completed.tolist() == [3, 1]
    assert out.total.completed.tolist() == [4]
    # Each request is served alone in 1 ms: every quantile of the run is 1 ms.
    assert out.total.p50_ns.tolist() == [1_000_000] and out.total.max_ns.tolist() == [1_000_000]
    assert out.requests is None
    with pytest.raises(AttributeError):
        out.arrived = 5  # type: ignore[misc]


def test_the_request_log_has_one_row_per_request_in_each_column() -> None:
    log = _run(keep_requests=True).requests
    assert log is not None
    columns = [log.id, log.tenant, log.class_, log.arrival_ns, log.dispatch_ns, log.finish_ns, log.target, log.size,
               log.is_read]
    assert {len(c) for c in columns} == {4}
    assert (log.finish_ns - log.arrival_ns).tolist() == [1_000_000] * 4
