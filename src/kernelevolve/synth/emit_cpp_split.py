"""C++ for a row kernel with fewer rows than threads (a full reduction is one row): each row's
columns are cut into blocks of SPLIT_COLS, the threads share the blocks of every pass, and a
pass's per-block partial accumulators are combined in block order.

Row parallelism leaves all threads but one idle on a full reduction (`x.sum()` is a kernel of one
row of every element). The blocks are fixed in size, not one per thread, so the partials and the
order they are added in do not depend on the thread count: a result is the same run to run and
on any machine. Each pass is its own parallel region (the next pass reads the row values the
combined partials give); the store pass shares the same blocks. The schedule's cached values and
carried pass are not used here: the store pass recomputes what it needs.
"""
from __future__ import annotations

from kernelevolve.synth.capture import Ref
from kernelevolve.synth.cpp_expr import lit
from kernelevolve.synth.emit_cpp_rows import (ADDITIVE, acc_type, chunked, reduced, row_final,
                                              step)
from kernelevolve.synth.schedule import Pass

# Columns per block: a multiple of the sum chunk (1024), large enough that a block's work
# (64 KiB of floats) dwarfs the scheduling of it, small enough that 2 * 16 threads share a
# row of a million.
SPLIT_COLS = 16384
IND = "            "


class SplitRows:
    """Mixed into emit_cpp.KernelWriter (ref, define, gather_rows, outputs, s)."""

    def split_rows(self) -> list[str]:
        """The few-long-rows path: a guarded block that returns when it runs."""
        s = self.s
        nreds = sum(len(p.reductions) for p in s.passes)
        out = [f"    if (rows < omp_get_max_threads() && cols >= 2 * {SPLIT_COLS} && "
               f"rows * cols * {s.cost} >= PARALLEL_MIN_ELEMENTS) {{",
               f"        const int64_t nb = (cols + {SPLIT_COLS} - 1) / {SPLIT_COLS};"]
        if nreds:
            out += [f"        double* ke_part = static_cast<double*>(std::malloc(sizeof(double)"
                    f" * {nreds} * nb));",
                    f"        int* ke_nan = static_cast<int*>(std::calloc({nreds} * nb, "
                    "sizeof(int)));"]
        out.append("        for (int64_t r = 0; r < rows; ++r) {")
        out += [f"{IND}const auto* {arg}_r = {arg} + r * cols;"
                for arg, inp in self.inputs.values() if inp.layout == "full"]
        out += self.gather_rows(IND, "c", "cols")
        out += [IND + self.define(n, "c") for n in s.prelude]
        slot = 0
        for p in s.passes:
            out += self._split_pass(p, slot)
            out += [IND + self.define(n, "c") for n in p.after]
            slot += len(p.reductions)
        out += self._split_store()
        out += [f"{IND}{self.outputs[n]}[r] = v_{n};" for n in s.row_outputs]
        out.append("        }")
        if nreds:
            out += ["        std::free(ke_part);", "        std::free(ke_nan);"]
        return out + ["        return;", "    }"]

    def _split_pass(self, p: Pass, slot: int) -> list[str]:
        """One reduction pass: each block's partials into ke_part / ke_nan, then combined in
        block order into the row's value."""
        reds = p.reductions
        out = [f"{IND}// pass: {reduced(reds)} (blocks of the row, combined in order)",
               f"{IND}#pragma omp parallel for schedule(static)",
               f"{IND}for (int64_t b = 0; b < nb; ++b) {{",
               f"{IND}    const int64_t lo = b * {SPLIT_COLS};",
               f"{IND}    const int64_t hi = cols - lo < {SPLIT_COLS} ? cols : lo + {SPLIT_COLS};"]
        for r in reds:
            out.append(f"{IND}    {acc_type(r)} acc_{r.node} = {lit(r.identity)};")
            out += [f"{IND}    int nan_acc_{r.node} = 0;"] if r.propagates_nan else []
        body = [self.define(n, "c") for n in p.nodes]
        body += [step(r, self.ref(Ref(r.source), "c"), "acc_" + r.node) for r in reds]
        out += [f"{IND}    " + line for line in chunked(reds, "acc_", body, lo="lo", hi="hi")]
        for j, r in enumerate(reds, slot):
            out.append(f"{IND}    ke_part[{j} * nb + b] = acc_{r.node};")
            out += [f"{IND}    ke_nan[{j} * nb + b] = nan_acc_{r.node};"] if r.propagates_nan \
                else []
        out.append(f"{IND}}}")
        for j, r in enumerate(reds, slot):
            out.append(f"{IND}{acc_type(r)} acc_{r.node} = {lit(r.identity)};")
            out += [f"{IND}int nan_acc_{r.node} = 0;"] if r.propagates_nan else []
            out.append(f"{IND}for (int64_t b = 0; b < nb; ++b) {{")
            part = f"ke_part[{j} * nb + b]"
            if r.op in ADDITIVE:
                out.append(f"{IND}    acc_{r.node} += {part};")
            else:
                cmp = ">" if r.op == "max" else "<"
                out += [f"{IND}    const {acc_type(r)} p = ({acc_type(r)}){part};",
                        f"{IND}    acc_{r.node} = p {cmp} acc_{r.node} ? p : acc_{r.node};",
                        f"{IND}    nan_acc_{r.node} |= ke_nan[{j} * nb + b];"]
            out += [f"{IND}}}", f"{IND}const float v_{r.node} = {row_final(r)};"]
        return out

    def _split_store(self) -> list[str]:
        s = self.s
        if s.store is None:
            return []
        return [f"{IND}// store pass, blocks of the row",
                f"{IND}#pragma omp parallel for schedule(static)",
                f"{IND}for (int64_t b = 0; b < nb; ++b) {{",
                f"{IND}    const int64_t lo = b * {SPLIT_COLS};",
                f"{IND}    const int64_t hi = cols - lo < {SPLIT_COLS} ? cols : lo + {SPLIT_COLS};",
                f"{IND}    #pragma omp simd",
                f"{IND}    for (int64_t c = lo; c < hi; ++c) {{",
                *(f"{IND}        " + self.define(n, "c") for n in s.store.nodes),
                *(f"{IND}        {self.outputs[n]}[r * cols + c] = v_{n};"
                  for n in s.full_outputs),
                f"{IND}    }}", f"{IND}}}"]
