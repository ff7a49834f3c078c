"""The C++ spelling of a mid kernel's body ((outer..., F, inner...) reduced over F).

Each task owns MID_BLOCK consecutive inner positions of one outer index. Per reduction level
it walks F once: for each f, one `omp simd` loop over the task's positions (contiguous,
vectorised loads, as eager's own non-last-dim softmax walks them), accumulating into a block
of floats per reduction; after the walk, a loop over the positions finishes the level's
reduced values, keeps those a later walk reads in a block each and stores the reduced
outputs. A full-size output is written by the walk that computes it, or by a last store walk
(softmax's exp(x - max) / sum), which reads back a value the last reduction walk left in the
output (the schedule's cache)."""
from __future__ import annotations

from kernelevolve.synth.capture import Ref
from kernelevolve.synth.cpp_expr import lit
from kernelevolve.synth.emit_cpp_rows import reduced, step
from kernelevolve.synth.kernel import KNode, Layout, Reduction
from kernelevolve.synth.schedule import Pass

IND = "                "           # inside a walk's position loop


class MidBody:
    """Mixed into emit_cpp.KernelWriter (ref, define, gather_rows, parallel_if, branch)."""

    def mid_body(self) -> list[str]:
        s = self.s
        out = ["    for (int64_t t = 0; t < outer * nblk; ++t) {",
               "        const int64_t o = t / nblk;",
               "        const int64_t c0 = (t - o * nblk) * MID_BLOCK;",
               "        const int64_t w = inner - c0 < MID_BLOCK ? inner - c0 : MID_BLOCK;"]
        out += [f"        float m_{name}[MID_BLOCK];" for name in s.mid.kept]
        out += [f"        float r_{name}[MID_BLOCK];" for name in s.mid.reciprocals]
        for level, p in enumerate(s.passes, 1):
            out += self.reduction_walk(p, level)
            out += self.level_values(p)
        out += self.store_walk()
        out.append("    }")
        return ["    const int64_t nblk = (inner + MID_BLOCK - 1) / MID_BLOCK;",
                *self.branch(self.parallel_if("outer * nred * inner", "outer * nblk"),
                             "#pragma omp parallel for schedule(static)", out, out)]

    def walk(self, nodes: list[str], top: list[str], end: list[str]) -> list[str]:
        """One walk down the reduced dim computing `nodes` per element, between the lines
        `top` and `end` of the position loop."""
        self.col = "j"
        gathers = [n for n in self.gathers if n.name in nodes]
        out = ["        for (int64_t f = 0; f < nred; ++f) {",
               "            const int64_t base = (o * nred + f) * inner + c0;",
               *self.gather_rows("            ", "", "inner", " + c0", gathers),
               "            #pragma omp simd",
               "            for (int64_t j = 0; j < w; ++j) {",
               f"{IND}const int64_t c = c0 + j;", f"{IND}(void)c;", *(IND + t for t in top)]
        out += [IND + line for line in self.kept_reads(nodes)]
        out += [IND + self.define(n, "base + j") for n in self.s.mid.uniform + nodes]
        return out + [IND + e for e in end] + ["            }", "        }"]

    def reduction_walk(self, p: Pass, level: int) -> list[str]:
        """A level's walk: its reductions' accumulators, the full-size outputs it computes,
        and the value the store walk reads back from the output (the last level's, when
        cached)."""
        out = [f"        // walk {level} down the reduced dim: " + reduced(p.reductions)]
        for r in p.reductions:
            out += [f"        float acc_{r.node}[MID_BLOCK];", "        #pragma omp simd",
                    f"        for (int64_t j = 0; j < w; ++j) acc_{r.node}[j] = "
                    f"{lit(r.identity)};"]
        cache = self.s.cache
        end = []
        if cache and level == len(self.s.passes):
            end += [f"{self.outputs[cache.in_output]}[base + j] = v_{cache.values[0]};"]
        end += [f"{self.outputs[name]}[base + j] = v_{name};" for name in p.stores]
        end += [step(r, self.ref(Ref(r.source), "base + j"), f"acc_{r.node}[j]", flagged=False)
                for r in p.reductions]
        return out + self.walk(p.nodes, [], end)

    def level_values(self, p: Pass) -> list[str]:
        """After a walk: its reduced values and the MID values built on them, kept in a block
        when a later walk reads them, stored when the kernel writes them."""
        defined = {r.node for r in p.reductions} | set(p.after)
        out = ["        #pragma omp simd", "        for (int64_t j = 0; j < w; ++j) {",
               "            const int64_t c = c0 + j;", "            (void)c;"]
        out += ["            " + line for line in self.kept_reads(p.after, defined)]
        out += [f"            const float v_{r.node} = {mid_final(r)};" for r in p.reductions]
        out += ["            " + self.define(n, "c") for n in self.s.mid.uniform + p.after]
        out += [f"            m_{name}[j] = v_{name};" for name in self.s.mid.kept
                if name in defined]
        out += [f"            r_{name}[j] = 1.0f / v_{name};" for name in self.s.mid.reciprocals
                if name in defined]
        out += [f"            {self.outputs[name]}[o * inner + c] = v_{name};"
                for name in self.s.row_outputs if name in defined]
        return out + ["        }"]

    def store_walk(self) -> list[str]:
        s = self.s
        if s.store is None:
            return []
        cached = s.cache.values if s.cache else []
        top = [f"const float v_{name} = {self.outputs[s.cache.in_output]}[base + j];"
               for name in cached]
        end = [f"{self.outputs[name]}[base + j] = v_{name};" for name in s.store.stores]
        note = f" (reads back {', '.join(cached)} from the last walk)" if cached else ""
        return [f"        // store walk{note}",
                *self.walk(s.cache.store_nodes if s.cache else s.store.nodes, top, end)]

    def reciprocal(self, n: KNode) -> str | None:
        """A full-size value's division by a kept value, as a multiplication by the kept
        reciprocal (None for any other node, and outside mid kernels)."""
        if self.s.mid is None or n.layout != Layout.FULL or n.op != "div" or \
                not isinstance(n.args[1], Ref) or n.args[1].name not in self.s.mid.reciprocals:
            return None
        return f"r_{n.args[1].name}[j]"

    def kept_reads(self, names: list[str], defined: set[str] = frozenset()) -> list[str]:
        """The kept reduced values `names` read from earlier levels (not `names` themselves nor
        the values `defined` in the same loop), from their blocks."""
        kept, inside, reads = set(self.s.mid.kept), set(names) | defined, []
        for name in names:
            for a in self.nodes[name].args:
                if isinstance(a, Ref) and a.name in kept and a.name not in inside \
                        and a.name not in reads:
                    reads.append(a.name)
        return [f"const float v_{name} = m_{name}[j];" for name in reads]


def mid_final(r: Reduction) -> str:
    """A reduced value from its accumulator. var divides by max(0, count - correction), as
    torch does (one element with correction 1: 0 / 0, NaN)."""
    acc = f"acc_{r.node}[j]"
    if r.op == "mean":
        return f"{acc} / (float)nred"
    if r.op == "var":
        c = lit(r.correction)
        return f"{acc} / ((float)nred > {c} ? (float)nred - {c} : 0.0f)"
    return acc
