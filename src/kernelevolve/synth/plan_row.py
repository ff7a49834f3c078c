"""Planning a row kernel: pointwise values over the domain (R..., C) and reductions over its
last dim, each reduction a level (a pass over the row) above the values it reads; or, with no
reduction and no per-row or per-column operand, a flat elementwise kernel."""
from __future__ import annotations

from kernelevolve.synth.capture import Graph, NotCovered, Value
from kernelevolve.synth.checks import KernelChecks, domain_source, role_layout
from kernelevolve.synth.kernel import Kernel, Layout, NodeKind, layout_of_shape, loop_of, strip
from kernelevolve.synth.ops import ELEMENT_TYPES
from kernelevolve.synth.plan_nodes import plan_nodes

L = Layout
ORDER = {L.SCALAR: 0, L.ROW: 1, L.COL: 1, L.FULL: 2}


class RowChecks(KernelChecks):
    broadcast_hint = " as a row, a column or a scalar"
    output_layouts = (L.FULL, L.ROW)
    output_layout_text = "is a per-column or scalar value"
    output_dtype_text = "float32 outputs and full-size int64, int32 and bool outputs are covered"
    reduced_layout = L.ROW

    def node_refs(self, kind: NodeKind, args):
        return args[:1] if kind == NodeKind.BUCKETIZE else () if kind == NodeKind.GATHER else args

    def node_layout(self, v: Value, kind: NodeKind, refs: list[str], attrs) -> Layout:
        return _node_layout(self, v, kind, refs, attrs)

    def reduced_dim(self, n: str, normed, refs: list[str]) -> int:
        return normed[3]["dim"] % len(self.g.values[refs[0]].shape)

    def data_layout(self, shape):
        return layout_of_shape(shape, self.domain)

    def role_layout(self, node: Value, v: Value, role: str) -> Layout:
        return role_layout(v, role, self.domain)

    def output_dtype_ok(self, dtype: str, layout: Layout) -> bool:
        return dtype in ELEMENT_TYPES and (dtype == "float32" or layout == L.FULL)

    def output_shape_error(self, name, shape, layout):
        if layout == L.ROW and not _rows_shaped(shape, self.domain):
            return f"kernel output {name} (shape {shape}) is a per-channel value"
        return None


def build_row_kernel(g: Graph, names: list[str], norm, users, domain, kname: str) -> Kernel:
    ck = RowChecks(g, names, domain)
    nodes, reductions = plan_nodes(g, names, norm, ck)
    outputs = ck.outputs(names, users)
    domain_of, lookup = domain_source(ck.inputs, nodes, kname)
    if any(kn.dtype in ("int64", "int32") for kn in nodes if kn.level > 0):
        raise NotCovered("integer values computed after a row reduction are not covered yet")
    levels = max((r.level for r in reductions), default=0)
    return Kernel(kname, nodes, ck.inputs, outputs, domain, domain_of, levels, lookup=lookup,
                  loop=loop_of(levels, ck.inputs), reductions=reductions)


def _node_layout(ck: RowChecks, v: Value, kind: NodeKind, refs: list[str], attrs) -> Layout:
    """The layout of a row kernel's node from its operands', checked against the domain."""
    g, domain, lays = ck.g, ck.domain, [ck.layout[r] for r in refs]
    if kind == NodeKind.REDUCE:
        src = g.values[refs[0]]
        if lays[0] != L.FULL or attrs["dim"] % len(src.shape) != len(src.shape) - 1:
            raise NotCovered(f"{v.op} over dim {attrs['dim']} of {src.shape}: only reductions "
                             "over the last dim are covered yet")
        return L.ROW
    if kind == NodeKind.GATHER:
        ck.check_lookup(v)
        return L.FULL
    if kind == NodeKind.VIEW:
        lay = L.ROW if lays[0] == L.CHAN else lays[0]
        if lays[0] in (L.COL, L.CHAN) and refs[0] not in ck.inside and \
                layout_of_shape(v.shape, domain) != lays[0]:
            raise NotCovered(f"{v.op} turns {refs[0]} of shape {g.values[refs[0]].shape} "
                             f"into {v.shape}, which broadcasts along other dims")
        if lay == L.FULL and strip(v.shape) != strip(domain):
            raise NotCovered(f"{v.op} reshapes the rows ({g.values[refs[0]].shape} -> "
                             f"{v.shape}); not covered inside a kernel")
        return lay
    lays = [L.ROW if x == L.CHAN else x for x in lays]  # per-channel: one value per row
    lay = max(lays, key=ORDER.get) if lays else L.SCALAR
    if L.ROW in lays and L.COL in lays:
        lay = L.FULL
    if lay != L.ROW:
        for r in refs:
            if ck.layout[r] == L.ROW and not row_shape_ok(g.values[r].shape, domain):
                raise NotCovered(f"{r} (shape {g.values[r].shape}) broadcasts against the "
                                 "wrong dim")
    if lay == L.FULL:
        ck.check_full(v)
    return lay


def row_shape_ok(shape, domain) -> bool:
    """A row value that broadcasts against a full one must keep the reduced dim as 1."""
    return bool(shape) and shape[-1] == 1 and len(shape) <= len(domain)


def _rows_shaped(shape: tuple[int, ...], domain: tuple[int, ...]) -> bool:
    """A row output has the domain's rows: (..., R, 1) or (..., R)."""
    rows = strip(tuple(domain[:-1]))
    return strip(shape[:-1] if shape and shape[-1] == 1 else shape) == rows
