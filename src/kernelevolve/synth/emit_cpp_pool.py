"""C++ for pool kernels (plan_pool.py).

One task per output row (plane, od, oh): its window bounds along D and H are computed once,
then each output of the row walks its window. The window geometry is compiled in as
constants; the sizes are arguments. A max window starts at its first in-range position and
takes a later value when it is greater or NaN (torch's CPU rule: NaN wins, the last NaN's
index is kept); an average divides by the count torch's rules give.
"""
from __future__ import annotations

from kernelevolve.synth.plan_pool import PoolKernel

PRELUDE = "#include <algorithm>\n"
SIZES = ("int64_t planes", "int64_t id", "int64_t ih", "int64_t iw",
         "int64_t od", "int64_t oh", "int64_t ow")


def signature(k: PoolKernel) -> str:
    args = ["const float* x", "float* out", "int64_t* idx", *SIZES]
    return f'extern "C" void {k.name}({", ".join(args)})'


def _bounds(k: PoolKernel, c: str) -> list[str]:
    """Lines setting `{c}0` and `{c}1` (the window's in-range [start, end) along dim c) and,
    for an average with count_include_pad, `{c}n` (the window's length within the padding)."""
    i = "dhw".index(c)
    kk, s, p, d = k.kernel[i], k.stride[i], k.padding[i], k.dilation[i]
    o, n = f"o{c}i", f"i{c}"
    if k.op == "adaptive":
        return [f"const int64_t {c}0 = ({o} * {n}) / o{c};",
                f"const int64_t {c}1 = (({o} + 1) * {n} + o{c} - 1) / o{c};"]
    if k.op == "avg":
        return [f"int64_t {c}0 = {o} * {s} - {p};",
                f"int64_t {c}1 = std::min<int64_t>({c}0 + {kk}, {n} + {p});",
                f"const int64_t {c}n = {c}1 - {c}0;",
                f"{c}0 = std::max<int64_t>({c}0, 0); {c}1 = std::min<int64_t>({c}1, {n});"]
    return [f"int64_t {c}0 = {o} * {s} - {p};",
            f"const int64_t {c}1 = std::min<int64_t>({c}0 + {(kk - 1) * d + 1}, {n});",
            f"while ({c}0 < 0) {c}0 += {d};"]


def _window(k: PoolKernel) -> list[str]:
    """The body for one output (owi): its W bounds, the walk, the store."""
    step = {c: (k.dilation["dhw".index(c)] if k.op == "max" else 1) for c in "dhw"}
    walk = [f"for (int64_t d = d0; d < d1; d += {step['d']})",
            f"for (int64_t h = h0; h < h1; h += {step['h']})",
            f"for (int64_t w = w0; w < w1; w += {step['w']}) {{"]
    at = "(d * ih + h) * iw + w"
    if k.op == "max":
        return [*_bounds(k, "w"), "float best = -INFINITY;",
                "int64_t where = (d0 * ih + h0) * iw + w0;", *walk,
                f"    const float v = plane[{at}];",
                f"    if (v > best || v != v) {{ best = v; where = {at}; }}", "}",
                "out[row * ow + owi] = best;", "if (idx) idx[row * ow + owi] = where;"]
    if k.op == "adaptive":
        count = "(d1 - d0) * (h1 - h0) * (w1 - w0)"
    elif k.divisor:
        count = str(k.divisor)
    elif k.count_include_pad:
        count = "dn * hn * wn"
    else:
        count = "(d1 - d0) * (h1 - h0) * (w1 - w0)"
    return [*_bounds(k, "w"), "float sum = 0.0f;", *walk, f"    sum += plane[{at}];", "}",
            "const bool empty = d0 >= d1 || h0 >= h1 || w0 >= w1;",
            f"out[row * ow + owi] = empty ? 0.0f : sum / (float)({count});"]


def write(k: PoolKernel) -> str:
    vol = k.kernel[0] * k.kernel[1] * k.kernel[2]
    cost = f"{vol}" if k.op != "adaptive" else "(id / od + 1) * (ih / oh + 1) * (iw / ow + 1)"
    body = ["const int64_t p = row / (od * oh), odi = (row / oh) % od, ohi = row % oh;",
            "const float* plane = x + p * id * ih * iw;", *_bounds(k, "d"), *_bounds(k, "h"),
            "for (int64_t owi = 0; owi < ow; ++owi) {", *("    " + b for b in _window(k)), "}"]
    loop = ["for (int64_t row = 0; row < rows; ++row) {", *("    " + b for b in body), "}"]
    return "\n".join([f"// kernel {k.name}: {k.label}", signature(k) + " {",
                      "    const int64_t rows = planes * od * oh;",
                      f"    if (rows > 1 && rows * ow * {cost} >= PARALLEL_MIN_ELEMENTS) {{",
                      "    #pragma omp parallel for schedule(static)",
                      *("    " + b for b in loop), "    } else {",
                      *("    " + b for b in loop), "    }", "}"])


def argtypes(k: PoolKernel) -> list[str]:
    return [f"_lib.{k.name}.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 7",
            f"_lib.{k.name}.restype = None"]


def call(k: PoolKernel, g, ref) -> list[str]:
    from kernelevolve.synth.pool_glue import pool_setup, size_args

    lines, x, (out, idx) = pool_setup(k, g, ref)
    ptr = "None" if idx == "None" else f"{idx}.data_ptr()"
    lines.append(f"if {out}.numel():")
    lines.append(f"    _lib.{k.name}({x}.data_ptr(), {out}.data_ptr(), {ptr}, "
                 f"{', '.join(size_args(k))})")
    return lines
