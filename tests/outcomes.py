"""What a finished search must exit with, derived from what it stored: one right answer.

A search over real measurements may or may not find a safe improvement on a busy machine, so a
test cannot fix 0 or 3 in advance; it can check that the exit code is the one the run's stored
outcome names, and that the outcome is the one its finalists' intervals decide
(search/acceptance.py: improved only when the best accepted finalist's interval clears 1)."""
from __future__ import annotations

from typing import Any

IMPROVED, NO_SAFE_IMPROVEMENT = 0, 3


def expected_kind(outcome: dict[str, Any]) -> str:
    lows = [f["interval"][0] for f in outcome.get("finalists") or []
            if f.get("stage") == "accepted" and f.get("speedup") is not None and f.get("interval")]
    return "improved" if lows and max(lows) > 1.0 else "no_safe_improvement"


def assert_measured_exit(returncode: int, summary: dict[str, Any], output: str = "") -> None:
    """`summary`: the run's --json summary. The run measured candidates and exited as its
    stored outcome says; the outcome agrees with the finalists' intervals."""
    outcome = summary.get("outcome") or {}
    assert outcome.get("kind") in ("improved", "no_safe_improvement"), (outcome, output)
    assert outcome["kind"] == expected_kind(outcome), outcome
    want = IMPROVED if outcome["kind"] == "improved" else NO_SAFE_IMPROVEMENT
    assert returncode == want, (returncode, outcome.get("message"), output)
