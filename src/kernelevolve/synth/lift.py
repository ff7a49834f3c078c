"""Numbers that differ between cases, read from the model at call time.

`Model.__init__(head_dim)` keeps `self.scale = 1 / sqrt(head_dim)` and forward multiplies by
it: the trace inlines the number (`mul(%bmm, 0.125)`), and when the cases construct the model
with different arguments their graphs differ in that number alone. One kernel cannot bake them
all in, so such a problem was refused. Here each differing number that a numeric attribute of
the model equals in every traced case (the harness's held-out one included) becomes a 0-d
float32 input the kernels read (a `scalar` operand), held by `ModelNew` as a non-persistent
buffer made from that attribute after the reference's own `__init__` has run
(`module.init_source`). A difference no attribute explains is left alone, and capture refuses
the problem as before.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from kernelevolve.synth.graph import SIZE_ARG_OPS, Graph, Ref, Value
from kernelevolve.synth.lift_sizes import Size, add_size_params, size_for

PREFIX = "_ke_attr_"


def lift_case_numbers(graphs: dict[str, Graph]) -> dict[str, Graph]:
    """`graphs` with every number that differs between them and that one model attribute
    explains replaced by a reference to a new 0-d parameter (all graphs alike); unchanged when
    there is nothing to lift or any difference is of another kind."""
    gs = list(graphs.values())
    if len(gs) < 2:
        return graphs
    spots = _differing_numbers(gs)
    if not spots:
        return graphs
    lifted: dict[tuple[str, tuple[int, ...]], str] = {}
    sized: dict[tuple[str, tuple[int, ...]], Size] = {}
    for spot in spots:
        attr = _attribute_for(gs, spot)
        if attr is not None:
            lifted[spot] = attr
            continue
        size = size_for(gs, [_at(g.values[spot[0]].args, spot[1]) for g in gs])
        if size is None:
            return graphs
        sized[spot] = size   # made of an input's size: read at call time (lift_sizes.py)
    return {case: add_size_params(_rewrite(g, lifted), sized, _put)
            for case, g in graphs.items()}


def _numbers_at(args: tuple, path: tuple[int, ...] = ()) -> dict[tuple[int, ...], Any]:
    out: dict[tuple[int, ...], Any] = {}
    for i, a in enumerate(args):
        if isinstance(a, (tuple, list)):
            out.update(_numbers_at(tuple(a), (*path, i)))
        elif isinstance(a, (int, float)) and not isinstance(a, bool):
            out[(*path, i)] = a
    return out


def _differing_numbers(gs: list[Graph]) -> list[tuple[str, tuple[int, ...]]] | None:
    """(value, argument path) of each number that differs between the graphs, or None when
    they differ in anything else (names, ops, shapes' ones, dtypes, kwargs, structure)."""
    base = gs[0]
    spots = []
    for name, v in base.values.items():
        if v.op in SIZE_ARG_OPS:
            continue
        here = _numbers_at(v.args)
        for g in gs[1:]:
            w = g.values.get(name)
            if w is None or w.op != v.op or len(w.args) != len(v.args):
                return None
            there = _numbers_at(w.args)
            if there.keys() != here.keys():
                return None
            for path, number in here.items():
                nan = there[path] != there[path] and number != number   # NaN alike
                if there[path] != number and not nan and (name, path) not in spots:
                    spots.append((name, path))
    return spots


def _attribute_for(gs: list[Graph], spot: tuple[str, tuple[int, ...]]) -> str | None:
    """The first model attribute (by name) equal, as float32, to the number at `spot` in every
    graph."""
    name, path = spot
    wanted = [np.float32(_at(g.values[name].args, path)) for g in gs]
    common = set(gs[0].numbers)
    for g in gs[1:]:
        common &= set(g.numbers)
    for attr in sorted(common):
        if all(np.float32(g.numbers[attr]) == w for g, w in zip(gs, wanted)):
            return attr
    return None


def _at(args: tuple, path: tuple[int, ...]) -> Any:
    for i in path:
        args = args[i]
    return args


def _put(args: tuple, path: tuple[int, ...], new: Any) -> tuple:
    i, rest = path[0], path[1:]
    item = _put(tuple(args[i]), rest, new) if rest else new
    return (*args[:i], type(args[i])(item) if rest and isinstance(args[i], list) else item,
            *args[i + 1:])


def _rewrite(g: Graph, lifted: dict[tuple[str, tuple[int, ...]], str]) -> Graph:
    params = dict(g.params)
    values: dict[str, Value] = {}
    for attr in sorted(set(lifted.values())):
        pname = PREFIX + attr.replace(".", "__")
        values[pname] = Value(pname, "param", (), (), "float32")
        params[pname] = pname
    values.update(g.values)
    for (name, path), attr in lifted.items():
        v = values[name]
        values[name] = replace(v, args=_put(v.args, path, Ref(PREFIX + attr.replace(".", "__"))))
    return replace(g, values=values, params=params,
                   lifted={PREFIX + a.replace(".", "__"): a for a in lifted.values()})
