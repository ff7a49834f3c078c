"""Capture: trace a problem's `Model.forward` into a small IR, once per case.

The reference is traced with `make_fx` through `torch.func.functional_call`, so parameters and
buffers arrive as graph inputs (named by their qualified names) instead of baked constants.
The model, the inputs and the trace are fake tensors (trace.py): tracing runs no full-size
forward, and a forward that needs its data (`.item()`, a data-dependent shape) is NotCovered.
Composite ops are decomposed into a small op set: softmax/log_softmax into amax/sub/exp/sum,
layer norm into mean/var-based arithmetic (our own decomposition, so the statistics stay
`mean.dim`/`var.correction`, which the planner handles), silu/gelu etc. by the core table.

Each case is traced separately, and so is the odd-size case the harness derives when the problem
declares none (problem.derive_held_out); the problem is covered only when every case gives the
same graph up to shapes (a scalar that changes with the case, e.g. a baked `1/cols` or
`x.size(-1)`, means the graph depends on the shape in a way the planner does not model; a dim
that is 1 in one case only changes how it broadcasts).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, replace
from typing import Any

from kernelevolve.synth import decomp, decomp_norms
# Graph, NotCovered, Ref and Value are imported from here by most of synth/ (graph.py holds them)
from kernelevolve.synth.graph import Graph, NotCovered, Ref, Value, _value_signature  # noqa: F401
from kernelevolve.problem import CaseBinder, derive_held_out, import_module, load_problem


def _decompositions() -> dict:
    import torch
    from torch._decomp import core_aten_decompositions, get_decompositions

    aten = torch.ops.aten
    table = dict(core_aten_decompositions())
    table.update(get_decompositions([aten._softmax, aten._log_softmax]))

    table[aten.native_layer_norm.default] = decomp_norms.layer_norm_rows
    table.update(decomp.table())
    return table


def trace_case(module, case, *, real: bool = False, binder=None) -> Graph:
    """Trace `module.Model` on `case`'s inputs, on fake tensors (no full-size forward; see
    trace.py). `real=True` runs the forward for real, seeded as the harness seeds it: the old
    trace, kept as the reference for the tests."""
    from kernelevolve.synth.trace import TraceRefused, trace_case as trace_gm

    try:
        gm, names, inputs, numbers = trace_gm(module, case, _decompositions(), real=real,
                                              binder=binder)
    except TraceRefused as exc:
        raise NotCovered(str(exc)) from None
    return replace(_to_graph(gm, names, inputs), numbers=numbers)


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _to_graph(gm, param_names: list[str], inputs: list[Any]) -> Graph:
    import torch

    values: dict[str, Value] = {}
    params: dict[str, str] = {}
    graph_inputs: list[str] = []
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    n_params = len(param_names)
    # make_fx flattens (tensors, *args): the parameters first, then forward's arguments.
    for i, node in enumerate(placeholders):
        meta = node.meta.get("val")
        if i >= n_params and not isinstance(meta, torch.Tensor):
            raise NotCovered(f"forward argument {i - n_params} is not a tensor")
        shape = tuple(int(s) for s in meta.shape)
        v = Value(node.name, "param" if i < n_params else "input", (), shape,
                  _dtype_name(meta.dtype))
        if i < n_params:
            params[node.name] = param_names[i]
        else:
            v.attrs["index"] = i - n_params
            graph_inputs.append(node.name)
        values[node.name] = v
    outputs: list[str] = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            outs = node.args[0]
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            for o in outs:
                if not hasattr(o, "name") or o.name not in values:
                    raise NotCovered("the forward returns something other than traced tensors")
                outputs.append(o.name)
            continue
        if node.op == "get_attr":
            raise NotCovered("the forward creates tensor constants (torch.tensor(...) inside "
                             "forward); not covered yet")
        if node.target is operator.getitem:
            src, idx = node.args
            values[node.name] = _from_node(node, "getitem", (Ref(src.name), idx))
            continue
        target = _out_of_place(node)
        args = tuple(_arg(a) for a in node.args)
        v = _from_node(node, str(target.overloadpacket.__name__) if hasattr(target, "overloadpacket")
                       else str(target), args)
        v.attrs["target"] = str(target)
        v.attrs["kwargs"] = {k: _arg(a) for k, a in node.kwargs.items()}
        values[node.name] = v
    _drop_dead(values, outputs)
    return Graph(values, graph_inputs, params, outputs, [f"x{i}" for i in range(len(inputs))])


def _out_of_place(node):
    """An in-place op on a temporary only it reads (rms_norm's `add_(mean, eps)`) is its
    out-of-place twin: same values, and the planner can fuse it."""
    import torch

    target = node.target
    packet = getattr(target, "overloadpacket", None)
    name = getattr(packet, "__name__", "")
    src = node.args[0] if node.args else None
    if not name.endswith("_") or name.startswith("_") or getattr(src, "op", None) != \
            "call_function" or len(src.users) != 1 or _aliases(src.target):
        return target
    twin = getattr(getattr(torch.ops.aten, name[:-1], None), target._overloadname, None)
    return twin if twin is not None else target


def _aliases(target) -> bool:
    """The op returns a view of an argument (writing to it writes to that argument too)."""
    schema = getattr(target, "_schema", None)
    return schema is None or any(r.alias_info is not None for r in schema.returns)


def _from_node(node, op: str, args: tuple) -> Value:
    import torch

    meta = node.meta.get("val")
    if isinstance(meta, torch.Tensor):
        shape, dtype = tuple(int(s) for s in meta.shape), _dtype_name(meta.dtype)
    else:
        shape, dtype = (), "tuple"
    return Value(node.name, op, args, shape, dtype)


def _arg(a: Any) -> Any:
    if hasattr(a, "name") and hasattr(a, "op"):  # an fx Node
        return Ref(a.name)
    if isinstance(a, (list, tuple)):
        return tuple(_arg(x) for x in a)
    import torch

    if isinstance(a, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return str(a)
    return a


def _drop_dead(values: dict[str, Value], outputs: list[str]) -> None:
    live = set(outputs)
    for v in reversed(list(values.values())):
        if v.name in live:
            live.update(_all_refs(v.args))
    for name in [n for n, v in values.items() if n not in live and v.op not in ("input", "param")]:
        del values[name]


def _all_refs(args) -> list[str]:
    out = []
    for a in args:
        if isinstance(a, Ref):
            out.append(a.name)
        elif isinstance(a, tuple):
            out.extend(_all_refs(a))
    return out


@dataclass
class Capture:
    """The traced graph of each case of a problem (the first one plans; all must agree)."""

    problem_path: str
    graphs: dict[str, Graph]
    module: Any

    @property
    def graph(self) -> Graph:
        return next(iter(self.graphs.values()))


def capture(problem_path: str) -> Capture:
    """Trace every case, and the harness's held-out case when it derives one; raise NotCovered
    when the cases do not share one graph. Views whose sizes vary get call-time shapes."""
    from kernelevolve.synth.lift import lift_case_numbers
    from kernelevolve.synth.shapes import annotate_call_shapes

    problem = load_problem(problem_path)
    module = import_module(problem.path, prefix="ke_synth")
    cases = {c.name: c for c in problem.cases}
    held = derive_held_out(problem)
    binder = CaseBinder(module, (*problem.cases, *([held] if held else [])))
    graphs = {name: _trace(module, case, binder) for name, case in cases.items()}
    if held is not None:
        try:
            graphs[held.name] = _trace(module, held, binder)
            cases[held.name] = held
        except NotCovered:
            pass  # the harness drops a derived shape the reference cannot run; so do we
    graphs = lift_case_numbers(graphs)
    _check_one_graph(graphs, cases, problem.size_globals)
    annotate_call_shapes(graphs)
    return Capture(problem.path, graphs, module)


def _trace(module, case, binder) -> Graph:
    try:
        return trace_case(module, case, binder=binder)
    except NotCovered:
        raise
    except Exception as exc:  # noqa: BLE001 - a trace failure is a coverage fact
        first = (str(exc).strip().splitlines() or [""])[0]
        raise NotCovered(f"tracing case {case.name!r} failed: {type(exc).__name__}: "
                         f"{first[:200]}") from None


def _check_one_graph(graphs: dict[str, Graph], cases: dict, defaults: dict) -> None:
    names = list(graphs)
    base = graphs[names[0]].signature()
    for name in names[1:]:
        if graphs[name].signature() == base:
            continue
        a, b = ({**defaults, **cases[n].bindings} for n in (names[0], name))
        binds = ", ".join(f"{k}={a.get(k)!r} vs {v!r}" for k, v in b.items() if a.get(k) != v)
        what = "the harness's held-out odd-size case " if cases[name].held_out else "case "
        raise NotCovered(f"{what}{name!r} traces to a different graph than case {names[0]!r}: "
                         f"{_difference(graphs[names[0]], graphs[name], names[0], name)}"
                         f"{f' ({binds})' if binds else ''}; a size the trace bakes into the "
                         "graph (x.size() or a size global used as a value, a shape-dependent "
                         "branch) is not covered")


def _difference(ga: Graph, gb: Graph, a: str, b: str) -> str:
    for va, vb in zip(ga.values.values(), gb.values.values()):
        sa, sb = _value_signature(va), _value_signature(vb)
        if sa[:3] != sb[:3] or sa[4] != sb[4]:
            return f"{_show(va)} in case {a!r} but {_show(vb)} in case {b!r}"
        if sa != sb:
            return (f"{_show(va)} has shape {va.shape} and {va.attrs.get('kwargs')} in case "
                    f"{a!r} but {vb.shape} and {vb.attrs.get('kwargs')} in case {b!r}")
    return f"{len(ga.values)} values in case {a!r} but {len(gb.values)} in case {b!r}"


def _show(v: Value) -> str:
    return f"{v.op}({', '.join(map(repr, v.args))})"
