"""Will a problem fit in this machine's memory? Estimated on the meta device, before any run.

For each case, the problem's `get_init_inputs()`, `Model(*init)` and `get_inputs()` run under
`torch.device("meta")`: shapes and dtypes without memory or data. Inputs plus parameters and
buffers, times `FACTOR` (outputs and eager's temporaries, and the harness keeps reference
outputs and a few input sets), is compared with MemAvailable. The reference's forward runs on
meta too (memory_peak.py): what it allocates at its peak, twice (the harness keeps the
reference's outputs while the candidate makes its own), plus the inputs and weights, is needed
as well, so a problem whose reference makes a huge intermediate from small inputs is skipped
with the figure instead of failing out of memory. A problem whose factory cannot run on meta (it
names a device, or calls `.numpy()`) is not estimated and simply runs.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kernelevolve.memory_peak import forward_peak

FACTOR = 4


def available_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _tensor_bytes(values: Any) -> int:
    import torch

    total = 0
    for v in values if isinstance(values, (list, tuple)) else [values]:
        if isinstance(v, torch.Tensor):
            total += v.numel() * v.element_size()
        elif isinstance(v, (list, tuple)):
            total += _tensor_bytes(v)
    return total


def estimate(problem_path: str | Path) -> dict[str, Any]:
    """{"bytes": the inputs and weights of the case needing most, "case": its name, "peak":
    its reference's forward peak (0: not measured)} or {"unknown": why}."""
    import torch

    from kernelevolve.problem import CaseBinder, import_module, load_problem

    try:
        problem = load_problem(problem_path)
        module = import_module(problem_path)
    except Exception as exc:  # noqa: BLE001 - the run reports the problem's own error
        return {"unknown": str(exc)}
    worst: dict[str, Any] = {"bytes": 0, "case": None}
    try:
        binder = CaseBinder(module, problem.cases)
        for case in problem.cases:
            binder.bind(case)
            with torch.device("meta"):
                init = list(module.get_init_inputs())
                model = module.Model(*init)
                inputs = list(module.get_inputs())
            state = [*model.parameters(), *model.buffers()] if hasattr(model, "parameters") else []
            size = _tensor_bytes(inputs) + _tensor_bytes(state)
            peak = forward_peak(model, inputs) or 0
            if _need(size, peak) > _need(worst["bytes"], worst.get("peak", 0)):
                worst = {"bytes": size, "case": case.name, "peak": peak}
    except Exception as exc:  # noqa: BLE001 - not estimable on meta: let the run find out
        return {"unknown": f"{type(exc).__name__}: {str(exc)[:200]}"}
    finally:
        sys.modules.pop(module.__name__, None)
    return worst


def _need(size: int, peak: int) -> int:
    """Bytes a run needs: FACTOR x the inputs and weights, or those plus twice the
    reference's forward peak when that is more."""
    return max(size * FACTOR, size + 2 * peak)


def too_big(problem_path: str | Path, available: int | None = None) -> str | None:
    """A one-line reason to skip the problem, or None when it fits (or cannot be estimated)."""
    found = estimate(problem_path)
    avail = available_bytes() if available is None else available
    if "unknown" in found or avail is None:
        return None
    size, peak = found["bytes"], found.get("peak", 0)
    need = _need(size, peak)
    if need <= avail:
        return None
    gib = 1024 ** 3
    why = f"x{FACTOR} for outputs and temporaries" if need == size * FACTOR else (
        f"and the reference's forward peaks at {peak / gib:.2f} GiB, twice that for it and "
        "the candidate")
    return (f"needs about {need / gib:.1f} GiB (case {found['case']}: {size / gib:.2f} "
            f"GiB of inputs and weights, {why}); {avail / gib:.1f} GiB available")
