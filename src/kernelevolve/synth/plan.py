"""Fusion planning: group a captured graph into row kernels and torch-kept ops.

A kernel works on a *domain* (R..., C): the shape of its largest elementwise value, seen as
`rows x cols` with cols the last dim. Each value in a kernel has a *layout* saying what it
varies with: "full" (row and column), "row" (one value per row: a reduction over the last
dim, or a (..., 1) input), "col" (one value per column: a per-feature parameter) or
"scalar". A row reduction's result is available after one pass over the row; values built
on it are available from the next pass, so each reduction gets a *level* (1 + the highest
level it depends on) and the emitted kernel makes one pass per level plus a final store
pass (softmax: max, then sum of exp, then store; layer norm: mean, then variance, then store).

A kernel whose reductions run over a middle dim (x of shape (B, F, D) -> (B, D), keepdim or
not) is a *mid reduction* kernel instead (`Kernel.mid_dim`): its prologue is "full" over
(B, F, D) (or "col" over D, or scalar), the reduced values and the epilogue on them are "mid",
and it writes only mid values (see _build_mid_kernel).

Grouping walks the graph in order: a fusable node joins the open kernel of its fusable
producers (merging them); a torch-kept node (matmul, conv, anything not in ops.py) closes
every kernel it depends on, so a kernel never needs a value computed after it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kernelevolve.synth.capture import Capture, Graph, NotCovered, Ref, Value
from kernelevolve.synth.kernel import (KInput, KNode, KOutput, Kernel, domain_source,
                                       chan_block, layout_of_shape, operand_role, role_layout,
                                       row_shape_ok, strip)
from kernelevolve.synth.ops import ELEMENT_TYPES, normalise
from kernelevolve.synth.plan_mid import build_mid_kernel

__all__ = ["KInput", "KNode", "KOutput", "Kernel", "Plan", "plan", "explain", "explain_error"]

ORDER = {"scalar": 0, "row": 1, "col": 1, "full": 2}


@dataclass
class Plan:
    graph: Graph
    steps: list[tuple[str, Any]]     # ("torch", value name) or ("kernel", Kernel), in order
    kernels: list[Kernel]
    kept: list[str]

    def summary(self) -> str:
        parts = [f"{k.name}: {'+'.join(_short_ops(k))}" for k in self.kernels]
        kept = [self.graph.values[n].op for n in self.kept if not _is_view(self.graph.values[n])]
        if kept:
            parts.append("torch: " + ", ".join(kept))
        return "; ".join(parts)


def _is_view(v: Value) -> bool:
    return v.op in ("view", "_unsafe_view", "reshape", "permute", "t", "transpose", "alias",
                    "expand", "unsqueeze", "squeeze", "clone", "contiguous")


def _short_ops(k: Kernel) -> list[str]:
    return [n.source_op for n in k.nodes if n.kind != "view" and n.source_op]


# ---- grouping -----------------------------------------------------------------------------

def plan(cap: Capture | Graph) -> Plan:
    graphs = cap.graphs if isinstance(cap, Capture) else {"default": cap}
    g = next(iter(graphs.values()))
    norm = {n: normalise(v) for n, v in g.values.items() if v.op not in ("input", "param")}
    group_of: dict[str, int] = {}
    members: dict[int, list[str]] = {}
    closed: set[int] = set()
    depends: dict[str, set[int]] = {}      # kept value -> kernels it (transitively) reads
    next_id = 0
    for name, v in g.values.items():
        if v.op in ("input", "param"):
            continue
        refs = v.refs()
        producers = {group_of[r] for r in refs if r in group_of and group_of[r] not in closed}
        fusable = norm[name] is not None
        if fusable and norm[name][0] == "view" and not producers:
            fusable = False                 # a view of a torch value stays a torch view
        if not fusable:
            deps: set[int] = set()
            for r in refs:
                if r in group_of:
                    deps.add(group_of[r])
                deps |= depends.get(r, set())
            depends[name] = deps
            closed |= deps
            continue
        # kernels this node may not join: those a kept producer of this node depends on
        blocked = set().union(*(depends.get(r, set()) for r in refs))
        producers -= blocked
        if producers:
            gid = min(producers)
            for other in sorted(producers - {gid}):
                for m in members.pop(other):
                    group_of[m] = gid
                    members[gid].append(m)
        else:
            gid, next_id = next_id, next_id + 1
            members[gid] = []
        group_of[name] = gid
        members[gid].append(name)
    order = list(g.values)
    kernels: list[Kernel] = []
    last_of: dict[str, Kernel] = {}
    kernel_of: dict[str, Kernel] = {}
    users = g.users()
    for gid in sorted(members, key=lambda i: max(order.index(m) for m in members[i])):
        names = sorted(members[gid], key=order.index)
        if all(norm[n][0] == "view" for n in names):
            for n in names:
                del group_of[n]
            continue
        k = _build_kernel(g, graphs, names, norm, users, f"k{len(kernels)}")
        kernels.append(k)
        last_of[names[-1]] = k
        for n in names:
            kernel_of[n] = k
    steps: list[tuple[str, Any]] = []
    kept: list[str] = []
    for name, v in g.values.items():
        if v.op in ("input", "param"):
            continue
        if name in last_of:
            steps.append(("kernel", last_of[name]))
        elif name not in kernel_of:
            _check_kept_args(graphs, name)
            steps.append(("torch", name))
            kept.append(name)
    if not kernels:
        ops = sorted({g.values[n].op for n in kept}) or ["nothing"]
        raise NotCovered("no fusable op: " + ", ".join(ops) + " stay(s) in torch "
                         "(not covered by the synthesizer yet)")
    return Plan(g, steps, kernels, kept)


def _check_kept_args(graphs: dict[str, Graph], name: str) -> None:
    first = None
    for g in graphs.values():
        v = g.values[name]
        if "call_shape" in v.attrs:  # a view whose sizes the candidate reads at call time
            return
        if first is None:
            first = v.args
        elif v.args != first:
            raise NotCovered(f"the torch-kept op {v.op} has shape-dependent arguments "
                             f"({first!r} vs {v.args!r}); not covered yet")


# ---- layouts and levels -------------------------------------------------------------------

def _domain(g: Graph, names: list[str], norm) -> tuple[int, ...]:
    shapes = [g.values[n].shape for n in names]
    for n in names:
        if norm[n][0] == "reduce":
            shapes.append(g.values[norm[n][2][0].name].shape)
    return max(shapes, key=lambda s: (math.prod(s), len(s)))


def _build_kernel(g: Graph, graphs, names: list[str], norm, users, kname: str) -> Kernel:
    domain = _domain(g, names, norm)
    for n in names:
        if norm[n][0] == "reduce":
            src = g.values[norm[n][2][0].name].shape
            if src and norm[n][3]["dim"] % len(src) != len(src) - 1:
                return build_mid_kernel(g, names, norm, users, kname)
    inside = set(names)
    layout: dict[str, str] = {}
    level: dict[str, int] = {}
    inputs: list[KInput] = []
    nodes: list[KNode] = []

    def operand(a, role: str | None = None):
        if not isinstance(a, Ref):
            return
        if a.name in inside:
            if role:
                raise NotCovered(f"{a.name} ({role}) is computed in the kernel")
            return
        if a.name in layout:
            if (role or "data") != roles.get(a.name, "data"):
                raise NotCovered(f"{a.name} is read both as {role or 'data'} and as "
                                 f"{roles.get(a.name, 'data')}")
            return
        v = g.values[a.name]
        lay = role_layout(v, role, domain) if role else layout_of_shape(v.shape, domain)
        if lay is None:
            raise NotCovered(f"{v.name} of shape {v.shape} does not broadcast as a row, a column "
                             f"or a scalar over the kernel domain {domain}")
        if v.dtype not in ELEMENT_TYPES:
            raise NotCovered(f"kernel input {v.name} has dtype {v.dtype}; float32, int64, int32 "
                             "and bool are covered")
        layout[a.name], level[a.name] = lay, 0
        if role:
            roles[a.name] = role
        inputs.append(KInput(a.name, lay, v.dtype,
                             chan_block(v.shape, domain) if lay == "chan" else None))

    roles: dict[str, str] = {}
    for n in names:
        v = g.values[n]
        kind, op, args, attrs = norm[n]
        for j, a in enumerate(args):
            operand(a, operand_role(kind, j))
        refs = [a.name for a in (args[:1] if kind == "bucketize" else
                                 () if kind == "gather" else args) if isinstance(a, Ref)]
        lays = [layout[r] for r in refs]
        lvl = max([level[r] for r in refs] or [0])
        if kind == "reduce":
            src = g.values[refs[0]]
            if layout[refs[0]] != "full" or attrs["dim"] % len(src.shape) != len(src.shape) - 1:
                raise NotCovered(f"{v.op} over dim {attrs['dim']} of {src.shape}: only reductions "
                                 "over the last dim are covered yet")
            lay, lvl = "row", lvl + 1
        elif kind == "gather":
            lay = "full"
            if strip(v.shape) != strip(domain):
                raise NotCovered(f"embedding lookup of shape {v.shape} is not the kernel domain "
                                 f"{domain}")
        elif kind == "view":
            lay = "row" if lays[0] == "chan" else lays[0]
            if lays[0] in ("col", "chan") and refs[0] not in inside and \
                    layout_of_shape(v.shape, domain) != lays[0]:
                raise NotCovered(f"{v.op} turns {refs[0]} of shape {g.values[refs[0]].shape} "
                                 f"into {v.shape}, which broadcasts along other dims")
            if lay == "full" and strip(v.shape) != strip(domain):
                raise NotCovered(f"{v.op} reshapes the rows ({g.values[refs[0]].shape} -> "
                                 f"{v.shape}); not covered inside a kernel")
        else:
            lays = ["row" if x == "chan" else x for x in lays]  # per-channel: one per row
            lay = max(lays, key=ORDER.get) if lays else "scalar"
            if "row" in lays and "col" in lays:
                lay = "full"
            if lay != "row":
                for r in refs:
                    if layout[r] == "row" and not row_shape_ok(g.values[r].shape, domain):
                        raise NotCovered(f"{g.values[r].name} (shape {g.values[r].shape}) "
                                         "broadcasts against the wrong dim")
            if lay == "full" and strip(v.shape) != strip(domain):
                raise NotCovered(f"{v.op} gives shape {v.shape}, not the kernel domain {domain}")
        if kind == "reduce" and op == "var":
            # two passes: the mean, then the mean of squared deviations (no cancellation)
            src, m, d, sq = args[0], Ref(n + "_mean"), Ref(n + "_dev"), Ref(n + "_sq")
            nodes.append(KNode(m.name, "reduce", "mean", (src,), attrs, "row", v.dtype, lvl, ""))
            nodes.append(KNode(d.name, "binary", "sub", (src, m), {}, "full", v.dtype, lvl, ""))
            nodes.append(KNode(sq.name, "binary", "mul", (d, d), {}, "full", v.dtype, lvl, ""))
            lvl += 1
            layout[n], level[n] = lay, lvl
            nodes.append(KNode(n, kind, "var", (sq,), attrs, lay, v.dtype, lvl, v.op))
            continue
        layout[n], level[n] = lay, lvl
        nodes.append(KNode(n, kind, op, args, attrs, lay, v.dtype, lvl, v.op))
    outputs = []
    for n in names:
        if any(u not in inside for u in users[n]):
            v = g.values[n]
            if v.dtype not in ELEMENT_TYPES or (v.dtype != "float32" and layout[n] != "full"):
                raise NotCovered(f"kernel output {n} has dtype {v.dtype}; float32 outputs and "
                                 "full-size int64, int32 and bool outputs are covered")
            if layout[n] not in ("full", "row"):
                raise NotCovered(f"kernel output {n} is a per-column or scalar value")
            if layout[n] == "row" and not _rows_shaped(tuple(v.shape), domain):
                raise NotCovered(f"kernel output {n} (shape {v.shape}) is a per-channel value")
            outputs.append(KOutput(n, layout[n], v.shape, v.dtype))
    domain_of, lookup = domain_source(inputs, nodes, kname)
    if any(kn.dtype in ("int64", "int32") for kn in nodes if kn.level > 0):
        raise NotCovered("integer values computed after a row reduction are not covered yet")
    levels = max((kn.level for kn in nodes if kn.kind == "reduce"), default=0)
    return Kernel(kname, nodes, inputs, outputs, domain, domain_of, levels, lookup=lookup)


# ---- explain ------------------------------------------------------------------------------

def explain(p: Plan) -> str:
    lines = []
    for k in p.kernels:
        shape = "x".join(map(str, k.domain))
        store = " + 1 store pass" if any(o.layout == "full" for o in k.outputs) else ""
        what = (f"row kernel, {k.levels} reduction pass(es){store}"
                if k.has_reduction else "elementwise kernel")
        if k.mid_dim is not None:
            what = f"mid reduction kernel over dim {k.mid_dim}"
        lines.append(f"kernel {k.name} ({what}, domain {shape}): fuses "
                     + ", ".join(n.source_op for n in k.nodes if n.source_op))
        lines.append("    reads " + ", ".join(f"{_label(p.graph, i.name)} [{i.layout}]"
                                             for i in k.inputs)
                     + "; writes " + ", ".join(f"{o.name} [{o.layout}]" for o in k.outputs))
    for name in p.kept:
        v = p.graph.values[name]
        lines.append(f"torch: {v.op} ({name}, shape {'x'.join(map(str, v.shape))}) stays a "
                     "torch call" + (" (a view)" if _is_view(v) else ""))
    return "\n".join(lines)


def _label(g: Graph, name: str) -> str:
    if name in g.params:
        return f"param {g.params[name]}"
    v = g.values[name]
    if v.op == "input":
        return f"input {v.attrs['index']}"
    return name


def explain_error(exc: NotCovered) -> str:
    return f"not covered: {exc}"


def _rows_shaped(shape: tuple[int, ...], domain: tuple[int, ...]) -> bool:
    """A row output has the domain's rows: (..., R, 1) or (..., R)."""
    rows = strip(tuple(domain[:-1]))
    return strip(shape[:-1] if shape and shape[-1] == 1 else shape) == rows
