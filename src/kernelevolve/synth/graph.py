"""The synthesizer's IR: a traced graph of values (inputs, parameters, op nodes) and references
between them, with the signature that says whether two cases' traces are one plan. Made by
capture.py; read by every planner and emitter."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class NotCovered(Exception):
    """The problem (or part of it) falls outside what the synthesizer handles; says why."""


@dataclass(frozen=True)
class Ref:
    """A reference to another IR value (a graph input, a parameter or a node)."""

    name: str

    def __repr__(self) -> str:
        return f"%{self.name}"


@dataclass
class Value:
    """One IR value: a graph input, a parameter/buffer, or an op node."""

    name: str
    op: str                      # "input", "param", or the normalised op name (see OPS in plan)
    args: tuple[Any, ...] = ()   # Refs and Python scalars
    shape: tuple[int, ...] = ()
    dtype: str = "float32"
    attrs: dict[str, Any] = field(default_factory=dict)   # target, dims, keepdim, index ...

    def refs(self) -> list[str]:
        """Every value this one reads, those inside a list argument (cat's tensors) too: a
        kernel value only a torch-kept cat read was not written out (NameError in forward)."""
        return [a.name for a in _flat(self.args) if isinstance(a, Ref)]


def _flat(args) -> list[Any]:
    out: list[Any] = []
    for a in args:
        out.extend(_flat(a) if isinstance(a, (tuple, list)) else [a])
    return out


@dataclass
class Graph:
    values: dict[str, Value]     # in topological order
    inputs: list[str]            # forward's tensor inputs, in order
    params: dict[str, str]       # value name -> qualified parameter/buffer name
    outputs: list[str]
    forward_args: list[str]      # forward's argument names (from the trace's inputs)
    # the model's numeric attributes in this case (path -> number; lift.py reads them)
    numbers: dict[str, float] = field(default_factory=dict)
    # parameters lift.py made: qualified name -> the model attribute they hold
    lifted: dict[str, str] = field(default_factory=dict)
    # parameters lift_sizes.py made: name -> (input index, dim, coefficient, "mul" | "div")
    sized: dict[str, tuple] = field(default_factory=dict)

    def users(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {n: [] for n in self.values}
        for v in self.values.values():
            for r in v.refs():
                out[r].append(v.name)
        for o in self.outputs:
            out[o].append("<output>")
        return out

    def signature(self) -> list[tuple]:
        """Ops, arguments and which dims are 1: equal across cases when one plan serves them
        all. Only a view's sizes may differ (a kept view reads them at call time or is
        refused, see shapes.py and plan._check_kept_args; a fused one follows its kernel)."""
        return [_value_signature(v) for v in self.values.values()]


def _value_signature(v: Value) -> tuple:
    sizes = v.op in SIZE_ARG_OPS
    kwargs = tuple(sorted((k, _sig_arg(a, sizes)) for k, a in v.attrs.get("kwargs", {}).items()))
    return (v.name, v.op, _sig_arg(v.args, sizes), kwargs, v.dtype,
            tuple(d == 1 for d in v.shape))


# Ops whose int arguments are sizes, not values.
SIZE_ARG_OPS = frozenset({"view", "_unsafe_view", "reshape", "expand", "broadcast_in_dim"})


def _sig_arg(a: Any, sizes: bool) -> Any:
    if isinstance(a, tuple):
        return tuple(_sig_arg(x, sizes) for x in a)
    if sizes and isinstance(a, int) and not isinstance(a, bool):
        return "·"
    if isinstance(a, float) and a != a:
        return "nan"                      # NaN != NaN would make every case's graph differ
    return a
