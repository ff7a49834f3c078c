"""Progress for a command busy for seconds on one thing (`eval`, `verify`): what it is doing.

On a terminal, a rich status line (a spinner) that each step replaces, starting with `first`;
elsewhere (a log, a pipe, CI), where a spinner shows nothing, one plain line per `update`, on
the same stream, so a log says what took the time. `first` is not printed there: a bad input
found before any real work stays one line of error. `quiet` (a command's --json) says nothing.
"""
from __future__ import annotations

from typing import Any

from rich.console import Console


class Steps:
    def __init__(self, console: Console, first: str, *, prefix: str = "", quiet: bool = False):
        self.console, self.first, self.prefix, self.quiet = console, first, prefix, quiet
        self._status: Any = None

    def __enter__(self) -> "Steps":
        if self.quiet:
            return self
        if self.console.is_terminal:
            self._status = self.console.status(self.first)
            self._status.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)

    def update(self, message: str) -> None:
        if self.quiet:
            return
        if self._status is not None:
            self._status.update(message)
        else:
            self._line(message)

    def _line(self, message: str) -> None:
        self.console.print(f"{self.prefix}{message}", markup=False, highlight=False,
                           soft_wrap=True)
