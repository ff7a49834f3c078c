"""C++ for solo kernels (plan_solo.py): index reductions, products, integer sums and scans.

The input is seen as (outer, n, inner). With inner == 1 each row is walked by one thread:
a reduction with one `omp simd` reduction loop (argmax / argmin: a vectorised max-and-NaN pass,
then a search for the first position holding it), a scan with one sequential loop. With
inner > 1 a task owns MID_BLOCK consecutive inner positions of one outer index and walks n,
the accumulators a block of values updated by a vectorised loop per step (an argmax keeps its
best value and index per position and takes a later one only when strictly greater, or the
first NaN: torch's first-extreme rule, NaN the extreme).
"""
from __future__ import annotations

from kernelevolve.synth import emit_cpp_solo_split
from kernelevolve.synth.plan_solo import SoloKernel

CTYPES = {"float32": "float", "float64": "double", "int64": "int64_t", "int32": "int32_t",
          "bool": "uint8_t"}
# torch's log-add-exp: NaN propagates, two infinities of one sign give that infinity
PRELUDE = r"""
static inline double ke_logaddexp(double a, double b) {
    if (a != a || b != b) return a + b;
    const double mn = a < b ? a : b, mx = a < b ? b : a;
    if (mn != mx || std::isfinite(mn)) return mx + std::log1p(std::exp(mn - mx));
    return a;
}
"""


def signature(k: SoloKernel) -> str:
    args = [f"const {CTYPES[k.in_dtype]}* x", f"{CTYPES[k.out_dtype]}* out"]
    if k.indices:
        args.append("int64_t* idx")
    if k.values is not None:
        args.append(f"{CTYPES[k.in_dtype]}* vals")
    args += ["int64_t outer", "int64_t n", "int64_t inner"]
    return f'extern "C" void {k.name}({", ".join(args)})'


def write(k: SoloKernel) -> str:
    rows = "outer > 1"
    if k.kind == "reduce" and k.op in ("argmax", "argmin"):
        row, mid = _arg_row(k), _arg_mid(k)
    elif k.kind == "reduce" and k.op in ("max", "min"):
        row, mid = _extreme_row(k), _extreme_mid(k)
    elif k.kind == "reduce":
        row, mid = _reduce_row(k), _reduce_mid(k)
    else:
        row, mid, rows = _scan_row(k), _scan_mid(k), "outer > SCAN_ROWS"
    par = f"if ({rows} && outer * n * inner >= PARALLEL_MIN_ELEMENTS)"
    lines = [f"// kernel {k.name}: {k.label}", signature(k) + " {",
             f"    constexpr int64_t SCAN_ROWS = {_scan_rows(k)};" if k.kind == "scan" else "",
             "    if (inner == 1) {",
             *emit_cpp_solo_split.split(k, _fold, _scan_step, _scan_init),
             f"        {par} {{",
             "        #pragma omp parallel for schedule(static)", *_indent(row, 8),
             "        } else {", *_indent(row, 8), "        }", "        return;", "    }",
             "    const int64_t blocks = (inner + MID_BLOCK - 1) / MID_BLOCK;",
             "    if (outer * blocks > 1 && outer * n * inner >= PARALLEL_MIN_ELEMENTS) {",
             "    #pragma omp parallel for collapse(2) schedule(static)", *_indent(mid, 4),
             "    } else {", *_indent(mid, 4), "    }", "}"]
    return "\n".join(lines)


def _scan_rows(k: SoloKernel) -> int:
    """Rows a row scan interleaves: eight for a float chain (a double add's latency), one
    for an integer chain (one cycle an add) and for cummax's value-and-index chain, which
    gain nothing from it (cummax: 47 us a group of eight rows against 40 us row by row,
    256 rows of 128)."""
    return 8 if k.acc in ("float32", "float64") and not k.indices else 1


def _indent(lines: list[str], n: int) -> list[str]:
    return [" " * n + line for line in lines]


def _arg_row(k: SoloKernel) -> list[str]:
    t = CTYPES[k.in_dtype]
    gt = ">" if k.op == "argmax" else "<"
    return ["for (int64_t o = 0; o < outer; ++o) {",
            f"    const {t}* xr = x + o * n;",
            f"    {t} m = xr[0];",
            "    int nan = 0;",
            "    #pragma omp simd reduction(" + ("max" if gt == ">" else "min") +
            ":m) reduction(|:nan)",
            "    for (int64_t f = 0; f < n; ++f) {",
            f"        const {t} v = xr[f];",
            f"        m = v {gt} m ? v : m;",
            "        nan |= (v != v);",
            "    }",
            "    int64_t best = 0;",
            "    if (nan) {",
            "        for (int64_t f = 0; f < n; ++f) if (xr[f] != xr[f]) { best = f; break; }",
            "    } else {",
            "        for (int64_t f = 0; f < n; ++f) if (xr[f] == m) { best = f; break; }",
            "    }",
            "    out[o] = best;",
            *(["    vals[o] = xr[best];"] if k.values is not None else []),
            "}"]


def _extreme_row(k: SoloKernel) -> list[str]:
    """torch.max(x): a vectorised max with a NaN flag; any NaN makes the result NaN."""
    t = CTYPES[k.in_dtype]
    gt = ">" if k.op == "max" else "<"
    return ["for (int64_t o = 0; o < outer; ++o) {",
            f"    const {t}* xr = x + o * n;",
            f"    {t} m = xr[0];",
            "    int nan = 0;",
            f"    #pragma omp simd reduction({k.op}:m) reduction(|:nan)",
            "    for (int64_t f = 0; f < n; ++f) {",
            f"        const {t} v = xr[f];",
            f"        m = v {gt} m ? v : m;",
            "        nan |= (v != v);",
            "    }",
            f"    out[o] = nan ? ({t})NAN : m;",
            "}"]


def _extreme_mid(k: SoloKernel) -> list[str]:
    t = CTYPES[k.in_dtype]
    gt = ">" if k.op == "max" else "<"
    return [*_block_head(),
            f"    {t} a[MID_BLOCK];",
            "    for (int64_t c = 0; c < w; ++c) a[c] = x[base + c];",
            "    for (int64_t f = 1; f < n; ++f) {",
            f"        const {t}* xr = x + base + f * inner;",
            "        #pragma omp simd",
            "        for (int64_t c = 0; c < w; ++c) {",
            f"            const {t} v = xr[c];",
            f"            a[c] = ((v {gt} a[c]) | (v != v)) ? v : a[c];",
            "        }",
            "    }",
            "    for (int64_t c = 0; c < w; ++c) out[o * inner + c0 + c] = a[c];",
            "}", "}"]


def _block_head() -> list[str]:
    return ["for (int64_t o = 0; o < outer; ++o) {",
            "for (int64_t b = 0; b < blocks; ++b) {",
            "    const int64_t c0 = b * MID_BLOCK;",
            "    const int64_t w = inner - c0 < MID_BLOCK ? inner - c0 : MID_BLOCK;",
            "    const int64_t base = o * n * inner + c0;"]


def _arg_mid(k: SoloKernel) -> list[str]:
    t = CTYPES[k.in_dtype]
    gt = ">" if k.op == "argmax" else "<"
    return [*_block_head(),
            f"    {t} bv[MID_BLOCK];",
            "    int64_t bi[MID_BLOCK];",
            "    for (int64_t c = 0; c < w; ++c) { bv[c] = x[base + c]; bi[c] = 0; }",
            "    for (int64_t f = 1; f < n; ++f) {",
            f"        const {t}* xr = x + base + f * inner;",
            "        #pragma omp simd",
            "        for (int64_t c = 0; c < w; ++c) {",
            f"            const {t} v = xr[c];",
            f"            const bool take = (v {gt} bv[c]) | ((v != v) & (bv[c] == bv[c]));",
            "            bv[c] = take ? v : bv[c];",
            "            bi[c] = take ? f : bi[c];",
            "        }",
            "    }",
            "    for (int64_t c = 0; c < w; ++c) out[o * inner + c0 + c] = bi[c];",
            *(["    for (int64_t c = 0; c < w; ++c) vals[o * inner + c0 + c] = bv[c];"]
              if k.values is not None else []),
            "}", "}"]


def _fold(k: SoloKernel, x: str) -> tuple[str, str, str]:
    """(operator, starting value, the element as folded) of a sum, product, any or all."""
    sym, init = {"sum": ("+", "0"), "prod": ("*", "1"), "any": ("|", "0"),
                 "all": ("&", "1")}[k.op]
    if k.op in ("any", "all"):          # a NaN is nonzero, so true, as in torch
        return sym, init, f"(uint8_t)({x} != 0)"
    return sym, init, f"({CTYPES[k.acc]}){x}"


def _reduce_row(k: SoloKernel) -> list[str]:
    acc = CTYPES[k.acc]
    sym, init, v = _fold(k, "xr[f]")
    return ["for (int64_t o = 0; o < outer; ++o) {",
            f"    const {CTYPES[k.in_dtype]}* xr = x + o * n;",
            f"    {acc} a = {init};",
            f"    #pragma omp simd reduction({sym}:a)",
            f"    for (int64_t f = 0; f < n; ++f) a {sym}= {v};",
            f"    out[o] = ({CTYPES[k.out_dtype]})a;",
            "}"]


def _reduce_mid(k: SoloKernel) -> list[str]:
    acc = CTYPES[k.acc]
    sym, init, v = _fold(k, "xr[c]")
    return [*_block_head(),
            f"    {acc} a[MID_BLOCK];",
            f"    for (int64_t c = 0; c < w; ++c) a[c] = {init};",
            "    for (int64_t f = 0; f < n; ++f) {",
            f"        const {CTYPES[k.in_dtype]}* xr = x + base + f * inner;",
            "        #pragma omp simd",
            f"        for (int64_t c = 0; c < w; ++c) a[c] {sym}= {v};",
            "    }",
            "    for (int64_t c = 0; c < w; ++c) "
            f"out[o * inner + c0 + c] = ({CTYPES[k.out_dtype]})a[c];",
            "}", "}"]


def _scan_step(k: SoloKernel, a: str, i: str, v: str, f: str) -> list[str]:
    """Statements folding value `v` (position `f`) into accumulator `a` (index `i`)."""
    if k.op == "sum":
        return [f"{a} = {a} + {v};"]
    if k.op == "prod":
        return [f"{a} = {a} * {v};"]
    if k.op == "logsumexp":
        return [f"{a} = ke_logaddexp({a}, {v});"]
    ge = ">=" if k.op == "max" else "<="
    # torch's cummax: a NaN, or a value at least the running one (a tie takes the later index)
    # bitwise, not short-circuit: a branch per element mispredicts on random data
    return [f"const bool take = ({v} != {v}) | (({a} == {a}) & ({v} {ge} {a}));",
            f"{a} = take ? {v} : {a};", f"{i} = take ? {f} : {i};"]


def _scan_init(k: SoloKernel, first: str) -> str:
    return {"sum": "0", "prod": "1", "logsumexp": "-INFINITY"}.get(k.op, first)


def _scan_row(k: SoloKernel) -> list[str]:
    """Rows in groups of SCAN_ROWS, their positions interleaved: a scan is one dependency
    chain per row (a double add's latency per element), so eight rows at a time keep eight
    chains in flight (cumsum of 256 rows of 128: about 3x faster than one row at a time)."""
    acc = CTYPES[k.acc]
    return ["for (int64_t o0 = 0; o0 < outer; o0 += SCAN_ROWS) {",
            "    const int64_t w = outer - o0 < SCAN_ROWS ? outer - o0 : SCAN_ROWS;",
            f"    {acc} a[SCAN_ROWS];",
            "    int64_t ai[SCAN_ROWS];",
            "    for (int64_t r = 0; r < w; ++r) "
            f"{{ a[r] = {_scan_init(k, '(' + acc + ')x[(o0 + r) * n]')}; ai[r] = 0; }}",
            *_scan_rows_walk(k, "SCAN_ROWS", "if (w == SCAN_ROWS) {"),
            *_scan_rows_walk(k, "w", "} else {"),
            "    }",
            "}"]


def _scan_rows_walk(k: SoloKernel, w: str, head: str) -> list[str]:
    """The walk down a group of rows; with the group's size a constant (`SCAN_ROWS`) g++
    keeps the accumulators in registers and unrolls the rows."""
    acc, out = CTYPES[k.acc], CTYPES[k.out_dtype]
    idx = ["            idx[(o0 + r) * n + f] = ai[r];"] if k.indices else []
    return ["    " + head,
            "    for (int64_t f = 0; f < n; ++f) {",
            f"        for (int64_t r = 0; r < {w}; ++r) {{",
            f"            const {acc} v = ({acc})x[(o0 + r) * n + f];",
            *_indent(_scan_step(k, "a[r]", "ai[r]", "v", "f"), 12),
            f"            out[(o0 + r) * n + f] = ({out})a[r];",
            *idx,
            "        }",
            "    }"]


def _scan_mid(k: SoloKernel) -> list[str]:
    acc, out = CTYPES[k.acc], CTYPES[k.out_dtype]
    idx = ["            idx[base + f * inner + c] = ai[c];"] if k.indices else []
    return [*_block_head(),
            f"    {acc} a[MID_BLOCK];",
            "    int64_t ai[MID_BLOCK];",
            "    for (int64_t c = 0; c < w; ++c) "
            f"{{ a[c] = {_scan_init(k, '(' + acc + ')x[base + c]')}; ai[c] = 0; }}",
            "    for (int64_t f = 0; f < n; ++f) {",
            f"        const {CTYPES[k.in_dtype]}* xr = x + base + f * inner;",
            "        #pragma omp simd",
            "        for (int64_t c = 0; c < w; ++c) {",
            f"            const {acc} v = ({acc})xr[c];",
            *_indent(_scan_step(k, "a[c]", "ai[c]", "v", "f"), 12),
            f"            out[base + f * inner + c] = ({out})a[c];",
            *idx,
            "        }",
            "    }",
            "}", "}"]
