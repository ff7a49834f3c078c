"""Fusion planning: group a captured graph into kernels and torch-kept ops.

Grouping walks the graph in order: a fusable node joins the open kernel of its fusable
producers (merging them); a torch-kept node (matmul, conv, anything not in ops.py) closes
every kernel it depends on, so a kernel never needs a value computed after it.

Each group becomes a row kernel (plan_row.py: values FULL, ROW, COL or SCALAR over the domain
(R..., C); a reduction over the last dim is available one pass after the values it reads, so
softmax is max, then sum of exp, then a store pass), or a mid reduction kernel (plan_mid.py)
when it reduces a middle dim (the same levels, each a walk down that dim). Both place operands with the shared checks (checks.py); each
kernel then gets its schedule (schedule.py). explain() prints the plan.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kernelevolve.synth.capture import Capture, Graph, NotCovered, Value
from kernelevolve.synth.kernel import (KInput, KNode, KOutput, Kernel, Layout, LoopKind,
                                       NodeKind, Reduction)
from kernelevolve.synth.fold import fold_constants
from kernelevolve.synth.ops import normalise
from kernelevolve.synth.plan_mid import build_mid_kernel
from kernelevolve.synth.plan_row import build_row_kernel
from kernelevolve.synth.plan_loss import loss_of
from kernelevolve.synth.plan_pool import explain_line, pool_of, same_pool
from kernelevolve.synth.plan_solo import SoloKernel, pair_values, solo_of
from kernelevolve.synth.schedule import schedule
from kernelevolve.synth.sink import sink_views

__all__ = ["KInput", "KNode", "KOutput", "Kernel", "Layout", "LoopKind", "NodeKind", "Plan",
           "Reduction", "plan", "explain", "explain_error"]


@dataclass
class Plan:
    graph: Graph
    steps: list[tuple[str, Any]]     # ("torch", value name), ("kernel", Kernel) or
    kernels: list[Kernel]            # ("solo", SoloKernel), in order
    kept: list[str]
    solos: list[SoloKernel] = field(default_factory=list)   # kernels of their own
    pools: list = field(default_factory=list)   # ("pool", PoolKernel) steps (plan_pool.py)

    def summary(self) -> str:
        parts = [f"{k.name}: {'+'.join(_short_ops(k))}" for k in self.kernels]
        parts += [f"{k.name}: {self.graph.values[k.out].op}" for k in self.solos]
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

def _group(g: Graph, norm, torch_views: frozenset[str] = frozenset()) -> dict[int, list[str]]:
    """The fusion groups: group id -> member value names (`torch_views`: views kept in torch
    even when they read a kernel value, splitting that kernel)."""
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
        if fusable and norm[name][0] == "view" and (not producers or name in torch_views):
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
    return members


def plan(cap: Capture | Graph) -> Plan:
    """The plan of a capture. A group a kernel cannot take because of a view inside it (a
    reshape of its rows: (B, C, H, W) -> (B, C, H*W) before a reduction, a group norm's
    (N, G, D) -> (N, C, H, W)) is planned again with those views as torch views between two
    kernels; the first reason stands when that does not help. The graph with its reshapes
    moved above their element-wise producers (sink.py) is planned too, and wins when it needs
    fewer kernels (a norm or a loss over every element: one kernel instead of two)."""
    graphs = cap.graphs if isinstance(cap, Capture) else {"default": cap}
    graphs = {case: fold_constants(graph) for case, graph in graphs.items()}
    sunk = {case: sink_views(graph) for case, graph in graphs.items()}
    try:
        best = _plan_splitting_views(graphs)
    except NotCovered:
        if all(sunk[c] is graphs[c] for c in graphs):
            raise
        return _plan_splitting_views(sunk)
    if all(sunk[c] is graphs[c] for c in graphs):
        return best
    try:
        other = _plan_splitting_views(sunk)
    except NotCovered:
        return best
    launches = lambda p: len(p.kernels) + len(p.solos) + len(p.pools)  # noqa: E731
    return other if launches(other) < launches(best) else best


def _plan_splitting_views(graphs: dict[str, Graph]) -> Plan:
    g = next(iter(graphs.values()))
    norm = {n: normalise(v) for n, v in g.values.items() if v.op not in ("input", "param")}
    torch_views: frozenset[str] = frozenset()
    first: NotCovered | None = None
    while True:
        try:
            return _plan(graphs, g, norm, torch_views)
        except _GroupNotCovered as exc:
            first = first or exc.reason
            split = {n for n in exc.names if norm[n][0] == "view"
                     and any(r in exc.names for r in g.values[n].refs())} - torch_views
            if not split:
                raise first from None
            # the views of the group's largest values first: a view of a reduced value (a
            # full sum's (N,) -> ()) split off alone would leave its epilogue a kernel of
            # its own (cross_entropy over class probabilities: log_softmax over dim 1, then
            # (x * y) viewed flat and summed, then negated)
            big = max(math.prod(g.values[n].shape) for n in exc.names)
            torch_views |= {n for n in split if math.prod(g.values[n].shape) == big} or split


class _GroupNotCovered(Exception):
    def __init__(self, reason: NotCovered, names: list[str]):
        super().__init__(str(reason))
        self.reason, self.names = reason, set(names)


def _plan(graphs, g: Graph, norm, torch_views: frozenset[str]) -> Plan:
    members = _group(g, norm, torch_views)
    order = list(g.values)
    kernels: list[Kernel] = []
    last_of: dict[str, Kernel] = {}
    kernel_of: dict[str, Kernel] = {}
    users = g.users()
    for gid in sorted(members, key=lambda i: max(order.index(m) for m in members[i])):
        names = sorted(members[gid], key=order.index)
        if all(norm[n][0] == "view" for n in names):
            continue                        # views alone stay torch views
        try:
            k = _build_kernel(g, graphs, names, norm, users, f"k{len(kernels)}")
        except NotCovered as exc:
            raise _GroupNotCovered(exc, names) from None
        k.schedule = schedule(k)
        kernels.append(k)
        last_of[names[-1]] = k
        for n in names:
            kernel_of[n] = k
    steps, kept, solos = _steps(graphs, g, last_of, kernel_of)
    pair_values(steps, kernels, g)
    solos = [item for kind, item in steps if kind == "solo"]
    pools = [item for kind, item in steps if kind == "pool"]
    if not kernels and not solos and not pools:
        ops = sorted({g.values[n].op for n in kept}) or ["nothing"]
        raise NotCovered("no fusable op: " + ", ".join(ops) + " stay(s) in torch")
    return Plan(g, steps, kernels, kept, solos, pools)


def _steps(graphs, g: Graph, last_of, kernel_of):
    """The forward's steps in graph order: kernel launches (after their last node), solo
    kernels and torch calls; with the kept values and the solo kernels."""
    steps: list[tuple[str, Any]] = []
    kept: list[str] = []
    solos: list[SoloKernel] = []
    for name, v in g.values.items():
        if v.op in ("input", "param"):
            continue
        if name in last_of:
            steps.append(("kernel", last_of[name]))
        elif name not in kernel_of:
            if same_pool(graphs, name):
                steps.append(("pool", pool_of(v, g, f"p{sum(k == 'pool' for k, _ in steps)}")))
                continue
            solo = (solo_of(v, g, f"s{len(solos)}") or loss_of(v, g, f"s{len(solos)}")
                    if _same_solo(graphs, name) else None)
            if solo is not None:
                steps.append(("solo", solo))
                solos.append(solo)
                continue
            _check_kept_args(graphs, name)
            steps.append(("torch", name))
            kept.append(name)
    return steps, kept, solos


def _same_solo(graphs: dict[str, Graph], name: str) -> bool:
    """Every case reduces or scans the same dim (a dim given from the end is normalised)."""
    seen = set()
    for g in graphs.values():
        v = g.values[name]
        k = solo_of(v, g, "s") or loss_of(v, g, "s")
        if k is None:
            return False
        seen.add((k.op, k.dim, k.keepdim, len(k.shape)))
    return len(seen) == 1


def _check_kept_args(graphs: dict[str, Graph], name: str) -> None:
    first = None
    for g in graphs.values():
        v = g.values[name]
        if "call_shape" in v.attrs:  # a view whose sizes the candidate reads at call time
            return
        if first is None:
            first = v.args
        elif _same_args(v.args) != _same_args(first):
            raise NotCovered(f"the torch-kept op {v.op} has shape-dependent arguments "
                             f"({first!r} vs {v.args!r}); not covered yet")


def _same_args(args):
    """Arguments as compared between cases (NaN equal to NaN)."""
    if isinstance(args, tuple):
        return tuple(_same_args(a) for a in args)
    return "nan" if isinstance(args, float) and args != args else args


# ---- layouts and levels -------------------------------------------------------------------

def _domain(g: Graph, names: list[str], norm) -> tuple[int, ...]:
    shapes = [g.values[n].shape for n in names]
    for n in names:
        if norm[n][0] == "reduce":
            shapes.append(g.values[norm[n][2][0].name].shape)
    return max(shapes, key=lambda s: (math.prod(s), len(s)))


def _build_kernel(g: Graph, graphs, names: list[str], norm, users, kname: str) -> Kernel:
    """A row kernel (plan_row.py), or a mid kernel (plan_mid.py) when a reduction runs over
    a dim other than the last."""
    for n in names:
        if norm[n][0] == "reduce":
            src = g.values[norm[n][2][0].name].shape
            if src and norm[n][3]["dim"] % len(src) != len(src) - 1:
                return build_mid_kernel(g, names, norm, users, kname)
    return build_row_kernel(g, names, norm, users, _domain(g, names, norm), kname)


# ---- explain ------------------------------------------------------------------------------

def explain(p: Plan) -> str:
    lines = []
    for k in p.kernels:
        shape = "x".join(map(str, k.domain))
        store = " + 1 store pass" if any(o.layout == "full" for o in k.outputs) else ""
        what = (f"row kernel, {k.levels} reduction pass(es){store}"
                if k.has_reduction else "elementwise kernel")
        if k.mid_dim is not None:
            store = " + 1 store walk" if k.schedule and k.schedule.store else ""
            what = f"mid reduction kernel over dim {k.mid_dim}, {k.levels} walk(s){store}"
        lines.append(f"kernel {k.name} ({what}, domain {shape}): fuses "
                     + ", ".join(n.source_op for n in k.nodes if n.source_op))
        lines.append("    reads " + ", ".join(f"{_label(p.graph, i.name)} [{i.layout}]"
                                             for i in k.inputs)
                     + "; writes " + ", ".join(f"{o.name} [{o.layout}]" for o in k.outputs))
    for k in p.solos:
        lines.append(f"kernel {k.name} (a kernel of its own): {k.label}, "
                     f"{'x'.join(map(str, k.shape))} {k.in_dtype} -> {k.out_dtype}")
    lines += [explain_line(k) for k in p.pools]
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

