"""The ATen suite's input domains and edge values: what a generated problem draws and plants.

DOMAINS maps a domain name to (kind, torch expression); `{s}` is the input's shape and `{dt}`
its integer dtype. The expressions are written into the generated problems, so a problem file
reads on its own. SHAPES are the shapes an input may take (the default is the 3-D "full").

Edge sets (EDGE_SETS) say what the extra "edge" case plants into the inputs, since random
draws never produce it: NaN, +-inf and signed zeros (every float probe), exact and rounding-
prone quotients (div, floor_divide, remainder, fmod), values on rounding boundaries (n + 0.5,
the largest float below 0.5, 2^23 + 1), domain edges (+-1 for asin / atanh, 0 and negatives
for log / sqrt, 0 and 1 for logit), overflow thresholds (exp, softplus), integer extremes and
sign combinations. A plant is (input, row, start, step, values): in the input viewed as
(rows, last dim), row `row` (modulo the row count), columns start::step get `values` tiled.
Rows are fixed per set so that sets combine without overwriting each other.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

NAN, INF = float("nan"), float("inf")

FLOAT, INT, BOOL = "float", "int", "bool"
DOMAINS: dict[str, tuple[str, str]] = {
    "normal": (FLOAT, "torch.randn({s})"),
    "wide": (FLOAT, "torch.randn({s}) * 8.0"),
    "pos": (FLOAT, "torch.randn({s}).exp()"),
    "unit": (FLOAT, "torch.rand({s}) * 0.98 + 0.01"),
    "pm1": (FLOAT, "torch.rand({s}) * 1.98 - 0.99"),
    "ge1": (FLOAT, "1.0 + torch.rand({s}) * 4.0"),
    "nonzero": (FLOAT, "(torch.rand({s}) + 0.1) * (torch.randint(0, 2, {s}) * 2 - 1)"),
    "near1": (FLOAT, "0.9 + torch.rand({s}) * 0.2"),
    "var": (FLOAT, "0.5 + torch.rand({s})"),
    "probs": (FLOAT, "torch.softmax(torch.randn({s}), dim=-1)"),
    "logprobs": (FLOAT, "torch.log_softmax(torch.randn({s}), dim=-1)"),
    # small integers as floats: ties for eq / le, zeros for logical ops and count_nonzero
    "grid": (FLOAT, "torch.randint(-3, 4, {s}).float()"),
    # normals with a few NaN and +-inf in every case, for isnan / isinf / isfinite
    "dirty": (FLOAT, "torch.randn({s}).masked_fill(torch.rand({s}) < 0.05, float('nan'))"
                     ".masked_fill(torch.rand({s}) < 0.05, float('inf'))"
                     ".masked_fill(torch.rand({s}) < 0.05, -float('inf'))"),
    "sign": (FLOAT, "torch.randint(0, 2, {s}).float() * 2 - 1"),
    "binary": (FLOAT, "torch.randint(0, 2, {s}).float()"),
    "bool": (BOOL, "torch.rand({s}) < 0.5"),
    # any / all: mostly False / mostly True, so that a reduction's result is not the same
    # everywhere (a constant output cannot tell a kernel from no kernel)
    "sparse": (BOOL, "torch.rand({s}) < 0.03"),
    "dense": (BOOL, "torch.rand({s}) < 0.97"),
    "int": (INT, "torch.randint(-100, 101, {s}, dtype={dt})"),
    "intnz": (INT, "torch.randint(1, 101, {s}, dtype={dt}) * "
                   "(torch.randint(0, 2, {s}, dtype={dt}) * 2 - 1)"),
    "intpos": (INT, "torch.randint(1, 21, {s}, dtype={dt})"),
    "shift": (INT, "torch.randint(0, 8, {s}, dtype={dt})"),
    "label": (INT, "torch.randint(0, C, (A, B))"),       # class indices over the last dim
    "index": (INT, "torch.randint(0, C, (A, B, C))"),    # gather indices along the last dim
}
SHAPES = {"full": "(A, B, C)", "last": "(C,)", "chan": "(B,)", "sq": "(C, C)"}
# Inputs that must keep their domain in the edge case: indices, shift amounts (a shift by a
# negative amount or past the width is not an edge of the op but undefined), class labels.
UNPLANTED = {"shift", "label", "index"}
LIMITS = {"int64": (-2 ** 63, 2 ** 63 - 1), "int32": (-2 ** 31, 2 ** 31 - 1)}


def f32(value: float) -> float:
    """The float32 value nearest `value` (what the planted tensor will hold)."""
    return float(np.float32(value))


def _special(ins: list[int], dtype: str) -> list[tuple]:
    out: list[tuple] = []
    for k, i in enumerate(ins[:3]):
        r = 8 * k
        out += [(i, r, 0, 5, (NAN,)), (i, r + 1, 0, 7, (INF,)), (i, r + 1, 3, 7, (-INF,)),
                (i, r + 2, 0, 1, (0.0, -0.0)), (i, r + 3, 0, 11, (NAN,)),
                (i, r + 3, 5, 11, (INF,))]
    for i in ins:  # the same places in every input: NaN op NaN, inf op inf, inf op -inf
        out += [(i, 24, 0, 3, (NAN,)), (i, 25, 0, 4, (INF,)),
                (i, 26, 0, 4, (INF if i == ins[0] else -INF,))]
    return out


def _special_pos(ins: list[int], dtype: str) -> list[tuple]:
    """special with every -inf made +inf: for NaN-skipping sums (nansum, nanmean), where an
    inf - inf turns into a NaN that a later step skips, so torch's own answer depends on its
    summation order (on CPU, torch.nansum of 32768 values holding both infs gives 0.0)."""
    return [(i, r, s, st, tuple(INF if v == -INF else v for v in vals))
            for i, r, s, st, vals in _special(ins, dtype)]


def _quot(ins: list[int], dtype: str) -> list[tuple]:
    """Dividend (first input) and divisor (second): quotients that are exact integers in real
    arithmetic but round up in fp32 (0.3 k / 0.1, 1 / 0.1), exact halves and signs, huge
    and tiny divisors, infinite divisors."""
    x = [(ins[0], 28, 0, 1, tuple(f32(0.3 * k) for k in range(16))),
         (ins[0], 29, 0, 1, (1.0,)),
         (ins[0], 30, 0, 1, (7.0, -7.0, 7.0, -7.0, 6.0, -6.0, 0.5, -0.5)),
         (ins[0], 31, 0, 1, (1.0, -1.0, 3.0, -3.0, 1e30, -1e30, 5.0, -5.0))]
    # (1e30 / 1e-5: huge over tiny, with a finite quotient: where a / b overflows, torch's
    # vectorised fmod gives NaN and its scalar tail the exact remainder)
    if len(ins) < 2:
        return x
    y = [(ins[1], 28, 0, 1, (f32(0.1),)), (ins[1], 29, 0, 1, (f32(0.1),)),
         (ins[1], 30, 0, 1, (2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 0.25, 0.25)),
         (ins[1], 31, 0, 1, (3.0, 3.0, -3.0, -3.0, 1e-5, 1e-5, INF, -INF))]
    return x + y


def _round(ins: list[int], dtype: str) -> list[tuple]:
    halves = tuple((k - 8) + 0.5 for k in range(16))
    hard = (f32(0.49999997), f32(-0.49999997), 8388609.0, -8388609.0, 1e30, -1e30, 0.5, -0.5,
            1.5, -1.5, 2.5, -2.5)
    quarters = tuple((k - 8) * 0.25 for k in range(16))
    return [p for i in ins for p in ((i, 32, 0, 1, halves), (i, 33, 0, 1, hard),
                                     (i, 34, 0, 1, quarters))]


def _row(row: int, values: tuple) -> Callable[[list[int], str], list[tuple]]:
    return lambda ins, dtype: [(i, row, 0, 1, values) for i in ins]


def _intsign(ins: list[int], dtype: str) -> list[tuple]:
    """Signs of dividend and divisor in every combination, exact multiples (remainder 0)."""
    x = [(ins[0], 28, 0, 1, tuple(k - 8 for k in range(16))),
         (ins[0], 29, 0, 1, tuple(k - 8 for k in range(16))),
         (ins[0], 30, 0, 1, (-21, 21, -20, 20, -1, 1, 0, -7))]
    if len(ins) < 2:
        return x
    return x + [(ins[1], 28, 0, 1, (3,)), (ins[1], 29, 0, 1, (-3,)),
                (ins[1], 30, 0, 1, (7, 7, -7, -7, 7, -7, 5, 7))]


def _intext(ins: list[int], dtype: str) -> list[tuple]:
    lo, hi = LIMITS.get(dtype, LIMITS["int64"])
    ext = [lo, hi, -1, 0, 1, lo + 1, hi - 1, 2]
    pairs = [hi, hi, lo, lo]
    out = []
    for k, i in enumerate(ins):
        out += [(i, 32, 0, 1, tuple(ext[k:] + ext[:k])),
                (i, 33, 0, 1, tuple(pairs[k:] + pairs[:k]))]
    return out


def _boolrows(ins: list[int], dtype: str) -> list[tuple]:
    return [p for i in ins for p in ((i, 0, 0, 1, (True,)), (i, 1, 0, 1, (False,)),
                                     (i, 2, 0, 1, (True, False)))]


# name -> (which inputs it plants into: their domain kind, the plant function)
EDGE_SETS: dict[str, tuple[str, Callable[[list[int], str], list[tuple]]]] = {
    "special": (FLOAT, _special),
    "specialpos": (FLOAT, _special_pos),
    "quot": (FLOAT, _quot),
    "round": (FLOAT, _round),
    "dom1": (FLOAT, _row(35, (1.0, -1.0, f32(0.99999994), f32(-0.99999994), f32(1.0000001),
                              f32(-1.0000001), 0.0, -0.0, 2.0, -2.0))),
    "zero": (FLOAT, _row(36, (0.0, -0.0, -1.0, f32(1e-45), f32(1e-38), -2.0, 1.0, f32(3e38),
                              f32(-3e38), 2.0))),
    "big": (FLOAT, _row(37, (f32(88.72), f32(88.73), 89.0, f32(-87.3), f32(-103.97), -104.0,
                             20.0, f32(20.01), -20.0, 30.0, 1e4, -1e4, 700.0, -700.0))),
    # sinh / cosh: torch's vectorised loop computes e^x first and overflows above 88.72 while
    # its scalar tail does not (sinh(88.73) is inf or 1.71e38 by position), so no value there
    "bighyp": (FLOAT, _row(37, (f32(88.7), f32(-88.7), 89.5, -89.5, 90.0, f32(-87.3), 20.0,
                                f32(20.01), -20.0, 30.0, 1e4, -1e4, 700.0, -700.0))),
    "dom01": (FLOAT, _row(38, (0.0, 1.0, f32(1e-12), f32(0.99999994), 0.5, f32(1e-45),
                               f32(5.9604645e-08), f32(0.9999999)))),
    "intsign": (INT, _intsign),
    "intext": (INT, _intext),
    "boolrows": (BOOL, _boolrows),
}


def plants(edges: str, inputs: list[tuple[str, str, str]]) -> list[tuple]:
    """The plants of a probe: `edges` is its space-separated edge sets (`set@i`: input i
    only); `inputs` its (domain, shape, dtype) per input. An edge set that matches no input
    is an error of the table."""
    out: list[tuple] = []
    for token in edges.split():
        name, _, only = token.partition("@")
        if name not in EDGE_SETS:
            raise ValueError(f"unknown edge set {name!r}")
        kind, fn = EDGE_SETS[name]
        ins = [i for i, (dom, shape, _dt) in enumerate(inputs)
               if DOMAINS[dom][0] == kind and shape == "full" and dom not in UNPLANTED
               and (not only or i == int(only))]
        if not ins:
            raise ValueError(f"edge set {token!r} matches no input")
        out += fn(ins, inputs[ins[0]][2])
    return out
