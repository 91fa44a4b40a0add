"""docs/reference/ is what ``python -m storqos.cli.reference`` generates from the
registry, the CLI and the file schemas now: a policy, an option or a key added, changed
or removed without regenerating it fails here."""

from __future__ import annotations

import difflib

from conftest import REPO
from storqos.cli.reference import REFERENCE, REGENERATE, reference


def test_the_committed_reference_is_current() -> None:
    pages = reference()
    committed = {p.name for p in (REPO / REFERENCE).glob("*.md")}
    assert committed == set(pages), f"{REFERENCE}: pages {sorted(committed)}, the generator makes {sorted(pages)}"
    for name, now in pages.items():
        path = f"{REFERENCE}/{name}"
        was = (REPO / path).read_text()
        if was != now:
            diff = "".join(list(difflib.unified_diff(was.splitlines(keepends=True), now.splitlines(keepends=True),
                                                     path, "generated"))[:40])
            raise AssertionError(f"{path} is not current: run `.venv/bin/{REGENERATE}`\n{diff}")


def test_the_reference_gives_each_policy_option_and_key_once() -> None:
    """Spot checks against the sources, written out by hand: a policy's parameter with its
    range, an option of both commands, a key of each file, a gateway limit."""
    text = "".join(reference().values())
    assert text.count("\n### `mclock`\n") == 1
    assert "| `limits` | rates | `none` | > 0 | per-tenant limits, IOPS (none = no limit) |" in text
    assert "| `pole` | number | `0.4` | (-1, 1) |" in text
    assert text.count("| `--at-limit` | text | — | mclock:") >= 2  # simulate and serve (and ctl set)
    assert "| `limits.request_timeout` | duration > 0 | `10 s` |" in text
    assert "| `depth` | whole number | — | ≥ 1, ≤ 4096 |" in text
    assert "| export name | 4096 bytes at most |" in text
