"""Self-checks of generated ATen probes: the table is right only if its references behave.

`check_problem` loads a generated problem and runs its reference on every case (in this
process, seeded), and reports what is wrong with the probe itself, not with any kernel:
a case whose reference raises; a normal or second case whose float output is not finite
(a domain that leaves the op's domain) or is one value everywhere (the harness's check that
the kernels compute the result, by skipping them, cannot work on it); an edge case whose inputs hold no NaN / inf although
the probe plants them, or whose float output holds none although the planted values should
reach it (unless the row says the op maps them to finite values, as nan_to_num does).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def _tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def _nonfinite(tensors: list[Any]) -> bool:
    import torch

    return any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in tensors)


def run_cases(path: str | Path, seed: int = 0) -> dict[str, tuple[list[Any], list[Any]]]:
    """case name -> (input tensors, output tensors) of the reference, or raises."""
    import torch

    from kernelevolve.problem import CaseBinder, import_module, load_problem

    problem = load_problem(path)
    module = import_module(path)
    out = {}
    try:
        binder = CaseBinder(module, problem.cases)
        for case in problem.cases:
            binder.bind(case)
            torch.manual_seed(seed)
            model = module.Model(*module.get_init_inputs())
            inputs = list(module.get_inputs())
            with torch.no_grad():
                outputs = model(*[t.clone() for t in inputs])
            out[case.name] = (_tensors(inputs), _tensors(outputs))
    finally:
        sys.modules.pop(module.__name__, None)
    return out


def check_problem(path: str | Path, probe: Any) -> list[str]:
    """What is wrong with one generated probe (empty: nothing)."""
    try:
        cases = run_cases(path)
    except Exception as exc:  # noqa: BLE001 - a probe whose reference fails is the finding
        return [f"{probe.name}: the reference raised {type(exc).__name__}: "
                f"{(str(exc).splitlines() or [''])[0][:200]}"]
    issues = []
    for name in ("normal", "second"):
        if _nonfinite(cases[name][1]):
            issues.append(f"{probe.name}: case {name} gives a non-finite output (its input "
                          "domain leaves the op's domain)")
        if any(t.numel() > 1 and bool((t == t.reshape(-1)[0]).all()) for t in cases[name][1]):
            issues.append(f"{probe.name}: case {name} gives an output that is one value "
                          "everywhere (it cannot tell a kernel from none)")
    ins, outs = cases["edge"]
    if probe.float_special:
        import torch

        fl = [t for t in ins if t.is_floating_point()]
        if not any(bool(torch.isnan(t).any()) for t in fl) or \
                not any(bool(torch.isinf(t).any()) for t in fl):
            issues.append(f"{probe.name}: the edge case's inputs hold no NaN or no inf")
        floats = [t for t in outs if t.is_floating_point()]
        if floats and not probe.finite and not _nonfinite(floats):
            issues.append(f"{probe.name}: the edge case's output holds no NaN / inf although "
                          "NaN and inf are planted (a table row that misses them)")
        if probe.finite and _nonfinite(floats):
            issues.append(f"{probe.name}: marked finite, but the edge output is not")
    elif all(bool((a == b).all()) for a, b in zip(ins, cases["normal"][0])
             if a.shape == b.shape):
        issues.append(f"{probe.name}: the edge case plants nothing into its inputs")
    return issues
