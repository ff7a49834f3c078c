"""The checks both planners share: how a kernel reads its operands (data by broadcast layout,
role operands by role), which dtypes it takes, which of its values it writes, and which value
gives its domain at run time; and the reduction records both build (`reduction_steps`: var's
two levels).

`KernelChecks` is one kernel's state while it is planned (every value's layout so far, the
inputs found) and the shared checks; a kind of kernel says what it covers by overriding the
class attributes and the `data_layout` / `role_layout` / output hooks (plan_row.RowChecks,
plan_mid.MidChecks). Each NotCovered names the value and what this kind of kernel covers.
"""
from __future__ import annotations

from typing import Any

from kernelevolve.synth.capture import Graph, NotCovered, Ref, Value
from kernelevolve.synth.kernel import (KInput, KNode, KOutput, Layout, NodeKind, Reduction,
                                       chan_block, strip)
from kernelevolve.synth.ops import ELEMENT_TYPES


def operand_role(kind: str, j: int) -> str | None:
    """Operands read as something other than data: bucketize's boundaries, an embedding
    lookup's table and indices."""
    if kind == NodeKind.BUCKETIZE and j == 1:
        return "boundaries"
    if kind == NodeKind.GATHER:
        return ("embedding table", "embedding indices")[j]
    return None


def role_layout(v: Value, role: str, domain: tuple[int, ...]) -> Layout:
    """Layouts of role operands: TABLE (1-D boundaries), GTABLE (an embedding table
    (num, D)), ROW (the indices: one per row of the (..., D) lookup)."""
    if role == "boundaries":
        if len(v.shape) != 1:
            raise NotCovered(f"bucketize boundaries {v.name} have shape {v.shape}; only 1-D "
                             "boundaries are covered")
        return Layout.TABLE
    if role == "embedding table":
        if len(v.shape) != 2 or v.shape[1] != domain[-1] or v.dtype != "float32":
            raise NotCovered(f"embedding table {v.name} ({v.dtype}, shape {v.shape}) is not a "
                             f"float32 (num, {domain[-1]}) table")
        return Layout.GTABLE
    if v.dtype not in ("int64", "int32") or strip(v.shape) != strip(domain[:-1]):
        raise NotCovered(f"embedding indices {v.name} ({v.dtype}, shape {v.shape}) do not index "
                         f"the rows of the lookup {domain}")
    return Layout.ROW


def reduction_steps(n: str, op: str, src: Ref, attrs, dtype: str, dim: int, lvl: int,
                    reduced: Layout) -> tuple[list[KNode], list[Reduction], Ref, int]:
    """A reduction node's records: (the nodes it adds before itself, its Reduction records, the
    value it reduces, its level). `lvl` is one above its source's; `reduced` is the layout of a
    reduced value (ROW in a row kernel, MID in a mid kernel). var takes two levels: the mean,
    then the mean of the squared deviations from it, which the var node reduces (two passes
    rather than one pass of sums and sums of squares: no cancellation)."""
    keep = attrs["keepdim"]
    if op != "var":
        return [], [Reduction(n, op, src.name, dim, keep, lvl)], src, lvl
    m, d, sq = Ref(n + "_mean"), Ref(n + "_dev"), Ref(n + "_sq")
    nodes = [KNode(m.name, NodeKind.REDUCE, "mean", (src,), attrs, reduced, dtype, lvl, ""),
             KNode(d.name, NodeKind.BINARY, "sub", (src, m), {}, Layout.FULL, dtype, lvl, ""),
             KNode(sq.name, NodeKind.BINARY, "mul", (d, d), {}, Layout.FULL, dtype, lvl, "")]
    reds = [Reduction(m.name, "mean", src.name, dim, keep, lvl),
            Reduction(n, "var", sq.name, dim, keep, lvl + 1, attrs.get("correction"))]
    return nodes, reds, sq, lvl + 1


_NAMED = ("float32", "int64", "int32", "bool")    # the order messages name dtypes in


def covered(dtypes: tuple[str, ...]) -> str:
    """("float32",) -> "only float32 is covered"; more -> "float32, int64 and bool are covered"."""
    dtypes = tuple(sorted(dtypes, key=_NAMED.index))
    if len(dtypes) == 1:
        return f"only {dtypes[0]} is covered"
    return f"{', '.join(dtypes[:-1])} and {dtypes[-1]} are covered"


def domain_source(inputs: list[KInput], nodes: list[KNode], kname: str):
    """The input whose run-time shape gives the kernel's domain (a full-size one), or an
    embedding lookup's (indices, table) pair."""
    full = next((i.name for i in inputs if i.layout == Layout.FULL), None)
    if full is not None:
        return full, None
    gather = next((n for n in nodes if n.kind == NodeKind.GATHER), None)
    if gather is None:
        raise NotCovered(f"kernel {kname} reads no full-size tensor")
    table, indices = gather.args[0].name, gather.args[1].name
    return indices, (indices, table)


class KernelChecks:
    """One kernel being planned: the layouts of its values, its inputs, the shared checks."""

    domain_name = "the kernel domain"
    broadcast_hint = ""                    # how data operands may broadcast, for the message
    input_dtypes: tuple[str, ...] = ELEMENT_TYPES
    output_layouts: tuple[Layout, ...] = ()
    output_layout_text = ""                # why a value of another layout cannot be written
    output_dtype_text = ""

    def __init__(self, g: Graph, names: list[str], domain: tuple[int, ...]):
        self.g, self.inside, self.domain = g, set(names), tuple(domain)
        self.layout: dict[str, Layout] = {}
        self.roles: dict[str, str] = {}
        self.inputs: list[KInput] = []

    # ---- what a kind of kernel covers -----------------------------------------------------

    def data_layout(self, shape: tuple[int, ...]) -> Layout | None:
        raise NotImplementedError

    def role_layout(self, node: Value, v: Value, role: str) -> Layout:
        raise NotImplementedError

    def lookup_shape_ok(self, shape: tuple[int, ...]) -> bool:
        """An embedding lookup is the domain (up to leading ones)."""
        return strip(tuple(shape)) == strip(self.domain)

    def output_dtype_ok(self, dtype: str, layout: Layout) -> bool:
        raise NotImplementedError

    def output_shape_error(self, name: str, shape: tuple[int, ...], layout: Layout) -> str | None:
        return None

    # ---- operands -------------------------------------------------------------------------

    def read(self, node: str, kind: str, args: tuple[Any, ...]) -> None:
        """Place the operands of graph node `node` that come from outside the kernel."""
        for j, a in enumerate(args):
            self.operand(node, a, operand_role(kind, j))

    def operand(self, node: str, a: Any, role: str | None) -> None:
        if not isinstance(a, Ref):
            return
        if a.name in self.inside:
            if role:
                raise NotCovered(f"{a.name} ({role}) is computed in the kernel")
            return
        if a.name in self.layout:
            if (role or "data") != self.roles.get(a.name, "data"):
                raise NotCovered(f"{a.name} is read both as {role or 'data'} and as "
                                 f"{self.roles.get(a.name, 'data')}")
            return
        v = self.g.values[a.name]
        lay = self.role_layout(self.g.values[node], v, role) if role else \
            self.data_layout(tuple(v.shape))
        if lay is None:
            raise NotCovered(f"{v.name} of shape {v.shape} does not broadcast"
                             f"{self.broadcast_hint} over {self.domain_name} {self.domain}")
        dtypes = ELEMENT_TYPES if role else self.input_dtypes
        if v.dtype not in dtypes:
            raise NotCovered(f"kernel input {v.name} has dtype {v.dtype}; {covered(dtypes)}")
        self.layout[a.name] = lay
        if role:
            self.roles[a.name] = role
        block = chan_block(v.shape, self.domain) if lay == Layout.CHAN else None
        self.inputs.append(KInput(a.name, lay, v.dtype, block))

    def refs(self, args: tuple[Any, ...]) -> list[str]:
        return [a.name for a in args if isinstance(a, Ref)]

    # ---- values ---------------------------------------------------------------------------

    def check_full(self, v: Value) -> None:
        """A full-size value must have the domain's shape (up to leading ones)."""
        if strip(tuple(v.shape)) != strip(self.domain):
            raise NotCovered(f"{v.op} gives shape {v.shape}, not {self.domain_name} "
                             f"{self.domain}")

    def check_lookup(self, v: Value) -> None:
        if not self.lookup_shape_ok(v.shape):
            raise NotCovered(f"embedding lookup of shape {v.shape} is not {self.domain_name} "
                             f"{self.domain}")

    def outputs(self, names: list[str], users: dict[str, list[str]]) -> list[KOutput]:
        """The values read after the kernel, each checked to be one this kernel can write."""
        out = []
        for n in names:
            if all(u in self.inside for u in users[n]):
                continue
            v, lay = self.g.values[n], self.layout[n]
            if lay not in self.output_layouts:
                raise NotCovered(f"kernel output {n} {self.output_layout_text}")
            if not self.output_dtype_ok(v.dtype, lay):
                raise NotCovered(f"kernel output {n} has dtype {v.dtype}; "
                                 f"{self.output_dtype_text}")
            error = self.output_shape_error(n, tuple(v.shape), lay)
            if error:
                raise NotCovered(error)
            out.append(KOutput(n, lay, v.shape, v.dtype))
        return out
