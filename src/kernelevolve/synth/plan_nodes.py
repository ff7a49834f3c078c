"""The walk both reduction kernels plan with (plan_row.py, plan_mid.py): each captured value
becomes a kernel node with a layout and a level, a reduction one level above what it reads.

What differs between the kinds is asked of the kernel's checks object: which operands a node
reads (`node_refs`), its layout (`node_layout`), the dim a reduction walks (`reduced_dim`) and
the layout of a reduced value (`reduced_layout`)."""
from __future__ import annotations

from typing import Any

from kernelevolve.synth.capture import Graph
from kernelevolve.synth.checks import reduction_steps
from kernelevolve.synth.kernel import KNode, NodeKind, Reduction


def plan_nodes(g: Graph, names: list[str], norm: dict[str, Any],
               ck: Any) -> tuple[list[KNode], list[Reduction]]:
    """The kernel's nodes in order (a reduction's steps before its result) and its
    reductions; fills in `ck.layout` as it goes."""
    level: dict[str, int] = {}
    nodes: list[KNode] = []
    reductions: list[Reduction] = []
    for n in names:
        v = g.values[n]
        kind, op, args, attrs = norm[n]
        kind = NodeKind(kind)
        ck.read(n, kind, args)
        refs = ck.refs(ck.node_refs(kind, args))
        lay = ck.node_layout(v, kind, refs, attrs)
        lvl = max([level.get(r, 0) for r in refs] or [0])
        if kind == NodeKind.REDUCE:
            dim = ck.reduced_dim(n, norm[n], refs)
            added, reds, src, lvl = reduction_steps(n, op, args[0], attrs, v.dtype, dim,
                                                    lvl + 1, ck.reduced_layout)
            nodes += added
            reductions += reds
            args = (src,)
        ck.layout[n], level[n] = lay, lvl
        nodes.append(KNode(n, kind, op, args, attrs, lay, v.dtype, lvl, v.op))
    return nodes, reductions
