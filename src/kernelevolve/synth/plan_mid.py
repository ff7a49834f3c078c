"""Planning a reduction over a middle dim: (outer..., F, inner...) -> (outer..., inner...).

Values are FULL (over the domain), COL (over the inner dims only), SCALAR, MID (a reduced
value and the pointwise values built on it), or ROW (one value per step of the walk: a (B, S)
mask over (B, S, D), bool or float; masked sum / mean / max pooling). A ROW value's reduction
(the mask's count) is a MID value the same in every lane, which may broadcast only along the
outer dims, as may an OUTER input (that count computed before the kernel: a bool mask's
integer sum). As in a row kernel, each value has a level: a reduction is one level above the value it reduces, and a full-size value may read the reduced
values of the levels below it (softmax's x - max at level 1, its sum at level 2), so each level
is one walk down the reduced dim. The kernel writes MID values and full-size values (softmax's
exp(x - max) / sum, in a store walk after the last level)."""
from __future__ import annotations

import math

from kernelevolve.synth.capture import Graph, NotCovered, Ref, Value
from kernelevolve.synth.checks import KernelChecks, domain_source, role_layout
from kernelevolve.synth.kernel import Kernel, Layout, LoopKind, NodeKind, mid_layout_of_shape
from kernelevolve.synth.ops import ELEMENT_TYPES
from kernelevolve.synth.plan_nodes import plan_nodes

L = Layout
MID_OPS = ("sum", "mean", "max", "min", "var")


class MidChecks(KernelChecks):
    domain_name = "the middle-dim reduction domain"
    input_dtypes = ("float32",)
    output_layouts = (L.MID, L.FULL)
    output_layout_text = ("is a per-inner-position, per-step or scalar value (a middle-dim "
                          "reduction kernel writes reduced and full-size values)")
    output_dtype_text = "only float32 is covered"
    reduced_layout = L.MID

    def __init__(self, g: Graph, names: list[str], domain: tuple[int, ...], dim: int):
        super().__init__(g, names, domain)
        self.dim = dim

    @property
    def kept_shape(self) -> tuple[int, ...]:
        """A reduced value's shape with the reduced dim kept (as 1)."""
        return self.domain[:self.dim] + (1,) + self.domain[self.dim + 1:]

    @property
    def row_shape(self) -> tuple[int, ...]:
        """A per-step value's shape as it broadcasts over the domain: (outer..., F, 1...)."""
        return self.domain[:self.dim + 1] + (1,) * (len(self.domain) - self.dim - 1)

    def data_layout(self, shape):
        return mid_layout_of_shape(shape, self.domain, self.dim)

    def operand(self, node: str, a, role) -> None:
        """Reduced, per-column and scalar inputs are float32; a full-size or per-step input
        (a mask, or one expanded to full size) may also be bool or integer: what a walk
        reduces is float32 (_check_reduction), so it is cast before it is accumulated."""
        if isinstance(a, Ref) and not role and a.name not in self.inside | set(self.layout):
            lay = self.data_layout(tuple(self.g.values[a.name].shape))
            self.input_dtypes = ELEMENT_TYPES if lay in (L.ROW, L.FULL, L.OUTER) else \
                ("float32",)
        super().operand(node, a, role)

    def node_refs(self, kind: NodeKind, args):
        return args

    def node_layout(self, v: Value, kind: NodeKind, refs: list[str], attrs) -> Layout:
        return _node_layout(self, v, kind, refs)

    def reduced_dim(self, n: str, normed, refs: list[str]) -> int:
        _check_reduction(self.g, n, normed, self.domain, self.dim)
        return self.dim

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
        if layout == L.FULL:
            return None if shape == self.domain else f"kernel output {name} has shape {shape}"
        d, nd = self.dim, len(self.domain)
        drop = self.domain[:d] + self.domain[d + 1:]
        if shape not in (self.kept_shape, drop) or len(shape) not in (nd, nd - 1):
            return f"kernel output {name} has shape {shape}"
        return None


def build_mid_kernel(g: Graph, names: list[str], norm, users, kname: str) -> Kernel:
    """A reduction over a middle dim: domain (outer..., F, inner...) -> (outer..., inner...),
    one level per reduction walk."""
    # the largest reduced value gives the domain: a mask's count (B, S) -> (B,) reduces the
    # per-step values of the (B, S, D) one
    first = max((n for n in names if norm[n][0] == NodeKind.REDUCE),
                key=lambda n: (math.prod(g.values[norm[n][2][0].name].shape),
                               len(g.values[norm[n][2][0].name].shape)))
    domain = tuple(g.values[norm[first][2][0].name].shape)
    dim = norm[first][3]["dim"] % len(domain)
    ck = MidChecks(g, names, domain, dim)
    nodes, reductions = plan_nodes(g, names, norm, ck)
    outputs = ck.outputs(names, users)
    domain_of, lookup = domain_source(ck.inputs, nodes, kname)
    return Kernel(kname, nodes, ck.inputs, outputs, domain, domain_of,
                  max(r.level for r in reductions), mid_dim=dim, lookup=lookup,
                  loop=LoopKind.MID, reductions=reductions)


def _check_reduction(g: Graph, n: str, normed, domain: tuple[int, ...], dim: int) -> None:
    """All of a mid kernel's reductions reduce the same shape over the same dim."""
    _, op, args, attrs = normed
    if op not in MID_OPS:
        raise NotCovered(f"{g.values[n].op} over a middle dim is not covered yet")
    if g.values[args[0].name].dtype != "float32":   # the walks accumulate in float32
        raise NotCovered(f"{g.values[n].op} of {g.values[args[0].name].dtype} over a middle "
                         "dim is not covered (only float32 is)")
    shape = tuple(g.values[args[0].name].shape)
    per_step = (domain[:dim + 1], domain[:dim + 1] + (1,) * (len(domain) - dim - 1))
    if shape not in (domain, *per_step) or attrs["dim"] % len(shape) != dim:
        raise NotCovered("reductions over different dims or shapes fused in one kernel "
                         f"({domain} dim {dim} vs {shape} dim {attrs['dim']})")


def _node_layout(ck: MidChecks, v: Value, kind: NodeKind, refs: list[str]) -> Layout:
    lays = {ck.layout[r] for r in refs}
    if kind == NodeKind.GATHER:
        ck.check_lookup(v)
        lays = {L.FULL}
    if kind == NodeKind.REDUCE:
        if ck.layout[refs[0]] not in (L.FULL, L.ROW):
            raise NotCovered(f"{v.op} reduces a value that is not full-size")
        return L.MID          # a per-step value's count is the same in every lane
    if L.FULL in lays or (L.ROW in lays and lays & {L.COL, L.MID, L.OUTER}):
        for r in refs:   # a reduced value read along the walk: its dim must be kept (as 1)
            shape = ck.g.values[r].shape
            if ck.layout[r] == L.MID and not _broadcasts_back(ck, shape, ck.kept_shape) or \
                    ck.layout[r] == L.ROW and not _broadcasts_back(ck, shape, ck.row_shape) \
                    or ck.layout[r] == L.OUTER:
                raise NotCovered(f"{r} (shape {ck.g.values[r].shape}) broadcasts against the "
                                 f"wrong dims of {ck.domain_name} {ck.domain}")
        ck.check_full(v)
        return L.FULL
    if L.ROW in lays:
        if kind == NodeKind.VIEW and math.prod(v.shape) != math.prod(ck.row_shape):
            raise NotCovered(f"{v.op} reshapes a per-step value to {v.shape}")
        return L.ROW
    if L.MID in lays or L.OUTER in lays:
        red_numel = math.prod(ck.domain) // max(1, ck.domain[ck.dim])
        counts = all(_per_outer(ck, tuple(ck.g.values[r].shape)) for r in refs)
        if kind == NodeKind.VIEW and math.prod(v.shape) not in (
                red_numel, *([math.prod(ck.domain[:ck.dim])] if counts else [])):
            raise NotCovered(f"{v.op} reshapes the reduced value to {v.shape}")
        if kind != NodeKind.VIEW:
            _check_lanes(ck, v, refs)
        return L.MID
    return L.COL if L.COL in lays else L.SCALAR


def _broadcasts_back(ck: MidChecks, shape: tuple[int, ...], want: tuple[int, ...]) -> bool:
    """A value broadcasts over the domain as `want` does (up to leading ones: a reduction
    over dim 0 may drop it)."""
    nd = len(ck.domain)
    return len(shape) <= nd and (1,) * (nd - len(shape)) + tuple(shape) == want


def _check_lanes(ck: MidChecks, v: Value, refs: list[str]) -> None:
    """A reduced per-step value (a mask's count: (B, 1) of (B, S) over (B, S, D)) is one value
    per outer index: it must broadcast over the lanes (outer..., inner...) along the outer
    dims (torch aligns the trailing dims: (B, 1) against (B, H, W) would be wrong)."""
    n_outer = ck.dim
    outer = ck.domain[:n_outer]
    for r in refs:
        shape = tuple(ck.g.values[r].shape)
        if ck.layout[r] not in (L.MID, L.OUTER) or not _per_outer(ck, shape):
            continue
        if len(shape) > len(v.shape):
            raise NotCovered(f"{r} (shape {shape}) broadcasts against the wrong dims of "
                             f"{v.op}'s result {v.shape}")
        padded = (1,) * (len(v.shape) - len(shape)) + shape
        if padded[:n_outer] != outer or any(s != 1 for s in padded[n_outer:]):
            raise NotCovered(f"{r} (shape {shape}) broadcasts against the wrong dims of "
                             f"{v.op}'s result {v.shape}")


def _per_outer(ck: MidChecks, shape: tuple[int, ...]) -> bool:
    """A reduced per-step value's shape (outer..., 1) or (outer...), not a lane shape."""
    lanes = (ck.kept_shape, ck.domain[:ck.dim] + ck.domain[ck.dim + 1:])
    return shape not in lanes
