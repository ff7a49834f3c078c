"""Speed of light: how close a candidate comes to what the measuring machine allows.

Per case, the reference's minimal traffic is the bytes of its tensor inputs, parameters,
buffers and outputs (each read or written once; the same storage counts once), and its work is
what `torch.utils.flop_counter.FlopCounterMode` counts over one reference forward (matmuls,
convolutions, attention; pointwise ops count 0, so such problems are memory-bound). Both are
counted by the reference job (`reference_cost`, in a worker that never loads candidate code),
once per problem and Evaluator. `apply_roofline` (driver) turns them and the fingerprint's
measured bandwidth and peaks (platforms/machine_facts.py) into each case's `sol_ms` =
max(bytes / bandwidth, flops / peak), its `sol_bound`, `sol_fraction` = sol_ms / cand_ms and the
candidate's achieved GB/s and GFLOP/s; `EvalResult.sol_fraction` is their weighted geometric mean.
"""
from __future__ import annotations

from typing import Any

from kernelevolve.types import CaseResult, EvalResult


# ---- worker side ------------------------------------------------------------------------------
def reference_cost(model: Any, inputs: list[Any], outputs: list[Any]) -> dict[str, Any]:
    """{"bytes", "flops", "dtype"} of one reference forward on `inputs` (which gave `outputs`)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(*inputs)
    tensors = [*_tensors(inputs), *_tensors(outputs)]
    if isinstance(model, torch.nn.Module):
        tensors += [*model.parameters(), *model.buffers()]
    return {"bytes": tensor_bytes(tensors), "flops": int(counter.get_total_flops()),
            "dtype": main_dtype(tensors)}


def tensor_bytes(tensors: list[Any]) -> int:
    """Bytes of distinct tensors (a view of another, or a second output aliasing an input,
    counts once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for t in tensors:
        key = (t.data_ptr(), t.nbytes) if t.data_ptr() else (id(t), t.nbytes)
        if key not in seen:
            seen.add(key)
            total += t.nbytes
    return total


def main_dtype(tensors: list[Any]) -> str:
    """The floating dtype holding the most bytes ("float32" when there is none)."""
    by_dtype: dict[str, int] = {}
    for t in tensors:
        if t.is_floating_point():
            name = str(t.dtype).removeprefix("torch.")
            by_dtype[name] = by_dtype.get(name, 0) + t.nbytes
    return max(by_dtype, key=by_dtype.get) if by_dtype else "float32"


def _tensors(values: Any) -> list[Any]:
    import torch

    if isinstance(values, torch.Tensor):
        return [values]
    if isinstance(values, (list, tuple)):
        return [t for v in values for t in _tensors(v)]
    if isinstance(values, dict):
        return [t for v in values.values() for t in _tensors(v)]
    return []


# ---- driver side ------------------------------------------------------------------------------
def apply_roofline(result: EvalResult, costs: dict[str, Any] | None,
                   fingerprint: dict[str, Any] | None) -> None:
    """Fill each case's cost and speed-of-light fields, and the result's weighted fraction.

    Cases without a counted cost keep None; without measured machine figures (or a timed
    candidate) only `bytes_moved` and `flops` are filled."""
    from kernelevolve.platforms.machine_facts import bandwidth_gbs, peak_gflops

    if not costs:
        return
    bandwidth = bandwidth_gbs(fingerprint)
    fractions, weights = [], []
    for case in result.cases:
        cost = costs.get(case.name)
        if not isinstance(cost, dict) or not isinstance(cost.get("bytes"), int):
            continue
        case.bytes_moved, case.flops = cost["bytes"], int(cost.get("flops") or 0)
        peak, _ = peak_gflops(fingerprint, str(cost.get("dtype") or "float32"))
        if bandwidth is None or peak is None or not case.cand_ms or case.cand_ms <= 0:
            continue
        fill_case(case, bandwidth, peak)
        if not case.held_out and case.sol_fraction:
            fractions.append(case.sol_fraction)
            weights.append(case.weight)
    if fractions and result.measured:
        from kernelevolve.harness.protocol.timing import weighted_geomean

        result.sol_fraction = weighted_geomean(fractions, weights)


def fill_case(case: CaseResult, bandwidth_gbs: float, peak_gflops: float) -> None:
    """sol_ms, sol_bound, sol_fraction, achieved_gbs and achieved_gflops of one timed case."""
    memory_ms = case.bytes_moved / (bandwidth_gbs * 1e6)   # bytes / (GB/s) in ms
    compute_ms = case.flops / (peak_gflops * 1e6)
    case.sol_ms = max(memory_ms, compute_ms)
    case.sol_bound = "compute" if compute_ms > memory_ms else "memory"
    case.sol_fraction = case.sol_ms / case.cand_ms
    case.achieved_gbs = case.bytes_moved / case.cand_ms / 1e6
    case.achieved_gflops = case.flops / case.cand_ms / 1e6


def sol_text(case: Any) -> str:
    """"31% mem", "88% comp" or "-" for a CaseResult or its dict."""
    get = case.get if isinstance(case, dict) else lambda k: getattr(case, k, None)
    fraction, bound = get("sol_fraction"), get("sol_bound")
    if fraction is None:
        return "-"
    return f"{100 * fraction:.0f}% {'comp' if bound == 'compute' else 'mem'}"
