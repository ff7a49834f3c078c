"""The command line's error helpers, shared by every command (the sub-apps' included): a user
mistake is one line on stderr and exit 2, anything else a traceback and a request for a report.

Low in the layer order so that the packages' own CLIs (bench, knowledge, registry) need not
import the top-level cli.py.
"""
from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

from kernelevolve.errors import KernelevolveError

err_console = Console(stderr=True)


class _user_errors:
    """Print a user mistake as one line on stderr and exit 2; never a traceback."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None and issubclass(exc_type, KernelevolveError):
            # escaped: a message may hold brackets ("pip install 'kernelevolve[ray]'")
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False,
                              soft_wrap=True)
            raise typer.Exit(getattr(exc, "exit_code", 2))
        if exc_type is not None and issubclass(exc_type, OSError) and _about_a_path(exc):
            # a path the user named or owns (missing, unreadable, disk full): theirs to fix
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False,
                              soft_wrap=True)
            raise typer.Exit(2)
        return False


def _about_a_path(exc: OSError) -> bool:
    return exc.filename is not None and not isinstance(exc, BlockingIOError)


BUG_EXIT = 70  # EX_SOFTWARE: never 1, which eval uses for "rejected"


def _internal_error(exc: BaseException) -> None:
    """Anything else that escapes a command is a kernelevolve bug: its traceback, a request
    for a report, exit 70."""
    import traceback

    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    err_console.print(f"[bold red]internal error:[/] {escape(type(exc).__name__)} is a bug in "
                      "kernelevolve, not a problem with your input. Please report it with the "
                      "traceback above and the output of `kernelevolve version`.",
                      highlight=False, soft_wrap=True)
    sys.exit(BUG_EXIT)


user_errors = _user_errors
