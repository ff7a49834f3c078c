"""torch.fx capture of a model and its fusable regions (the groups `outline` turns into modules).

A model is traced with `torch.fx.symbolic_trace` (the default tracer: torch.nn modules are leaves,
user modules are traced through) and run once on the example inputs to learn each node's value.
Every node then gets a role:

    input / output / state   placeholders, the output, get_attr (a parameter or buffer)
    meta                      a non-tensor value (x.shape, x.size(-1), T // 2, x.device): never a
                              region member; a region that reads one re-derives it inside
    fusable                   elementwise math, comparisons, where/masked_fill, activations,
                              reductions, softmax, norms, embedding gathers (functional or module)
    view                      reshapes, transposes, slicing, split/chunk, dropout in eval, identity
    boundary                  stays eager (GEMM, convolution, pooling, cat/stack, unknown ops):
                              `why` says why; `outline` lists these in out_of_reach

Regions are maximal connected groups of fusable and view nodes, grown in graph order and kept
convex (no path leaves a region and comes back, so each runs as one call). Views at a region's
input edge stay outside (the region takes the viewed tensor), and a group without a fusable op
is no region.
"""
from __future__ import annotations

import builtins
import math
import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx
import torch.nn as nn
import torch.nn.functional as F

# Elementwise math, comparisons, casts, activations, reductions, norms and lookups, by the name
# of the torch / F function or Tensor method (and the operator module's arithmetic).
FUSABLE = {
    "add", "sub", "mul", "div", "true_divide", "truediv", "floordiv", "floor_divide", "mod",
    "remainder", "neg", "pow", "abs", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10",
    "sqrt", "rsqrt", "square", "reciprocal", "sign", "floor", "ceil", "round", "trunc", "erf",
    "erfc", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "relu6", "gelu", "silu", "mish",
    "softplus", "elu", "selu", "celu", "leaky_relu", "hardtanh", "hardswish", "hardsigmoid",
    "logsigmoid", "clamp", "clip", "clamp_min", "clamp_max", "maximum", "minimum", "fmax", "fmin",
    "where", "masked_fill", "lerp", "addcmul", "addcdiv", "eq", "ne", "lt", "le", "gt", "ge",
    "and_", "or_", "xor", "invert", "logical_and", "logical_or", "logical_not", "logical_xor",
    "isnan", "isinf", "nan_to_num", "float", "half", "double", "bfloat16", "int", "long", "bool",
    "to", "type_as", "softmax", "log_softmax", "sum", "mean", "amax", "amin", "var", "std",
    "logsumexp", "prod", "layer_norm", "rms_norm", "group_norm", "batch_norm", "embedding",
    "embedding_bag", "tril", "triu", "arange", "ones", "zeros", "full", "ones_like", "zeros_like",
    "full_like",
}
VIEWS = {
    "view", "reshape", "transpose", "permute", "contiguous", "unsqueeze", "squeeze", "flatten",
    "unflatten", "expand", "expand_as", "t", "chunk", "split", "narrow", "select", "view_as",
    "reshape_as", "getitem", "getattr", "dropout", "identity", "movedim", "swapaxes",
}
BOUNDARY = {
    "linear": "a vendor GEMM (nn.Linear / F.linear): stays eager",
    "matmul": "a vendor GEMM (@ / matmul): stays eager",
    "bmm": "a vendor GEMM (bmm): stays eager", "mm": "a vendor GEMM (mm): stays eager",
    "addmm": "a vendor GEMM (addmm): stays eager", "baddbmm": "a vendor GEMM: stays eager",
    "einsum": "an einsum (a vendor GEMM): stays eager",
    "conv1d": "a vendor convolution: stays eager", "conv2d": "a vendor convolution: stays eager",
    "conv3d": "a vendor convolution: stays eager",
    "scaled_dot_product_attention": "a vendor attention kernel: stays eager",
    "cat": "cat/stack: a copy into one buffer, kept in torch",
    "concat": "cat/stack: a copy into one buffer, kept in torch",
    "stack": "cat/stack: a copy into one buffer, kept in torch",
}
POOLING = "pooling: stays eager (the synthesizer has no pooling kernels yet: issue 29)"

# Leaf modules written as a functional call in a region (codegen.module_call spells them).
FUSABLE_MODULES = {
    nn.LayerNorm: "layer_norm", nn.GroupNorm: "group_norm", nn.BatchNorm1d: "batch_norm",
    nn.BatchNorm2d: "batch_norm", nn.BatchNorm3d: "batch_norm", nn.Embedding: "embedding",
    nn.EmbeddingBag: "embedding_bag", nn.GELU: "gelu", nn.SiLU: "silu", nn.ReLU: "relu",
    nn.ReLU6: "relu6", nn.Tanh: "tanh", nn.Sigmoid: "sigmoid", nn.Softmax: "softmax",
    nn.LogSoftmax: "log_softmax", nn.LeakyReLU: "leaky_relu", nn.ELU: "elu", nn.Mish: "mish",
    nn.Hardtanh: "hardtanh", nn.Hardswish: "hardswish", nn.Hardsigmoid: "hardsigmoid",
    nn.Softplus: "softplus", nn.Dropout: "dropout", nn.Dropout1d: "dropout",
    nn.Dropout2d: "dropout", nn.Dropout3d: "dropout", nn.Identity: "identity",
}
if hasattr(nn, "RMSNorm"):
    FUSABLE_MODULES[nn.RMSNorm] = "rms_norm"
_OPERATOR_NAMES = {getattr(operator, n): n for n in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg", "pos", "invert", "eq", "ne",
    "lt", "le", "gt", "ge", "and_", "or_", "xor", "getitem", "matmul")}


@dataclass
class Role:
    kind: str                 # input / output / state / meta / fusable / view / boundary
    op: str = ""              # the op's short name: "add", "layer_norm", "linear", ...
    why: str = ""             # for a boundary: why it stays eager


@dataclass
class Traced:
    gm: fx.GraphModule
    order: dict = field(default_factory=dict)      # node -> index in graph order
    values: dict = field(default_factory=dict)     # node -> the value it had on the inputs
    roles: dict = field(default_factory=dict)      # node -> Role
    deps: dict = field(default_factory=dict)       # node -> tensor nodes it reads (meta expanded)


def op_name(node: fx.Node, modules: dict) -> str:
    """A short readable name for a call node's op."""
    if node.op == "call_module":
        mod = modules[node.target]
        return FUSABLE_MODULES.get(type(mod), type(mod).__name__.lower())
    if node.op == "call_method":
        return str(node.target)
    t = node.target
    if t in _OPERATOR_NAMES:
        return _OPERATOR_NAMES[t]
    if t is builtins.getattr:
        return "getattr"
    return getattr(t, "__name__", str(t)).lstrip("_")


def is_tensorish(value) -> bool:
    if isinstance(value, torch.Tensor):
        return True
    return isinstance(value, (tuple, list)) and len(value) > 0 and all(
        isinstance(v, torch.Tensor) for v in value)


def trace(model: nn.Module, example_inputs: list) -> Traced | str:
    """The traced graph with each node's value and role, or a one-line reason it cannot be had."""
    try:
        gm = fx.symbolic_trace(model)
    except Exception as exc:  # noqa: BLE001 - any tracing failure is a reason, not a crash
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"torch.fx cannot trace {type(model).__name__}.forward: {type(exc).__name__}: {msg}"
    values: dict = {}

    class _Recorder(fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            values[n] = out
            return out

    try:
        with torch.no_grad():
            _Recorder(gm).run(*example_inputs)
    except Exception as exc:  # noqa: BLE001
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return (f"the traced graph of {type(model).__name__} failed on the example inputs: "
                f"{type(exc).__name__}: {msg}")
    t = Traced(gm=gm, values=values)
    modules = dict(gm.named_modules())
    for i, node in enumerate(gm.graph.nodes):
        t.order[node] = i
        t.roles[node] = classify(node, values, modules)
    for node in gm.graph.nodes:
        t.deps[node] = tensor_roots(t, node.all_input_nodes)
    return t


def tensor_roots(t: Traced, nodes) -> list:
    """The non-meta nodes behind `nodes` (a meta node stands for the nodes it was derived from)."""
    out: list = []
    stack = list(nodes)
    seen = set()
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if t.roles[n].kind == "meta":
            stack.extend(n.all_input_nodes)
        elif n not in out:
            out.append(n)
    return out


def classify(node: fx.Node, values: dict, modules: dict) -> Role:
    value = values.get(node)
    if node.op == "placeholder":
        return Role("input")
    if node.op == "output":
        return Role("output")
    if node.op == "get_attr":
        return Role("state") if isinstance(value, torch.Tensor) else Role("meta")
    if not is_tensorish(value):
        return Role("meta", op_name(node, modules))
    name = op_name(node, modules)
    if node.op == "call_module":
        return _module_role(node, modules[node.target], name)
    if node.op == "call_function" and node.target is not builtins.getattr and \
            node.target not in _OPERATOR_NAMES and not _public(node.target):
        return Role("boundary", name, f"{name}: no public torch spelling (a wrapped or "
                                      "user function)")
    if name in BOUNDARY:
        return Role("boundary", name, BOUNDARY[name])
    if "pool" in name:
        return Role("boundary", name, POOLING)
    if name == "getitem" and any(isinstance(a, fx.Node) and isinstance(values.get(a), torch.Tensor)
                                 for a in _flat(node.args[1:])):
        return Role("fusable", "index")
    if name == "dropout":
        training = node.kwargs.get("training", node.args[2] if len(node.args) > 2 else True)
        return Role("view", name) if training is False else Role(
            "boundary", name, "dropout in training mode: random, kept in torch")
    if name in VIEWS:
        return Role("view", name)
    if name in FUSABLE:
        return Role("fusable", name)
    return Role("boundary", name, f"{name}: no region rule for this op (kept in torch)")


def _flat(args) -> list:
    out = []
    for a in args:
        if isinstance(a, (tuple, list)):
            out.extend(_flat(a))
        elif isinstance(a, slice):
            out.extend([a.start, a.stop, a.step])
        else:
            out.append(a)
    return out


def _public(fn) -> bool:
    """Whether `fn` is reachable as torch.X, F.X, torch.special.X or math.X."""
    name = getattr(fn, "__name__", None)
    return name is not None and any(getattr(m, name, None) is fn
                                    for m in (torch, F, torch.special, math))


def _module_role(node: fx.Node, mod: nn.Module, name: str) -> Role:
    kind = FUSABLE_MODULES.get(type(mod))
    if kind is None:
        if "Pool" in type(mod).__name__:
            return Role("boundary", name, POOLING)
        if isinstance(mod, (nn.Linear, nn.Bilinear)):
            return Role("boundary", "linear", BOUNDARY["linear"])
        if isinstance(mod, nn.modules.conv._ConvNd):
            return Role("boundary", name, "a vendor convolution: stays eager")
        return Role("boundary", name, f"module {type(mod).__name__}: no region rule (kept eager "
                                      "as a whole module)")
    if kind == "dropout":
        return Role("view", kind) if not mod.training else Role(
            "boundary", kind, "dropout in training mode: random, kept in torch")
    if kind == "identity":
        return Role("view", kind)
    if kind == "batch_norm" and (mod.training or not mod.track_running_stats):
        return Role("boundary", kind, "batch norm in training mode (batch statistics): eager")
    if kind in ("embedding", "embedding_bag") and mod.max_norm is not None:
        return Role("boundary", kind, f"{kind} with max_norm renormalises its table in place")
    if kind in ("softmax", "log_softmax") and mod.dim is None:
        return Role("boundary", kind, f"{kind} with an implicit dim")
    if kind == "embedding_bag" and (len(node.args) + len(node.kwargs)) > 1:
        return Role("boundary", kind, "embedding_bag with offsets or per-sample weights")
    return Role("fusable", kind)


def regions(t: Traced) -> list[list]:
    """The fusable groups, each a list of nodes in graph order (see the module docstring)."""
    member: dict = {}                 # node -> group id
    groups: dict[int, set] = {}
    users: dict = {n: [] for n in t.order}
    for n, ds in t.deps.items():
        for d in ds:
            users[d].append(n)
    next_id = 0
    for node in t.gm.graph.nodes:
        if t.roles[node].kind not in ("fusable", "view"):
            continue
        group = {node}
        cands = []
        for a in node.all_input_nodes:
            g = member.get(a)
            if g is not None and g not in cands:
                cands.append(g)
        for g in sorted(cands, key=lambda g: -max(t.order[n] for n in groups[g])):
            if _convex(t, users, group | groups[g]):
                group |= groups.pop(g)
        for n in group:
            member[n] = next_id
        groups[next_id] = group
        next_id += 1
    out = []
    for group in groups.values():
        group = _trim_leading_views(t, group)
        if any(t.roles[n].kind == "fusable" for n in group):
            out.append(sorted(group, key=t.order.__getitem__))
    return sorted(out, key=lambda g: t.order[g[0]])


def _convex(t: Traced, users: dict, group: set) -> bool:
    """No path from a member through a non-member back into the group."""
    last = max(t.order[n] for n in group)
    stack = [u for n in group for u in users[n] if u not in group]
    seen = set()
    while stack:
        n = stack.pop()
        if n in seen or t.order[n] > last:
            continue
        seen.add(n)
        for u in users[n]:
            if u in group:
                return False
            stack.append(u)
    return True


def _trim_leading_views(t: Traced, group: set) -> set:
    """Drop views that read only tensors from outside (the region takes the view as an input);
    views of a parameter or buffer stay (state is the region's own)."""
    group = set(group)
    changed = True
    while changed:
        changed = False
        for n in sorted(group, key=t.order.__getitem__):
            if t.roles[n].kind != "view":
                continue
            if all(d not in group and t.roles[d].kind != "state" for d in t.deps[n]):
                group.discard(n)
                changed = True
    return group
