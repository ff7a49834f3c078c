"""Planning a reduction over a middle dim: (outer..., F, inner...) -> (outer..., inner...),
with its pointwise prologue (and embedding lookups) and the epilogue on the reduced values.
Values are FULL (over the domain), COL (over the inner dims only), SCALAR, or MID (the reduced
value and the pointwise epilogue built on it); the kernel writes only MID values."""
from __future__ import annotations

import math

from kernelevolve.synth.capture import Graph, NotCovered, Value
from kernelevolve.synth.checks import KernelChecks, domain_source, role_layout
from kernelevolve.synth.kernel import (KNode, Kernel, Layout, LoopKind, NodeKind, Reduction,
                                       mid_layout_of_shape)

L = Layout
MID_OPS = ("sum", "mean", "max", "min")


class MidChecks(KernelChecks):
    domain_name = "the middle-dim reduction domain"
    input_dtypes = ("float32",)
    output_layouts = (L.MID,)
    output_layout_text = ("is not the reduced value (a middle-dim reduction kernel writes only "
                          "reduced values)")
    output_dtype_text = "only float32 is covered"

    def __init__(self, g: Graph, names: list[str], domain: tuple[int, ...], dim: int):
        super().__init__(g, names, domain)
        self.dim = dim

    def data_layout(self, shape):
        return mid_layout_of_shape(shape, self.domain, self.dim)

    def role_layout(self, node: Value, v: Value, role: str) -> Layout:
        """Embedding lookups feed a reduction over the indices' last dim only."""
        if role == "boundaries" or self.dim != len(self.domain) - 2:
            raise NotCovered(f"{node.op} inside a middle-dim reduction over dim {self.dim} of "
                             f"{self.domain} is not covered")
        role_layout(v, role, self.domain)
        return L.GTABLE if role == "embedding table" else L.INDEX

    def lookup_shape_ok(self, shape) -> bool:
        return tuple(shape) == self.domain      # read at the full inputs' exact offsets

    def output_dtype_ok(self, dtype: str, layout: Layout) -> bool:
        return dtype == "float32"

    def output_shape_error(self, name, shape, layout):
        d, nd = self.dim, len(self.domain)
        keep = self.domain[:d] + (1,) + self.domain[d + 1:]
        drop = self.domain[:d] + self.domain[d + 1:]
        if shape not in (keep, drop) or len(shape) not in (nd, nd - 1):
            return f"kernel output {name} has shape {shape}"
        return None


def build_mid_kernel(g: Graph, names: list[str], norm, users, kname: str) -> Kernel:
    """A reduction over a middle dim: domain (outer..., F, inner...) -> (outer..., inner...)."""
    reds = [n for n in names if norm[n][0] == NodeKind.REDUCE]
    domain = tuple(g.values[norm[reds[0]][2][0].name].shape)
    dim = norm[reds[0]][3]["dim"] % len(domain)
    reductions = [_reduction(g, n, norm[n], domain, dim) for n in reds]
    ck = MidChecks(g, names, domain, dim)
    nodes: list[KNode] = []
    for n in names:
        v = g.values[n]
        kind, op, args, attrs = norm[n]
        kind = NodeKind(kind)
        ck.read(n, kind, args)
        lay = _node_layout(ck, v, kind, ck.refs(args), n in reds)
        ck.layout[n] = lay
        nodes.append(KNode(n, kind, op, args, attrs, lay, v.dtype, 1 if lay == L.MID else 0,
                           v.op))
    outputs = ck.outputs(names, users)
    domain_of, lookup = domain_source(ck.inputs, nodes, kname)
    return Kernel(kname, nodes, ck.inputs, outputs, domain, domain_of, 1, mid_dim=dim,
                  lookup=lookup, loop=LoopKind.MID, reductions=reductions)


def _reduction(g: Graph, n: str, normed, domain: tuple[int, ...], dim: int) -> Reduction:
    """All of a mid kernel's reductions reduce the same shape over the same dim."""
    _, op, args, attrs = normed
    if op not in MID_OPS:
        raise NotCovered(f"{g.values[n].op} over a middle dim is not covered yet")
    shape = tuple(g.values[args[0].name].shape)
    if shape != domain or attrs["dim"] % len(shape) != dim:
        raise NotCovered("reductions over different dims or shapes fused in one kernel "
                         f"({domain} dim {dim} vs {shape} dim {attrs['dim']})")
    return Reduction(n, op, args[0].name, dim, attrs["keepdim"], 1)


def _node_layout(ck: MidChecks, v: Value, kind: NodeKind, refs: list[str],
                 reduces: bool) -> Layout:
    lays = {ck.layout[r] for r in refs}
    if kind == NodeKind.GATHER:
        ck.check_lookup(v)
        lays = {L.FULL}
    if reduces:
        if ck.layout[refs[0]] != L.FULL:
            raise NotCovered(f"{v.op} reduces a value that is not full-size")
        return L.MID
    if L.MID in lays:
        if L.FULL in lays:
            raise NotCovered(f"{v.op} mixes the reduced value with a full-size one")
        red_numel = math.prod(ck.domain) // max(1, ck.domain[ck.dim])
        if kind == NodeKind.VIEW and math.prod(v.shape) != red_numel:
            raise NotCovered(f"{v.op} reshapes the reduced value to {v.shape}")
        return L.MID
    if L.FULL in lays:
        ck.check_full(v)
        return L.FULL
    return L.COL if L.COL in lays else L.SCALAR
