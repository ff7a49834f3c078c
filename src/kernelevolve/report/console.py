"""The console the read-only views print on (`show`, `runs`): a terminal's width on a terminal;
in a log or a pipe, a wide one that does not wrap lines, so no column is cut mid-word to fit an
80-column terminal that is not there. COLUMNS widens it further but never narrows it there: CI
runners and pytest-xdist workers export COLUMNS=80 with no terminal behind it."""
from __future__ import annotations

from typing import Any

from rich.console import Console

WIDE = 200  # columns in a log or pipe: every table this package prints fits


def stdout_console(**kwargs: Any) -> Console:
    console = Console(**kwargs)
    if not console.is_terminal:
        console.width = max(console.width, WIDE)
        console.soft_wrap = True  # text lines whole; tables still lay out within the width
    return console
