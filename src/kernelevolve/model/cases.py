"""A model file's timed cases as the profilers and the in-place check take them."""
from __future__ import annotations

from typing import Any, Callable


def timed_cases(mf: Any) -> list[tuple[str, float, Callable[[], list]]]:
    """(name, weight, inputs maker) of each timed (not held-out) case of a model file."""
    return [(c.name, c.weight, (lambda c=c: mf.inputs(c))) for c in mf.cases if not c.held_out]
