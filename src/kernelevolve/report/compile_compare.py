"""The outcome against torch.compile, said once: the "compile comparison line" that `optimize`
and `show` print under the outcome when torch.compile was timed in the run.

With `--baseline compile` the outcome itself is the speedup over torch.compile (the finalists
are re-measured beside it), so no second line repeats it. With `--baseline eager` torch.compile
is timed once per run when asked (an LLM's prompt, `time_compile`: search/baselines.py); the
line then sets the outcome node's re-measured times against those, per case, weighted like the
speedup. Those figures come from different measurements, so the line says it is not paired and
gives no interval: a rough figure, never dressed as the verdict's equal.
"""
from __future__ import annotations

from typing import Any

from kernelevolve.harness.protocol.timing import weighted_geomean
from kernelevolve.types import EvalResult


def compile_comparison(outcome: dict[str, Any] | None, result: EvalResult | None,
                       baselines: dict[str, Any] | None, baseline: str) -> dict[str, Any] | None:
    """{"node_id", "baseline", "speedup", "interval", "paired"} for the outcome's node, or None
    when the run has no outcome node or torch.compile was not timed for every case."""
    if not outcome or outcome.get("node_id") is None or result is None or not result.accepted:
        return None
    base = {"node_id": outcome["node_id"], "baseline": outcome.get("baseline") or baseline}
    if result.compile_speedup is not None:  # timed beside the candidate: paired, with interval
        ci = result.compile_speedup_ci
        return {**base, "speedup": result.compile_speedup,
                "interval": list(ci) if ci else None, "paired": True}
    rows = (baselines or {}).get("cases") or {}
    timed = [c for c in result.cases if not c.held_out]
    if not timed or any(c.cand_ms is None or (rows.get(c.name) or {}).get("compile_ms") is None
                        for c in timed):
        return None
    speedup = weighted_geomean([rows[c.name]["compile_ms"] / c.cand_ms for c in timed],
                               [c.weight for c in timed])
    return {**base, "speedup": speedup, "interval": None, "paired": False}


def compile_line(comparison: dict[str, Any] | None) -> str | None:
    """"over torch.compile: 1.234x ...", or None: not timed, or the outcome already says it."""
    c = comparison
    if not c or c.get("speedup") is None or c.get("baseline") == "compile":
        return None
    head = f"over torch.compile: {c['speedup']:.3f}x by node {c['node_id']}"
    if c.get("paired") and c.get("interval"):
        lo, hi = c["interval"]
        return f"{head} (95% interval {lo:.3f}-{hi:.3f}, timed beside it)"
    return (f"{head} (its re-measured times against torch.compile's, timed once earlier in "
            "the run: not paired, so no interval; --baseline compile measures it properly)")
