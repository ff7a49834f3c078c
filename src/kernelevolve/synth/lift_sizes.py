"""Numbers that differ between cases because they are made of an input's size.

KLDivLoss(reduction='batchmean') divides the summed loss by the batch size, and cross_entropy
with label smoothing scales its smoothing term by eps / C: the trace inlines `div(s, 64)` or
`mul(s, 0.0333)`, so cases of different sizes give graphs that differ in that number alone.
When no model attribute explains it (lift.py), a number that is, in every traced case (the
harness's held-out one included), one input dim's size (or its square root: an attention
scale 1 / sqrt(x.size(-1))) times a constant, or a constant divided by it, becomes a 0-d float32 parameter the forward computes from that input's run-time shape
(`module.forward_prologue`) and the kernels read as a scalar operand, as sizes are read.
Dims of equal sizes in every case (a batch shared by the logits and the targets) are one
size; when two sizes that differ fit, the number is not lifted (capture refuses as before).
"""
from __future__ import annotations

import math
from dataclasses import replace

from kernelevolve.synth.graph import Graph, Ref, Value

PREFIX = "_ke_size_"
# (input index, dim, coefficient, kind): coefficient * size ("mul"), coefficient / size ("div"),
# coefficient * sqrt(size) ("mulsqrt") or coefficient / sqrt(size) ("divsqrt")
Size = tuple[int, int, float, str]


def size_for(gs: list[Graph], numbers: list[float]) -> Size | None:
    """How `numbers` (one per graph) follow one input dim's size, or None: also None when
    dims whose sizes differ between the cases both fit (4 and 3 are B in two cases and
    sqrt(D) too): the traced cases cannot say which one the forward read."""
    if any(not isinstance(n, (int, float)) or not math.isfinite(n) for n in numbers):
        return None
    fits: dict[tuple[int, ...], Size] = {}
    base = gs[0]
    for name in base.inputs:
        index, shape = base.values[name].attrs["index"], base.values[name].shape
        for dim in range(len(shape)):
            sizes = tuple(g.values[name].shape[dim] for g in gs)
            if len(set(sizes)) < 2 or 0 in sizes or sizes in fits:
                continue
            for kind in KINDS:
                coef = numbers[0] / _apply(1.0, sizes[0], kind)
                if all(_close(_apply(coef, s, kind), n) for s, n in zip(sizes, numbers)):
                    fits[sizes] = (index, dim, coef, kind)
                    break
    return next(iter(fits.values())) if len(fits) == 1 else None


KINDS = ("mul", "div", "mulsqrt", "divsqrt")


def _apply(coef: float, size: int, kind: str) -> float:
    base = size ** 0.5 if kind.endswith("sqrt") else size
    return coef * base if kind.startswith("mul") else coef / base


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
    size = f"{x}.shape[{dim}]" + (" ** 0.5" if kind.endswith("sqrt") else "")
    value = f"{coef!r} {'*' if kind.startswith('mul') else '/'} {size}"
    return f"torch.full((), {value}, dtype=torch.float32, device={x}.device)"
