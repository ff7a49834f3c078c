"""The model with each fusable region outlined into a submodule built from its generated source.

    outlined = find_regions(model, example_inputs)
    outlined.module          # fx.GraphModule, outputs equal to the model's; "region_<k>" each
                             # one region's generated Model, holding the model's own tensors
    outlined.regions         # RegionSpec per region: kind, label, source, init_args, state, ...
    outlined.out_of_reach    # [{"what", "why", "nodes"}]: what stays eager and why

graph.py finds the regions, codegen.py writes each one's source; here each source is exec'd,
instantiated on the meta device and handed the model's Parameter/buffer objects (same storage),
and the graph is rebuilt with one call_module per region, in a topological order.
`render_problem` wraps a region's source into a full KernelBench-format problem file.
"""
from __future__ import annotations

import heapq
import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn as nn

from kernelevolve.model.codegen import CodegenError, region_code
from kernelevolve.model.graph import Traced, regions, trace


@dataclass
class RegionSpec:
    name: str                   # "region_<k>": the submodule name in Outlined.module
    kind: str                   # digest of (source up to the random values' statistics, init args)
    label: str                  # e.g. "add+layer_norm", "embedding+sum"
    source: str                 # imports + `class Model(nn.Module)`, nothing else
    init_args: list             # Model(*init_args)
    state: dict                 # region param/buffer name -> the model's qualified name
    input_names: list           # forward's argument names
    ops: list                   # op names covered, in order (views included)
    nodes: list                 # fx node names covered (the traced graph's)
    input_nodes: list = field(default_factory=list)    # traced-graph node feeding each input
    output_nodes: list = field(default_factory=list)   # traced-graph node of each output


@dataclass
class Outlined:
    module: nn.Module
    regions: list
    out_of_reach: list
    traced: fx.GraphModule | None = None    # the graph `nodes` name (None when untraceable)


def find_regions(model: nn.Module, example_inputs: list) -> Outlined:
    """Trace `model`, group its fusable nodes into regions and outline each (module docstring).
    A model torch.fx cannot trace gives no regions and one out_of_reach entry saying why."""
    t = trace(model, list(example_inputs))
    if isinstance(t, str):
        return Outlined(module=model, regions=[], out_of_reach=[
            {"what": f"model {type(model).__name__}", "why": t, "nodes": []}])
    out_of_reach = _left_out(t)
    specs, groups = [], []
    for group in regions(t):
        try:
            code = region_code(t, group)
        except CodegenError as exc:
            out_of_reach.append({"what": "region " + "+".join(t.roles[n].op for n in group),
                                 "why": str(exc), "nodes": [n.name for n in group]})
            continue
        name = f"region_{len(specs)}"
        specs.append(RegionSpec(
            name=name, kind=code.kind, label=code.label, source=code.source,
            init_args=list(code.init_args), state=dict(code.state),
            input_names=[f"x{i}" for i in range(len(code.inputs))], ops=code.ops,
            nodes=[n.name for n in group], input_nodes=[n.name for n in code.inputs],
            output_nodes=[n.name for n in code.outputs]))
        groups.append((group, code))
    module = _outline(t, specs, groups)
    return Outlined(module=module, regions=specs, out_of_reach=out_of_reach, traced=t.gm)


def _left_out(t: Traced) -> list:
    """Boundary nodes grouped by (op, reason)."""
    by: dict = {}
    for node in t.gm.graph.nodes:
        role = t.roles[node]
        if role.kind == "boundary":
            by.setdefault((role.op, role.why), []).append(node.name)
    return [{"what": op, "why": why, "nodes": nodes} for (op, why), nodes in by.items()]


def load_region_class(source: str, name: str = "region") -> type:
    """The `Model` class a region source defines (exec'd in a fresh namespace)."""
    namespace: dict = {"__name__": f"kernelevolve_{name}"}
    exec(compile(source, f"<kernelevolve {name}>", "exec"), namespace)  # noqa: S102 - our code
    return namespace["Model"]


def instantiate(spec: RegionSpec, tensors: dict) -> nn.Module:
    """The region's Model built on the meta device, then handed the given tensors (the model's
    own objects, by the region's local names): no allocation, no random draws."""
    with torch.device("meta"):
        module = load_region_class(spec.source, spec.name)(*spec.init_args)
    for local, value in tensors.items():
        if local in module._parameters:
            module._parameters[local] = value
        else:
            module._buffers[local] = value
    return module.eval()


def _outline(t: Traced, specs: list, groups: list) -> fx.GraphModule:
    gm = t.gm
    region_of = {}
    for k, (group, _) in enumerate(groups):
        for n in group:
            region_of[n] = k
        tensors = {local: _fetch(gm, qual) for local, qual in specs[k].state.items()}
        gm.add_submodule(specs[k].name, instantiate(specs[k], tensors))
    # units: every node outside a region, and each region; ordered topologically with the
    # original order as the tie-break (a region at the place of its first node)
    deps: dict = {}
    for node in gm.graph.nodes:
        if node in region_of:
            continue
        deps[node] = {("r", region_of[a]) if a in region_of else a for a in node.all_input_nodes}
    for k, (group, code) in enumerate(groups):
        deps[("r", k)] = {("r", region_of[a]) if a in region_of else a for a in code.inputs}
    prio = {u: t.order[u] for u in deps if isinstance(u, fx.Node)}
    prio.update({("r", k): t.order[group[0]] for k, (group, _) in enumerate(groups)})
    waiting = {u: len(d) for u, d in deps.items()}
    users: dict = {u: [] for u in deps}
    for u, d in deps.items():
        for v in d:
            users[v].append(u)
    heap = [(prio[u], i, u) for i, u in enumerate(deps) if not waiting[u]]
    heapq.heapify(heap)
    ids = {u: i for i, u in enumerate(deps)}
    graph = fx.Graph()
    env: dict = {}
    while heap:
        _, _, u = heapq.heappop(heap)
        if isinstance(u, fx.Node):
            # a shape query of a region's inner value is read only inside regions (each
            # re-derives it): it has no copy, nor has anything derived from it
            if all(a in env for a in u.all_input_nodes):
                env[u] = graph.node_copy(u, lambda a: env[a])
        else:
            group, code = groups[u[1]]
            call = graph.call_module(specs[u[1]].name, tuple(env[a] for a in code.inputs))
            if len(code.outputs) == 1:
                env[code.outputs[0]] = call
            else:
                for j, out in enumerate(code.outputs):
                    env[out] = graph.call_function(operator.getitem, (call, j))
        for v in users[u]:
            waiting[v] -= 1
            if not waiting[v]:
                heapq.heappush(heap, (prio[v], ids[v], v))
    _drop_dead(graph, t)
    graph.lint()
    return fx.GraphModule(gm, graph, class_name=f"Outlined{type(gm).__name__}")


def _drop_dead(graph: fx.Graph, t: Traced) -> None:
    """Remove parameter reads and shape queries left without users (regions re-derive them)."""
    changed = True
    while changed:
        changed = False
        for node in reversed(list(graph.nodes)):
            if node.users or node.op in ("placeholder", "output", "call_module"):
                continue
            if node.op == "get_attr" or (node.op in ("call_function", "call_method")
                                         and node.target in (getattr, "size", "dim")
                                         or node.target is operator.getitem):
                graph.erase_node(node)
                changed = True


def record_regions(outlined: Outlined, inputs: list) -> tuple[dict, object]:
    """Run the outlined model once: ({region name: (its input tensors, its output)}, the model's
    output). What the lead needs for a region's shapes and dtypes (a region's inputs are the
    tensors its generated forward takes, in order)."""
    seen: dict = {}
    hooks = [getattr(outlined.module, r.name).register_forward_hook(
        lambda m, args, out, name=r.name: seen.__setitem__(name, (args, out)))
        for r in outlined.regions]
    try:
        with torch.no_grad():
            out = outlined.module(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return seen, out


def state_values(outlined: Outlined, spec: RegionSpec) -> dict:
    """The model's tensors for a region's state, by the region's local names (a state_dict
    for the region's generated Model; traced constants come from Outlined.traced)."""
    return {local: _fetch(outlined.traced, qual) for local, qual in spec.state.items()}


def _fetch(gm: nn.Module, qual: str):
    obj = gm
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def region_problem(spec: RegionSpec) -> str:
    """The region's source alone (imports + Model)."""
    return spec.source


def render_problem(spec: RegionSpec, cases: list[dict], input_specs: list[dict]) -> str:
    """A full KernelBench-format problem file around a region's source.

    cases: [{"name": .., "weight": .., GLOBAL: value, ...}]: the first case's values become the
    module-level globals. input_specs, one per forward input: {"shape": [int | GLOBAL name],
    "dtype": "float32" | "int64" | ..., "mean": m, "std": s} for floats, {"low": a, "high": b}
    (high exclusive) for integers."""
    if len(input_specs) != len(spec.input_names):
        raise ValueError(f"{spec.name} takes {len(spec.input_names)} inputs, "
                         f"got {len(input_specs)} input specs")
    globals_: dict = {}
    for case in cases:
        for key, value in case.items():
            if key not in ("name", "weight"):
                globals_.setdefault(key, value)
    lines = [spec.source.rstrip("\n"), "", ""]
    lines += [f"{k} = {v!r}" for k, v in globals_.items()]
    lines += ["", "CASES = ["] + [f"    {c!r}," for c in cases] + ["]", "", "",
                                                                   "def get_inputs():"]
    items = []
    for ins in input_specs:
        shape = ", ".join(str(d) for d in ins["shape"])
        shape = f"({shape},)" if len(ins["shape"]) == 1 else f"({shape})"
        dtype = ins.get("dtype", "float32")
        if dtype.startswith(("int", "uint")):
            items.append(f"torch.randint({ins['low']}, {ins['high']}, {shape}, "
                         f"dtype=torch.{dtype})")
        elif dtype == "bool":
            items.append(f"torch.rand({shape}) < 0.5")
        else:
            items.append(f"torch.randn({shape}, dtype=torch.{dtype}) * {ins.get('std', 1.0)!r}"
                         f" + {ins.get('mean', 0.0)!r}")
    lines += [f"    return [{', '.join(items)}]", "", "",
              "def get_init_inputs():", f"    return {list(spec.init_args)!r}", ""]
    return "\n".join(lines)
