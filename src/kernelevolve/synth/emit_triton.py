"""Triton emitter: one `@triton.jit` kernel per planned kernel, in a `ModelNew` module.

Row kernels: each program owns BLOCK_ROWS rows and walks them in BLOCK_COLS-wide chunks, one
walk per reduction level plus a store walk (a row that fits one chunk is read from cache
after the first walk). Per-row values are kept as (BLOCK_ROWS, 1) columns so they broadcast.
Elementwise kernels use a 2-D grid of (rows, column chunks) tiles, or a flat 1-D grid when no
operand is per-column. Every load and store is masked; padding lanes are neutralised before
they enter a reduction. Runs on a GPU, or on CPU tensors under TRITON_INTERPRET=1.
"""
from __future__ import annotations

from kernelevolve.synth.capture import Ref
from kernelevolve.synth.module import (Reference, call_setup, doc_of, forward_epilogue,
                                       forward_prologue, imports_of, problem_name, table_args,
                                       torch_step, var)
from kernelevolve.synth.plan import KNode, Kernel, Plan
from kernelevolve.synth.triton_expr import HELPERS, TL, expr, lit
from kernelevolve.synth.writer import INTS, KernelWriterBase


class _KernelWriter(KernelWriterBase):
    def __init__(self, k: Kernel):
        super().__init__(k)
        self.width, self.cols = "cols", "cols_idx[None, :]"   # a gathered row's columns

    def ref(self, a, dtype: str = "float32") -> str:
        if not isinstance(a, Ref):
            return lit(a, dtype)
        if a.name in self.inputs:
            arg, inp = self.inputs[a.name]
            return arg if inp.layout in ("table", "gtable") else "x_" + arg
        return "v_" + a.name

    def define(self, n: KNode) -> str:
        if n.kind == "gather":
            table = self.inputs[n.args[0].name][0]
            return (f"v_{n.name} = tl.load({table} + g_{n.name} * {self.width} + {self.cols}, "
                    "mask=mask, other=0.0)")
        t, operands = self.operands(n)
        x = [f"{self.ref(a, t)}.to({TL[t]})" if cast else self.ref(a, t)
             for a, _, cast in operands]
        e = expr(n, x, t)
        if n.dtype in INTS and n.kind not in ("view", "cast"):
            e = f"({e}).to({TL[n.dtype]})"
        return f"v_{n.name} = {e}"

    def closure(self, targets: list[str]) -> tuple[list[str], list[KNode]]:
        need: set[str] = set()
        loads: list[str] = []
        stack = list(targets)
        while stack:
            name = stack.pop()
            if name in self.inputs:
                if self.inputs[name][1].layout in ("full", "col") and name not in loads:
                    loads.append(name)
                continue
            n = self.nodes.get(name)
            if n is None or name in need or n.layout in ("row", "scalar"):
                continue
            need.add(name)
            stack.extend(a.name for a in n.args if isinstance(a, Ref))
        return loads, [n for n in self.k.nodes if n.name in need]

    def load(self, name: str, flat: bool) -> str:
        arg, inp = self.inputs[name]
        if flat:
            return f"x_{arg} = tl.load({arg} + offs, mask=mask, other=0.0)"
        if inp.layout == "full":
            return f"x_{arg} = tl.load({arg} + offs, mask=mask, other=0.0)"
        return f"x_{arg} = tl.load({arg} + cols_idx, mask=col_ok, other=0.0)[None, :]"

    def write(self) -> str:
        k = self.k
        args = [a for a, _ in self.inputs.values()] + list(self.outputs.values())
        tables = []  # in the order module.table_args passes them
        for a, i in self.inputs.values():
            tables += ([f"{a}_n"] if i.layout in ("table", "gtable") else
                       [f"{a}_in", f"{a}_sp"] if i.layout == "chan" else [])
        tables += ["bad_index"] if self.gathers else []
        if k.flat:
            args += ["n", *tables, "BLOCK: tl.constexpr"]
        elif k.mid_dim is not None:
            args += ["outer", "nred", "inner", *tables, "BLOCK: tl.constexpr"]
        else:
            args += ["rows", "cols", *tables, "BLOCK_ROWS: tl.constexpr",
                     "BLOCK_COLS: tl.constexpr"]
        lines = [f"# {doc_of(k)}", "@triton.jit", f"def {k.name}({', '.join(args)}):"]
        body = (self.mid_body() if k.mid_dim is not None else
                self.flat_body() if k.flat else self.row_body())
        return "\n".join(lines + ["    " + b for b in body])

    def pre_rows(self) -> list[str]:
        out = []
        for arg, inp in self.inputs.values():
            if inp.layout == "scalar":
                out.append(f"x_{arg} = tl.load({arg})")
            elif inp.layout == "row" and not self.k.flat:
                out.append(f"x_{arg} = tl.load({arg} + row_idx, mask=row_ok, other=0.0)[:, None]")
            elif inp.layout == "chan":
                out.append(f"x_{arg} = tl.load({arg} + (row_idx // {arg}_in) % {arg}_sp, "
                           "mask=row_ok, other=0.0)[:, None]")
        return out + self.gather_rows("x_", "row_ok[:, None]")

    def gather_rows(self, prefix: str, ok: str) -> list[str]:
        """Each lookup's table row index; an out-of-range index sets the flag (forward raises
        IndexError, as torch does) and reads row 0 instead."""
        out = []
        for n in self.gathers:
            table, idx = (self.inputs[a.name][0] for a in n.args)
            g = f"{prefix}{idx}"
            out += [f"bad_{n.name} = {ok} & (({g} < 0) | ({g} >= {table}_n))",
                    f"tl.store(bad_index + 0 * {g}, 1, mask=bad_{n.name})",
                    f"g_{n.name} = tl.where(bad_{n.name}, 0, {g}).to(tl.int64)"]
        return out

    def mid_body(self) -> list[str]:
        """Reduction over a middle dim: program (o, block) owns BLOCK inner positions of outer
        index o and walks the reduced dim, accumulating a BLOCK-wide vector; then the epilogue
        and one store."""
        k = self.k
        self.width, self.cols = "inner", "cols_idx"
        reds = [n for n in k.nodes if n.kind == "reduce"]
        init = {"max": 'float("-inf")', "min": 'float("inf")'}
        out = ["o = tl.program_id(0)",
               "cols_idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)",
               "col_ok = cols_idx < inner", "mask = col_ok"]
        for arg, inp in self.inputs.values():
            if inp.layout == "scalar":
                out.append(f"x_{arg} = tl.load({arg})")
            elif inp.layout == "col":
                out.append(f"x_{arg} = tl.load({arg} + cols_idx, mask=col_ok, other=0.0)")
        out += [self.define(n) for n in k.nodes if n.layout in ("col", "scalar")]
        out += [f"acc_{n.name} = tl.full((BLOCK,), {init.get(n.op, '0.0')}, tl.float32)"
                for n in reds]
        inner = ["offs = (o * nred + f) * inner + cols_idx"]
        for arg, inp in self.inputs.values():
            if inp.layout == "full":
                inner.append(f"x_{arg} = tl.load({arg} + offs, mask=mask, other=0.0)")
            elif inp.layout == "index":
                inner.append(f"x_{arg} = tl.load({arg} + o * nred + f)")
        inner += self.gather_rows("x_", "True")
        inner += [self.define(n) for n in k.nodes if n.layout == "full"]
        for n in reds:
            v = f"tl.where(mask, {self.ref(n.args[0])}, {init.get(n.op, '0.0')})"
            inner.append(_step(n, v))
        out.append("for f in range(0, nred):")
        out += ["    " + line for line in inner]
        for n in reds:
            out.append(f"v_{n.name} = acc_{n.name}" + (" / nred" if n.op == "mean" else ""))
        out += [self.define(n) for n in k.nodes if n.layout == "mid" and n.kind != "reduce"]
        out += [f"tl.store({o} + o * inner + cols_idx, v_{n}, mask=col_ok)"
                for n, o in self.outputs.items()]
        return out

    def flat_body(self) -> list[str]:
        out = ["offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n"]
        out += self.pre_rows()
        loads, nodes = self.closure(list(self.outputs))
        out += [self.load(n, True) for n in loads]
        out += [self.define(n) for n in self.k.nodes]
        out += [f"tl.store({o} + offs, v_{n}, mask=mask)" for n, o in self.outputs.items()]
        return out

    def tile(self, col0: str) -> list[str]:
        return [f"cols_idx = {col0} + tl.arange(0, BLOCK_COLS)", "col_ok = cols_idx < cols",
                "mask = row_ok[:, None] & col_ok[None, :]",
                "offs = row_idx[:, None] * cols + cols_idx[None, :]"]

    def row_body(self) -> list[str]:
        k = self.k
        out = ["row_idx = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)",
               "row_ok = row_idx < rows"]
        out += self.pre_rows()
        out += [self.define(n) for n in k.nodes
                if n.layout in ("row", "scalar") and n.level == 0 and n.kind != "reduce"]
        init = {"max": 'float("-inf")', "min": 'float("inf")'}
        for level in range(1, k.levels + 1):
            reds = [n for n in k.nodes if n.kind == "reduce" and n.level == level]
            out.append(f"# pass {level}: " + ", ".join(f"{n.op} of {n.args[0].name}" for n in reds))
            for n in reds:
                out.append(f"acc_{n.name} = tl.full((BLOCK_ROWS, BLOCK_COLS), "
                           f"{init.get(n.op, '0.0')}, tl.float32)")
            out.append("for col0 in range(0, cols, BLOCK_COLS):")
            loads, nodes = self.closure([n.args[0].name for n in reds])
            inner = self.tile("col0") + [self.load(n, False) for n in loads]
            inner += [self.define(n) for n in nodes]
            for n in reds:
                v = f"tl.where(mask, {self.ref(n.args[0])}, {init.get(n.op, '0.0')})"
                inner.append(_step(n, v))
            out += ["    " + line for line in inner]
            for n in reds:
                fn = {"max": "tl.max", "min": "tl.min"}.get(n.op, "tl.sum")
                red = f"{fn}(acc_{n.name}, axis=1)[:, None]"
                if n.op in ("max", "min"):  # a NaN lane makes the row's max NaN, as in torch
                    red = (f"tl.where(tl.sum((acc_{n.name} != acc_{n.name}).to(tl.int32), "
                           f"axis=1)[:, None] > 0, float(\"nan\"), {red})")
                if n.op == "mean":
                    red += " / cols"
                elif n.op == "var":
                    red += f" / (cols - {lit(n.attrs.get('correction', 1.0))})"
                out.append(f"v_{n.name} = {red}")
            out += [self.define(n) for n in k.nodes
                    if n.layout in ("row", "scalar") and n.level == level and n.kind != "reduce"]
        full_outs = [(n, o) for n, o in self.outputs.items() if self.nodes[n].layout == "full"]
        if full_outs:
            loads, nodes = self.closure([n for n, _ in full_outs])
            inner = [self.load(n, False) for n in loads] + [self.define(n) for n in nodes]
            inner += [f"tl.store({o} + offs, v_{n}, mask=mask)" for n, o in full_outs]
            if k.has_reduction:
                out.append("# store pass")
                out.append("for col0 in range(0, cols, BLOCK_COLS):")
                out += ["    " + line for line in self.tile("col0") + inner]
            else:
                out += self.tile("tl.program_id(1) * BLOCK_COLS") + inner
        for n, o in self.outputs.items():
            if self.nodes[n].layout == "row":
                out.append(f"tl.store({o} + row_idx[:, None], v_{n}, mask=row_ok[:, None])")
        return out


def emit_source(p: Plan, problem_path: str, plan_text: str) -> str:
    ref = Reference(problem_path)
    g = p.graph
    writers = [_KernelWriter(k) for k in p.kernels]
    kernels = "\n\n\n".join(w.write() for w in writers)
    helpers = [name for name in HELPERS if f"{name}(" in kernels]
    if helpers:
        kernels = "\n\n\n".join("\n".join(HELPERS[h]) for h in helpers) + "\n\n\n" + kernels
    name = problem_name(problem_path)
    # What the launches in _call read: BLOCK_ELEMENTS all but middle-dim kernels, MAX_BLOCK_COLS
    # all but flat ones (a knob nothing reads would cost the tuner evaluations of one kernel).
    blocks = any(k.mid_dim is None for k in p.kernels)
    cols = any(k.mid_dim is not None or not k.flat for k in p.kernels)
    lines = [f'"""Synthesized Triton candidate (kernelevolve synth) for {name}.',
             "", "Plan:", *("    " + line for line in plan_text.splitlines()), '"""',
             *imports_of(ref), "import triton", "import triton.language as tl", "",
             "# ---- Tunables: the `tune` operator rewrites these literals (powers of two;",
             "# only those the kernel calls below read are declared).",
             *(["# Values per program; row kernels take BLOCK_ELEMENTS // BLOCK_COLS rows each.",
                "BLOCK_ELEMENTS = 8192"] if blocks else []),
             *(["# Widest column chunk a row kernel walks at once (the row length rounded up to "
                "a", "# power of two when it is smaller).", "MAX_BLOCK_COLS = 4096"]
               if cols else []),
             "NUM_WARPS = 4",
             "TUNABLES = {",
             *(['    "BLOCK_ELEMENTS": [1024, 2048, 4096, 8192, 16384],'] if blocks else []),
             *(['    "MAX_BLOCK_COLS": [512, 1024, 2048, 4096, 8192],'] if cols else []),
             '    "NUM_WARPS": [1, 2, 4, 8, 16],',
             "}", "", "", kernels, "", "",
             *(["# Module-level constants Model.__init__ reads.", *ref.constants, "", ""]
               if ref.constants else []),
             "class ModelNew(nn.Module):" if "nn" in " ".join(imports_of(ref))
             else "class ModelNew(torch.nn.Module):", ref.init_src.rstrip("\n"), "",
             f"    def forward(self, {', '.join(ref.forward_args)}):"]
    body = forward_prologue(p, ref)
    for kind, item in p.steps:
        body += [torch_step(g, item, ref)] if kind == "torch" else _call(item, g, ref)
    body += forward_epilogue(p, ref)
    lines += ["        " + b if b else "" for b in body]
    return "\n".join(lines) + "\n"


def _call(k: Kernel, g, ref: Reference) -> list[str]:
    out, names = call_setup(k, g, ref)
    shape = f"{k.name}_shape"
    tables = "".join(f", {a}" for a in table_args(k, names))
    gathers = any(n.kind == "gather" for n in k.nodes)
    if gathers:
        out.append(f"{k.name}_bad = torch.zeros(1, dtype=torch.int32, device={names[0]}.device)")
        tables += f", {k.name}_bad"
    tensors = ", ".join(names + [var(g, o.name, ref) for o in k.outputs])
    out.append(f"if {shape}.numel():")
    if k.mid_dim is not None:
        d = k.mid_dim
        out += [f"    outer, nred = {shape}[:{d}].numel(), {shape}[{d}]",
                f"    inner = {shape}[{d + 1}:].numel()",
                "    block = min(triton.next_power_of_2(inner), MAX_BLOCK_COLS)",
                f"    {k.name}[(outer, triton.cdiv(inner, block))]({tensors}, outer, nred, "
                f"inner{tables},", "        BLOCK=block, num_warps=NUM_WARPS)"]
    elif k.flat:
        out.append(f"    n = {shape}.numel()")
        out.append(f"    {k.name}[(triton.cdiv(n, BLOCK_ELEMENTS),)]({tensors}, n{tables}, "
                   "BLOCK=BLOCK_ELEMENTS, num_warps=NUM_WARPS)")
    else:
        out += [f"    cols = {shape}[-1]", f"    rows = {shape}.numel() // cols",
                "    block_cols = min(triton.next_power_of_2(cols), MAX_BLOCK_COLS)",
                "    block_rows = max(1, BLOCK_ELEMENTS // block_cols)"]
        grid = ("(triton.cdiv(rows, block_rows),)" if k.has_reduction
                else "(triton.cdiv(rows, block_rows), triton.cdiv(cols, block_cols))")
        out.append(f"    {k.name}[{grid}]({tensors}, rows, cols{tables},")
        out.append("        BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols, num_warps=NUM_WARPS)")
    if gathers:
        out += [f"if {k.name}_bad.item():", '    raise IndexError("index out of range in self")']
    return out


def _step(n: KNode, v: str) -> str:
    """One tile into an accumulator; max / min keep a NaN once seen (torch's amax / amin)."""
    acc = f"acc_{n.name}"
    if n.op in ("max", "min"):
        cmp = ">" if n.op == "max" else "<"
        return f"{acc} = tl.where(({v} {cmp} {acc}) | ({v} != {v}), {v}, {acc})"
    return f"{acc} += {v}"
