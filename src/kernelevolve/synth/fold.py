"""Constants folded before planning: a 0-d tensor made from a Python number inside forward
(`aten.scalar_tensor`: `torch.where(c, x, 0.0)`, nan_to_num's replacements, hardshrink's and
threshold's values; a 0-d `aten.full`: logsigmoid's zero) becomes that number in the fusable ops that read it.

As a kernel input it cost a torch call on every forward (about 1.5 us each: nan_to_num's three
made it 0.55x eager on 32768 floats) and a load inside the loop. Only readers that stay
fusable with a number in its place take it (a torch-kept op still gets the tensor, which
`torch.ops` needs), and the constant keeps its own dtype's value (float32's rounding of 0.1).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from kernelevolve.synth.capture import Graph, Ref, Value
from kernelevolve.synth.ops import ELEMENT_TYPES, normalise

_NUMBER = {"float32": lambda x: float(np.float32(x)), "int64": int, "int32": int, "bool": bool}


def fold_constants(g: Graph) -> Graph:
    consts = {n: _NUMBER[v.dtype](number) for n, v in g.values.items()
              if v.dtype in ELEMENT_TYPES and (number := _constant(v)) is not None}
    if not consts:
        return g
    values: dict[str, Value] = {}
    for name, v in g.values.items():
        args = substitute(v.args, consts)
        if name not in consts and args != v.args:
            folded = replace(v, args=args)
            norm = normalise(folded)
            if norm is not None and norm[0] != "view":
                v = folded
        values[name] = v
    used = {r for v in values.values() for r in v.refs()} | set(g.outputs)
    return replace(g, values={n: v for n, v in values.items() if n not in consts or n in used})


def _constant(v: Value) -> int | float | bool | None:
    """The number of a 0-d constant: scalar_tensor(c), or full((), c) (logsigmoid's zero)."""
    if v.op == "scalar_tensor" and len(v.args) == 1:
        number = v.args[0]
    elif v.op == "full" and len(v.args) == 2 and tuple(v.args[0]) == ():
        number = v.args[1]
    else:
        return None
    return number if isinstance(number, (int, float, bool)) else None


def substitute(args: tuple[Any, ...], consts: dict[str, Any]) -> tuple[Any, ...]:
    out = []
    for a in args:
        if isinstance(a, Ref) and a.name in consts:
            out.append(consts[a.name])
        elif isinstance(a, (tuple, list)):
            out.append(type(a)(substitute(tuple(a), consts)))
        else:
            out.append(a)
    return tuple(out)
