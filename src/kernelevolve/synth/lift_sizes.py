"""Numbers that differ between cases because they are made of an input's size.

KLDivLoss(reduction='batchmean') divides the summed loss by the batch size, and cross_entropy
with label smoothing scales its smoothing term by eps / C: the trace inlines `div(s, 64)` or
`mul(s, 0.0333)`, so cases of different sizes give graphs that differ in that number alone.
When no model attribute explains it (lift.py), a number that is, in every traced case (the
harness's held-out one included), one input dim's size times a constant, or a constant divided
by it, becomes a 0-d float32 parameter the forward computes from that input's run-time shape
(`module.forward_prologue`) and the kernels read as a scalar operand, as sizes are read.
The first (input, dim) that fits every case is taken, the size itself before a ratio.
"""
from __future__ import annotations

import math
from dataclasses import replace

from kernelevolve.synth.graph import Graph, Ref, Value

PREFIX = "_ke_size_"
# (input index, dim, coefficient, "mul" | "div"): coefficient * size, or coefficient / size
Size = tuple[int, int, float, str]


def size_for(gs: list[Graph], numbers: list[float]) -> Size | None:
    """How `numbers` (one per graph) follow one input dim's size, or None."""
    if any(not isinstance(n, (int, float)) or not math.isfinite(n) for n in numbers):
        return None
    base = gs[0]
    for name in base.inputs:
        index, shape = base.values[name].attrs["index"], base.values[name].shape
        for dim in range(len(shape)):
            sizes = [g.values[name].shape[dim] for g in gs]
            if len(set(sizes)) < 2 or 0 in sizes:
                continue
            for kind in ("mul", "div"):
                coef = numbers[0] / sizes[0] if kind == "mul" else numbers[0] * sizes[0]
                if all(_close(_apply(coef, s, kind), n) for s, n in zip(sizes, numbers)):
                    return index, dim, coef, kind
    return None


def _apply(coef: float, size: int, kind: str) -> float:
    return coef * size if kind == "mul" else coef / size


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)


def param_name(size: Size) -> str:
    index, dim, coef, kind = size
    return f"{PREFIX}{index}_{dim}_{kind}_{abs(hash(coef)) % 10**8}"


def add_size_params(g: Graph, sized: dict[tuple[str, tuple[int, ...]], Size], put) -> Graph:
    """`g` with each spot's number replaced by a reference to its size parameter (`put` is
    lift.py's argument writer)."""
    if not sized:
        return g
    values: dict[str, Value] = {}
    params, table = dict(g.params), dict(g.sized)
    for size in dict.fromkeys(sized.values()):
        pname = param_name(size)
        values[pname] = Value(pname, "param", (), (), "float32")
        params[pname] = pname
        table[pname] = size
    values.update(g.values)
    for (name, path), size in sized.items():
        v = values[name]
        values[name] = replace(v, args=put(v.args, path, Ref(param_name(size))))
    return replace(g, values=values, params=params, sized=table)


def size_expr(size: Size, forward_args: list[str]) -> str:
    """The forward's line computing a size parameter from its input's run-time shape."""
    index, dim, coef, kind = size
    x = forward_args[index]
    value = f"{coef!r} * {x}.shape[{dim}]" if kind == "mul" else f"{coef!r} / {x}.shape[{dim}]"
    return f"torch.full((), {value}, dtype=torch.float32, device={x}.device)"
