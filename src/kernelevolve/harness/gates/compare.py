"""Trusted comparison of candidate outputs against reference outputs (driver side only).

Checks, in order: output count, shape, dtype, NaN/inf positions, then closeness computed in
float64: |cand - ref| <= atol + rtol * |ref| for floating outputs, exact for integers and bools.
Reports max abs and rel error and the first mismatching index, as in a test assertion.

The relative error is taken against the output's scale: max |cand - ref| / max |ref| per output
(the largest finite |ref|, never below the dtype's atol), the worst over the outputs. An
elementwise max of |cand - ref| / |ref| means nothing where the reference crosses zero: a
correct candidate read 7.8e+04 there. A failure also says how far past its tolerance the worst
element is (|cand - ref| / (atol + rtol * |ref|), the ratio the check itself uses).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Default tolerances by output dtype; integer and bool outputs compare exactly.
DEFAULT_TOLERANCE = {
    "float64": (1e-6, 1e-6),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
    "complex64": (1e-4, 1e-4),
    "complex128": (1e-6, 1e-6),
}


@dataclass
class Comparison:
    ok: bool
    reason: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    mismatch: str | None = None


def tolerance_for(dtype: Any, override: dict[str, float] | None) -> tuple[float, float]:
    name = str(dtype).removeprefix("torch.")
    if name not in DEFAULT_TOLERANCE:
        return 0.0, 0.0
    atol, rtol = DEFAULT_TOLERANCE[name]
    if override:
        atol, rtol = override.get("atol", atol), override.get("rtol", rtol)
    return atol, rtol


def compare_outputs(ref: list[Any], cand: list[Any],
                    tolerance: dict[str, float] | None = None) -> Comparison:
    if len(ref) != len(cand):
        return Comparison(False, f"forward returned {len(cand)} output(s); the reference returns "
                                 f"{len(ref)}")
    worst = Comparison(True)
    for i, (r, c) in enumerate(zip(ref, cand)):
        label = f"output {i}" if len(ref) > 1 else "output"
        one = _compare_one(r, c, label, tolerance)
        if not one.ok:
            return one
        worst.max_abs_err = max(worst.max_abs_err, one.max_abs_err)
        worst.max_rel_err = max(worst.max_rel_err, one.max_rel_err)
    return worst


def _compare_one(r: Any, c: Any, label: str, tolerance: dict[str, float] | None) -> Comparison:
    import torch

    if tuple(c.shape) != tuple(r.shape):
        return Comparison(False, f"{label} has shape {tuple(c.shape)}; expected {tuple(r.shape)}")
    if c.dtype != r.dtype:
        return Comparison(False, f"{label} has dtype {_dt(c.dtype)}; expected {_dt(r.dtype)}")
    if r.numel() == 0:
        return Comparison(True)
    if not (r.is_floating_point() or r.is_complex()):
        diff = c != r
        if bool(diff.any()):
            return _mismatch(label, diff, r, c, "exact match required for "
                             f"{_dt(r.dtype)} outputs", 0.0, 0.0)
        return Comparison(True)
    r64 = r.to(torch.complex128 if r.is_complex() else torch.float64)
    c64 = c.to(r64.dtype)
    if not (bool(torch.isfinite(r64).all()) and bool(torch.isfinite(c64).all())):
        special = _special_values(label, r, c, r64, c64)
        if special is not None:
            return special
    atol, rtol = tolerance_for(r.dtype, tolerance)
    # Non-finite positions match here (checked above); their difference counts as zero.
    diff = torch.nan_to_num((c64 - r64).abs(), nan=0.0, posinf=0.0)
    mag = torch.nan_to_num(r64.abs(), nan=0.0, posinf=0.0)
    max_abs = float(diff.max())
    max_rel = max_abs / max(float(mag.max()), atol, 1e-300) if max_abs else 0.0
    allowed = mag * rtol + atol
    bad = diff > allowed
    if bool(bad.any()):
        worst = float((diff / allowed.clamp_min(1e-300)).max())
        return _mismatch(label, bad, r, c, f"allowed atol={atol:g} rtol={rtol:g}, the worst "
                         f"element is {worst:.3g}x its allowance", max_abs, max_rel)
    return Comparison(True, max_abs_err=max_abs, max_rel_err=max_rel)


def _special_values(label: str, r: Any, c: Any, r64: Any, c64: Any) -> Comparison | None:
    """NaN and inf must sit at the same positions (and infs have the same sign)."""
    import torch

    r_nan, c_nan = torch.isnan(r64), torch.isnan(c64)
    if not torch.equal(r_nan, c_nan):
        where = r_nan != c_nan
        extra = int((c_nan & ~r_nan).sum())
        missing = int((r_nan & ~c_nan).sum())
        return _mismatch(label, where, r, c, f"NaN positions differ ({extra} unexpected NaN, "
                         f"{missing} missing)", float("nan"), float("nan"))
    r_inf, c_inf = torch.isinf(r64), torch.isinf(c64)
    if not torch.equal(r_inf, c_inf) or not torch.equal(r64[r_inf], c64[c_inf]):
        return _mismatch(label, (r_inf != c_inf) | (r_inf & (r64 != c64)), r, c,
                         "inf positions or signs differ", float("inf"), float("inf"))
    return None


def _mismatch(label: str, bad: Any, r: Any, c: Any, why: str, max_abs: float,
              max_rel: float) -> Comparison:
    import torch

    flat = int(torch.nonzero(bad.reshape(-1))[0])
    idx = "[" + ", ".join(str(i) for i in _unravel(flat, tuple(r.shape))) + "]"
    got, want = c.reshape(-1)[flat].item(), r.reshape(-1)[flat].item()
    count, total = int(bad.sum()), bad.numel()
    first = f"first mismatch at {idx}: expected {want:.6g}, got {got:.6g}" if isinstance(
        want, float) else f"first mismatch at {idx}: expected {want}, got {got}"
    reason = (f"{label} differs from the reference in {count} of {total} elements "
              f"({why}; max abs err {max_abs:.3g}, max rel err {max_rel:.3g} of the output's "
              f"largest |value|); {first}")
    return Comparison(False, reason, max_abs, max_rel, first)


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    """The index of element `flat` of a row-major tensor of `shape`, in plain integers:
    torch.unravel_index's argument check imports sympy (about 1.5 s in a fresh driver, and
    every evaluation that reaches integrity compares a mismatching output)."""
    index = []
    for size in reversed(shape):
        flat, at = divmod(flat, size)
        index.append(at)
    return index[::-1]


def _dt(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")
