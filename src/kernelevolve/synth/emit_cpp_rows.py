"""The C++ spelling of a row kernel's body (one row per iteration of an OpenMP `for`: the
schedule's prelude, one `omp simd` pass per reduction level, the store pass) and of a
reduction's accumulator steps, clauses and final value."""
from __future__ import annotations

from kernelevolve.synth.capture import Ref
from kernelevolve.synth.cpp_expr import lit
from kernelevolve.synth.kernel import Reduction
from kernelevolve.synth.schedule import Pass

IND = "        "
OMP_FOR = "    #pragma omp for KE_SCHEDULE"
_CLAUSE = {"sum": "+", "mean": "+", "var": "+", "max": "max", "min": "min"}


class RowBody:
    """Mixed into emit_cpp.KernelWriter (ref, define, gather_rows, parallel_if, outputs)."""

    def row_body(self) -> list[str]:
        s = self.s
        out = ["    {"]
        split = self.split_rows()      # fewer rows than threads (emit_cpp_split.py)
        if s.cache and s.cache.scratch:
            out.append(f"    float* scratch = static_cast<float*>(std::malloc("
                       f"sizeof(float) * {len(s.cache.scratch)} * (cols > 0 ? cols : 1)));")
        if s.carry:
            first = s.passes[0].reductions
            out.append("    int64_t carried_row = -1;")
            out += [f"    {acc_type(r)} carry_{r.node} = 0.0f;" for r in first]
            out += [f"    int nan_carry_{r.node} = 0;" for r in first if r.propagates_nan]
        out += [OMP_FOR, "    for (int64_t r = 0; r < rows; ++r) {"]
        out += self.row_setup()
        out += [IND + self.define(n, "c") for n in s.prelude]
        for level, p in enumerate(s.passes, 1):
            out.append(f"{IND}// pass {level}: " + reduced(p.reductions))
            if s.carry and level == 1:
                out += self.carried_pass(p)
            else:
                out += self.reduction_pass(p, level == len(s.passes))
            out += [IND + self.define(n, "c") for n in p.after]
        out += self.store_pass()
        out += [f"{IND}{self.outputs[n]}[r] = v_{n};" for n in s.row_outputs]
        out.append("    }")
        if s.cache and s.cache.scratch:
            out.append("    std::free(scratch);")
        out.append("    }")
        # one thread below the threshold: the same block without the worksharing pragma
        return split + self.branch(self.parallel_if("rows * cols", "rows"),
                                   "#pragma omp parallel", out,
                                   [line for line in out if line != OMP_FOR])
        return out

    def row_setup(self) -> list[str]:
        """Row pointers of the full inputs and of the cached values' buffers; the embedding
        lookups' table rows."""
        out = [f"{IND}const auto* {arg}_r = {arg} + r * cols;"
               for arg, inp in self.inputs.values() if inp.layout == "full"]
        cache = self.s.cache
        if cache and cache.in_output:
            out.append(f"{IND}float* buf_{cache.values[0]} = {self.outputs[cache.in_output]} "
                       "+ r * cols;")
        for j, name in enumerate(cache.scratch if cache else []):
            out.append(f"{IND}float* buf_{name} = scratch + {j} * cols;")
        return out + self.gather_rows(IND, "c", "cols")

    def carried_pass(self, p: Pass) -> list[str]:
        """Pass 1 of row r + 1 rides along the last pass of row r when it reduces one plain
        full input (softmax's max): its loads overlap the last pass's arithmetic. A row not
        taken along (the first of a thread's block) makes the pass itself."""
        reds = p.reductions
        out = [f"{IND}if (carried_row != r) {{  // not taken along the previous row"]
        out += [f"{IND}    carry_{r.node} = {lit(r.identity)};" for r in reds]
        out += [f"{IND}    nan_carry_{r.node} = 0;" for r in reds if r.propagates_nan]
        body = [step(r, self.ref(Ref(r.source), "c"), "carry_" + r.node) for r in reds]
        out += [IND + "    " + line for line in chunked(reds, "carry_", body)]
        out.append(f"{IND}}}")
        out += [f"{IND}const float v_{r.node} = {final(r, 'carry_')};" for r in reds]
        arg = self.inputs[self.s.carry][0] + "_r"
        out.append(f"{IND}const float* next_r = r + 1 < rows ? {arg} + cols : {arg};")
        return out

    def reduction_pass(self, p: Pass, last: bool) -> list[str]:
        reds, cache = p.reductions, self.s.cache
        nxt = self.s.passes[0].reductions if self.s.carry and last else []
        out = []
        for r in reds:
            out.append(f"{IND}{acc_type(r)} acc_{r.node} = {lit(r.identity)};")
            out += [f"{IND}int nan_acc_{r.node} = 0;"] if r.propagates_nan else []
        for r in nxt:
            out.append(f"{IND}{acc_type(r)} next_{r.node} = {lit(r.identity)};")
            out += [f"{IND}int nan_next_{r.node} = 0;"] if r.propagates_nan else []
        body = []
        for n in p.nodes:
            body.append(self.define(n, "c"))
            if last and cache and n in cache.values:
                body.append(f"buf_{n}[c] = v_{n};")
        body += [step(r, self.ref(Ref(r.source), "c"), "acc_" + r.node) for r in reds]
        body += [step(r, "next_r[c]", "next_" + r.node) for r in nxt]
        out += [IND + line for line in chunked(reds, "acc_", body, nxt)]
        if nxt:
            out += [f"{IND}carry_{r.node} = next_{r.node};" for r in nxt]
            out += [f"{IND}nan_carry_{r.node} = nan_next_{r.node};" for r in nxt
                    if r.propagates_nan]
            out.append(f"{IND}carried_row = r + 1;")
        out += [f"{IND}const float v_{r.node} = {row_final(r)};" for r in reds]
        return out

    def store_pass(self) -> list[str]:
        s = self.s
        if s.store is None:
            return []
        cached = s.cache.values if s.cache else []
        out = [f"{IND}// store pass" + (" (reads back " + ", ".join(cached) +
                                         " from the last pass)" if cached else ""),
               f"{IND}#pragma omp simd", f"{IND}for (int64_t c = 0; c < cols; ++c) {{"]
        out += [f"{IND}    const float v_{name} = buf_{name}[c];" for name in cached]
        nodes = s.cache.store_nodes if s.cache else s.store.nodes
        out += [f"{IND}    " + self.define(n, "c") for n in nodes]
        out += [f"{IND}    {self.outputs[n]}[r * cols + c] = v_{n};" for n in s.full_outputs]
        out.append(f"{IND}}}")
        return out


# Additive reductions sum a row in chunks of SUM_CHUNK columns, each chunk into a fresh
# partial accumulator added to the row's after it: one running float per SIMD lane summed 2048
# values of a 32768-float row, and a sum over all of a (8, 32, 128) input was off by 4.6e-4
# (rel 3.2e-4) on a draw of the harness's unseen inputs, past the 1e-4 tolerance; a chunk of
# 1024 is 64 values a lane (torch sums pairwise), and the chunks add up in a double. Max / min
# need no chunks.
SUM_CHUNK = 1024


ADDITIVE = ("sum", "mean", "var")


def acc_type(r: Reduction) -> str:
    return "double" if r.op in ADDITIVE else "float"


def chunked(reds: list[Reduction], prefix: str, body: list[str],
            nxt: list[Reduction] = (), lo: str = "0", hi: str = "cols") -> list[str]:
    """The column loop of one pass over columns [lo, hi) (the row, or a block of it:
    emit_cpp_split.py), `body` computing element c and stepping the accumulators
    `prefix + node` (and the carried pass's `next_` ones)."""
    added = [(r, prefix) for r in reds if r.op in ADDITIVE] + \
        [(r, "next_") for r in nxt if r.op in ADDITIVE]
    red = " ".join([clauses(r, prefix) for r in reds] + [clauses(r, "next_") for r in nxt])
    if not added:
        return [f"#pragma omp simd {red}", f"for (int64_t c = {lo}; c < {hi}; ++c) {{",
                *("    " + line for line in body), "}"]
    for r, pre in added:
        red = red.replace(f"reduction(+:{pre}{r.node})", f"reduction(+:part_{pre}{r.node})")
        body = [line.replace(f"{pre}{r.node} +=", f"part_{pre}{r.node} +=") for line in body]
    return [f"for (int64_t c0 = {lo}; c0 < {hi}; c0 += {SUM_CHUNK}) {{",
            f"    const int64_t c1 = {hi} - c0 < {SUM_CHUNK} ? {hi} : c0 + {SUM_CHUNK};",
            *(f"    float part_{pre}{r.node} = 0.0f;" for r, pre in added),
            f"    #pragma omp simd {red}", "    for (int64_t c = c0; c < c1; ++c) {",
            *("        " + line for line in body), "    }",
            *(f"    {pre}{r.node} += part_{pre}{r.node};" for r, pre in added), "}"]


def reduced(reds: list[Reduction]) -> str:
    return ", ".join(f"{r.op} of {r.source}" for r in reds)


def step(r: Reduction, v: str, acc: str, flagged: bool = True) -> str:
    """One element into an accumulator. max / min propagate NaN as torch's amax / amin do:
    `omp simd reduction(max:)` combines its lanes with a compare that drops NaN, so a NaN is
    remembered in an int flag (`nan_<acc>`, reduced with |) and applied after the loop; an
    accumulator no reduction clause combines (`flagged=False`) takes the NaN directly."""
    if not r.propagates_nan:
        return f"{acc} += {v};"
    cmp = ">" if r.op == "max" else "<"
    if not flagged:
        return f"{acc} = ({v} {cmp} {acc} || {v} != {v}) ? {v} : {acc};"
    return f"{acc} = {v} {cmp} {acc} ? {v} : {acc}; nan_{acc} |= ({v} != {v});"


def row_final(r: Reduction) -> str:
    """A row reduction's value from its accumulator: means divide by the row length (var by
    the length less its correction)."""
    if r.op == "mean":
        return f"acc_{r.node} / (float)cols"
    if r.op == "var":  # over max(0, n - correction), as torch (n <= correction: NaN or inf)
        c = lit(r.correction)
        return f"acc_{r.node} / ((float)cols > {c} ? (float)cols - {c} : 0.0f)"
    return final(r, "acc_")


def clauses(r: Reduction, prefix: str) -> str:
    acc = f"{prefix}{r.node}"
    nan = f" reduction(|:nan_{acc})" if r.propagates_nan else ""
    return f"reduction({_CLAUSE[r.op]}:{acc}){nan}"


def final(r: Reduction, prefix: str) -> str:
    acc = f"{prefix}{r.node}"
    return f"(nan_{acc} ? NAN : {acc})" if r.propagates_nan else acc
