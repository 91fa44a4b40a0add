"""What storqos hands the Rust core is JSON with finite numbers: `inf` and `nan` reached
it as `Infinity` / `NaN` and came back as "expected value at line 1 column N" (a policy
key given `inf` in an experiment file), or ended in an internal error (an FCLB batch of
`inf`, an OverflowError). Each is now one line naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from storqos.base.core_json import core_json
from storqos.base.errors import InputError

EXPERIMENT = """
name = "x"
duration = "2s"
[device]
kind = "constant"
capacity = "900"
[[tenant]]
name = "a"
generator = {{ kind = "poisson", rate = "100" }}
reservation = "50"
slo = "20ms"
[[policy]]
{policy}
"""


def test_a_number_that_is_not_finite_is_named_by_its_key() -> None:
    assert core_json({"kind": "wf2q", "weights": [1.0, 2.5]}, "policy") == '{"kind": "wf2q", "weights": [1.0, 2.5]}'
    with pytest.raises(InputError, match=r"^policy\.then\.weights\[1\]: must be a finite number, got nan$"):
        core_json({"kind": "rtt", "then": {"weights": [1.0, float("nan")]}}, "policy")


@pytest.mark.parametrize(("policy", "needle"), [
    ('kind = "adaptive+avatar"\np_rt = inf', "[[policy]] 1 (adaptive+avatar): policy.p_rt: must be a finite number, got inf"),
    ('kind = "fclb"\nworkloads = ["40:35ms"]\npole = nan', "[[policy]] 1 (fclb): policy.pole: must be a finite number, got nan"),
    ('kind = "fclb"\nworkloads = ["40:35ms"]\nbatch = inf', "[[policy]] 1 (fclb): batch: expected a whole number, got inf"),
])
def test_an_experiments_policy_key_of_inf_or_nan_is_one_line(tmp_path: Path, policy: str, needle: str) -> None:
    f = tmp_path / "e.toml"
    f.write_text(EXPERIMENT.format(policy=policy))
    assert_one_line_error(run_cli("run", str(f), "--check"), needle)
