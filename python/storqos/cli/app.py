"""The ``storqos`` command line (typer + rich).

Every command has ``--help`` with an example and ``--json`` for scripts. Bad input of
any kind ends with one line on stderr naming what and where, and exit status 2. The
commands live in :mod:`storqos.cli.commands`, one module each; this module makes the app and
turns errors into lines and exit statuses.
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from typing import Annotated, Any, NoReturn

import typer
from rich.markup import escape
from typer.core import TyperOption

from storqos.base.console import err, out
from storqos.base.errors import InputError, InputWarning
from storqos.cli.commands import register_all
from storqos.cli.commands.options import given


def _flags_without_type(self: TyperOption, ctx: Any) -> str | None:
    """typer ≥ 0.2x prints ``<bool>`` beside every flag (``--json <bool>``), which reads
    as if the flag took a value: show flags bare, other options with their type."""
    return None if self.is_flag else _option_type(self, ctx)


_option_type = TyperOption.display_type_rich
TyperOption.display_type_rich = _flags_without_type  # type: ignore[method-assign]


def _no_empty_values(self: TyperOption, ctx: Any, value: Any) -> Any:
    """An option given an empty value (``--policy=``, ``--listen ""``: a shell variable
    that was not set) is an error, not the option left out: several options fall back
    to their default or the config file's value when empty, which served FCFS on the
    default address without a word."""
    values = value if isinstance(value, (list, tuple)) else (value,)
    if self.name is not None and given(ctx, self.name) and any(isinstance(v, str) and not v.strip() for v in values):
        name = max(self.opts, key=len)
        raise InputError(f"empty value (give one, or leave {name} out)", name)
    return _process_value(self, ctx, value)


_process_value = TyperOption.process_value
TyperOption.process_value = _no_empty_values  # type: ignore[method-assign,assignment]

app = typer.Typer(
    name="storqos",
    help="QoS toolkit for shared block storage: simulate traces through QoS policies, plan, serve.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)



def _print_version(value: bool) -> None:
    if value:
        from storqos.base.version import __version__

        out.print(f"storqos {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_print_version)
    ] = False,
) -> None:
    """The app's own options (its help text is the app's)."""


register_all(app)


def _reflow(doc: str) -> str:
    """A command's docstring as help: typer's rich mode keeps the source's line breaks,
    which at 80 columns leaves a one-word line after every wrapped one. Paragraphs are
    joined into single lines (rich wraps them to the terminal); list items ("- ") each
    start a line."""
    paras = []
    for para in inspect.cleandoc(doc).split("\n\n"):
        items: list[str] = []
        for line in para.splitlines():
            if line.lstrip().startswith(("- ", "* ")) or not items:
                items.append(line.strip())
            else:
                items[-1] += " " + line.strip()
        paras.append("\n".join(items))
    return "\n\n".join(paras)


def _reflow_all(t: typer.Typer) -> None:
    for cmd in t.registered_commands:
        doc = cmd.help or (cmd.callback.__doc__ if cmd.callback else None)
        if doc:
            cmd.help = _reflow(doc)
    for group in t.registered_groups:
        if group.typer_instance is not None:
            _reflow_all(group.typer_instance)


_reflow_all(app)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    """Doubtful input (an :class:`InputWarning`) as one ``warning:`` line on stderr."""
    err.print(f"[yellow]warning:[/yellow] {escape(str(message))}", highlight=False, soft_wrap=True)


def main() -> None:
    """Entry point: run the app, turning input errors into one line and exit status 2."""
    warnings.simplefilter("default", InputWarning)
    warnings.showwarning = _show_warning
    try:
        rv = app(standalone_mode=False)
        if isinstance(rv, int) and rv != 0:
            sys.exit(rv)
    except InputError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except FileNotFoundError as e:
        err.print(f"[red]error:[/red] {escape(str(e.filename))}: no such file", highlight=False, soft_wrap=True)
        sys.exit(2)
    except IsADirectoryError as e:
        err.print(f"[red]error:[/red] {escape(str(e.filename))}: is a directory, expected a file", highlight=False, soft_wrap=True)
        sys.exit(2)
    except PermissionError as e:
        err.print(f"[red]error:[/red] {escape(str(e.filename))}: permission denied", highlight=False, soft_wrap=True)
        sys.exit(2)
    except OSError as e:
        # A path the user gave that cannot be used (a file where a directory must be, a
        # full disk, ...): name it and say why. Errors without a path are not about input.
        if e.filename is None:
            raise_internal(e)
        where = f"{e.filename} -> {e.filename2}" if e.filename2 else str(e.filename)
        err.print(f"[red]error:[/red] {escape(where)}: {escape((e.strerror or type(e).__name__).lower())}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as e:  # usage errors of typer's click, and anything unexpected
        # typer may vendor click (typer._click): recognise its exceptions by shape.
        show, code = getattr(e, "show", None), getattr(e, "exit_code", None)
        if callable(show) and isinstance(code, int):
            ctx = getattr(e, "ctx", None)
            fmt = getattr(e, "format_message", None)
            if type(e).__name__ == "NoArgsIsHelpError" or ctx is None or not callable(fmt):
                show()  # the help text itself
            else:  # a usage error: one line, with where to get help
                err.print(f"[red]error:[/red] {escape(f'{ctx.command_path}: {fmt()}')} (see '{escape(ctx.command_path)} --help')",
                          highlight=False, soft_wrap=True)
            sys.exit(code)
        raise_internal(e)


def raise_internal(e: BaseException) -> NoReturn:
    """An unexpected error (a bug, not bad input): one line and exit status 1, or the
    traceback with STORQOS_DEBUG=1."""
    if os.environ.get("STORQOS_DEBUG"):
        raise e
    err.print(f"[red]internal error:[/red] {escape(f'{type(e).__name__}: {e}')} (set STORQOS_DEBUG=1 for a traceback)",
              highlight=False, soft_wrap=True)
    sys.exit(1)


if __name__ == "__main__":
    main()
