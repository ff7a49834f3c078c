"""Will a problem fit in this machine's memory? Estimated on the meta device, before any run.

For each case, the problem's `get_init_inputs()`, `Model(*init)` and `get_inputs()` run under
`torch.device("meta")`: shapes and dtypes without memory or data. Inputs plus parameters and
buffers, times `FACTOR` (outputs and eager's temporaries, and the harness keeps reference
outputs and a few input sets), is compared with MemAvailable. A problem whose factory cannot run
on meta (it names a device, or calls `.numpy()`) is not estimated and simply runs.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

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
    """{"bytes": largest case's estimate, "case": its name} or {"unknown": why}."""
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
            if size > worst["bytes"]:
                worst = {"bytes": size, "case": case.name}
    except Exception as exc:  # noqa: BLE001 - not estimable on meta: let the run find out
        return {"unknown": f"{type(exc).__name__}: {str(exc)[:200]}"}
    finally:
        sys.modules.pop(module.__name__, None)
    return worst


def too_big(problem_path: str | Path, available: int | None = None) -> str | None:
    """A one-line reason to skip the problem, or None when it fits (or cannot be estimated)."""
    found = estimate(problem_path)
    avail = available_bytes() if available is None else available
    if "unknown" in found or avail is None:
        return None
    need = found["bytes"] * FACTOR
    if need <= avail:
        return None
    gib = 1024 ** 3
    return (f"needs about {need / gib:.1f} GiB (case {found['case']}: {found['bytes'] / gib:.2f} "
            f"GiB of inputs and weights, x{FACTOR} for outputs and temporaries); "
            f"{avail / gib:.1f} GiB available")
