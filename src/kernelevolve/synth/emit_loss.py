"""Both languages' code for the class-index loss kernel (plan_loss.py).

C++: one loop over the (outer * inner) targets, OpenMP-parallel with a sum reduction (double
accumulators, as the loss and the weight total may sum many terms) above the parallel
threshold. Triton: reduction none runs one program per block of targets; mean and sum run one
program that walks every block, so the result is one deterministic sum and the mean's
division happens in the kernel. In both, an out-of-range target is never read: the lane is
masked (C++: skipped) and a flag set.
"""
from __future__ import annotations

from kernelevolve.synth.capture import Graph
from kernelevolve.synth.module import var
from kernelevolve.synth.plan_loss import LossKernel


def cpp_signature(k: LossKernel) -> str:
    args = ["const float* x", "const int64_t* t"]
    if k.weight is not None:
        args.append("const float* w")
    args += ["float* out", "float* total", "int32_t* bad", "int64_t outer", "int64_t c",
             "int64_t inner"]
    return f'extern "C" void {k.name}({", ".join(args)})'


def cpp_write(k: LossKernel) -> str:
    wi = "w[ti]" if k.weight is not None else "1.0f"
    store = "        out[i] = li;" if k.op == "none" else ""
    result = {"none": "", "sum": "    out[0] = (float)acc;",
              "mean": "    out[0] = (float)(acc / wsum);"}[k.op]
    lines = [
        f"// kernel {k.name}: {k.label}", cpp_signature(k) + " {",
        "    const int64_t m = outer * inner;",
        "    double acc = 0.0, wsum = 0.0;", "    int32_t flag = 0;",
        "    #pragma omp parallel for schedule(static) reduction(+:acc, wsum) reduction(|:flag) "
        f"if (m * {'(c + 1)' if k.smoothing else '1'} * 4 >= PARALLEL_MIN_ELEMENTS)",
        "    for (int64_t i = 0; i < m; ++i) {",
        "        const int64_t ti = t[i];", "        float li = 0.0f, wv = 0.0f;",
        f"        if (ti != (int64_t){k.ignore_index}LL) {{",
        "            if (ti < 0 || ti >= c) {", "                flag = 1;",
        "            } else {",
        "                const int64_t o = i / inner, j = i - o * inner;",
        f"                wv = {wi};", "                li = -wv * x[(o * c + ti) * inner + j];",
        *_cpp_smoothing(k), "            }", "        }", store,
        "        acc += li;", "        wsum += wv;", "    }",
        result, "    total[0] = (float)wsum;", "    bad[0] = flag;", "}"]
    return "\n".join(line for line in lines if line)


def _cpp_smoothing(k: LossKernel) -> list[str]:
    """Label smoothing: (1 - eps) * nll + eps / C * (-sum_c w_c logp_c), per target."""
    if not k.smoothing:
        return []
    wc = "w[cc] * " if k.weight is not None else ""
    eps = f"{k.smoothing!r}f"
    return ["                float s = 0.0f;",
            "                for (int64_t cc = 0; cc < c; ++cc)",
            f"                    s += {wc}x[(o * c + cc) * inner + j];",
            f"                li = (1.0f - {eps}) * li - ({eps} / (float)c) * s;"]


def _triton_smoothing(k: LossKernel) -> list[str]:
    if not k.smoothing:
        return []
    wc = "tl.load(w + cc) * " if k.weight is not None else ""
    eps = repr(k.smoothing)
    return ["sm = tl.zeros([BLOCK], tl.float32)", "for cc in range(0, c):",
            f"    sm += {wc}tl.load(x + (o * c + cc) * inner + j, mask=valid, other=0.0)",
            f"li = (1.0 - {eps}) * li - ({eps} / c) * sm"]


def cpp_argtypes(k: LossKernel) -> list[str]:
    ptrs = 5 + (k.weight is not None)
    return [f"_lib.{k.name}.argtypes = [ctypes.c_void_p] * {ptrs} + [ctypes.c_int64] * 3",
            f"_lib.{k.name}.restype = None"]


def cpp_launch(k: LossKernel, tensors: list[str]) -> list[str]:
    ptrs = ", ".join(f"{t}.data_ptr()" for t in tensors)
    n = k.name
    return [f"_lib.{n}({ptrs}, {n}_outer, {n}_c, {n}_inner)"]


def triton_write(k: LossKernel) -> str:
    w = ", w" if k.weight is not None else ""
    wload = ("tl.load(w + tc, mask=valid, other=0.0)" if k.weight is not None
             else "tl.where(valid, 1.0, 0.0)")
    head = ["@triton.jit", f"def {k.name}(x, t{w}, out, total, bad, outer, c, inner, "
            "BLOCK: tl.constexpr):", "    m = outer * inner"]
    body = [
        "ok = i < m", f"ti = tl.load(t + i, mask=ok, other={k.ignore_index})",
        f"keep = ok & (ti != {k.ignore_index})", "oob = keep & ((ti < 0) | (ti >= c))",
        "tl.store(bad + i * 0, tl.full([BLOCK], 1, tl.int32), mask=oob)",
        "valid = keep & (oob == 0)", "tc = tl.where(valid, ti, 0)",
        "o = i // inner", "j = i - o * inner",
        "xv = tl.load(x + (o * c + tc) * inner + j, mask=valid, other=0.0)",
        f"wv = {wload}", "li = -(wv * xv)", *_triton_smoothing(k)]
    if k.op == "none":
        return "\n".join(head + [
            "    i = (tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)",
            *("    " + b for b in body),
            "    tl.store(out + i, li, mask=ok)",
            "    ws = tl.sum(wv, 0)", "    if tl.program_id(0) == 0:",
            "        tl.store(total, ws)"])
    result = "s / ws" if k.op == "mean" else "s"
    return "\n".join(head + [
        "    acc = tl.zeros([BLOCK], tl.float32)", "    wacc = tl.zeros([BLOCK], tl.float32)",
        "    for start in range(0, m, BLOCK):",
        "        i = (start + tl.arange(0, BLOCK)).to(tl.int64)",
        *("        " + b for b in body),
        "        acc += li", "        wacc += wv",
        "    s = tl.sum(acc, 0)", "    ws = tl.sum(wacc, 0)",
        f"    tl.store(out, {result})", "    tl.store(total, ws)"])


def triton_launch(k: LossKernel, tensors: list[str]) -> list[str]:
    n = k.name
    m = f"{n}_outer * {n}_inner"
    block = "min(1024, BLOCK_ELEMENTS)"
    grid = f"(triton.cdiv({m}, {block}),)" if k.op == "none" else "(1,)"
    call = (f"{n}[{grid}]({', '.join(tensors)}, {n}_outer, {n}_c, {n}_inner, "
            f"BLOCK={block}, num_warps=NUM_WARPS)")
    if k.op == "none":
        return [f"if {m}:", f"    {call}"]
    return [call]


def cpp_call(k: LossKernel, g, ref) -> list[str]:
    lines, tensors = loss_setup(k, g, ref)
    return lines + cpp_launch(k, tensors) + loss_finish(k, g, ref)


def triton_call(k: LossKernel, g, ref) -> list[str]:
    lines, tensors = loss_setup(k, g, ref)
    return lines + triton_launch(k, tensors) + loss_finish(k, g, ref)


def loss_setup(k: LossKernel, g: Graph, ref) -> tuple[list[str], list[str]]:
    """The forward lines before the launch, shared by both emitters: (lines, the tensors the
    kernel reads and writes, in its argument order). The lines leave `{name}_outer`,
    `{name}_c` and `{name}_inner` set from the input's run-time shape."""
    n = k.name
    x, t = f"{n}_x", f"{n}_t"
    lines = [f"# kernel {n}: {k.label} (a kernel of its own)",
             f"{x} = {var(g, k.source, ref)}.contiguous()",
             f"{t} = {var(g, k.target, ref)}.contiguous()"]
    if len(k.shape) == 1:
        lines.append(f"{n}_outer, {n}_c, {n}_inner = 1, {x}.shape[0], 1")
    else:
        lines.append(f"{n}_outer, {n}_c, {n}_inner = {x}.shape[0], {x}.shape[1], "
                     f"{x}.shape[2:].numel()")
    shape = f"{t}.shape" if k.op == "none" else "()"
    dev = f"device={x}.device"
    lines += [f"{n}_out = torch.empty({shape}, dtype=torch.float32, {dev})",
              f"{n}_total = torch.empty((), dtype=torch.float32, {dev})",
              f"{n}_bad = torch.zeros(1, dtype=torch.int32, {dev})"]
    tensors = [x, t]
    if k.weight is not None:
        lines.append(f"{n}_w = {var(g, k.weight, ref)}.contiguous()")
        tensors.append(f"{n}_w")
    return lines, tensors + [f"{n}_out", f"{n}_total", f"{n}_bad"]


def loss_finish(k: LossKernel, g: Graph, ref) -> list[str]:
    """After the launch: torch's IndexError for a target out of range, and the result."""
    n = k.name
    return [f"if {n}_bad.item():",
            f'    raise IndexError(f"Target out of bounds: a class index outside [0, {{{n}_c}})")',
            f"{var(g, k.out, ref)} = " + (f"({n}_out, {n}_total)" if g.values[k.out].dtype ==
                                          "tuple" else f"{n}_out")]
