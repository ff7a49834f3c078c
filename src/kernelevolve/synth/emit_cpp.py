"""C++/OpenMP emitter: one `extern "C"` function per planned kernel, in a `ModelNew` module.

The kernel's schedule (schedule.py) says what each loop computes; this module spells it.
Flat kernels run one `parallel for simd` loop. Row kernels give each row to one thread
(`parallel for`, static blocks or dynamic tasks of ROWS_PER_TASK rows) and make one `omp simd`
pass over the row per reduction level plus a store pass; values between passes stay in
registers or L1/L2 (a row of 8192 floats is 32 KiB), and pointwise prologues are recomputed in
each pass rather than stored (but for the schedule's cached values). Mid reduction kernels
((B, F, D) -> (B, D)) give each task MID_BLOCK consecutive D positions of one B index and walk
F once per reduction level (emit_cpp_mid.py), accumulating in a block of floats (contiguous,
vectorised loads), then a store walk for the full-size outputs.

exp (and sigmoid/tanh, built on it) use a polynomial with ~2e-7 relative error when FAST_EXP
is on, so the loops vectorise; with it off they call std::exp (scalar). The harness checks
either value like any other candidate.
"""
from __future__ import annotations

from kernelevolve.synth.capture import Ref
from kernelevolve.synth.cpp_expr import CTYPE, expr, lit
from kernelevolve.synth.emit_cpp_mid import MidBody
from kernelevolve.synth.emit_cpp_rows import RowBody
from kernelevolve.synth.emit_cpp_split import SplitRows
from kernelevolve.synth.kernel import Layout, LoopKind
from kernelevolve.synth.module import doc_of
from kernelevolve.synth.plan import KNode, Kernel
from kernelevolve.synth.writer import KernelWriterBase

L = Layout
# Bool tensors are read and written as bytes (torch stores them as 0 / 1): g++ vectorises a
# loop over `const bool*` badly, normalising every loaded byte (logical_and of 32768 bools
# 27.7 us, `c ? a : b` with a bool condition 46 us; as uint8_t != 0: 1.6 and 6.6 us).
_MEMORY = {**CTYPE, "bool": "uint8_t"}


class KernelWriter(KernelWriterBase, RowBody, MidBody, SplitRows):
    def __init__(self, k: Kernel):
        super().__init__(k)
        self.col = "c"             # the column index inside the current loop (gathers)

    def ref(self, a, idx: str, dtype: str = "float32") -> str:
        if not isinstance(a, Ref):
            return lit(a, dtype)
        if a.name in self.inputs:
            arg, inp = self.inputs[a.name]
            if inp.layout == L.FULL and self.s.loop is LoopKind.ROWS:
                arg += "_r"        # the row pointer
            row = "o * nred + f" if self.s.loop is LoopKind.MID else "r"   # a walk's step
            read = {"full": f"{arg}[{idx}]", "col": f"{arg}[c]", "row": f"{arg}[{row}]",
                    "chan": f"{arg}[(r / {arg}_in) % {arg}_sp]",
                    "scalar": f"{arg}[0]", "table": arg, "gtable": arg,
                    "mid": f"{arg}[o * inner + c]", "outer": f"{arg}[o]",
                    "index": f"{arg}[o * nred + f]"}[inp.layout]
            return f"({read} != 0)" if inp.dtype == "bool" and inp.layout != "table" else read
        return "v_" + a.name

    def define(self, n: KNode | str, idx: str) -> str:
        n = self.nodes[n] if isinstance(n, str) else n
        if n.kind == "gather":
            return f"const float v_{n.name} = gp_{n.name}[{self.col}];"
        t, operands = self.operands(n)
        x = []
        for a, d, cast in operands:
            # a literal takes the compute type (a bool literal stays bool)
            v = self.ref(a, idx, d if not cast and (isinstance(a, Ref) or d == "bool") else t)
            x.append(f"({CTYPE[t]})({v})" if cast else v)
        rcp = self.reciprocal(n)
        if rcp:
            return f"const float v_{n.name} = ({x[0]} * {rcp});"
        uniform = n.name in self.s.uniform_divisors
        return f"const {CTYPE[n.dtype]} v_{n.name} = {expr(n, x, uniform, t)};"

    def signature(self) -> str:
        args = [f"const {_MEMORY[inp.dtype]}* {arg}" for arg, inp in self.inputs.values()]
        odt = {o.name: o.dtype for o in self.k.outputs}
        args += [f"{_MEMORY[odt[n]]}* {o}" for n, o in self.outputs.items()]
        args += [f"int64_t {a}" for a in self.s.shape_args]
        # bucketize boundaries and embedding tables: their lengths come last, then the flag
        # an embedding lookup raises when an index is out of range
        args += [f"int64_t {self.inputs[name][0]}_{what}" for name, what in self.s.size_args]
        if self.gathers:
            args.append("int32_t* bad_index")
        return f'extern "C" void {self.k.name}({", ".join(args)})'

    def write(self) -> str:
        lines = [f"// {doc_of(self.k)}", self.signature() + " {"]
        lines += {LoopKind.MID: self.mid_body, LoopKind.FLAT: self.flat_body,
                  LoopKind.ROWS: self.row_body}[self.s.loop]()
        lines.append("}")
        return "\n".join(lines)

    def gather_rows(self, ind: str, index: str, width: str, offset: str = "",
                    gathers: list[KNode] | None = None) -> list[str]:
        """Each embedding lookup's table row for this row (of `gathers`, all by default): an
        out-of-range index raises the flag (forward raises IndexError, as torch does) and
        reads row 0 instead."""
        out = []
        for n in self.gathers if gathers is None else gathers:
            table = self.inputs[n.args[0].name][0]
            out += [f"{ind}int64_t g_{n.name} = (int64_t){self.ref(n.args[1], index)};",
                    f"{ind}if (g_{n.name} < 0 || g_{n.name} >= {table}_n) {{",
                    f"{ind}    #pragma omp atomic write",
                    f"{ind}    bad_index[0] = 1;",
                    f"{ind}    g_{n.name} = 0;",
                    f"{ind}}}",
                    f"{ind}const float* gp_{n.name} = {table} + g_{n.name} * {width}{offset};"]
        return out

    def parallel_if(self, size: str, tasks: str = "") -> str:
        # Waking the OpenMP team costs tens of microseconds on a busy machine: a kernel runs
        # parallel only when its work (elements x cost per element) reaches the threshold, and
        # when there is more than one task to share (a full reduction is one row: a woken team
        # would wait on the one thread that has it, 29 -> 109 us for a sum of 32768 floats).
        more = f"{tasks} > 1 && " if tasks else ""
        return f"if ({more}{size} * {self.s.cost} >= PARALLEL_MIN_ELEMENTS)"

    def flat_body(self) -> list[str]:
        # Not `parallel for simd if (...)`: an `if` clause without a modifier applies to every
        # construct of a combined one, the simd included, so on one thread g++ ran the scalar
        # loop (abs on 11880 floats: 6.5 us against 1.0 us vectorised). `if (parallel: ...)`
        # keeps the vector loop but still enters the runtime (+0.4 us a call); a branch does not.
        body = ["        " + self.define(n, "i") for n in self.s.store.nodes]
        body += [f"        {o}[i] = v_{name};" for name, o in self.outputs.items()]
        loop = ["    for (int64_t i = 0; i < n; ++i) {", *body, "    }"]
        exact = self.branch(self.parallel_if("n"), "#pragma omp parallel for simd "
                            "schedule(static)", loop, ["    #pragma omp simd", *loop])
        fast = [_one_step_fmod(line) for line in loop]
        if fast == loop:
            return exact
        # fmod by a tensor: the one-step double fmod, and the exact 13-step kernel again only
        # when some quotient reached 2^28 (cpp_prelude.py's ke_fmod_fast)
        red = " reduction(|:ke_far)"
        return ["    int ke_far = 0;",
                *self.branch(self.parallel_if("n"), "#pragma omp parallel for simd "
                             "schedule(static)" + red, fast, ["    #pragma omp simd" + red, *fast]),
                "    if (ke_far) {", *exact, "    }"]

    @staticmethod
    def branch(cond: str, pragma: str, parallel: list[str], serial: list[str]) -> list[str]:
        """The parallel region where the work pays for waking the team, else the serial code:
        a region entered with a false `if` clause still goes through the OpenMP runtime (about
        a microsecond a call, a fifth of a small row reduction's time)."""
        return [f"    {cond} {{", f"    {pragma}", *parallel, "    } else {", *serial, "    }"]


_FMOD_FAMILY = ("ke_fmod", "ke_frem", "ke_ffloordiv")


def _one_step_fmod(line: str) -> str:
    """`line` with the 13-step fmod family (a tensor divisor) spelled in one step."""
    for name in _FMOD_FAMILY:
        line = line.replace(f"{name}<13>(", f"{name}_fast(ke_far, ")
    return line
