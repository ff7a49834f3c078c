"""What the reference costs, per case: eager PyTorch and torch.compile, from a run's results.

Every timed evaluation measures eager PyTorch next to the candidate; torch.compile is timed when
fitness is relative to it (`--baseline compile`) and otherwise once per run, in the first
evaluation, so that a prompt can state the goal as beating the faster of the two. The figures
are read back from stored results, so a resumed run has them without measuring again.
"""
from __future__ import annotations

from typing import Any, Iterable


def figures(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """{"cases": {name: {"eager_ms", "compile_ms", and the case's speed-of-light cost:
    "bytes_moved", "flops", "sol_ms", "sol_bound"}}, "compile_error": str | None}; the latest
    result that timed a case wins."""
    cases: dict[str, dict[str, float]] = {}
    error = None
    for result in results:
        if not result:
            continue
        error = error or (result.get("integrity") or {}).get("compile_baseline_error")
        for case in result.get("cases") or []:
            if case.get("held_out"):
                continue
            row = cases.setdefault(case["name"], {})
            for key, field in (("eager_ms", "ref_ms"), ("compile_ms", "compile_ms"),
                               ("bytes_moved", "bytes_moved"), ("flops", "flops"),
                               ("sol_ms", "sol_ms"), ("sol_bound", "sol_bound")):
                if case.get(field) is not None:
                    row[key] = case[field]
    return {"cases": cases, "compile_error": error}


def compile_known(facts: dict[str, Any]) -> bool:
    """Whether torch.compile has been timed for every case (or failed, which is a fact too)."""
    rows = facts.get("cases") or {}
    return bool(facts.get("compile_error")) or (
        bool(rows) and all("compile_ms" in row for row in rows.values()))


def fitness_for(result: dict[str, Any], baseline: str) -> float | None:
    """An accepted result's fitness relative to the run's baseline (None when not accepted or
    not timed against it). Runs stored before the first evaluation kept its speedup over eager
    apart from its speedup over torch.compile stored the latter as fitness; this realigns them."""
    if not result.get("accepted"):
        return None
    return result.get("compile_speedup" if baseline == "compile" else "speedup")
