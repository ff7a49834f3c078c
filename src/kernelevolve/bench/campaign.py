"""A bench campaign's state: one JSON file per campaign in WORKSPACE/benches/, rewritten by
rename after every change, so a killed bench resumes where it stopped.

Rows are per problem: pending -> running (its run id recorded before the search starts) ->
done, or skipped (too big for the machine) or failed (the problem cannot be loaded). Running
the same bench again (same name: by default derived from the problem list) continues: finished
rows are kept, a running row's run is resumed from its store, pending rows start.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelevolve.errors import UsageError

VERSION = 1


def default_name(problems: list[Path]) -> str:
    h = hashlib.sha256("\n".join(str(p) for p in problems).encode()).hexdigest()[:10]
    return f"bench-{h}"


class Campaign:
    def __init__(self, path: Path, data: dict[str, Any]):
        self.path, self.data = path, data

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.data["rows"]

    @property
    def name(self) -> str:
        return self.data["name"]

    @classmethod
    def open(cls, workspace: Path, name: str, problems: list[Path],
             settings: dict[str, Any]) -> tuple["Campaign", bool]:
        """(campaign, resumed): a new one, or the stored one when it has these problems."""
        if not name.replace("-", "").replace("_", "").isalnum():
            raise UsageError(f"--name {name!r}: use letters, digits, - and _")
        path = Path(workspace) / "benches" / f"{name}.json"
        if path.is_file():
            try:
                data = json.loads(path.read_text())
            except ValueError:
                raise UsageError(f"{path}: not a readable bench state; move it away or pass "
                                 "another --name") from None
            stored = [r["path"] for r in data.get("rows", [])]
            if stored != [str(p) for p in problems]:
                raise UsageError(f"bench {name} holds other problems ({len(stored)}); pass "
                                 "another --name, or the same paths to resume it")
            return cls(path, data), True
        rows = [{"problem": p.stem, "path": str(p), "status": "pending"} for p in problems]
        data = {"version": VERSION, "name": name, "created": time.time(), "settings": settings,
                "rows": rows, "stopped": None}
        camp = cls(path, data)
        camp.save()
        return camp, False

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.data["updated"] = time.time()
        fd, tmp = tempfile.mkstemp(prefix=".bench-", dir=self.path.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump(self.data, fh, indent=1, sort_keys=True, default=str)
        os.replace(tmp, self.path)
