"""Output paths make only their last folder: ``--out /nope/dir/x.parquet`` made ``/nope``
at the root of the file system without a word. Every command that writes a file or a
folder refuses, in one line and before any work, a path with more than its last folder
missing, and makes that last folder when it alone is missing."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO, assert_one_line_error, run_cli
from storqos.base.errors import InputError
from storqos.base.paths import check_output_dir, check_output_file, make_folder, replacing
from storqos.traces import bundled

TRACE = str(bundled("websearch"))


def _commands(tmp_path: Path, out: Path) -> dict[str, list[str]]:
    """Each command that writes, with ``out`` where it writes (a file or a folder)."""
    image = tmp_path / "a.img"
    image.write_bytes(b"\0" * 4096)
    return {
        "simulate": ["simulate", TRACE, "--capacity", "500", "--out", str(out)],
        "plan": ["plan", TRACE, "--deadline", "10ms", "--fraction", "90", "--out", str(out)],
        "trace convert": ["trace", "convert", TRACE, str(out)],
        "replay": ["replay", TRACE, "nbd://127.0.0.1:9/a", "--out", str(out)],
        "calibrate": ["calibrate", "nbd://127.0.0.1:9/a", "--out", str(out)],
        "serve": ["serve", "-e", f"a={image}", "--window", "1s", "--for", "1s", "--out", str(out)],
        "run": ["run", str(REPO / "examples" / "experiments" / "compare.toml"), "--out", str(out)],
        "run --markdown": ["run", str(REPO / "examples" / "experiments" / "compare.toml"), "--out",
                           str(tmp_path / "run"), "--markdown", str(out)],
        "validate": ["validate", str(REPO / "examples" / "validation" / "websearch.toml"), "--out", str(out)],
        "demo": ["demo", "--out", str(out)],
        "advise": ["advise", str(REPO / "examples" / "advise" / "advise.toml"), "--out", str(out)],
    }


COMMANDS = ["simulate", "plan", "trace convert", "replay", "calibrate", "serve", "run", "run --markdown", "validate",
            "demo", "advise"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_path_with_more_than_its_last_folder_missing_is_refused(tmp_path: Path, command: str) -> None:
    out = tmp_path / "nope" / "dir" / ("x.md" if "markdown" in command else "x.parquet")
    r = run_cli(*_commands(tmp_path, out)[command])
    assert_one_line_error(r, str(out), f"no folder {tmp_path / 'nope'}", "only the last folder")
    assert not (tmp_path / "nope").exists()


def test_the_last_folder_is_made(tmp_path: Path) -> None:
    """simulate's file into a new folder; run's folder itself."""
    r = run_cli(*_commands(tmp_path, tmp_path / "new" / "x.parquet")["simulate"])
    assert r.code == 0, r.err
    assert (tmp_path / "new" / "x.parquet").is_file()
    exp = tmp_path / "exp.toml"
    exp.write_text('name = "x"\nduration = "1s"\n[device]\nkind = "constant"\ncapacity = "500"\n'
                   '[[tenant]]\nname = "a"\ngenerator = { kind = "poisson", rate = "50" }\n[[policy]]\nkind = "fcfs"\n')
    r = run_cli("run", str(exp), "--out", str(tmp_path / "made"))
    assert r.code == 0, r.err
    assert (tmp_path / "made" / "summary.json").is_file()
    # out/, where the defaults go, is made with its folder: `storqos run exp.toml` in a fresh directory.
    r = run_cli("run", str(exp), cwd=tmp_path)
    assert r.code == 0, r.err
    assert (tmp_path / "out" / "run" / "summary.json").is_file()


def test_the_library_makes_the_last_folder_alone(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="only the last folder"):
        check_output_file(tmp_path / "a" / "b" / "x.csv", "--out")
    with pytest.raises(InputError, match="only the last folder"):
        check_output_dir(tmp_path / "a" / "b", "--out")
    with pytest.raises(InputError, match="only the last folder"), replacing(tmp_path / "a" / "b" / "x.csv") as part:
        part.write_text("never")
    with pytest.raises(InputError, match="only the last folder"):
        make_folder(tmp_path / "a" / "b")
    assert not (tmp_path / "a").exists()
    with replacing(tmp_path / "a" / "x.csv") as part:
        part.write_text("kept\n")
    assert (tmp_path / "a" / "x.csv").read_text() == "kept\n"
    check_output_dir(tmp_path / "b", "--out")  # its parent is there: fine
