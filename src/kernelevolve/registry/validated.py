"""What a problem's validated cases look like as calls: the region and the init bindings.

Runs the problem's `get_inputs()` / `get_init_inputs()` for each case the evaluation checked
(the held-out odd case included, as the harness derives it), in this process: the problem is the
user's own trusted reference, and the calls only build inputs, they run no candidate code.
"""
from __future__ import annotations

import json
import sys
from typing import Any

from kernelevolve.registry.binding import case_signature
from kernelevolve.registry.db import RegistryError
from kernelevolve.registry.region import Region


def validated_cases(problem_path: str, platform: str, checked: set[str]
                    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(region as a dict, [{"case", "init", "signature"}]) over the checked cases."""
    from kernelevolve.harness.worker.session import seed_all
    from kernelevolve.plugins import get_platform
    from kernelevolve.problem import CaseBinder, derive_held_out, import_module, load_problem

    problem = load_problem(problem_path)
    held = derive_held_out(problem)
    cases = [c for c in (*problem.cases, *([held] if held else [])) if c.name in checked]
    if not cases:
        raise RegistryError(f"no case of {problem_path} was checked correct; nothing to promote")
    module = import_module(problem_path)
    try:
        binder = CaseBinder(module, tuple(cases))
        calls, binding = [], []
        for case in cases:
            binder.bind(case)
            seed_all(0)
            init = list(module.get_init_inputs())
            calls.append(list(module.get_inputs()))
            numel = sum(int(v.numel()) for v in calls[-1] if hasattr(v, "numel"))
            binding.append({**_binding(module.Model, case.name, init), "numel": numel})
    finally:
        sys.modules.pop(module.__name__, None)
    try:
        region = Region.from_calls(calls, get_platform(platform).device,
                                   [c.name for c in cases])
    except ValueError as exc:
        raise RegistryError(f"{problem_path}: {exc}") from None
    return region.to_dict(), binding


def _binding(model_cls: type, case: str, init: list[Any]) -> dict[str, Any]:
    try:
        json.dumps(init, allow_nan=False)
    except (TypeError, ValueError):
        return {"case": case, "init": None, "signature": None,
                "why": "its init inputs are not plain values"}
    try:
        sig = case_signature(model_cls, init)
    except Exception as exc:  # noqa: BLE001 - a constructor that cannot run on meta tensors
        return {"case": case, "init": init, "signature": None,
                "why": f"Model(*init) failed on the meta device ({type(exc).__name__})"}
    return {"case": case, "init": init, "signature": sig}
