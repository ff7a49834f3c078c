"""A bench's figures: per-problem speedups over eager and over torch.compile, fast_p, rates.

fast_p (KernelBench's measure) is the share of problems whose kernel is correct and more than
p times faster than the baseline; fast_0 is the correctness rate. A problem's speedup is its
run's outcome figure: the best finalist's re-measured speedup over eager (paired, interleaved
with the reference), counted only when the run called it a safe improvement (its 95% interval
clears 1): otherwise the user keeps eager, and a 1.4x whose interval reaches 0.6x is no win.
The measured figure is kept beside it (`measured_speedup`). Over torch.compile it is that figure divided by torch.compile's own speedup
over eager on the same cases, timed in the same worker in the run's first evaluation (both
paired ratios, so the division is fair). Skipped and failed problems count in the denominators:
a suite result covers the whole suite.
"""
from __future__ import annotations

import math
from typing import Any, Iterable

P_VALUES = (0.0, 1.0, 1.5, 2.0)


def compile_factor(results: Iterable[dict[str, Any]]) -> float | None:
    """torch.compile's speedup over eager (weighted geomean over the timed cases) from the first
    stored evaluation that timed it, or None."""
    for result in results:
        pairs = [(c.get("weight") or 1.0, c["ref_ms"] / c["compile_ms"])
                 for c in (result or {}).get("cases") or []
                 if not c.get("held_out") and c.get("ref_ms") and c.get("compile_ms")]
        if pairs:
            total = sum(w for w, _ in pairs)
            return math.exp(sum(w * math.log(r) for w, r in pairs) / total)
    return None


def fast_p(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    n = len(rows)
    out = {}
    for p in P_VALUES:
        hits = sum(1 for r in rows if r.get("correct") and (
            p == 0.0 or (r.get(key) is not None and r[key] > p)))
        out[f"fast_{p:g}"] = hits / n if n else 0.0
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in rows if r.get("status") == "done"]
    funnel: dict[str, int] = {}
    for r in done:
        for k, v in (r.get("funnel") or {}).items():
            if isinstance(v, (int, float)):
                funnel[k] = funnel.get(k, 0) + v
    n = len(rows)
    return {
        "problems": n,
        "done": len(done),
        "skipped": sum(1 for r in rows if r.get("status") == "skipped"),
        "failed": sum(1 for r in rows if r.get("status") == "failed"),
        "pending": sum(1 for r in rows if r.get("status") in ("pending", "running")),
        "correct_rate": sum(1 for r in rows if r.get("correct")) / n if n else 0.0,
        "improved_share": sum(1 for r in rows if r.get("safe")) / n if n else 0.0,
        "no_improvement_share": sum(1 for r in done if not r.get("safe")) / n if n else 0.0,
        "over_eager": fast_p(rows, "speedup"),
        "over_compile": fast_p(rows, "speedup_compile"),
        "compile_timed": sum(1 for r in rows if r.get("speedup_compile") is not None),
        "evaluations": sum(r.get("evals") or 0 for r in done),
        "funnel": funnel,
        "wall_s": sum(r.get("wall_s") or 0.0 for r in rows),
    }
