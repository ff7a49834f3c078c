"""The rejection funnel: where candidates of a run stopped, derived from node rows.

Why a separate function: the funnel is derived state (from each node's status and the stage its
evaluation reached), shown by `show`, the live display and the report; keeping it a pure function
of counts keeps it testable without a database and identical everywhere it is shown.

Keys: `proposed` counts every candidate; each gate key (`static` ... `timing`) counts candidates
REJECTED at that gate; `accepted` counts those that passed all gates; `pending` and `infra_failed`
count candidates without a verdict; `generation` counts proposals that never became a candidate
(an LLM reply with no usable code), read from events of kind "generation_failure". The root node
(the PyTorch reference, status "root") is the baseline, not a proposal, and is not counted.
"""
from __future__ import annotations

from typing import Iterable

from kernelevolve.types import STAGES

FUNNEL_KEYS = ("generation", "proposed", *STAGES, "pending", "infra_failed")


def funnel_counts(groups: Iterable[tuple[str, str | None, int]], generation_failures: int = 0
                  ) -> dict[str, int]:
    """Counts from `(status, stage, n)` groups, e.g. a `GROUP BY status, stage` query."""
    out = {key: 0 for key in FUNNEL_KEYS}
    out["generation"] = int(generation_failures)
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
