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
    """Lines setting `{c}0` and `{c}1` (the window's in-range [start, end) along dim c), `{c}f`
    (the window lies inside the input: the fast path's constant loops) and, for an average
    with count_include_pad, `{c}n` (the window's length within the padding)."""
    i = "dhw".index(c)
    kk, s, p, d = k.kernel[i], k.stride[i], k.padding[i], k.dilation[i]
    o, n = f"o{c}i", f"i{c}"
    if k.op == "adaptive":
        return [f"const int64_t {c}0 = ({o} * {n}) / o{c};",
                f"const int64_t {c}1 = (({o} + 1) * {n} + o{c} - 1) / o{c};"]
    span = (kk - 1) * d + 1
    head = [f"int64_t {c}0 = {o} * {s} - {p};",
            f"const bool {c}f = {c}0 >= 0 && {c}0 + {span} <= {n};"]
    if k.op == "avg":
        return head + [f"int64_t {c}1 = std::min<int64_t>({c}0 + {kk}, {n} + {p});",
                       f"const int64_t {c}n = {c}1 - {c}0;",
                       f"{c}0 = std::max<int64_t>({c}0, 0); {c}1 = std::min<int64_t>({c}1, {n});"]
    return head + [f"const int64_t {c}1 = std::min<int64_t>({c}0 + {span}, {n});",
                   f"while ({c}0 < 0) {c}0 += {d};"]


def _take(k: PoolKernel, at: str) -> list[str]:
    """The max's update: a greater value or a NaN takes over (and its index, when written)."""
    where = f" where = {at};" if k.indices else ""
    return [f"    if (v > best || v != v) {{ best = v;{where} }}"]


def _interior(k: PoolKernel) -> list[str]:
    """A row whose D and H windows lie inside the input: its outputs [lo, hi), whose W
    windows do too, walk the window one position at a time, each step a vectorisable loop
    over the outputs (strided loads, the running max or sum kept in the output row; each
    output still sees its window in torch's order)."""
    (kd, kh, kw), sw = k.kernel, k.stride[2]
    step = k.dilation if k.op == "max" else (1, 1, 1)
    span, p = (kw - 1) * step[2] + 1, k.padding[2]
    o, r = "out + row * ow", "idx + row * ow"
    lines = [f"const int64_t lo = std::min<int64_t>(ow, ({p} + {sw} - 1) / {sw});",
             f"const int64_t hi = iw - {span} + {p} < 0 ? lo : std::max<int64_t>(lo, "
             f"std::min<int64_t>(ow, (iw - {span} + {p}) / {sw} + 1));",
             "if (df && hf && lo < hi) {", f"    float* o = {o};",
             *([f"    int64_t* r = {r};"] if k.indices else []),
             "    const int64_t start = (d0 * ih + h0) * iw - " + str(p) + ";",
             "    const float* q = plane + start;",
             "    #pragma omp simd", "    for (int64_t j = lo; j < hi; ++j) o[j] = "
             + ("-INFINITY;" if k.op == "max" else "0.0f;"),
             *(["    #pragma omp simd",
                f"    for (int64_t j = lo; j < hi; ++j) r[j] = start + j * {sw};"]
               if k.indices else []),
             f"    for (int64_t kd = 0; kd < {kd}; ++kd)",
             f"    for (int64_t kh = 0; kh < {kh}; ++kh)",
             f"    for (int64_t kw = 0; kw < {kw}; ++kw) {{",
             f"        const int64_t at = (kd * {step[0]} * ih + kh * {step[1]}) * iw "
             f"+ kw * {step[2]};", "        #pragma omp simd",
             "        for (int64_t j = lo; j < hi; ++j) {",
             f"            const float v = q[j * {sw} + at];"]
    if k.op == "max":
        lines += ["            const bool take = v > o[j] || v != v;",
                  "            o[j] = take ? v : o[j];",
                  *([f"            r[j] = take ? start + j * {sw} + at : r[j];"]
                    if k.indices else [])]
    else:
        lines.append("            o[j] += v;")
    lines += ["        }", "    }"]
    if k.op == "avg":
        div = k.divisor or kd * kh * kw
        lines += ["    #pragma omp simd", f"    for (int64_t j = lo; j < hi; ++j) o[j] /= {div}.0f;"]
    return lines + ["}"]


def _skip(k: PoolKernel) -> list[str]:
    """The outputs the interior loops wrote are skipped by the general walk."""
    return ["    if (df && hf && owi >= lo && owi < hi) continue;"]


def _store(k: PoolKernel) -> list[str]:
    return ["out[row * ow + owi] = best;", *(["idx[row * ow + owi] = where;"] if k.indices
                                              else [])]


def _window(k: PoolKernel) -> list[str]:
    """The body for one output (owi): its W bounds, the walk, the store."""
    step = {c: (k.dilation["dhw".index(c)] if k.op == "max" else 1) for c in "dhw"}
    walk = [f"for (int64_t d = d0; d < d1; d += {step['d']})",
            f"for (int64_t h = h0; h < h1; h += {step['h']})",
            f"for (int64_t w = w0; w < w1; w += {step['w']}) {{"]
    at = "(d * ih + h) * iw + w"
    if k.op == "max":
        return [*_bounds(k, "w"), "float best = -INFINITY;",
                *(["int64_t where = (d0 * ih + h0) * iw + w0;"] if k.indices else []), *walk,
                f"    const float v = plane[{at}];", *_take(k, at), "}", *_store(k)]
    if k.divisor:
        count = str(k.divisor)
    elif k.count_include_pad:
        count = "dn * hn * wn"
    else:
        count = "(d1 - d0) * (h1 - h0) * (w1 - w0)"
    return [*_bounds(k, "w"), "float sum = 0.0f;", *walk, f"    sum += plane[{at}];",
            "}", "const bool empty = d0 >= d1 || h0 >= h1 || w0 >= w1;",
            f"out[row * ow + owi] = empty ? 0.0f : sum / (float)({count});"]


def _adaptive_row(k: PoolKernel) -> list[str]:
    """An adaptive row: the (D, H) window's rows summed into a row buffer (vectorised along W),
    then each output sums its W window of the buffer (the same terms as torch's walk, added
    in another order: within float rounding of it, NaN and inf alike)."""
    return ["float* buf = (float*)std::malloc(iw * sizeof(float));",
            "#pragma omp simd", "for (int64_t w = 0; w < iw; ++w) buf[w] = 0.0f;",
            "for (int64_t d = d0; d < d1; ++d)", "for (int64_t h = h0; h < h1; ++h) {",
            "    const float* src = plane + (d * ih + h) * iw;", "    #pragma omp simd",
            "    for (int64_t w = 0; w < iw; ++w) buf[w] += src[w];", "}",
            "for (int64_t owi = 0; owi < ow; ++owi) {",
            *("    " + b for b in _bounds(k, "w")), "    float sum = 0.0f;",
            "    for (int64_t w = w0; w < w1; ++w) sum += buf[w];",
            "    out[row * ow + owi] = sum / (float)((d1 - d0) * (h1 - h0) * (w1 - w0));", "}",
            "std::free(buf);"]


def write(k: PoolKernel) -> str:
    vol = k.kernel[0] * k.kernel[1] * k.kernel[2]
    cost = f"{vol}" if k.op != "adaptive" else "(id / od + 1) * (ih / oh + 1) * (iw / ow + 1)"
    body = ["const int64_t p = row / (od * oh), odi = (row / oh) % od, ohi = row % oh;",
            "const float* plane = x + p * id * ih * iw;", *_bounds(k, "d"), *_bounds(k, "h"),
            *(_adaptive_row(k) if k.op == "adaptive" else
              [*_interior(k), "for (int64_t owi = 0; owi < ow; ++owi) {", *_skip(k),
               *("    " + b for b in _window(k)), "}"])]
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
