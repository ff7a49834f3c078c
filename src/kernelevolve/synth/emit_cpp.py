"""C++/OpenMP emitter: one `extern "C"` function per planned kernel, in a `ModelNew` module.

Elementwise kernels with no per-column operand run one flat `parallel for simd` loop. Row
kernels give each row to one thread (`parallel for`, static blocks or dynamic tasks of
ROWS_PER_TASK rows) and make one `omp simd` pass over the row per reduction level plus a
store pass; values between passes stay in registers or L1/L2 (a row of 8192 floats is 32 KiB),
and pointwise prologues are recomputed in each pass rather than stored. Mid reduction kernels
((B, F, D) -> (B, D)) give each task MID_BLOCK consecutive D positions of one B index and walk
F, accumulating in a block of floats (contiguous, vectorised loads), then store the epilogue.

exp (and sigmoid/tanh, built on it) use a polynomial with ~2e-7 relative error when FAST_EXP
is on, so the loops vectorise; with it off they call std::exp (scalar). The harness checks
either value like any other candidate.
"""
from __future__ import annotations

from kernelevolve.synth.capture import Ref
from kernelevolve.synth.cpp_expr import CTYPE, EXPENSIVE, expr, lit
from kernelevolve.synth.module import doc_of
from kernelevolve.synth.plan import KNode, Kernel
from kernelevolve.synth.writer import KernelWriterBase

class KernelWriter(KernelWriterBase):
    def __init__(self, k: Kernel):
        super().__init__(k)
        self.col = "c"             # the column index inside the current loop (gathers)

    def ref(self, a, idx: str, dtype: str = "float32") -> str:
        if not isinstance(a, Ref):
            return lit(a, dtype)
        if a.name in self.inputs:
            arg, inp = self.inputs[a.name]
            return {"full": f"{arg}[{idx}]", "col": f"{arg}[c]", "row": f"{arg}[r]",
                    "chan": f"{arg}[(r / {arg}_in) % {arg}_sp]",
                    "scalar": f"{arg}[0]", "table": arg, "gtable": arg,
                    "index": f"{arg}[o * nred + f]"}[inp.layout]
        return "v_" + a.name

    def layout(self, a) -> str:
        if not isinstance(a, Ref):
            return "scalar"
        if a.name in self.inputs:
            return self.inputs[a.name][1].layout
        return self.nodes[a.name].layout

    def define(self, n: KNode, idx: str) -> str:
        if n.kind == "gather":
            return f"const float v_{n.name} = gp_{n.name}[{self.col}];"
        t, operands = self.operands(n)
        x = []
        for a, d, cast in operands:
            # a literal takes the compute type (a bool literal stays bool)
            v = self.ref(a, idx, d if not cast and (isinstance(a, Ref) or d == "bool") else t)
            x.append(f"({CTYPE[t]})({v})" if cast else v)
        uniform = n.op == "div" and len(n.args) > 1 and self.layout(n.args[1]) in ("row", "scalar")
        return f"const {CTYPE[n.dtype]} v_{n.name} = {expr(n, x, uniform, t)};"

    def closure(self, targets: list[str], stop: frozenset[str] = frozenset()) -> list[KNode]:
        """Per-element nodes needed (in order) to compute `targets` inside a column loop;
        names in `stop` are taken as given (cached from an earlier pass)."""
        need: set[str] = set()
        stack = list(targets)
        while stack:
            name = stack.pop()
            n = self.nodes.get(name)
            if n is None or name in need or name in stop or n.layout in ("row", "scalar"):
                continue
            need.add(name)
            stack.extend(a.name for a in n.args if isinstance(a, Ref))
        return [n for n in self.k.nodes if n.name in need]

    def cost(self) -> int:
        """Work per element in units of one load+store (for the parallel threshold)."""
        units = 4.0 * (1 + self.k.levels)
        for n in self.k.nodes:
            if n.kind == "reduce":
                continue
            units += {"gelu": 16, "gelu_tanh": 12, "erf": 16}.get(n.op, 10 if n.op in EXPENSIVE
                                                                  else 1)
        return max(1, round(units / 4))

    def signature(self) -> str:
        args = [f"const {CTYPE[inp.dtype]}* {arg}" for arg, inp in self.inputs.values()]
        odt = {o.name: o.dtype for o in self.k.outputs}
        args += [f"{CTYPE[odt[n]]}* {o}" for n, o in self.outputs.items()]
        if self.k.mid_dim is not None:
            args += ["int64_t outer", "int64_t nred", "int64_t inner"]
        else:
            args += ["int64_t n"] if self.k.flat else ["int64_t rows", "int64_t cols"]
        # bucketize boundaries and embedding tables: their lengths come last, then the flag
        # an embedding lookup raises when an index is out of range
        for arg, inp in self.inputs.values():  # in the order module.table_args passes them
            if inp.layout in ("table", "gtable"):
                args.append(f"int64_t {arg}_n")
            elif inp.layout == "chan":
                args += [f"int64_t {arg}_in", f"int64_t {arg}_sp"]
        if self.gathers:
            args.append("int32_t* bad_index")
        return f'extern "C" void {self.k.name}({", ".join(args)})'

    def write(self) -> str:
        lines = [f"// {doc_of(self.k)}", self.signature() + " {"]
        if self.k.mid_dim is not None:
            lines += self.mid_body()
        else:
            lines += self.flat_body() if self.k.flat else self.row_body()
        lines.append("}")
        return "\n".join(lines)

    def gather_rows(self, ind: str, index: str, width: str, offset: str = "") -> list[str]:
        """Each embedding lookup's table row for this row: an out-of-range index raises the
        flag (forward raises IndexError, as torch does) and reads row 0 instead."""
        out = []
        for n in self.gathers:
            table, idx = (self.inputs[a.name][0] for a in n.args)
            table = table.removesuffix("_r")
            out += [f"{ind}int64_t g_{n.name} = (int64_t){self.ref(n.args[1], index)};",
                    f"{ind}if (g_{n.name} < 0 || g_{n.name} >= {table}_n) {{",
                    f"{ind}    #pragma omp atomic write",
                    f"{ind}    bad_index[0] = 1;",
                    f"{ind}    g_{n.name} = 0;",
                    f"{ind}}}",
                    f"{ind}const float* gp_{n.name} = {table} + g_{n.name} * {width}{offset};"]
        return out

    def parallel_if(self, size: str) -> str:
        # Waking the OpenMP team costs tens of microseconds on a busy machine: a kernel runs
        # parallel only when its work (elements x cost per element) reaches the threshold.
        return f"if ({size} * {self.cost()} >= PARALLEL_MIN_ELEMENTS)"

    def flat_body(self) -> list[str]:
        out = [f"    #pragma omp parallel for simd schedule(static) {self.parallel_if('n')}",
               "    for (int64_t i = 0; i < n; ++i) {"]
        for n in self.k.nodes:
            out.append("        " + self.define(n, "i"))
        for name, o in self.outputs.items():
            out.append(f"        {o}[i] = v_{name};")
        out.append("    }")
        return out

    def mid_body(self) -> list[str]:
        """Reduction over a middle dim: each task owns MID_BLOCK consecutive inner positions
        of one outer index and walks the reduced dim, accumulating into a block of floats
        (contiguous loads, vectorised along the inner dim); then the epilogue and the store."""
        k = self.k
        reds = [n for n in k.nodes if n.kind == "reduce"]
        init = {"sum": "0.0f", "mean": "0.0f", "max": "(-INFINITY)", "min": "INFINITY"}
        ind = "            "
        out = ["    const int64_t nblk = (inner + MID_BLOCK - 1) / MID_BLOCK;",
               f"    #pragma omp parallel for schedule(static) "
               f"{self.parallel_if('outer * nred * inner')}",
               "    for (int64_t t = 0; t < outer * nblk; ++t) {",
               "        const int64_t o = t / nblk;",
               "        const int64_t c0 = (t - o * nblk) * MID_BLOCK;",
               "        const int64_t w = inner - c0 < MID_BLOCK ? inner - c0 : MID_BLOCK;"]
        for n in reds:
            out += [f"        float acc_{n.name}[MID_BLOCK];",
                    "        #pragma omp simd",
                    f"        for (int64_t j = 0; j < w; ++j) acc_{n.name}[j] = {init[n.op]};"]
        out += ["        // one pass down the reduced dim: " + ", ".join(
                    f"{n.op} of {n.args[0].name}" for n in reds),
                "        for (int64_t f = 0; f < nred; ++f) {",
                "            const int64_t base = (o * nred + f) * inner + c0;",
                *self.gather_rows("            ", "", "inner", " + c0"),
                "            #pragma omp simd",
                "            for (int64_t j = 0; j < w; ++j) {",
                f"{ind}    const int64_t c = c0 + j;",
                f"{ind}    (void)c;"]
        self.col = "j"
        for n in k.nodes:
            if n.layout != "mid":
                out.append(f"{ind}    " + self.define(n, "base + j"))
        for n in reds:
            out.append(f"{ind}    " + self.step(n, self.ref(n.args[0], "base + j"),
                                                f"acc_{n.name}[j]", flagged=False))
        out += [f"{ind}}}", "        }",
                "        // epilogue and store",
                "        #pragma omp simd",
                "        for (int64_t j = 0; j < w; ++j) {",
                "            const int64_t c = c0 + j;",
                "            (void)c;"]
        for n in reds:
            post = f"acc_{n.name}[j]" + (" / (float)nred" if n.op == "mean" else "")
            out.append(f"{ind}const float v_{n.name} = {post};")
        for n in k.nodes:
            if n.layout in ("col", "scalar") or (n.layout == "mid" and n.kind != "reduce"):
                out.append(f"{ind}" + self.define(n, "c"))
        for name, o in self.outputs.items():
            out.append(f"{ind}{o}[o * inner + c] = v_{name};")
        out += ["        }", "    }"]
        return out

    def cached(self) -> list[str]:
        """Full values of the last reduction pass worth keeping for the store pass: those
        with a transcendental op in them (softmax's exp), read back instead of recomputed."""
        k = self.k
        full_outs = [n for n in self.outputs if self.nodes[n].layout == "full"]
        if not k.levels or not full_outs:
            return []
        last = [n for n in k.nodes if n.kind == "reduce" and n.level == k.levels]
        in_last = {n.name for n in self.closure([n.args[0].name for n in last])}
        store = self.closure(full_outs)
        both = {n.name for n in store if n.name in in_last}

        def costly(name: str, seen: set[str]) -> bool:
            n = self.nodes.get(name)
            if n is None or name not in both or name in seen:
                return False
            seen.add(name)
            return n.op in EXPENSIVE or any(costly(a.name, seen) for a in n.args
                                            if isinstance(a, Ref))

        frontier = []
        for n in store:
            if n.name in both:
                continue
            frontier += [a.name for a in n.args if isinstance(a, Ref) and a.name in both]
        frontier += [o for o in full_outs if o in both]
        return [n.name for n in k.nodes if n.name in set(frontier) and costly(n.name, set())]

    @staticmethod
    def step(n: KNode, v: str, acc: str, flagged: bool = True) -> str:
        """One element into an accumulator. max / min propagate NaN as torch's amax / amin
        do: `omp simd reduction(max:)` combines its lanes with a compare that drops NaN, so
        a NaN is remembered in an int flag (`nan_<acc>`, reduced with |) and applied after
        the loop; an accumulator no reduction clause combines (`flagged=False`) takes the
        NaN directly."""
        if n.op not in ("max", "min"):
            return f"{acc} += {v};"
        cmp = ">" if n.op == "max" else "<"
        if not flagged:
            return f"{acc} = ({v} {cmp} {acc} || {v} != {v}) ? {v} : {acc};"
        return f"{acc} = {v} {cmp} {acc} ? {v} : {acc}; nan_{acc} |= ({v} != {v});"

    def row_body(self) -> list[str]:
        k = self.k
        cached = self.cached()
        # The first cached value lives in the first float output's row: the store pass reads
        # each element back just before writing that element (softmax: exp, then scaled in
        # place). The others go to a per-thread scratch row.
        in_out = next((o for n, o in self.outputs.items() if self.nodes[n].layout == "full"
                       and self.nodes[n].dtype == "float32"), None) if cached else None
        scratch = cached[1:] if in_out else cached
        out = [f"    #pragma omp parallel {self.parallel_if('rows * cols')}",
               "    {"]
        if scratch:
            out.append(f"    float* scratch = static_cast<float*>(std::malloc("
                       f"sizeof(float) * {len(scratch)} * (cols > 0 ? cols : 1)));")
        fuse = (k.levels >= 2 and all(isinstance(n.args[0], Ref) and n.args[0].name in
                                      self.inputs and n.op in ("max", "min", "sum")
                                      for n in k.nodes if n.kind == "reduce" and n.level == 1)
                and len({n.args[0].name for n in k.nodes
                         if n.kind == "reduce" and n.level == 1}) == 1)
        if fuse:
            out.append("    int64_t carried_row = -1;")
            out += [f"    float carry_{n.name} = 0.0f;" for n in k.nodes
                    if n.kind == "reduce" and n.level == 1]
            out += [f"    int nan_carry_{n.name} = 0;" for n in k.nodes
                    if n.kind == "reduce" and n.level == 1 and _nan(n)]
        out += ["    #pragma omp for KE_SCHEDULE",
                "    for (int64_t r = 0; r < rows; ++r) {"]
        ind = "        "
        for arg, inp in self.inputs.values():
            if inp.layout == "full":
                out.append(f"{ind}const float* {arg}_r = {arg} + r * cols;")
        if in_out:
            out.append(f"{ind}float* buf_{cached[0]} = {in_out} + r * cols;")
        for j, name in enumerate(scratch):
            out.append(f"{ind}float* buf_{name} = scratch + {j} * cols;")
        self.inputs = {n: ((f"{a}_r" if i.layout == "full" else a), i)
                       for n, (a, i) in self.inputs.items()}
        out += self.gather_rows(ind, "c", "cols")
        out += [ind + self.define(n, "c") for n in k.nodes
                if n.layout in ("row", "scalar") and n.level == 0 and n.kind != "reduce"]
        first = [n for n in k.nodes if n.kind == "reduce" and n.level == 1]
        # Pass 1 of row r + 1 rides along the last pass of row r when it reduces plain full
        # inputs (softmax's max): its loads overlap the last pass's arithmetic.
        fuse_next = (k.levels >= 2 and all(isinstance(n.args[0], Ref) and n.args[0].name in
                                           self.inputs and n.op in ("max", "min", "sum")
                                           for n in first)
                     and len({n.args[0].name for n in first}) == 1)
        init = {"sum": "0.0f", "mean": "0.0f", "var": "0.0f", "max": "(-INFINITY)",
                "min": "INFINITY"}
        for level in range(1, k.levels + 1):
            reds = [n for n in k.nodes if n.kind == "reduce" and n.level == level]
            out.append(f"{ind}// pass {level}: " + ", ".join(
                f"{n.op} of {n.args[0].name}" for n in reds))
            if fuse_next and level == 1:
                out.append(f"{ind}if (carried_row != r) {{  // not taken along the previous row")
                out += [f"{ind}    carry_{n.name} = {init[n.op]};" for n in reds]
                out += [f"{ind}    nan_carry_{n.name} = 0;" for n in reds if _nan(n)]
                red = " ".join(_clauses(n, "carry_") for n in reds)
                out.append(f"{ind}    #pragma omp simd {red}")
                out.append(f"{ind}    for (int64_t c = 0; c < cols; ++c) {{")
                for n in reds:
                    v = self.ref(n.args[0], "c")
                    out.append(f"{ind}        " + self.step(n, v, "carry_" + n.name))
                out.append(f"{ind}    }}")
                out.append(f"{ind}}}")
                out += [f"{ind}const float v_{n.name} = {_final(n, 'carry_')};" for n in reds]
                out.append(f"{ind}const float* next_r = r + 1 < rows ? in0_r + cols : in0_r;"
                           .replace("in0_r", self.inputs[first[0].args[0].name][0]))
                out += [ind + self.define(n, "c") for n in k.nodes
                        if n.layout in ("row", "scalar") and n.level == 1 and n.kind != "reduce"]
                continue
            for n in reds:
                out.append(f"{ind}float acc_{n.name} = {init[n.op]};")
                out += [f"{ind}int nan_acc_{n.name} = 0;"] if _nan(n) else []
            if fuse_next and level == k.levels:
                for n in first:
                    out.append(f"{ind}float next_{n.name} = {init[n.op]};")
                    out += [f"{ind}int nan_next_{n.name} = 0;"] if _nan(n) else []
            red = " ".join(_clauses(n, "acc_") for n in reds)
            if fuse_next and level == k.levels:
                red += " " + " ".join(_clauses(n, "next_") for n in first)
            out.append(f"{ind}#pragma omp simd {red}")
            out.append(f"{ind}for (int64_t c = 0; c < cols; ++c) {{")
            for n in self.closure([n.args[0].name for n in reds]):
                out.append(f"{ind}    " + self.define(n, "c"))
                if level == k.levels and n.name in cached:
                    out.append(f"{ind}    buf_{n.name}[c] = v_{n.name};")
            for n in reds:
                out.append(f"{ind}    " + self.step(n, self.ref(n.args[0], "c"), "acc_" + n.name))
            if fuse_next and level == k.levels:
                for n in first:
                    v = "next_r[c]"
                    out.append(f"{ind}    " + self.step(n, v, "next_" + n.name))
            out.append(f"{ind}}}")
            if fuse_next and level == k.levels:
                out += [f"{ind}carry_{n.name} = next_{n.name};" for n in first]
                out += [f"{ind}nan_carry_{n.name} = nan_next_{n.name};" for n in first
                        if _nan(n)]
                out.append(f"{ind}carried_row = r + 1;")
            for n in reds:
                post = {"mean": f"acc_{n.name} / (float)cols",
                        "var": f"acc_{n.name} / (float)(cols - {lit(n.attrs.get('correction', 1.0))})"}
                out.append(f"{ind}const float v_{n.name} = {post.get(n.op, _final(n, 'acc_'))};")
            out += [ind + self.define(n, "c") for n in k.nodes
                    if n.layout in ("row", "scalar") and n.level == level and n.kind != "reduce"]
        full_outs = [(n, o) for n, o in self.outputs.items() if self.nodes[n].layout == "full"]
        if full_outs:
            out.append(f"{ind}// store pass" + (" (reads back " + ", ".join(cached) +
                                                 " from the last pass)" if cached else ""))
            out.append(f"{ind}#pragma omp simd")
            out.append(f"{ind}for (int64_t c = 0; c < cols; ++c) {{")
            for name in cached:
                out.append(f"{ind}    const float v_{name} = buf_{name}[c];")
            for n in self.closure([n for n, _ in full_outs], frozenset(cached)):
                out.append(f"{ind}    " + self.define(n, "c"))
            for n, o in full_outs:
                out.append(f"{ind}    {o}[r * cols + c] = v_{n};")
            out.append(f"{ind}}}")
        for n, o in self.outputs.items():
            if self.nodes[n].layout == "row":
                out.append(f"{ind}{o}[r] = v_{n};")
        out.append("    }")
        if scratch:
            out.append("    std::free(scratch);")
        out.append("    }")
        return out


_CLAUSE = {"sum": "+", "mean": "+", "var": "+", "max": "max", "min": "min"}


def _nan(n: KNode) -> bool:
    """A reduction that keeps a NaN flag beside its accumulator (max, min)."""
    return n.op in ("max", "min")


def _clauses(n: KNode, prefix: str) -> str:
    acc = f"{prefix}{n.name}"
    return f"reduction({_CLAUSE[n.op]}:{acc})" + (f" reduction(|:nan_{acc})" if _nan(n) else "")


def _final(n: KNode, prefix: str) -> str:
    acc = f"{prefix}{n.name}"
    return f"(nan_{acc} ? NAN : {acc})" if _nan(n) else acc
