"""Python glue shared by the emitters: the candidate's header, `ModelNew.__init__` and the
torch-kept steps of `forward`.

Parameters: `ModelNew.__init__` is the reference's own `Model.__init__` body, copied from the
problem source (with `super(Model, self)` made `super()`), so it creates the same parameters
in the same order from the same random stream: under the harness's seeding both models get
identical weights. The module-level constants that body reads are copied too, unless the
cases (or the harness's held-out case) set one differently: the candidate cannot see a case's
value, so that is NotCovered, naming the global. `forward` reads each parameter from the
candidate's own module (`self.linear.weight`), never from the reference.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from kernelevolve.synth.capture import Graph, NotCovered, Ref
from kernelevolve.synth.lift_sizes import size_expr
from kernelevolve.synth.plan import Kernel, Plan
from kernelevolve.synth.shapes import render as render_shape

_ALLOWED_IMPORTS = ("torch", "math", "numpy", "functools", "itertools", "typing", "collections",
                    "dataclasses", "enum", "operator", "numbers", "__future__")


class Reference:
    """What the emitters need from the problem's source: imports, __init__, forward's args."""

    def __init__(self, problem_path: str):
        source = Path(problem_path).read_text()
        tree = ast.parse(source)
        self.imports: list[str] = []
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                        else [node.module or ""])
                if all(m.split(".")[0] in _ALLOWED_IMPORTS for m in mods) and not \
                        (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
                    self.imports.append(ast.get_source_segment(source, node))
        model = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model"),
                     None)
        if model is None:
            raise NotCovered("the problem defines no class Model in its source")
        init = next((n for n in model.body if isinstance(n, ast.FunctionDef)
                     and n.name == "__init__"), None)
        fwd = next((n for n in model.body if isinstance(n, ast.FunctionDef)
                    and n.name == "forward"), None)
        if fwd is None:
            raise NotCovered("Model has no forward method in its source")
        if fwd.args.vararg or fwd.args.kwonlyargs:
            raise NotCovered("Model.forward takes *args or keyword-only arguments")
        self.forward_args = [a.arg for a in fwd.args.args[1:]]
        self.constants: list[str] = []
        if init is None:
            self.init_src = "    def __init__(self):\n        super().__init__()\n"
        else:
            seg = ast.get_source_segment(source, init, padded=True)
            seg = re.sub(r"super\(\s*Model\s*,\s*self\s*\)", "super()", seg)
            self.init_src = _reindent(seg, "    ")
            self.constants = _constants_used(tree, source, init, varying_globals(problem_path))


_PURE_CALLS = {"int", "float", "bool", "tuple", "list", "min", "max", "len", "abs", "round"}


def varying_globals(problem_path: str) -> dict[str, str]:
    """Module globals the cases set to different values (the harness's held-out case included),
    each with its values by case, e.g. {"DIM": "64 in case '16x64', 33 in case 'tail'"}."""
    import sys

    from kernelevolve.problem import derive_held_out, import_module, load_problem

    problem = load_problem(problem_path)
    held = derive_held_out(problem)
    cases = [*problem.cases, *([held] if held else [])]
    keys = {k for c in cases for k in c.bindings}
    if not keys:
        return {}
    module = import_module(problem.path, prefix="ke_synth_globals")
    sys.modules.pop(module.__name__, None)
    out = {}
    for key in sorted(keys):
        values = [(c, c.bindings.get(key, getattr(module, key, None))) for c in cases]
        if len({repr(v) for _, v in values}) > 1:
            out[key] = ", ".join(f"{v!r} in " + ("the harness's held-out case" if c.held_out
                                                 else f"case {c.name!r}") for c, v in values)
    return out


def _constants_used(tree: ast.Module, source: str, init: ast.FunctionDef,
                    varying: dict[str, str]) -> list[str]:
    """The module-level assignments `Model.__init__` reads (and those they read in turn), in
    source order, so `ModelNew.__init__` (the same body) finds them: `DIM = 64`,
    `SCALE = 1 / math.sqrt(DIM)`. A value computed by any other call is not copied: running it
    again in the candidate could differ (random draws, I/O). Nor is a global the cases set
    differently (`varying`): the candidate's copy would keep one case's value in every case."""
    assigns: dict[str, ast.stmt] = {}
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, ast.AnnAssign) and node.value else [])
        for t in targets:
            for name in ast.walk(t):
                if isinstance(name, ast.Name):
                    assigns[name.id] = node
    needed: list[ast.stmt] = []
    stack = [(n, n) for n in sorted(_globals_read(init))]
    seen: set[str] = set()
    while stack:
        name, via = stack.pop()
        if name in seen or name not in assigns:
            continue
        seen.add(name)
        if name in varying:
            through = f"{via} (computed from {name})" if via != name else name
            raise NotCovered(f"Model.__init__ reads the module-level {through}, which the cases "
                             f"set differently ({varying[name]}); a candidate cannot see a "
                             "case's value: pass it through get_init_inputs()")
        node = assigns[name]
        for call in (c for c in ast.walk(node) if isinstance(c, ast.Call)):
            fn = call.func
            pure = (isinstance(fn, ast.Name) and fn.id in _PURE_CALLS) or (
                isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name)
                and fn.value.id == "math")
            if not pure:
                raise NotCovered(f"Model.__init__ reads the module-level {name}, computed by a "
                                 f"call ({ast.get_source_segment(source, call)}); not copied")
        if node not in needed:
            needed.append(node)
        stack += [(n.id, via) for n in ast.walk(node) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, ast.Load)]
    return [ast.get_source_segment(source, n) for n in sorted(needed, key=lambda n: n.lineno)]


def _globals_read(fn: ast.FunctionDef) -> set[str]:
    """Names `fn` loads that are not its own: its parameters and the names it assigns are
    locals (a parameter `features` is not the module's `features`)."""
    a = fn.args
    local = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if x}
    loads = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Name):
            (loads if isinstance(n.ctx, ast.Load) else local).add(n.id)
    return loads - local


def _reindent(text: str, indent: str) -> str:
    lines = text.splitlines()
    first = next(line for line in lines if line.strip())
    cur = len(first) - len(first.lstrip())
    return "\n".join((indent + line[cur:]) if line.strip() else "" for line in lines) + "\n"


def param_expr(qualified: str) -> str:
    parts = qualified.split(".")
    if all(p.isidentifier() for p in parts):
        return "self." + qualified
    # a parameter or a buffer (get_parameter refuses buffers: a BatchNorm's running_mean in a
    # ModuleList, "norms.0.running_mean")
    owner, _, leaf = qualified.rpartition(".")
    return f"getattr(self.get_submodule({owner!r}), {leaf!r})"


def var(g: Graph, name: str, ref: Reference) -> str:
    v = g.values[name]
    if v.op == "input":
        return ref.forward_args[v.attrs["index"]]
    return name


def render_arg(g: Graph, a: Any, ref: Reference) -> str:
    if isinstance(a, Ref):
        return var(g, a.name, ref)
    if isinstance(a, tuple):
        inner = ", ".join(render_arg(g, x, ref) for x in a)
        return f"[{inner}]"
    if isinstance(a, str) and a.startswith("torch."):
        return a
    if isinstance(a, float) and a != a:
        return 'float("nan")'
    if isinstance(a, float) and a in (float("inf"), -float("inf")):
        return 'float("inf")' if a > 0 else '-float("inf")'
    return repr(a)


def torch_step(g: Graph, name: str, ref: Reference) -> str:
    v = g.values[name]
    if v.op == "getitem":
        return f"{name} = {render_arg(g, v.args[0], ref)}[{v.args[1]}]"
    target = v.attrs["target"]
    if not target.startswith("aten."):
        raise NotCovered(f"cannot call {target} from a candidate")
    _refuse_case_numbers(g, v, target)
    args = [render_arg(g, a, ref) for a in v.args]
    note = "kept in torch"
    if "call_shape" in v.attrs:  # sizes that vary between cases, read from the source
        args[1] = render_shape(v.attrs["call_shape"], args[0],
                               lambda n: render_arg(g, Ref(n), ref))
        note += "; its shape read at call time"
    kwargs = [f"{k}={render_arg(g, a, ref)}" for k, a in v.attrs.get("kwargs", {}).items()]
    if target in TENSOR_METHODS and not kwargs:
        rest = [_sizes(args[1])] + args[2:] if len(args) > 1 else []
        call = f"{args[0]}.{TENSOR_METHODS[target]}({', '.join(rest)})"
    elif target in TORCH_FUNCTIONS and not kwargs:
        call = f"{TORCH_FUNCTIONS[target]}({', '.join(args)})"
    else:
        call = f"torch.ops.{target}({', '.join(args + kwargs)})"
    return f"{name} = {call}  # {note}"


def _refuse_case_numbers(g: Graph, v, target: str) -> None:
    """A number lifted out of the trace (lift.py: it differs between cases) is a 0-d tensor that
    kernels read; an op kept in torch takes a Python number or a size there (`arange(0, n)`,
    a shape list), so the draft would fail at run time: refuse it with the reason instead.
    `slice` is the exception: its bounds take a 0-d tensor (F.glu's halves, checked against
    torch on the aten suite's cases)."""
    if target == "aten.slice.Tensor":
        return
    lifted = set(g.sized) | set(g.lifted)

    def refs(a: Any) -> bool:
        if isinstance(a, Ref):
            return a.name in lifted
        return isinstance(a, (tuple, list)) and any(refs(x) for x in a)

    if refs(v.args) or refs(tuple(v.attrs.get("kwargs", {}).values())):
        raise NotCovered(f"{target.split('.')[1]} stays in torch but takes a number that differs "
                         "between cases (an input's size or a model attribute); not covered yet")


def _sizes(arg: str) -> str:
    """A size list spelled as separate arguments (`x.view(a, b, -1)`, not `x.view([a, b, -1])`):
    torch parses a list argument about 0.6 us slower a call (1.75 -> 1.16 us a view here), and
    a draft's glue keeps several views per call. An empty list, or anything not a list literal,
    stays as it is."""
    node = ast.parse(arg, mode="eval").body
    if not isinstance(node, ast.List) or not node.elts:
        return arg
    return ", ".join(ast.get_source_segment(arg, e) for e in node.elts)


# ATen ops kept in torch, spelled as the Tensor method or torch function that dispatches the
# same overload with the same arguments: the overload lookup of `torch.ops.aten.X.overload`
# costs about a microsecond a call (view 2.4 -> 1.5 us, t 1.7 -> 0.9 us, addmm on 64x64
# 9.3 -> 7.4 us here), which a small problem's kernel does not win back (sum over all of 32768
# floats: its flattening view was a quarter of the candidate's time). _unsafe_view is spelled
# reshape, which is the same view wherever _unsafe_view is defined and copies otherwise.
TENSOR_METHODS = {
    "aten.view.default": "view", "aten._unsafe_view.default": "reshape",
    "aten.reshape.default": "reshape", "aten.permute.default": "permute", "aten.t.default": "t",
    "aten.transpose.int": "transpose", "aten.unsqueeze.default": "unsqueeze",
    "aten.squeeze.dim": "squeeze", "aten.expand.default": "expand",
}
TORCH_FUNCTIONS = {
    "aten.mm.default": "torch.mm", "aten.bmm.default": "torch.bmm",
    "aten.addmm.default": "torch.addmm", "aten.convolution.default": "torch.convolution",
}


def init_source(ref: Reference, g) -> str:
    """`ModelNew.__init__`: the reference's own body, then a non-persistent buffer for each
    number lift.py made a kernel input (so it follows `.to(device)`), from the attribute the
    body just set."""
    lines = [ref.init_src.rstrip("\n")]
    for qualified, attr in sorted(g.lifted.items()):
        lines.append(f"        self.register_buffer({qualified!r}, torch.tensor(float("
                     f"self.{attr}), dtype=torch.float32), persistent=False)")
    return "\n".join(lines)


def forward_prologue(p: Plan, ref: Reference) -> list[str]:
    g = p.graph
    used = {r for v in g.values.values() for r in v.refs()} | set(g.outputs)
    return [f"{n} = {size_expr(g.sized[n], ref.forward_args) if n in g.sized else param_expr(q)}"
            for n, q in g.params.items() if n in used]


def forward_epilogue(p: Plan, ref: Reference) -> list[str]:
    outs = [var(p.graph, o, ref) for o in p.graph.outputs]
    return [f"return {outs[0]}" if len(outs) == 1 else f"return ({', '.join(outs)},)"]


def out_shape_expr(k: Kernel, out, dom: str) -> str:
    """The run-time shape of a kernel output, from the domain tensor's shape `dom`."""
    nd = len(k.domain)
    if k.mid_dim is not None and out.layout == "full":
        return f"{dom}"
    if k.mid_dim is not None:
        d = k.mid_dim
        if len(out.shape) == nd:
            return f"tuple({dom})[:{d}] + (1,) + tuple({dom})[{d + 1}:]"
        return f"tuple({dom})[:{d}] + tuple({dom})[{d + 1}:]"
    if out.layout == "full":
        extra = len(out.shape) - nd
        if extra == 0:
            return f"{dom}"
        if extra > 0:
            return f"(1,) * {extra} + tuple({dom})"
        return f"tuple({dom})[{-extra}:]"
    if len(out.shape) == nd and out.shape[-1] == 1:
        return f"tuple({dom})[:-1] + (1,)"
    if len(out.shape) == nd - 1:
        return f"tuple({dom})[:-1]"
    raise NotCovered(f"row output {out.name} has shape {out.shape}")


def domain_shape_expr(k: Kernel, named: dict[str, str]) -> str:
    """The run-time domain shape: a full-size input's shape, or an embedding lookup's."""
    if k.lookup is None:
        return f"{named[k.domain_of]}.shape"
    idx, table = k.lookup
    return f"torch.Size(tuple({named[idx]}.shape) + ({named[table]}.shape[1],))"


def call_setup(k: Kernel, g: Graph, ref: Reference) -> tuple[list[str], list[str]]:
    """The forward lines before a kernel launch: its inputs made contiguous (`k0_in0`...), the
    domain shape (`k0_shape`) and the outputs allocated; returns (lines, input names)."""
    out = [f"# {doc_of(k)}"]
    names = [f"{k.name}_in{j}" for j in range(len(k.inputs))]
    out += [f"{n} = {var(g, i.name, ref)}.contiguous()" for n, i in zip(names, k.inputs)]
    named = dict(zip([i.name for i in k.inputs], names))
    out.append(f"{k.name}_shape = {domain_shape_expr(k, named)}")
    for o in k.outputs:
        shape = out_shape_expr(k, o, f"{k.name}_shape")
        if new_like(k, o, shape, named):
            out.append(f"{var(g, o.name, ref)} = torch.empty_like({named[k.domain_of]})")
        else:
            out.append(f"{var(g, o.name, ref)} = torch.empty({shape}, dtype=torch.{o.dtype}, "
                       f"device={names[0]}.device)")
    return out, names


def table_args(k: Kernel, names: list[str]) -> list[str]:
    """The sizes a kernel takes after its shape arguments, per input in order: bucketize
    boundaries (numel), embedding tables (rows), and a per-channel input's row grouping (rows
    per channel value, channel count), read from the domain's run-time shape."""
    out, nd, shape = [], len(k.domain), f"{k.name}_shape"
    for n, i in zip(names, k.inputs):
        if i.layout == "table":
            out.append(f"{n}.numel()")
        elif i.layout == "gtable":
            out.append(f"{n}.shape[0]")
        elif i.layout == "chan":
            a, b = i.block
            out += [f"{shape}[{b}:{nd - 1}].numel()", f"{shape}[{a}:{b}].numel()"]
    return out


def new_like(k: Kernel, out, shape: str, named: dict[str, str]) -> bool:
    """The output has the domain input's shape and dtype: allocate it with `empty_like` (a
    microsecond cheaper than `torch.empty(shape, dtype=, device=)` on every call)."""
    dom = next(i for i in k.inputs if i.name == k.domain_of)
    return (k.lookup is None and shape.endswith("_shape") and dom.layout == "full"
            and dom.dtype == out.dtype and tuple(out.shape) == tuple(k.domain))


def doc_of(k: Kernel) -> str:
    ops = ", ".join(n.source_op for n in k.nodes if n.kind != "view" and n.source_op)
    if k.mid_dim is not None:
        walks = k.levels + (k.schedule is not None and k.schedule.store is not None)
        return (f"kernel {k.name}: {ops}, mid reduction over dim {k.mid_dim} (threads over "
                f"outer x inner blocks, {walks} walk(s) down the reduced dim)")
    if k.has_reduction:
        return f"kernel {k.name}: {ops} over rows ({k.levels} reduction pass(es) per row)"
    return f"kernel {k.name}: {ops}, elementwise (one read per input, one write)"


def imports_of(ref: Reference) -> list[str]:
    base = ["import torch", "import torch.nn as nn"]
    return base + [i for i in ref.imports if i not in base]


def problem_name(problem_path: str) -> str:
    path = Path(problem_path)
    return path.parent.name if path.stem == "problem" else path.stem


def ident(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text)
