"""The Triton spelling of a mid kernel's body ((outer..., F, inner...) reduced over F).

Program (o, block) owns BLOCK inner positions of outer index o. Per reduction level it walks
F once, accumulating a BLOCK-wide vector per reduction (padding lanes at the reduction's
identity); the level's reduced values follow (vectors, in scope for the later walks). A
full-size output is stored by the walk that computes it, or by a last store walk, which
computes again the exp the last reduction walk computed (as in the row kernels)."""
from __future__ import annotations

from kernelevolve.synth.kernel import Reduction
from kernelevolve.synth.schedule import Pass
from kernelevolve.synth.triton_expr import lit, reduce_step


class TritonMidBody:
    """Mixed into emit_triton._KernelWriter (ref, define, gather_rows, padded, outputs)."""

    def mid_body(self) -> list[str]:
        s = self.s
        self.width, self.cols = "inner", "cols_idx"
        out = ["o = tl.program_id(0)",
               "cols_idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)",
               "col_ok = cols_idx < inner", "mask = col_ok"]
        for arg, inp in self.inputs.values():
            if inp.layout == "scalar":
                out.append(f"x_{arg} = tl.load({arg})")
            elif inp.layout == "outer":
                out.append(f"x_{arg} = tl.load({arg} + o)")
            elif inp.layout == "col":
                out.append(f"x_{arg} = tl.load({arg} + cols_idx, mask=col_ok, other=0.0)")
            elif inp.layout == "mid":
                out.append(f"x_{arg} = tl.load({arg} + o * inner + cols_idx, mask=col_ok, "
                           "other=0.0)")
        out += [self.define(n) for n in s.mid.uniform]
        for level, p in enumerate(s.passes, 1):
            out += self.reduction_walk(p, level)
        if s.store is not None:
            out += ["# store walk", *self.mid_walk(s.store, self.stores(s.store))]
        return out

    def mid_walk(self, p: Pass, end: list[str]) -> list[str]:
        """One walk down the reduced dim: the pass's loads and values for each f, then `end`."""
        gathers = [n for n in self.gathers if n.name in p.nodes]
        inner = ["offs = (o * nred + f) * inner + cols_idx"]
        inner += [self.mid_load(name) for name in p.loads]
        for n in gathers:
            idx = self.inputs[n.args[1].name][0]
            inner.append(f"x_{idx} = tl.load({idx} + o * nred + f)")
        inner += self.gather_rows("x_", "True", gathers)
        inner += [self.define(n) for n in p.nodes] + end
        return ["for f in range(0, nred):", *("    " + line for line in inner)]

    def mid_load(self, name: str) -> str:
        """A walk's load: a full-size input's BLOCK lanes, or a per-step input's one value
        (a mask over the reduced dim, the same for every lane)."""
        arg, inp = self.inputs[name]
        if inp.layout == "row":
            return f"x_{arg} = tl.load({arg} + o * nred + f)"
        return f"x_{arg} = tl.load({arg} + offs, mask=mask, other=0.0)"

    def stores(self, p: Pass) -> list[str]:
        return [f"tl.store({self.outputs[n]} + offs, v_{n}, mask=mask)" for n in p.stores]

    def reduction_walk(self, p: Pass, level: int) -> list[str]:
        out = [f"# walk {level} down the reduced dim: "
               + ", ".join(f"{r.op} of {r.source}" for r in p.reductions)]
        out += [f"acc_{r.node} = tl.full((BLOCK,), {lit(r.identity)}, tl.float32)"
                for r in p.reductions]
        out += self.mid_walk(p, self.stores(p) + [reduce_step(r, self.padded(r))
                                                  for r in p.reductions])
        out += [f"v_{r.node} = {mid_final(r)}" for r in p.reductions]
        out += [self.define(n) for n in p.after]
        defined = {r.node for r in p.reductions} | set(p.after)
        out += [f"tl.store({self.outputs[n]} + o * inner + cols_idx, v_{n}, mask=col_ok)"
                for n in self.s.row_outputs if n in defined]
        return out


def mid_final(r: Reduction) -> str:
    """A reduced value from its accumulator; var divides by max(0, count - correction), as
    torch does."""
    acc = f"acc_{r.node}"
    if r.op == "mean":
        return f"{acc} / nred"
    if r.op == "var":
        c = lit(r.correction)
        return f"{acc} / tl.maximum(nred - {c}, 0.0)"
    return acc
