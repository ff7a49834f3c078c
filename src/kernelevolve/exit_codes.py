"""What `kernelevolve optimize` and `resume` exit with, so a script can tell outcomes apart.

The run's outcome `kind` (search/acceptance.py, run.py) maps to one code each; the README
lists them. `eval` keeps its own: 0 accepted, 1 rejected, 2 bad input.
"""
from __future__ import annotations

IMPROVED = 0              # the best finalist's re-measured interval clears 1
USAGE = 2                 # bad input: nothing ran, or a run could not start as asked
NO_SAFE_IMPROVEMENT = 3   # candidates were measured; none is a safe improvement
NOTHING_TO_SEARCH = 4     # no seed, and no operator could draft one from the reference
FAILED = 5                # stopped by failures: the LLM, the evaluation infrastructure
INTERRUPTED = 130         # Ctrl-C or SIGTERM; `kernelevolve resume ID` continues the run

BY_KIND = {"improved": IMPROVED, "no_safe_improvement": NO_SAFE_IMPROVEMENT,
           "nothing_to_search": NOTHING_TO_SEARCH, "stopped_by_failures": FAILED}


def for_outcome(outcome: dict) -> int:
    return BY_KIND.get(outcome.get("kind"), FAILED)
