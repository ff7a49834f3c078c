"""A run config for searches whose tests assert no verdict: the suite's timing
(tests/quick_timing.toml, which conftest.py names in KERNELEVOLVE_CONFIG) with one finalist
re-measured instead of three. Choosing among finalists is covered by test_timing_stats and the
verdict tests, which keep the suite's config."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

QUICK = Path(__file__).resolve().parent / "quick_timing.toml"


def one_finalist_config(folder: Path, *, default_search_timing: bool = False) -> Path:
    """Write the config into `folder` and return its path (for --config). With
    `default_search_timing`, the search's evaluations keep the product's default timing (no
    [search_timing] table); the finalist's re-measurement is the suite's."""
    tables = tomllib.loads(QUICK.read_text())
    if default_search_timing:
        tables.pop("search_timing", None)
    tables["final_top_k"] = 1
    flat = {k: v for k, v in tables.items() if not isinstance(v, dict)}
    lines = [f"{k} = {json.dumps(v)}" for k, v in flat.items()]
    for name, table in tables.items():
        if name not in flat:
            lines += ["", f"[{name}]", *(f"{k} = {json.dumps(v)}" for k, v in table.items())]
    path = Path(folder) / "one_finalist.toml"
    path.write_text("\n".join(lines) + "\n")
    return path
