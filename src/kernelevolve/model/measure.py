"""Whole-model timing: variants of one model (eager, patched, torch.compile) on the workload's
cases, paired and interleaved, with outputs compared to the baseline's.

Protocol, under `torch.inference_mode()`:

1. First calls. Each variant is called once per case (held-out cases included) on a copy of
   the inputs; the output is kept for the comparison and the call's wall time is recorded
   (`first_call_s`; their sum is `compile_s`: for a `torch.compile` variant the first call on
   each new shape is where it compiles). A variant that raises here, or later, is dropped with
   a one-line reason in `failed`; the baseline raising is a UsageError.
2. Warm-up: `warmup` more untimed calls per variant and timed case.
3. Timing: `reps` repetitions; in each, every timed case (weight > 0) runs every variant once,
   back to back, the variants' order rotated per repetition (and the cases' order too), so
   drift and cache effects are shared by the variants of one repetition.

Statistics: per case and variant the median ms; a variant's `ms` is the weighted mean of its
case medians (sum w * median / sum w). Per repetition the weighted time of a variant is
sum w * t / sum w over the cases; the speedup of a variant is the median over repetitions of
(baseline's weighted time / the variant's) in the same repetition, with a 95% percentile
bootstrap interval of that median, resampling repetitions (pairs kept together). Outputs are
compared per case with `allclose(atol, rtol)` (NaN equal to NaN, shapes and structure equal);
`max_abs_err` is the largest absolute difference over all cases.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

import torch

from kernelevolve.errors import UsageError
from kernelevolve.model.profile import device_sync

_RESAMPLES = 2000


def measure_model(variants: dict[str, Callable[..., Any]],
                  inputs: Sequence[tuple[str, float, list]], *, reps: int = 15,
                  warmup: int = 2, baseline: str = "eager", atol: float = 1e-4,
                  rtol: float = 1e-4, seed: int = 0) -> dict:
    """Time `variants` (name -> callable taking *inputs) on `inputs` ([(case, weight, args)];
    held-out cases have weight 0: compared, not timed). Returns a JSON-able dict:
    cases, variants {name: {ms, per_case, first_call_s, compile_s}}, speedup {name: {value,
    interval}} (over the baseline), max_abs_err, outputs_match, failed {name: reason}."""
    cases = _check_args(variants, inputs, baseline, reps, warmup)
    live = dict(variants)
    failed: dict[str, str] = {}
    outputs: dict[str, dict[str, Any]] = {name: {} for name in live}
    first: dict[str, dict[str, float]] = {name: {} for name in live}
    with torch.inference_mode():
        for case, _, args in cases:
            for name in list(live):
                try:
                    t0 = _now(args)
                    out = live[name](*_clone(args))
                    first[name][case] = _now(args) - t0
                    outputs[name][case] = _detach(out)
                except Exception as exc:  # noqa: BLE001 - a failing variant is data
                    _drop(name, f"raised {_one_line(exc)} on case {case!r}", live, failed,
                          baseline)
        timed = [(c, w, a) for c, w, a in cases if w > 0]
        for _ in range(warmup):
            for case, _, args in timed:
                for name in list(live):
                    _call(name, live, failed, baseline, case, args)
        samples = {name: {case: [] for case, _, _ in timed} for name in live}
        for rep in range(reps):
            shift = rep % len(timed)
            for case, _, args in timed[shift:] + timed[:shift]:
                names = list(live)
                turn = rep % len(names)
                for name in names[turn:] + names[:turn]:
                    if name not in live:
                        continue
                    t = _call(name, live, failed, baseline, case, args)
                    if t is not None:
                        samples[name][case].append(t * 1e3)
    return _summarise(cases, timed, live, failed, outputs, first, samples, baseline, atol,
                      rtol, seed)


def _check_args(variants, inputs, baseline, reps, warmup) -> list[tuple[str, float, list]]:
    if baseline not in variants:
        raise UsageError(f"baseline {baseline!r} is not one of the variants "
                         f"({', '.join(variants) or 'none'})")
    if not isinstance(reps, int) or reps < 1 or not isinstance(warmup, int) or warmup < 0:
        raise UsageError(f"reps must be >= 1 and warmup >= 0 (got reps={reps!r}, "
                         f"warmup={warmup!r})")
    cases, seen = [], set()
    for entry in inputs:
        case, weight, args = entry
        if case in seen:
            raise UsageError(f"case {case!r} appears twice in the inputs; name each case once")
        seen.add(case)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or \
                not (weight >= 0 and math.isfinite(weight)):
            raise UsageError(f"case {case!r} has weight {weight!r}; use a finite number >= 0 "
                             "(0 for a held-out case)")
        cases.append((str(case), float(weight), list(args)))
    if not any(w > 0 for _, w, _ in cases):
        raise UsageError("no case has a positive weight; at least one workload case must be "
                         "timed (held-out cases have weight 0)")
    return cases


def _one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if first.endswith(":") and len(lines) > 1:  # "backend='inductor' raised:" + the cause
        first = f"{first} {lines[1]}"
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _drop(name, why, live, failed, baseline) -> None:
    if name == baseline:
        raise UsageError(f"the baseline variant {name!r} {why}; the model must run its "
                         "workload") from None
    live.pop(name, None)
    failed[name] = why


def _device(args) -> str:
    return next((a.device.type for a in args if isinstance(a, torch.Tensor)), "cpu")


def _now(args) -> float:
    device_sync(_device(args))()  # device work is asynchronous: read the clock after it
    return time.perf_counter()


def _call(name, live, failed, baseline, case, args) -> float | None:
    """One timed call (seconds), or None when the variant raised (it is dropped)."""
    if name not in live:
        return None
    fn = live[name]
    try:
        t0 = _now(args)
        fn(*args)
        return _now(args) - t0
    except Exception as exc:  # noqa: BLE001
        _drop(name, f"raised {_one_line(exc)} on case {case!r}", live, failed, baseline)
        return None


def _clone(args: list) -> list:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _detach(out: Any) -> Any:
    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, (list, tuple)):
        return type(out)(_detach(o) for o in out) if isinstance(out, list) else \
            tuple(_detach(o) for o in out)
    if isinstance(out, dict):
        return {k: _detach(v) for k, v in out.items()}
    return out


def _leaves(out: Any, path: str = "out") -> list[tuple[str, Any]]:
    if isinstance(out, (list, tuple)):
        return [leaf for i, o in enumerate(out) for leaf in _leaves(o, f"{path}[{i}]")]
    if isinstance(out, dict):
        return [leaf for k in sorted(out, key=str) for leaf in _leaves(out[k], f"{path}[{k!r}]")]
    return [(path, out)]


def compare_outputs(ref: Any, got: Any, atol: float, rtol: float) -> tuple[float, bool, str]:
    """(max abs error, within tolerance, why not): tensors leaf by leaf, NaN equal to NaN."""
    a, b = _leaves(ref), _leaves(got)
    if [p for p, _ in a] != [p for p, _ in b]:
        return math.inf, False, "the outputs differ in structure"
    worst, ok, why = 0.0, True, ""
    for (path, x), (_, y) in zip(a, b):
        if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
            if x != y:
                return math.inf, False, f"{path} differs"
            continue
        if x.shape != y.shape:
            return math.inf, False, f"{path} has shape {tuple(y.shape)}, not {tuple(x.shape)}"
        if x.numel() == 0:
            continue
        x64, y64 = x.detach().cpu().double(), y.detach().cpu().double()
        both_nan = torch.isnan(x64) & torch.isnan(y64)
        same = (x64 == y64) | both_nan  # equal infinities have no error
        diff = torch.where(same, torch.zeros_like(x64), (x64 - y64).abs())
        diff = torch.nan_to_num(diff, nan=math.inf)
        worst = max(worst, float(diff.max()))
        if not torch.allclose(y64, x64, atol=atol, rtol=rtol, equal_nan=True):
            ok, why = False, why or f"{path} is outside atol={atol:g}, rtol={rtol:g}"
    return worst, ok, why


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _speedup(ratios: list[float], seed: int) -> dict:
    import numpy as np

    arr = np.asarray(ratios, dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(_RESAMPLES, arr.size))
    lo, hi = np.percentile(np.median(arr[idx], axis=1), [2.5, 97.5])
    return {"value": float(np.median(arr)), "interval": [float(lo), float(hi)],
            "reps": int(arr.size)}


def _summarise(cases, timed, live, failed, outputs, first, samples, baseline, atol, rtol,
               seed) -> dict:
    total_w = sum(w for _, w, _ in timed)
    out_variants: dict[str, dict] = {}
    for name in live:
        per_case = {case: _median(samples[name][case]) for case, _, _ in timed}
        out_variants[name] = {
            "ms": sum(w * per_case[c] for c, w, _ in timed) / total_w,
            "per_case": per_case,
            "first_call_s": dict(first[name]),
            "compile_s": sum(first[name].values()),
        }
    n_reps = min(len(samples[name][c]) for name in live for c, _, _ in timed)
    per_rep = {name: [sum(w * samples[name][c][r] for c, w, _ in timed) / total_w
                      for r in range(n_reps)] for name in live}
    speedup = {name: _speedup([b / v for b, v in zip(per_rep[baseline], per_rep[name])], seed)
               for name in live if name != baseline}
    # every other pair too, paired the same way ("patched_over_compile": compile's time over
    # patched's, rep by rep), so a speedup over torch.compile has its interval
    over = {f"{a}_over_{b}": _speedup([y / x for x, y in zip(per_rep[a], per_rep[b])], seed)
            for a in live for b in live if baseline not in (a, b) and a != b}
    max_err: dict[str, float] = {}
    match: dict[str, bool] = {}
    case_rows = []
    for case, weight, _ in cases:
        row: dict[str, Any] = {"name": case, "weight": weight, "timed": weight > 0,
                               "max_abs_err": {}, "outputs_match": {}}
        for name in live:
            if name == baseline:
                continue
            err, ok, why = compare_outputs(outputs[baseline][case], outputs[name][case],
                                           atol, rtol)
            row["max_abs_err"][name] = _finite(err)
            row["outputs_match"][name] = ok
            if why:
                row.setdefault("mismatch", {})[name] = why
            max_err[name] = max(max_err.get(name, 0.0), err)
            match[name] = match.get(name, True) and ok
        case_rows.append(row)
    return {"cases": case_rows, "variants": out_variants, "baseline": baseline,
            "speedup": speedup, "over": over,
            "max_abs_err": {k: _finite(v) for k, v in max_err.items()},
            "outputs_match": match, "failed": failed,
            "tolerance": {"atol": atol, "rtol": rtol}}


def _finite(x: float) -> float | None:
    """JSON has no infinity: an error that is not finite (shapes differ) is null."""
    return float(x) if math.isfinite(x) else None


def pin_malloc() -> str:
    """Fix glibc malloc's mmap and trim thresholds for the whole measurement (what
    MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ do). glibc adapts them to what the process
    freed before, so the same eager model ran at about 20 or 45 ms a forward depending on that
    history (benchmarks/registry_e2e.py): every variant is measured under the same fixed
    thresholds instead. Says what was done."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return "not pinned (no glibc mallopt here)"
    m_trim_threshold, m_mmap_threshold = -1, -3
    ok = mallopt(m_mmap_threshold, 32 << 20) == 1 and mallopt(m_trim_threshold, 256 << 20) == 1
    return ("pinned: mmap threshold 32 MiB, trim threshold 256 MiB" if ok
            else "not pinned (mallopt refused)")
