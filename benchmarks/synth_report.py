"""Rows and reporting for benchmarks/synth_cpu.py: per-problem and per-case results, the
rich table, the totals (geometric means) and the JSON form of a row."""
from __future__ import annotations

import argparse
import math
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


@dataclass
class CaseRow:
    name: str
    weight: float
    synth_ms: float | None = None
    eager_ms: float | None = None
    compile_ms: float | None = None
    speedup: float | None = None           # eager / synth
    compile_speedup: float | None = None   # compile / synth


@dataclass
class ProblemRow:
    name: str
    path: str
    status: str = "error"   # ok | not covered | synth error | rejected | error
    reason: str = ""
    draft: str = "synth"    # synth | stand-in (--candidate-for)
    plan: Any = None
    kernels: str = ""       # short coverage summary for the table
    evals: int | None = None
    run_id: str | None = None
    best_node: int | None = None
    draft_speedup: float | None = None     # the draft's own search evaluation
    search_speedup: float | None = None    # the run's outcome (finalists re-measured)
    speedup: float | None = None           # weighted geomean over cases, vs eager
    compile_speedup: float | None = None   # weighted geomean over cases, vs torch.compile
    compile_note: str = ""
    cases: list[CaseRow] = field(default_factory=list)
    elapsed_s: float = 0.0


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _ms(values: list[float | None]) -> str:
    return "\n".join("-" if v is None else (f"{v:.3f}" if v < 10 else f"{v:.1f}") for v in values)


def render(rows: list[ProblemRow], totals: dict[str, Any], args: argparse.Namespace,
           console: Console) -> None:
    table = Table(title=f"synthesized C++ kernels, tuned ({args.evals} evals each), vs eager and "
                        "torch.compile (median ms per case)", show_lines=True)
    table.add_column("problem", no_wrap=True)
    table.add_column("case", no_wrap=True)
    for col in ("synth ms", "eager ms", "compile ms"):
        table.add_column(col, justify="right", no_wrap=True)
    table.add_column("vs eager", justify="right", no_wrap=True)
    table.add_column("vs compile", justify="right", no_wrap=True)
    table.add_column("notes", max_width=60)
    for row in rows:
        if row.status == "ok":
            notes = [row.kernels] if row.kernels else []
            if row.draft_speedup is not None:
                notes.append(f"draft {row.draft_speedup:.2f}x in the search, best node "
                             f"{row.best_node} of {row.evals} evals")
            if row.compile_note:
                notes.append(row.compile_note)
            table.add_row(row.name, "\n".join(c.name for c in row.cases),
                          _ms([c.synth_ms for c in row.cases]),
                          _ms([c.eager_ms for c in row.cases]),
                          _ms([c.compile_ms for c in row.cases]),
                          _speed(row.speedup), _speed(row.compile_speedup),
                          "; ".join(n for n in notes if n) + f" [{row.elapsed_s:.0f} s]")
        else:
            colour = "yellow" if row.status == "not covered" else "red"
            table.add_row(row.name, "", "", "", "", "-", "-",
                          f"[{colour}]{row.status}[/]: {row.reason} [{row.elapsed_s:.0f} s]")
    table.add_row("[bold]geomean[/]", "", "", "", "", _speed(totals["geomean_vs_eager"]),
                  _speed(totals["geomean_vs_compile"]),
                  f"over {totals['measured']} of {len(rows)} problems; beats eager on "
                  f"{totals['beats_eager']}, matches or beats torch.compile (>= 0.97x) on "
                  f"{totals['matches_compile']}")
    console.print(table)


def _speed(value: float | None) -> str:
    if value is None:
        return "-"
    colour = "green" if value >= 1.0 else ("yellow" if value >= 0.97 else "red")
    return f"[{colour}]{value:.2f}x[/]"


def totals_of(rows: list[ProblemRow]) -> dict[str, Any]:
    ok = [r for r in rows if r.status == "ok"]
    compiled = [r for r in ok if r.compile_speedup is not None]
    return {"problems": len(rows), "measured": len(ok),
            "geomean_vs_eager": geomean([r.speedup for r in ok]),
            "geomean_vs_compile": geomean([r.compile_speedup for r in compiled]),
            "compile_measured": len(compiled),
            "beats_eager": sum(1 for r in ok if r.speedup and r.speedup > 1.0),
            "matches_compile": sum(1 for r in compiled if r.compile_speedup >= 0.97),
            "by_status": {s: sum(1 for r in rows if r.status == s)
                          for s in sorted({r.status for r in rows})}}


def machine() -> dict[str, Any]:
    import torch

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version()}


def row_dict(row: ProblemRow) -> dict[str, Any]:
    data = asdict(row)
    for key, value in list(data.items()):
        if isinstance(value, float) and not math.isfinite(value):
            data[key] = None
    return data
