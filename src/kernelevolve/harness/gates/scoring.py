"""Scoring: a measure job's timing samples become the EvalResult's figures and verdict."""
from __future__ import annotations

from typing import Any

from kernelevolve.harness.protocol.timing import (speedup_interval, summarize, weighted_geomean,
                                         weighted_interval)
from kernelevolve.harness.gates.profile_view import apply_profiles
from kernelevolve.types import EvalResult


def score(result: EvalResult, cases: dict[str, Any]) -> None:
    """Fill `result` from the measure job's samples: per-case medians, IQRs and intervals,
    the weighted speedup and its interval, and the accepted verdict."""
    speedups, weights, compile_speedups, measured_ms, pairs = [], [], [], 0.0, []
    compile_pairs = []
    for case_result in result.cases:
        if case_result.held_out:
            continue
        data = cases[case_result.name]
        ref, cand = summarize(data["ref_ms"]), summarize(data["cand_ms"])
        case_result.ref_timing, case_result.cand_timing = ref, cand
        case_result.ref_ms, case_result.cand_ms = ref.median_ms, cand.median_ms
        case_result.speedup = ref.median_ms / cand.median_ms
        case_result.speedup_ci = speedup_interval(data["ref_ms"], data["cand_ms"])
        case_result.timing_stop = data.get("stopped")
        apply_profiles(result, case_result, data)
        calls = data.get("calls_per_batch") or 1  # samples are per call, of n-call batches
        measured_ms += calls * (sum(data["ref_ms"]) + sum(data["cand_ms"]))
        if data.get("compile_ms"):
            comp = summarize(data["compile_ms"])
            case_result.compile_timing, case_result.compile_ms = comp, comp.median_ms
            compile_speedups.append(comp.median_ms / cand.median_ms)
            compile_pairs.append((data["compile_ms"], data["cand_ms"]))
            measured_ms += calls * sum(data["compile_ms"])
        speedups.append(case_result.speedup)
        weights.append(case_result.weight)
        pairs.append((data["ref_ms"], data["cand_ms"]))
    result.measured = True
    result.speedup_ci = weighted_interval(pairs, weights)
    result.measured_s += measured_ms / 1e3
    result.speedup = weighted_geomean(speedups, weights)
    result.compile_speedup = (weighted_geomean(compile_speedups, weights)
                              if len(compile_speedups) == len(speedups) else None)
    result.compile_speedup_ci = (weighted_interval(compile_pairs, weights)
                                 if result.compile_speedup is not None else None)
    result.accepted, result.stage, result.fitness = True, "accepted", result.speedup
    if result.compile_speedup is not None and result.baseline == "compile":
        result.fitness = result.compile_speedup  # relative to what the user compares with
    result.reason = _verdict(result, len(speedups))


def _verdict(result: EvalResult, n_cases: int) -> str:
    """"accepted: S x weighted speedup over B (95% interval) across N case(s); ...": B is the
    baseline fitness uses (torch.compile with --baseline compile), so the figure that leads is
    the one the search and the outcome judge; the other baseline follows."""
    eager = (result.speedup, result.speedup_ci, "eager PyTorch")
    comp = (result.compile_speedup, result.compile_speedup_ci, "torch.compile")
    order = [comp, eager] if result.baseline == "compile" else [eager, comp]
    parts = [f"{s:.3f}x over {name} (95% interval {ci[0]:.3f}-{ci[1]:.3f})"
             for s, ci, name in order if s is not None]
    head = parts[0].replace("x over", "x weighted speedup over", 1)
    return f"accepted: {head} across {n_cases} case(s)" + "".join(f"; {p}" for p in parts[1:])
