"""A region (a group of graph.py nodes) -> the source of a KernelBench-style `Model` class.

The forward is the region's nodes in graph order, one statement each, written with public calls
(torch.X, F.X, Tensor methods, Python operators) and the node's own arguments, so it runs the
same kernels in the same order as the model (bitwise equal outputs). Leaf modules become their
functional form with the module's settings (nn.LayerNorm -> F.layer_norm(x, shape, w, b, eps)).
Shape queries a region reads (x.size(1), C // 4) are re-derived inside it from its inputs.

Names are canonical (inputs x0.., temporaries t0.., state by its attribute name), so equal
regions get equal sources. `__init__` takes the distinct sizes of the region's parameters and
buffers and rebuilds each: a recognisable buffer by its recipe (tril/triu of ones, zeros, ones,
a constant, arange, eye), anything else as random values with the model's rounded statistics
(a comment says so; load the model's values for equal outputs).
"""
from __future__ import annotations

import builtins
import hashlib
import keyword
import math
import operator
from dataclasses import dataclass

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevolve.model.graph import FUSABLE_MODULES, Traced, op_name

_BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.eq: "==",
           operator.ne: "!=", operator.lt: "<", operator.le: "<=", operator.gt: ">",
           operator.ge: ">=", operator.and_: "&", operator.or_: "|", operator.xor: "^"}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}
_MODULE_STATE = ("weight", "bias", "running_mean", "running_var")


class CodegenError(Exception):
    """The region holds something with no faithful public spelling; says what."""


@dataclass
class RegionCode:
    source: str
    kind: str
    label: str
    init_args: list
    state: dict          # local name -> qualified name in the traced model
    inputs: list         # external nodes, in forward-argument order
    outputs: list        # member nodes read outside the region, in graph order
    ops: list


class _Names:
    """Canonical names while a region is written: inputs x0.., state by attribute name."""

    def __init__(self, t: Traced):
        self.t = t
        self.names: dict = {}
        self.inputs: list = []
        self.state: dict = {}          # local -> qualified name
        self.state_nodes: list = []    # (local, qualified name, tensor)

    def state_local(self, qual: str, tensor) -> str:
        for local, q in self.state.items():
            if q == qual:
                return local
        base = qual.rsplit(".", 1)[-1]
        if base.startswith("_tensor_constant"):     # a tensor fx folded at trace time
            base = "constant"
        if not base.isidentifier() or keyword.iskeyword(base) or hasattr(nn.Module, base):
            base = f"p_{base}" if base.isidentifier() else f"p{len(self.state)}"
        local, k = base, 1
        while local in self.state:
            local, k = f"{base}_{k}", k + 1
        self.state[local] = qual
        self.state_nodes.append((local, qual, tensor))
        return local

    def ref(self, a: fx.Node) -> str:
        if a not in self.names:
            if a.op == "get_attr":
                self.names[a] = "self." + self.state_local(a.target, self.t.values[a])
            else:
                self.names[a] = f"x{len(self.inputs)}"
                self.inputs.append(a)
        return self.names[a]


def _metas(t: Traced, group: list) -> list:
    """The shape queries (non-tensor nodes) the group reads, with those they derive from."""
    metas: list = []
    stack = [a for n in group for a in n.all_input_nodes]
    while stack:
        n = stack.pop()
        if t.roles[n].kind == "meta" and n not in metas:
            metas.append(n)
            stack.extend(n.all_input_nodes)
    return metas


def region_code(t: Traced, group: list) -> RegionCode:
    members = set(group)
    modules = dict(t.gm.named_modules())
    metas = _metas(t, group)
    nm = _Names(t)
    lines = []
    for i, n in enumerate(sorted(members | set(metas), key=t.order.__getitem__)):
        expr = _statement(n, nm.ref, modules, t, nm.state_local)
        nm.names[n] = f"t{i}"
        lines.append(f"        t{i} = {expr}")

    def read_outside(u) -> bool:      # a shape query cloned inside is not a reader outside
        return u not in members and (u not in metas or any(map(read_outside, u.users)))

    outputs = [n for n in group if any(map(read_outside, n.users))]
    if not outputs:
        raise CodegenError("the region's values are read by nothing outside it")
    lines.append("        return " + ", ".join(nm.names[n] for n in outputs))
    compute = []
    for n in group:
        if t.roles[n].kind == "fusable" and t.roles[n].op not in compute:
            compute.append(t.roles[n].op)
    label = "+".join(compute[:6]) + ("+..." if len(compute) > 6 else "")
    sizes: list = []
    for d in (int(d) for _, _, tensor in nm.state_nodes for d in tensor.shape):
        if d != 1 and d not in sizes:
            sizes.append(d)
    texts = [_render(label, sizes, nm.state_nodes, nm.inputs, lines, exact)
             for exact in (True, False)]
    kind = hashlib.sha256((texts[1] + repr(sizes)).encode()).hexdigest()[:12]
    return RegionCode(source=texts[0], kind=kind, label=label, init_args=sizes, state=nm.state,
                      inputs=nm.inputs, outputs=outputs,
                      ops=[op_name(n, modules) for n in group])


def _render(label, sizes, state_nodes, inputs, lines, exact: bool) -> str:
    params = "".join(f", n{i}: int" for i in range(len(sizes)))
    init = ["        super().__init__()"]
    for local, qual, tensor in state_nodes:
        shape = ", ".join("1" if d == 1 else f"n{sizes.index(int(d))}"
                          for d in tensor.shape) or "()"
        expr, note = state_recipe(tensor, shape, exact)
        if exact and note:
            init.append(f"        # {qual}: {note}")
        if isinstance(tensor, nn.Parameter):
            grad = "" if tensor.requires_grad else ", requires_grad=False"
            init.append(f"        self.{local} = nn.Parameter({expr}{grad})")
        else:
            init.append(f"        self.register_buffer({local!r}, {expr})")
    body = "\n".join(lines)
    head = "import math\n" if "math." in body else ""
    args = "".join(f", x{i}" for i in range(len(inputs)))
    return (f"{head}import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
            f"class Model(nn.Module):\n    \"\"\"A model region: {label}.\"\"\"\n\n"
            f"    def __init__(self{params}):\n" + "\n".join(init) + "\n\n"
            f"    def forward(self{args}):\n{body}\n")


def _statement(n: fx.Node, ref, modules, t: Traced, state_local) -> str:
    def r(a):
        return render(a, ref)

    if n.op == "call_module":
        return module_call(n, modules[n.target], r, t, state_local)
    if n.op == "call_method":
        recv, *rest = n.args
        return f"{r(recv)}.{n.target}({_call_args(rest, n.kwargs, r)})"
    fn = n.target
    if t.roles[n].op == "dropout":
        return r(n.args[0])
    if fn is operator.getitem:
        return f"{r(n.args[0])}[{_index(n.args[1], r)}]"
    if fn is builtins.getattr:
        return f"{r(n.args[0])}.{n.args[1]}"
    if fn in _BINARY:
        a, b = (_operand(r(x)) for x in n.args)
        return f"{a} {_BINARY[fn]} {b}"
    if fn in _UNARY:
        return f"{_UNARY[fn]}{_operand(r(n.args[0]))}"
    return f"{public_name(fn)}({_call_args(n.args, n.kwargs, r)})"


def public_name(fn) -> str:
    name = getattr(fn, "__name__", None)
    for prefix, mod in (("torch", torch), ("F", F), ("torch.special", torch.special),
                        ("math", math)):
        if name and getattr(mod, name, None) is fn:
            return f"{prefix}.{name}"
    raise CodegenError(f"{fn!r} has no public torch spelling")


def module_call(n: fx.Node, mod: nn.Module, r, t: Traced, state_local) -> str:
    """A fusable leaf module as its functional call, with the module's state and settings."""
    def s(attr):
        v = getattr(mod, attr, None)
        return "None" if v is None else "self." + state_local(f"{n.target}.{attr}", v)

    kind = FUSABLE_MODULES[type(mod)]
    x = r(n.args[0]) if n.args else r(next(iter(n.kwargs.values())))
    src = n.args[0] if n.args else None
    inplace = getattr(mod, "inplace", False) and isinstance(src, fx.Node) and len(src.users) > 1
    tail = ", inplace=True" if inplace else ""
    if kind in ("dropout", "identity"):
        return x
    if kind == "layer_norm":
        return f"F.layer_norm({x}, {tuple(mod.normalized_shape)!r}, {s('weight')}, " \
               f"{s('bias')}, {mod.eps!r})"
    if kind == "rms_norm":
        return f"F.rms_norm({x}, {tuple(mod.normalized_shape)!r}, {s('weight')}, {mod.eps!r})"
    if kind == "group_norm":
        return f"F.group_norm({x}, {mod.num_groups}, {s('weight')}, {s('bias')}, {mod.eps!r})"
    if kind == "batch_norm":
        momentum = 0.0 if mod.momentum is None else mod.momentum
        return (f"F.batch_norm({x}, {s('running_mean')}, {s('running_var')}, {s('weight')}, "
                f"{s('bias')}, False, {momentum!r}, {mod.eps!r})")
    if kind == "embedding":
        pad = "" if mod.padding_idx is None else f", padding_idx={mod.padding_idx}"
        return f"F.embedding({x}, {s('weight')}{pad})"
    if kind == "embedding_bag":
        extra = "" if mod.padding_idx is None else f", padding_idx={mod.padding_idx}"
        if mod.include_last_offset:
            extra += ", include_last_offset=True"
        return f"F.embedding_bag({x}, {s('weight')}, mode={mod.mode!r}{extra})"
    if kind == "gelu":
        return f"F.gelu({x}, approximate={mod.approximate!r})"
    if kind in ("softmax", "log_softmax"):
        return f"F.{kind}({x}, {mod.dim})"
    if kind == "leaky_relu":
        return f"F.leaky_relu({x}, {mod.negative_slope!r}{tail})"
    if kind == "elu":
        return f"F.elu({x}, {mod.alpha!r}{tail})"
    if kind in ("hardtanh", "relu6"):
        return f"F.hardtanh({x}, {mod.min_val!r}, {mod.max_val!r}{tail})"
    if kind == "softplus":
        return f"F.softplus({x}, {mod.beta!r}, {mod.threshold!r})"
    if kind in ("tanh", "sigmoid"):
        return f"torch.{kind}({x})"
    return f"F.{kind}({x}{tail})"          # relu, silu, mish, hardswish, hardsigmoid


def _call_args(args, kwargs, r) -> str:
    parts = [r(a) for a in args] + [f"{k}={r(v)}" for k, v in kwargs.items()
                                    if k != "_stacklevel"]
    return ", ".join(parts)


def _operand(text: str) -> str:
    return f"({text})" if text.startswith("-") else text


def _index(idx, r) -> str:
    items = idx if isinstance(idx, tuple) else (idx,)
    parts = []
    for it in items:
        if isinstance(it, slice):
            parts.append(":".join("" if v is None else r(v)
                                  for v in (it.start, it.stop, it.step)).rstrip(":") or ":")
            if it.step is None and it.stop is None and it.start is not None:
                parts[-1] += ":"
        else:
            parts.append(r(it))
    text = ", ".join(parts)
    return text + "," if isinstance(idx, tuple) and len(items) == 1 else text


def render(a, ref) -> str:
    """A graph argument as Python source (nodes through `ref`)."""
    if isinstance(a, fx.Node):
        return ref(a)
    if isinstance(a, bool) or a is None or isinstance(a, (int, str)) or a is Ellipsis:
        return "..." if a is Ellipsis else repr(a)
    if isinstance(a, float):
        if math.isnan(a):
            return "float('nan')"
        if math.isinf(a):
            return "float('inf')" if a > 0 else "float('-inf')"
        return repr(a)
    if isinstance(a, (torch.dtype, torch.memory_format, torch.layout)):
        return str(a)
    if isinstance(a, torch.device):
        return f"torch.device({str(a)!r})"
    if isinstance(a, (tuple, torch.Size)):
        items = [render(v, ref) for v in a]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(a, list):
        return "[" + ", ".join(render(v, ref) for v in a) + "]"
    if isinstance(a, slice):
        return f"slice({render(a.start, ref)}, {render(a.stop, ref)}, {render(a.step, ref)})"
    raise CodegenError(f"an argument of type {type(a).__name__} has no source spelling")


def _sig(x: float, digits: int) -> float:
    return round(float(x), digits)


def _affine(base: str, scale: float, shift: float) -> str:
    text = base if scale == 1 else f"{base} * {scale!r}"
    if shift:
        text += f" - {-shift!r}" if shift < 0 else f" + {shift!r}"
    return text


def state_recipe(t: torch.Tensor, shape: str, exact: bool) -> tuple[str, str]:
    """(constructor expression, comment) rebuilding a parameter/buffer of this shape and dtype.
    With exact=False the statistics are masked (the kind digest ignores the values)."""
    t = t.detach()
    dt = t.dtype
    fdt = "" if dt == torch.float32 else f", dtype={dt}"
    idt = "" if dt == torch.int64 else f", dtype={dt}"
    size = "()" if shape == "()" else f"({shape},)" if "," not in shape else f"({shape})"
    if t.numel() == 0:
        return f"torch.empty({size}, dtype={dt})", ""
    flat = t.reshape(-1)
    first = flat[0]
    if flat.numel() == 1 or (flat[1] == first and bool((flat == first).all())):
        v = first.item()
        if v == 0:
            return f"torch.zeros({size}, dtype={dt})", ""
        if v == 1:
            return f"torch.ones({size}, dtype={dt})", ""
        return f"torch.full({size}, {render(v, None) if exact else '?'}, dtype={dt})", ""
    if t.dim() >= 2:
        ones = torch.ones_like(t)
        for how in ("tril", "triu"):
            for k in (0, 1, -1):
                if torch.equal(t, getattr(torch, how)(ones, k)):
                    diag = f", {k}" if k else ""
                    return f"torch.{how}(torch.ones({size}, dtype={dt}){diag})", ""
        if t.dim() == 2 and torch.equal(t, torch.eye(*t.shape, dtype=dt, device=t.device)):
            return f"torch.eye({shape}, dtype={dt})", ""
    if t.dim() == 1 and dt != torch.bool and torch.equal(
            t, torch.arange(t.numel(), dtype=dt, device=t.device)):
        return f"torch.arange({shape}, dtype={dt})", ""
    if dt == torch.bool:
        p = flat.float().mean().item()
        p = repr(_sig(p, 3)) if exact else "?"
        return f"torch.rand({size}) < {p}", f"random, {p} of the model's values are True"
    if not dt.is_floating_point:
        lo, hi = (int(flat.min().item()), int(flat.max().item()))
        b = f"{lo}, {hi + 1}" if exact else "?, ?"
        return f"torch.randint({b}, {size}{idt})", "random integers in the model's range"
    x = flat.double()
    lo, hi, mean, std = (x.min().item(), x.max().item(), x.mean().item(), x.std().item())
    spread = std if std > 0 else abs(mean) or 1.0
    digits = max(0, 1 - math.floor(math.log10(spread)))
    if lo >= 0:
        a, b = _sig(lo, digits), _sig(hi - lo, digits)
        text = _affine(f"torch.rand({size}{fdt})", b, a) if exact else \
            f"torch.rand({size}{fdt}) * ? + ?"
        return text, (f"random in the model's range [{lo:.4g}, {hi:.4g}]; load the model's "
                      "values for equal outputs")
    m, s = _sig(mean, digits), _sig(std, digits)
    text = _affine(f"torch.randn({size}{fdt})", s, m) if exact else \
        f"torch.randn({size}{fdt}) * ? + ?"
    return text, (f"random with the model's mean {mean:.4g} and std {std:.4g}; load the "
                  "model's values for equal outputs")
