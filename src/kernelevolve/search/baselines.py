"""What the reference costs, per case: eager PyTorch and torch.compile, from a run's results.

Every timed evaluation measures eager PyTorch next to the candidate; torch.compile is timed when
fitness is relative to it (`--baseline compile`) and otherwise once per run, in the first
evaluation, so that a prompt can state the goal as beating the faster of the two. The figures
are read back from stored results, so a resumed run has them without measuring again.
"""
from __future__ import annotations

from typing import Any, Iterable

from kernelevolve.types import EvalResult


def figures(results: Iterable[EvalResult | None]) -> dict[str, Any]:
    """{"cases": {name: {"eager_ms", "compile_ms", and the case's speed-of-light cost:
    "bytes_moved", "flops", "sol_ms", "sol_bound"}}, "compile_error": str | None}; the latest
    result that timed a case wins."""
    cases: dict[str, dict[str, Any]] = {}
    error = None
    for result in results:
        if not result:
            continue
        error = error or result.integrity.get("compile_baseline_error")
        for case in result.cases:
            if case.held_out:
                continue
            row = cases.setdefault(case.name, {})
            for key, value in (("eager_ms", case.ref_ms), ("compile_ms", case.compile_ms),
                               ("bytes_moved", case.bytes_moved), ("flops", case.flops),
                               ("sol_ms", case.sol_ms), ("sol_bound", case.sol_bound)):
                if value is not None:
                    row[key] = value
    return {"cases": cases, "compile_error": error}


def compile_known(facts: dict[str, Any]) -> bool:
    """Whether torch.compile has been timed for every case (or failed, which is a fact too)."""
    rows = facts.get("cases") or {}
    return bool(facts.get("compile_error")) or (
        bool(rows) and all("compile_ms" in row for row in rows.values()))


def fitness_for(result: EvalResult, baseline: str) -> float | None:
    """An accepted result's fitness relative to the run's baseline (None when not accepted or
    not timed against it). Runs stored before the first evaluation kept its speedup over eager
    apart from its speedup over torch.compile stored the latter as fitness; this realigns them."""
    if not result.accepted:
        return None
    return result.compile_speedup if baseline == "compile" else result.speedup
