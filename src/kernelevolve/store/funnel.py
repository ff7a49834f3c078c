"""The rejection funnel: where candidates of a run stopped, derived from node rows.

Why a separate function: the funnel is derived state (from each node's status and the stage its
evaluation reached), shown by `show`, the live display and the report; keeping it a pure function
of counts keeps it testable without a database and identical everywhere it is shown.

Keys: `proposed` counts every candidate; each gate key (`static` ... `timing`) counts candidates
REJECTED at that gate; `accepted` counts those that passed all gates; `pending` and `infra_failed`
count candidates without a verdict; `generation` counts proposals that never became a candidate
(an LLM reply with no usable code), read from events of kind "generation_failure", and `llm`
the LLM calls that failed outright (no reply: connection, auth, rate limit), from "llm_error"
events. The root node (the PyTorch reference, status "root") is the baseline, not a proposal,
and is not counted.

`survivors` turns the counts into what every view prints (show, the report, the live view):
how many are left after each step, from the attempts to the accepted.
"""
from __future__ import annotations

from typing import Iterable

from kernelevolve.types import STAGES

FUNNEL_KEYS = ("llm", "generation", "proposed", *STAGES, "pending", "infra_failed")


def funnel_counts(groups: Iterable[tuple[str, str | None, int]], generation_failures: int = 0,
                  llm_failures: int = 0) -> dict[str, int]:
    """Counts from `(status, stage, n)` groups, e.g. a `GROUP BY status, stage` query."""
    out = {key: 0 for key in FUNNEL_KEYS}
    out["generation"] = int(generation_failures)
    out["llm"] = int(llm_failures)
    for status, stage, n in groups:
        if status == "root":
            continue
        out["proposed"] += n
        if status == "done" and stage in STAGES:
            out[stage] += n
        elif status == "infra_failed":
            out["infra_failed"] += n
        else:
            # pending, or a done row with an unknown stage (written by a newer version): no verdict
            out["pending"] += n
    return out


def survivors(funnel: dict[str, int]) -> list[tuple[str, int, int]]:
    """(step, left after it, dropped at it), narrowing from the attempts to the accepted: the
    steps before "candidates" appear only when proposals were lost (failed LLM calls, replies
    without code), "evaluated" only when some candidates got no verdict."""
    def count(key: str) -> int:
        return int(funnel.get(key) or 0)

    lost = count("llm") + count("generation")
    rows = [("attempts", count("proposed") + lost, 0)] if lost else []
    rows.append(("candidates", count("proposed"), lost))
    unjudged = count("pending") + count("infra_failed")
    alive = max(count("proposed") - unjudged, 0)
    if unjudged:
        rows.append(("evaluated", alive, unjudged))
    for gate in STAGES[:-2]:
        alive = max(alive - count(gate), 0)
        rows.append((f"passed {gate}", alive, count(gate)))
    rows.append(("accepted", count("accepted"), count(STAGES[-2])))
    return rows


def funnel_text(funnel: dict[str, int]) -> str:
    """One line: "candidates 20 -> passed static 20 -> ... -> accepted 12", with what was lost
    before the candidates spelled out."""
    steps = []
    for label, left, dropped in survivors(funnel):
        step = f"{label} {left}"
        if label == "candidates" and dropped:
            why = [f"{n} {what}" for n, what in ((int(funnel.get("llm") or 0), "LLM calls failed"),
                   (int(funnel.get("generation") or 0), "replies without usable code")) if n]
            step += f" ({', '.join(why)})"
        steps.append(step)
    return " -> ".join(steps)
