"""What both emitters' kernel writers share: the typing of a node's operands (torch's
promotion rules, the type a node computes in) and the kernel's names for its values."""
from __future__ import annotations

from typing import Any

from kernelevolve.synth.capture import Ref
from kernelevolve.synth.kernel import KNode, Kernel

INTS = ("int64", "int32")
COMPARE = {"eq", "ne", "lt", "le", "gt", "ge", "and", "or"}
_RANK = {"bool": 0, "int32": 1, "int64": 2, "float32": 3}


def promote(dtypes: list[str]) -> str:
    """torch's type promotion for a comparison's operands: tensors by category, then Python
    scalars ("float", "int") only when they are of a higher category."""
    tensors = [d for d in dtypes if d in _RANK]
    t = max(tensors, key=_RANK.get) if tensors else "float32"
    if "float" in dtypes and t != "float32":
        return "float32"
    if "int" in dtypes and t == "bool":
        return "int64"
    return t


def compute_dtype(n: KNode, operand_dtypes: list[str]) -> str:
    """The type a node computes in (its operands are cast to it)."""
    if n.kind == "binary" and n.op in COMPARE:
        return promote(operand_dtypes)
    if n.kind in ("cast", "view") or (n.kind == "unary" and n.op == "not"):
        return operand_dtypes[0]
    if n.kind == "bucketize":
        return operand_dtypes[0]
    return n.dtype


class KernelWriterBase:
    """A kernel's inputs (`in0`...), outputs (`out0`...), nodes and embedding lookups, the
    types of its operands, and its schedule (`s`, schedule.py)."""

    def __init__(self, k: Kernel):
        if k.schedule is None:
            raise ValueError(f"kernel {k.name} has no schedule (plan() gives each one)")
        self.k, self.s = k, k.schedule
        self.nodes = {n.name: n for n in k.nodes}
        self.inputs = {i.name: (f"in{j}", i) for j, i in enumerate(k.inputs)}
        self.outputs = {o.name: f"out{j}" for j, o in enumerate(k.outputs)}
        self.gathers = [n for n in k.nodes if n.kind == "gather"]

    def dtype(self, a: Any) -> str:
        """A value's dtype; Python scalars are "bool", "int" or "float" (weak types)."""
        if isinstance(a, bool):
            return "bool"
        if not isinstance(a, Ref):
            return "int" if isinstance(a, int) else "float"
        if a.name in self.inputs:
            return self.inputs[a.name][1].dtype
        return self.nodes[a.name].dtype

    def operands(self, n: KNode) -> tuple[str, list[tuple[Any, str, bool]]]:
        """(the type `n` computes in, [(operand, its dtype, cast to that type?)]): a where's
        condition, bucketize's boundaries and a cast's or view's source keep their own type."""
        dts = [self.dtype(a) for a in n.args]
        t = compute_dtype(n, dts)
        out = []
        for j, (a, d) in enumerate(zip(n.args, dts)):
            keep = (n.kind == "where" and j == 0) or (n.kind == "bucketize" and j == 1) or \
                n.kind in ("cast", "view")
            out.append((a, d, isinstance(a, Ref) and not keep and d != t))
        return t, out
