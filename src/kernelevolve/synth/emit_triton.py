"""Triton emitter: one `@triton.jit` kernel per planned kernel, in a `ModelNew` module.

Row kernels: each program owns BLOCK_ROWS rows and walks them in BLOCK_COLS-wide chunks, one
walk per reduction level plus a store walk (a row that fits one chunk is read from cache
after the first walk). Per-row values are kept as (BLOCK_ROWS, 1) columns so they broadcast.
Mid kernels walk the reduced dim once per level (triton_mid.py). Elementwise kernels use a
2-D grid of (rows, column chunks) tiles, or a flat 1-D grid when no operand is per-column. Every load and store is masked; padding lanes are neutralised before
they enter a reduction. Runs on a GPU, or on CPU tensors under TRITON_INTERPRET=1.
"""
from __future__ import annotations

from kernelevolve.synth.capture import Ref
from kernelevolve.synth.module import (Reference, call_setup, doc_of, forward_epilogue,
                                       forward_prologue, imports_of, init_source, problem_name,
                                       table_args, torch_step, var)
from kernelevolve.synth.plan import KNode, Kernel, LoopKind, Plan, Reduction
from kernelevolve.synth.plan_loss import LossKernel
from kernelevolve.synth.plan_solo import SoloKernel
from kernelevolve.synth.schedule import Pass, Programs
from kernelevolve.synth import emit_loss, triton_pool, triton_solo
from kernelevolve.synth.solo_glue import solo_setup
from kernelevolve.synth.triton_expr import HELPERS, TL, expr, lit, reduce_step
from kernelevolve.synth.triton_mid import TritonMidBody
from kernelevolve.synth.writer import INTS, KernelWriterBase


class _KernelWriter(KernelWriterBase, TritonMidBody):
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

    def define(self, n: KNode | str) -> str:
        n = self.nodes[n] if isinstance(n, str) else n
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

    def load(self, name: str) -> str:
        arg, inp = self.inputs[name]
        if self.s.programs is Programs.FLAT or inp.layout == "full":
            return f"x_{arg} = tl.load({arg} + offs, mask=mask, other=0.0)"
        return f"x_{arg} = tl.load({arg} + cols_idx, mask=col_ok, other=0.0)[None, :]"

    def walk(self, p: Pass) -> list[str]:
        """A pass's loads and per-element values, for one tile."""
        return [self.load(n) for n in p.loads] + [self.define(n) for n in p.nodes]

    def write(self) -> str:
        k, s = self.k, self.s
        args = [a for a, _ in self.inputs.values()] + list(self.outputs.values())
        args += s.shape_args   # then the sizes, in the order module.table_args passes them
        args += [f"{self.inputs[name][0]}_{what}" for name, what in s.size_args]
        args += ["bad_index"] if self.gathers else []
        args += (["BLOCK: tl.constexpr"] if s.programs in (Programs.FLAT, Programs.MID_BLOCKS)
                 else ["BLOCK_ROWS: tl.constexpr", "BLOCK_COLS: tl.constexpr"])
        lines = [f"# {doc_of(k)}", "@triton.jit", f"def {k.name}({', '.join(args)}):"]
        body = {LoopKind.MID: self.mid_body, LoopKind.FLAT: self.flat_body,
                LoopKind.ROWS: self.row_body}[s.loop]()
        return "\n".join(lines + ["    " + b for b in body])

    def pre_rows(self) -> list[str]:
        out = []
        for arg, inp in self.inputs.values():
            if inp.layout == "scalar":
                out.append(f"x_{arg} = tl.load({arg})")
            elif inp.layout == "row":
                out.append(f"x_{arg} = tl.load({arg} + row_idx, mask=row_ok, other=0.0)[:, None]")
            elif inp.layout == "chan":
                out.append(f"x_{arg} = tl.load({arg} + (row_idx // {arg}_in) % {arg}_sp, "
                           "mask=row_ok, other=0.0)[:, None]")
        return out + self.gather_rows("x_", "row_ok[:, None]")

    def gather_rows(self, prefix: str, ok: str, gathers: list[KNode] | None = None) -> list[str]:
        """Each lookup's table row index (of `gathers`, all by default); an out-of-range index
        sets the flag (forward raises IndexError, as torch does) and reads row 0 instead."""
        out = []
        for n in self.gathers if gathers is None else gathers:
            table, idx = (self.inputs[a.name][0] for a in n.args)
            g = f"{prefix}{idx}"
            out += [f"bad_{n.name} = {ok} & (({g} < 0) | ({g} >= {table}_n))",
                    f"tl.store(bad_index + 0 * {g}, 1, mask=bad_{n.name})",
                    f"g_{n.name} = tl.where(bad_{n.name}, 0, {g}).to(tl.int64)"]
        return out

    def padded(self, r: Reduction) -> str:
        """The reduced value with padding lanes at the reduction's identity."""
        return f"tl.where(mask, {self.ref(Ref(r.source))}, {lit(r.identity)})"

    def flat_body(self) -> list[str]:
        out = ["offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)", "mask = offs < n"]
        out += self.pre_rows() + self.walk(self.s.store)
        out += [f"tl.store({o} + offs, v_{n}, mask=mask)" for n, o in self.outputs.items()]
        return out

    def tile(self, col0: str) -> list[str]:
        return [f"cols_idx = {col0} + tl.arange(0, BLOCK_COLS)", "col_ok = cols_idx < cols",
                "mask = row_ok[:, None] & col_ok[None, :]",
                "offs = row_idx[:, None] * cols + cols_idx[None, :]"]

    def row_body(self) -> list[str]:
        s = self.s
        out = ["row_idx = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)",
               "row_ok = row_idx < rows"]
        out += self.pre_rows() + [self.define(n) for n in s.prelude]
        for level, p in enumerate(s.passes, 1):
            out.append(f"# pass {level}: " + ", ".join(f"{r.op} of {r.source}"
                                                        for r in p.reductions))
            out += [f"acc_{r.node} = tl.full((BLOCK_ROWS, BLOCK_COLS), {lit(r.identity)}, "
                    "tl.float32)" for r in p.reductions]
            out.append("for col0 in range(0, cols, BLOCK_COLS):")
            inner = self.tile("col0") + self.walk(p)
            inner += [reduce_step(r, self.padded(r)) for r in p.reductions]
            out += ["    " + line for line in inner]
            out += [f"v_{r.node} = {_row_final(r)}" for r in p.reductions]
            out += [self.define(n) for n in p.after]
        if s.store is not None:
            inner = self.walk(s.store)
            inner += [f"tl.store({self.outputs[n]} + offs, v_{n}, mask=mask)"
                      for n in s.full_outputs]
            if s.programs is Programs.ROW_BLOCKS:
                out += ["# store pass", "for col0 in range(0, cols, BLOCK_COLS):"]
                out += ["    " + line for line in self.tile("col0") + inner]
            else:
                out += self.tile("tl.program_id(1) * BLOCK_COLS") + inner
        out += [f"tl.store({self.outputs[n]} + row_idx[:, None], v_{n}, mask=row_ok[:, None])"
                for n in s.row_outputs]
        return out


def emit_source(p: Plan, problem_path: str, plan_text: str) -> str:
    ref = Reference(problem_path)
    g = p.graph
    writers = [_KernelWriter(k) for k in p.kernels]
    kernels = "\n\n\n".join([w.write() for w in writers]
                             + [emit_loss.triton_write(k) if isinstance(k, LossKernel)
                                else triton_solo.write(k) for k in p.solos]
                             + [triton_pool.write(k) for k in p.pools])
    helpers = [name for name in HELPERS if f"{name}(" in kernels]
    helpers = [HELPERS[h] for h in helpers] + [triton_solo.HELPERS[h]
                                                for h in triton_solo.helpers_used(
                                                    [k for k in p.solos
                                                     if isinstance(k, SoloKernel)])]
    if helpers:
        kernels = "\n\n\n".join("\n".join(h) for h in helpers) + "\n\n\n" + kernels
    name = problem_name(problem_path)
    # What the launches in _call read: BLOCK_ELEMENTS all but middle-dim kernels, MAX_BLOCK_COLS
    # all but flat ones (a knob nothing reads would cost the tuner evaluations of one kernel).
    blocks = any(k.schedule.programs is not Programs.MID_BLOCKS for k in p.kernels) or \
        bool(p.solos) or bool(p.pools)
    cols = any(k.schedule.programs is not Programs.FLAT for k in p.kernels)
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
             else "class ModelNew(torch.nn.Module):", init_source(ref, g), "",
             f"    def forward(self, {', '.join(ref.forward_args)}):"]
    body = forward_prologue(p, ref)
    for kind, item in p.steps:
        if kind == "solo":
            body += _solo_call(item, g, ref)
        elif kind == "pool":
            body += triton_pool.launch(item, g, ref)
        else:
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
    programs = k.schedule.programs
    if programs is Programs.MID_BLOCKS:
        d = k.mid_dim
        out += [f"    outer, nred = {shape}[:{d}].numel(), {shape}[{d}]",
                f"    inner = {shape}[{d + 1}:].numel()",
                "    block = min(triton.next_power_of_2(inner), MAX_BLOCK_COLS)",
                f"    {k.name}[(outer, triton.cdiv(inner, block))]({tensors}, outer, nred, "
                f"inner{tables},", "        BLOCK=block, num_warps=NUM_WARPS)"]
    elif programs is Programs.FLAT:
        out.append(f"    n = {shape}.numel()")
        out.append(f"    {k.name}[(triton.cdiv(n, BLOCK_ELEMENTS),)]({tensors}, n{tables}, "
                   "BLOCK=BLOCK_ELEMENTS, num_warps=NUM_WARPS)")
    else:
        out += [f"    cols = {shape}[-1]", f"    rows = {shape}.numel() // cols",
                "    block_cols = min(triton.next_power_of_2(cols), MAX_BLOCK_COLS)",
                "    block_rows = max(1, BLOCK_ELEMENTS // block_cols)"]
        grid = ("(triton.cdiv(rows, block_rows),)" if programs is Programs.ROW_BLOCKS
                else "(triton.cdiv(rows, block_rows), triton.cdiv(cols, block_cols))")
        out.append(f"    {k.name}[{grid}]({tensors}, rows, cols{tables},")
        out.append("        BLOCK_ROWS=block_rows, BLOCK_COLS=block_cols, num_warps=NUM_WARPS)")
    if gathers:
        out += [f"if {k.name}_bad.item():", '    raise IndexError("index out of range in self")']
    return out


def _solo_call(k: SoloKernel, g, ref: Reference) -> list[str]:
    if isinstance(k, LossKernel):
        return emit_loss.triton_call(k, g, ref)
    out, x, outs = solo_setup(k, g, ref)
    return out + triton_solo.launch(k, x, outs)


def _row_final(r: Reduction) -> str:
    """A row reduction's (BLOCK_ROWS, 1) value from its (BLOCK_ROWS, BLOCK_COLS) accumulator."""
    fn = {"max": "tl.max", "min": "tl.min"}.get(r.op, "tl.sum")
    red = f"{fn}(acc_{r.node}, axis=1)[:, None]"
    if r.propagates_nan:  # a NaN lane makes the row's max NaN, as in torch
        red = (f"tl.where(tl.sum((acc_{r.node} != acc_{r.node}).to(tl.int32), "
               f"axis=1)[:, None] > 0, float(\"nan\"), {red})")
    if r.op == "mean":
        red += " / cols"
    elif r.op == "var":
        red += f" / tl.maximum(cols - {lit(r.correction)}, 0.0)"
    return red
