"""Which files a bench runs: problem modules named on the command line or found in folders."""
from __future__ import annotations

from pathlib import Path

from kernelevolve.errors import UsageError


def find_problems(paths: list[str | Path]) -> list[Path]:
    """Every `.py` file named, and every `.py` file directly in a named folder (sorted; names
    starting with `_` or `test` are skipped); one-line UsageError when nothing is found."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(p for p in path.glob("*.py")
                            if not p.name.startswith(("_", "test")))
        elif path.is_file() and path.suffix == ".py":
            found.append(path)
        else:
            raise UsageError(f"{path}: no such problem file or folder; pass .py problem files or "
                             "folders holding them")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        raise UsageError(f"no problem files (*.py) in {', '.join(str(p) for p in paths)}")
    return unique
