"""Output paths: checked before a command does its work (a run that takes minutes must
not end with "cannot write --out" and lose its results), and written whole or not at all
(:func:`replacing`: a failure or a kill mid-write leaves the previous file intact).

Of the folders an output path names, only the last may be missing: it is made (an
output folder ``runs/a``, the folder ``runs`` of a file ``runs/x.parquet``); a path
with more missing is an error, not a tree of folders made where a typo put them
(``/nope/dir/x.parquet`` made ``/nope`` at the root of the file system). The one
exception is :data:`RESULTS`, the current directory's ``out``, where the commands'
default outputs go (``out/run``): it is made with its folder.

>>> check_output_file(Path("/dev/null/x.csv"), "--out")
Traceback (most recent call last):
...
storqos.base.errors.InputError: --out: /dev/null/x.csv: /dev/null is not a directory
>>> check_output_file(Path("/nope/dir/x.parquet"), "--out")
Traceback (most recent call last):
...
storqos.base.errors.InputError: --out: /nope/dir/x.parquet: no folder /nope (only the last folder, /nope/dir, is made: make the others first)
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from storqos.base.errors import InputError

if TYPE_CHECKING:
    import polars as pl


#: The folder of the commands' default outputs (``out/run``, ``out/demo``,
#: ``out/validate``), in the current directory: made when missing with a folder in it.
RESULTS = Path("out")


def _check_folder(path: Path, folder: Path, where: str | None) -> None:
    """``folder`` (``path``'s own: a file's, or an output folder itself) is a writable
    directory, or can be made as one: its parent exists, as a writable directory (or is
    :data:`RESULTS`, which can be made in the current one)."""
    anc = folder if folder.exists() else folder.parent
    if anc == RESULTS and not anc.exists():
        anc = Path.cwd()
    if not anc.exists():
        top = anc
        while not top.parent.exists() and top != top.parent:
            top = top.parent
        raise InputError(f"{path}: no folder {top} (only the last folder, {folder}, is made: make the others first)",
                         where)
    if not anc.is_dir():
        raise InputError(f"{path}: {anc} is not a directory", where)
    if not os.access(anc, os.W_OK | os.X_OK):
        raise InputError(f"{path}: permission denied (cannot write in {anc})", where)


def make_folder(folder: Path, where: str | None = None) -> None:
    """Make ``folder`` if it is missing, and it alone (its parent must exist)."""
    if folder.is_dir():
        return
    _check_folder(folder, folder, where)
    if folder.parent == RESULTS:
        RESULTS.mkdir(exist_ok=True)
    folder.mkdir(exist_ok=True)


def check_output_file(path: Path, where: str) -> None:
    """``path`` can be created or overwritten as a file (its folder, if missing, is made
    when it is written)."""
    if path.exists():
        if path.is_dir():
            raise InputError(f"{path}: is a directory, expected a file", where)
        if not os.access(path, os.W_OK):
            raise InputError(f"{path}: permission denied", where)
        return
    _check_folder(path, path.parent, where)


def check_output_dir(path: Path, where: str) -> None:
    """``path`` is a writable directory or can be made as one (:func:`make_folder`)."""
    if path.exists():
        if not path.is_dir():
            raise InputError(f"{path}: exists and is not a directory", where)
        if not os.access(path, os.W_OK | os.X_OK):
            raise InputError(f"{path}: permission denied", where)
        return
    _check_folder(path, path, where)


class Replacement:
    """Where to write a file that is to replace ``path`` whole: :attr:`part`, a temporary
    file beside it, moved over it (atomically, on the same file system) by
    :meth:`commit`; :meth:`abort` drops it and leaves ``path`` as it was.

    A symbolic link is written through (its target replaced, the link kept). A path that
    is not a regular file (``/dev/null``, ``/dev/stdout``, a named pipe) is written into
    by :meth:`commit` from a temporary file elsewhere: replacing it would put a regular
    file in its place (as root, ``/dev/null`` itself).
    """

    def __init__(self, path: Path) -> None:
        try:
            self.special = not stat.S_ISREG(os.stat(path).st_mode)
        except FileNotFoundError:
            self.special = False
        self._tmp: str | None = None
        if self.special:
            self.path = path
            self._tmp = tempfile.mkdtemp(prefix="storqos-")
            self.part = Path(self._tmp) / path.name
        else:
            self.path = Path(os.path.realpath(path)) if path.is_symlink() else path
            make_folder(self.path.parent)
            self.part = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")

    def commit(self) -> None:
        """Put what was written to :attr:`part` in place."""
        if self.special:
            with open(self.part, "rb") as src, open(self.path, "wb") as dst:
                shutil.copyfileobj(src, dst)
            self.abort()
        else:
            os.replace(self.part, self.path)

    def abort(self) -> None:
        """Drop :attr:`part` (the file at ``path``, if any, stays as it was)."""
        self.part.unlink(missing_ok=True)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)


@contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """:class:`Replacement` as a block: write to the path it yields; ``path`` is
    replaced only when the block ends without an error.

    >>> with replacing(Path(tmp) / "out.csv") as part:  # doctest: +SKIP
    ...     df.write_csv(part)
    """
    r = Replacement(path)
    try:
        yield r.part
        r.commit()
    finally:
        r.abort()


#: Table files storqos writes, by suffix.
TABLE_SUFFIXES = (".csv", ".json", ".parquet")


def check_table_file(path: Path, where: str) -> str:
    """Before any work: ``path`` names a table type storqos writes (by its suffix) and can
    be written; returns the suffix. A ``.csv`` is written as CSV, never Parquet."""
    check_output_file(path, where)
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise InputError(f"unknown output type {path.suffix or path.name!r} (use .csv, .json or .parquet)", where)
    return suffix


def write_table(df: pl.DataFrame, path: Path, where: str = "--out") -> None:
    """Write ``df`` whole or not at all, as CSV, JSON (a list of rows) or Parquet by the
    suffix of ``path``."""
    suffix = check_table_file(path, where)
    with replacing(path) as part:
        if suffix == ".csv":
            df.write_csv(part)
        elif suffix == ".json":
            part.write_text(json.dumps(df.to_dicts(), indent=2, default=float) + "\n")
        else:
            df.write_parquet(part)


__all__ = ["RESULTS", "TABLE_SUFFIXES", "Replacement", "check_output_dir", "check_output_file", "check_table_file", "make_folder",
           "replacing", "write_table"]
