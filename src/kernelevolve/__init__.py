"""kernelevolve: agentic kernel optimisation with a gated, sandboxed, honest harness."""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def evaluate(problem: Any, candidate: Any, **kwargs: Any):
    """Evaluate a candidate module against a problem; see `kernelevolve.harness.evaluate`."""
    from kernelevolve.harness.evaluate import evaluate as _evaluate

    return _evaluate(problem, candidate, **kwargs)


__all__ = ["evaluate", "__version__"]
