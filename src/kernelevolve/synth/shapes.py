"""Call-time shapes for views whose traced sizes differ between cases.

A view of a torch value stays a torch call, and the trace gives it the case's literal sizes
(`x.view(x.size(0) * x.size(1), -1)` traces to `view(x, [128, -1])`; PReLU's decomposition
views its (C,) weight as `[1, C, 1, 1]`). When the literal differs between the traced cases
(the held-out one included), each output dim is written in terms of the source's run-time
shape: a size every case shares stays a literal, a size that is the product of a run of the
source's dims in every case becomes that product (`x.shape[0:2].numel()`), and at most one
other dim becomes -1. The expression is kept only when it reproduces every traced case's shape;
A size that no run of the source's dims gives may come from a forward input instead
(`("of", input, a, b)`: a group norm's (N, G, D) result viewed back as the input's
(N, C, H, W)). It goes in the view's `attrs["call_shape"]` (items: an int, `("dims", a, b)`
for prod(shape[a:b]) of the source, or the `("of", ...)` form), which module.torch_step renders
and plan._check_kept_args accepts.
"""
from __future__ import annotations

import math
from typing import Any

RESHAPES = ("view", "_unsafe_view", "reshape")


def annotate_call_shapes(graphs: dict[str, Any]) -> None:
    """Set `call_shape` on every view whose sizes differ between the graphs (all share names)."""
    gs = list(graphs.values())
    for name, v in gs[0].values.items():
        if v.op not in RESHAPES or not v.args or not hasattr(v.args[0], "name"):
            continue
        if all(g.values[name].args == v.args for g in gs):
            continue
        src = v.args[0].name
        ins = [tuple(g.values[src].shape) for g in gs]
        outs = [tuple(g.values[name].shape) for g in gs]
        others = {i: [tuple(g.values[i].shape) for g in gs] for i in gs[0].inputs if i != src}
        expr = call_shape(ins, outs, others)
        if expr is not None:
            for g in gs:
                g.values[name].attrs["call_shape"] = expr


def call_shape(ins: list[tuple[int, ...]], outs: list[tuple[int, ...]],
               others: dict[str, list[tuple[int, ...]]] | None = None) -> tuple | None:
    """Per output dim: a shared literal, ("dims", a, b), ("of", input, a, b) or -1 (at most
    one); None when the output shapes cannot be written from the source's (and the other
    forward inputs') shapes so that every case comes out."""
    expr: list[Any] = []
    cursor, free = 0, False
    others = others or {}
    for j in range(len(outs[0])):
        sizes = [o[j] for o in outs]
        if len(set(sizes)) == 1:
            expr.append(sizes[0])
            continue
        run = _run_of_dims(ins, sizes, cursor)
        other = next(((name, r) for name, shapes in others.items()
                      if (r := _run_of_dims(shapes, sizes, j if j < len(shapes[0]) else 0))
                      is not None), None)
        if run is not None:
            expr.append(("dims", *run))
            cursor = run[1]
        elif other is not None:
            expr.append(("of", other[0], *other[1]))
        elif not free:
            expr.append(-1)
            free = True
        else:
            return None
    out = tuple(expr)
    cases = [{name: shapes[c] for name, shapes in others.items()} for c in range(len(ins))]
    return out if all(evaluate(out, i, o_) == o for i, o, o_ in zip(ins, outs, cases)) else None


def _run_of_dims(ins, sizes, cursor: int) -> tuple[int, int] | None:
    n = len(ins[0])
    for a in [*range(cursor, n), *range(cursor)]:
        for b in range(a + 1, n + 1):
            if all(math.prod(i[a:b]) == s for i, s in zip(ins, sizes)):
                return a, b
    return None


def evaluate(expr: tuple, shape: tuple[int, ...],
             others: dict[str, tuple[int, ...]] | None = None) -> tuple[int, ...]:
    """The output shape `expr` gives for a source of `shape` and forward inputs of the shapes
    `others` (-1 resolved as torch does)."""
    def size(d):
        if not isinstance(d, tuple):
            return d
        if d[0] == "of":
            return math.prod((others or {})[d[1]][d[2]:d[3]])
        return math.prod(shape[d[1]:d[2]])
    dims = [size(d) for d in expr]
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        dims[dims.index(-1)] = math.prod(shape) // known if known else 0
    return tuple(dims)


def render(expr: tuple, src: str, name_of=lambda name: name) -> str:
    """The Python list expression of `expr` over the source tensor named `src` (`name_of`:
    the Python name of a forward input). A flattening to one dim is `[-1]`: a view keeps the
    element count, and `x.shape[0:3].numel()` cost 1.1 us more on every call."""
    if len(expr) == 1:
        return "[-1]"
    parts = []
    for d in expr:
        if isinstance(d, tuple):
            t = name_of(d[1]) if d[0] == "of" else src
            a, b = d[-2:]
            parts.append(f"{t}.shape[{a}]" if b == a + 1 else f"{t}.shape[{a}:{b}].numel()")
        else:
            parts.append(str(d))
    return f"[{', '.join(parts)}]"
