"""C++ for solo kernels (emit_cpp_solo.py) over few long rows (inner == 1, fewer rows or row
groups than threads: a reduction over everything is one row): the row is cut into blocks of
SPLIT_N positions that the threads share.

A reduction folds each block into a partial (a product, a count, an extreme with its NaN flag)
and combines the partials in block order: torch's rules hold across blocks (argmax keeps the
first extreme: a later block wins only when strictly greater, or when it holds the first NaN;
then the winning block alone is searched for the index). A scan makes two passes: each block's total, then
each block walked again from the fold of the totals before it (cummax's total is its value and
index, and the fold takes a later block on the same NaN / tie rule as a step does). Blocks are
fixed in size, so the result does not depend on the thread count and is the same run to run.
"""
from __future__ import annotations

from kernelevolve.synth.plan_solo import SoloKernel

SPLIT_N = 16384      # positions per block (64 KiB of floats)
GROUP = 4            # blocks a scan's second pass walks together (emitted as a constant)
CTYPES = {"float32": "float", "float64": "double", "int64": "int64_t", "int32": "int32_t",
          "bool": "uint8_t"}
IND = "            "


def guard(k: SoloKernel) -> list[str]:
    """The split path's head: taken when the rows (scan: row groups) leave threads idle."""
    groups = "(outer + SCAN_ROWS - 1) / SCAN_ROWS" if k.kind == "scan" else "outer"
    return [f"        if ({groups} < omp_get_max_threads() && n >= 2 * {SPLIT_N} && "
            "outer * n >= PARALLEL_MIN_ELEMENTS) {",
            f"            const int64_t nb = (n + {SPLIT_N} - 1) / {SPLIT_N};",
            *([f"            constexpr int64_t GROUP = {GROUP};"] if k.kind == "scan" else [])]


def split(k: SoloKernel, fold, step, init) -> list[str]:
    """The guarded block. fold(k, x) gives (operator, starting value, element as folded);
    step(k, a, i, v, f) a scan's step statements; init(k, first) a scan's starting value
    (emit_cpp_solo.py's own)."""
    body = _scan(k, step, init) if k.kind == "scan" else _reduce(k, fold)
    return [*guard(k), *body, "            return;", "        }"]


def _arrays(specs: list[tuple[str, str]]) -> list[str]:
    return [f"{IND}{t}* {name} = static_cast<{t}*>(std::malloc(sizeof({t}) * nb));"
            for t, name in specs]


def _block(ind: str = IND) -> list[str]:
    return [f"{ind}#pragma omp parallel for schedule(static)",
            f"{ind}for (int64_t b = 0; b < nb; ++b) {{",
            f"{ind}    const int64_t lo = b * {SPLIT_N};",
            f"{ind}    const int64_t hi = n - lo < {SPLIT_N} ? n : lo + {SPLIT_N};"]


def _reduce(k: SoloKernel, fold) -> list[str]:
    t, acc = CTYPES[k.in_dtype], CTYPES[k.acc]
    arg = k.op in ("argmax", "argmin")
    ext = k.op in ("max", "min") or arg
    specs = [(t if ext else acc, "pv")] + ([("int", "pn")] if ext else [])
    out = [*_arrays(specs), f"{IND}for (int64_t o = 0; o < outer; ++o) {{",
           f"{IND}    const {t}* xr = x + o * n;", *_block(IND + "    ")]
    inner = IND + "        "
    if ext:
        gt = ">" if k.op in ("max", "argmax") else "<"
        red = "max" if gt == ">" else "min"
        out += [f"{inner}{t} m = xr[lo];", f"{inner}int nan = 0;",
                f"{inner}#pragma omp simd reduction({red}:m) reduction(|:nan)",
                f"{inner}for (int64_t f = lo; f < hi; ++f) {{",
                f"{inner}    const {t} v = xr[f];", f"{inner}    m = v {gt} m ? v : m;",
                f"{inner}    nan |= (v != v);", f"{inner}}}",
                f"{inner}pv[b] = m; pn[b] = nan;", f"{IND}    }}"]
        out += _combine_extreme(k, gt)
    else:
        sym, start, v = fold(k, "xr[f]")
        out += [f"{inner}{acc} a = {start};", f"{inner}#pragma omp simd reduction({sym}:a)",
                f"{inner}for (int64_t f = lo; f < hi; ++f) a {sym}= {v};",
                f"{inner}pv[b] = a;", f"{IND}    }}",
                f"{IND}    {acc} a = {start};",
                f"{IND}    for (int64_t b = 0; b < nb; ++b) a {sym}= pv[b];",
                f"{IND}    out[o] = ({CTYPES[k.out_dtype]})a;"]
    out.append(f"{IND}}}")
    return out + [f"{IND}std::free({name});" for _, name in specs]


def _combine_extreme(k: SoloKernel, gt: str) -> list[str]:
    """Block 0's partial, then each later block's in order: a later block wins when it holds
    a NaN and the best so far does not, or (no NaN either side) when strictly better."""
    t = CTYPES[k.in_dtype]
    ind = IND + "    "
    out = [f"{ind}{t} m = pv[0];", f"{ind}int nan = pn[0];", f"{ind}int64_t best = 0;",
           f"{ind}for (int64_t b = 1; b < nb; ++b) {{",
           f"{ind}    const bool take = !nan && (pn[b] || pv[b] {gt} m);",
           f"{ind}    m = take ? pv[b] : m;", f"{ind}    best = take ? b : best;",
           f"{ind}    nan |= pn[b];", f"{ind}}}"]
    if k.op in ("max", "min"):
        return out + [f"{ind}out[o] = nan ? ({t})NAN : m;"]
    # the index: the first NaN, or the first position holding the extreme, of the winning
    # block (one block's search, not one per block)
    out += [f"{ind}const int64_t lo = best * {SPLIT_N};",
            f"{ind}const int64_t hi = n - lo < {SPLIT_N} ? n : lo + {SPLIT_N};",
            f"{ind}int64_t at = lo;",
            f"{ind}for (int64_t f = lo; f < hi; ++f) "
            "if (nan ? xr[f] != xr[f] : xr[f] == m) { at = f; break; }",
            f"{ind}out[o] = at;"]
    return out + ([f"{ind}vals[o] = xr[at];"] if k.values is not None else [])


def _scan(k: SoloKernel, step, init) -> list[str]:
    acc = CTYPES[k.acc]
    ind = IND + "        "
    specs = [(acc, "tv"), ("int64_t", "ti"), (acc, "ov"), ("int64_t", "oi")]
    out = [*_arrays(specs), f"{IND}for (int64_t o = 0; o < outer; ++o) {{",
           f"{IND}    const {CTYPES[k.in_dtype]}* xr = x + o * n;",
           f"{IND}    // pass 1: each block's total", *_block(IND + "    "),
           f"{ind}{acc} a = {init(k, f'({acc})xr[lo]')};", f"{ind}int64_t ai = lo;",
           *_total(k, step, ind), f"{ind}tv[b] = a; ti[b] = ai;", f"{IND}    }}",
           f"{IND}    // each block's offset: the fold of the totals before it, in order",
           f"{IND}    {acc} a = {init(k, f'({acc})xr[0]')};", f"{IND}    int64_t ai = 0;",
           f"{IND}    for (int64_t b = 0; b < nb; ++b) {{",
           f"{IND}        ov[b] = a; oi[b] = ai;",
           f"{IND}        const {acc} v = tv[b];", f"{IND}        const int64_t f = ti[b];",
           *(f"{IND}        " + s for s in step(k, "a", "ai", "v", "f")), f"{IND}    }}",
           *_second_pass(k, step), f"{IND}}}"]
    return out + [f"{IND}std::free({name});" for _, name in specs]


def _total(k: SoloKernel, step, ind: str) -> list[str]:
    """A block's total: a sum or product as a vectorised reduction (one chain per lane, not
    one add's latency per element), the others step by step."""
    acc = CTYPES[k.acc]
    if k.op in ("sum", "prod"):
        sym = "+" if k.op == "sum" else "*"
        return [f"{ind}#pragma omp simd reduction({sym}:a)",
                f"{ind}for (int64_t f = lo; f < hi; ++f) a {sym}= ({acc})xr[f];"]
    return [f"{ind}for (int64_t f = lo; f < hi; ++f) {{",
            f"{ind}    const {acc} v = ({acc})xr[f];",
            *(f"{ind}    " + s for s in step(k, "a", "ai", "v", "f")), f"{ind}}}"]


def _second_pass(k: SoloKernel, step) -> list[str]:
    """Each block walked again from its offset, GROUP whole blocks at a time with their
    positions interleaved: a scan step is one dependency chain (a double add's latency per
    element), and GROUP chains in flight hide it; a group with a short block walks its blocks
    one by one."""
    acc, out_t = CTYPES[k.acc], CTYPES[k.out_dtype]
    ind, inner = IND + "        ", IND + "                "
    walk = [f"{inner}const {acc} v = ({acc})xr[f];",
            *(f"{inner}" + s for s in step(k, "a[j]", "ai[j]", "v", "f")),
            f"{inner}out[o * n + f] = ({out_t})a[j];",
            *([f"{inner}idx[o * n + f] = ai[j];"] if k.indices else [])]
    return [f"{IND}    // pass 2: each block walked again from its offset",
            f"{IND}    #pragma omp parallel for schedule(static)",
            f"{IND}    for (int64_t g = 0; g < (nb + GROUP - 1) / GROUP; ++g) {{",
            f"{ind}const int64_t b0 = g * GROUP;",
            f"{ind}const int64_t w = nb - b0 < GROUP ? nb - b0 : GROUP;",
            f"{ind}{acc} a[GROUP];", f"{ind}int64_t ai[GROUP];",
            f"{ind}for (int64_t j = 0; j < w; ++j) {{ a[j] = ov[b0 + j]; ai[j] = oi[b0 + j]; }}",
            f"{ind}if (w == GROUP && (b0 + GROUP) * {SPLIT_N} <= n) {{",
            f"{ind}    for (int64_t e = 0; e < {SPLIT_N}; ++e) {{",
            f"{ind}        for (int64_t j = 0; j < GROUP; ++j) {{",
            f"{ind}            const int64_t f = (b0 + j) * {SPLIT_N} + e;",
            *walk, f"{ind}        }}", f"{ind}    }}", f"{ind}}} else {{",
            f"{ind}    for (int64_t j = 0; j < w; ++j) {{",
            f"{ind}        const int64_t hi = n - (b0 + j) * {SPLIT_N} < {SPLIT_N} ? n : "
            f"(b0 + j + 1) * {SPLIT_N};",
            f"{ind}        for (int64_t f = (b0 + j) * {SPLIT_N}; f < hi; ++f) {{",
            *walk, f"{ind}        }}", f"{ind}    }}", f"{ind}}}", f"{IND}    }}"]
