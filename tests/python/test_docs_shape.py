"""The docs read as reference and guides, not as a log of work: the README, BENCHMARKS and
the validation guide stay short enough to read, and neither they nor the code name
tracker issues or work sessions (git keeps that history)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: The longest each top-level document may grow, in lines.
LONGEST = {"README.md": 250, "BENCHMARKS.md": 400, "docs/validation.md": 400}
#: The longest any other user's document (docs/) may grow, in lines.
LONGEST_GUIDE = 600

#: A tracker's issue number or a work session, in prose or a comment.
LOG_WORDS = re.compile(r"\bissue #?\d+\b|\bsittings?\b|\bsession dates?\b", re.IGNORECASE)


def _product_files() -> list[Path]:
    """The docs, the package, the crates' sources, the benchmarks, the examples and the
    Makefile: everything a user reads or runs."""
    files = [REPO / "README.md", REPO / "BENCHMARKS.md", REPO / "CHANGELOG.md", REPO / "Makefile"]
    for folder, suffixes in (("docs", {".md"}), ("python", {".py", ".pyi"}), ("crates", {".rs"}),
                             ("benches", {".py", ".rs"}), ("examples", {".py", ".toml"})):
        files += [f for f in (REPO / folder).rglob("*") if f.suffix in suffixes and "target" not in f.parts]
    return files


@pytest.mark.parametrize("name", sorted(LONGEST))
def test_the_document_is_short_enough_to_read(name: str) -> None:
    lines = (REPO / name).read_text(encoding="utf-8").count("\n")
    assert lines <= LONGEST[name], f"{name} has {lines} lines, more than {LONGEST[name]}"


def test_every_guide_and_reference_page_is_short_enough_to_read() -> None:
    long = [f"{f.relative_to(REPO)}: {n} lines" for f in sorted((REPO / "docs").rglob("*.md"))
            if (n := f.read_text(encoding="utf-8").count("\n")) > LONGEST_GUIDE]
    assert long == [], f"more than {LONGEST_GUIDE} lines: {long}"


def test_the_checker_finds_an_issue_number_and_a_sitting() -> None:
    assert LOG_WORDS.search("fixed in issue 58, see below")
    assert LOG_WORDS.search("measured this sitting")
    assert not LOG_WORDS.search("the issue depth is 8; issues 4 KiB reads")


def test_no_document_or_source_names_an_issue_or_a_sitting() -> None:
    found = [f"{f.relative_to(REPO)}:{n}: {line.strip()[:80]}"
             for f in _product_files()
             for n, line in enumerate(f.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
             if LOG_WORDS.search(line)]
    assert found == []
