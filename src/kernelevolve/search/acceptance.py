"""Final acceptance: noise must not crown a winner.

The top candidates are measured again, each paired with the baseline (interleaved in the same
worker, longer than during the search). The answer is "improved S x (interval lo-hi)" only
when the 95% interval of a re-measured candidate clears 1 (of several, the best lower bound
wins); otherwise it is "no safe improvement", naming the fastest point estimate, which is an
honest outcome, not a failure.
"""
from __future__ import annotations

from typing import Any

from kernelevolve.types import EvalResult


def _judged(result: EvalResult, baseline: str) -> tuple[float | None, Any]:
    """The speedup and interval judged: those over torch.compile with baseline "compile"."""
    if baseline == "compile":
        return result.compile_speedup, result.compile_speedup_ci
    return result.speedup, result.speedup_ci


def decide(remeasured: list[tuple[int, EvalResult]], stop_reason: str,
           baseline: str = "eager") -> dict[str, Any]:
    """`remeasured`: (node id, EvalResult) for each finalist, best search fitness first.

    With baseline "compile" the speedup and interval judged are those over torch.compile."""
    judged = [(nid, r, *_judged(r, baseline)) for nid, r in remeasured]
    over = " over torch.compile" if baseline == "compile" else ""
    accepted = [(nid, speedup, ci) for nid, r, speedup, ci in judged
                if r.accepted and speedup is not None and ci]
    base = {"stop_reason": stop_reason, "baseline": baseline, "finalists": [
        {"node_id": nid, "stage": r.stage, "speedup": speedup,
         "interval": list(ci) if ci is not None else None} for nid, r, speedup, ci in judged]}
    if not accepted:
        why = "no candidate was accepted and measured" if not remeasured else \
            "no finalist passed the re-measurement"
        return {**base, "kind": "no_safe_improvement", "speedup": None, "interval": None,
                "node_id": None, "message": f"no safe improvement: {why}"}
    # Of the finalists that clear 1, the surest (best lower bound) wins. When none does, the
    # one named is the fastest point estimate: a steady 0.89x is not "the best candidate" beside
    # a 1.3x whose interval a load spike widened below 1.
    safe = [item for item in accepted if item[2][0] > 1.0]
    node_id, speedup, (lo, hi) = (max(safe, key=lambda item: (item[2][0], item[1])) if safe
                                  else max(accepted, key=lambda item: (item[1], item[2][0])))
    if safe:
        return {**base, "kind": "improved", "speedup": speedup, "interval": [lo, hi],
                "node_id": node_id,
                "message": f"improved {speedup:.3f}x{over} (95% interval {lo:.3f}-{hi:.3f}) by "
                           f"node {node_id}"}
    return {**base, "kind": "no_safe_improvement", "speedup": speedup, "interval": [lo, hi],
            "node_id": node_id,
            "message": (f"no safe improvement: the best candidate (node {node_id}) re-measured "
                        f"{speedup:.3f}x{over}, but its 95% interval {lo:.3f}-{hi:.3f} does not clear 1")}
