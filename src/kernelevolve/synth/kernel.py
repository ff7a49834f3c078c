"""The planner's vocabulary: kernels, their nodes, inputs and outputs, and layouts.

A kernel works on a *domain* (R..., C): the shape of its largest elementwise value, seen as
`rows x cols` with cols the last dim. Each value in a kernel has a *layout* saying what it
varies with: "full" (row and column), "row" (one value per row), "col" (one value per column:
a per-feature parameter), "chan" (a kernel input that is one value per group of rows: a
per-channel parameter broadcast over the rows of (B, C, H, W)) or "scalar"; mid reduction kernels add "mid" (a reduced value).
Operands read in a special role have their own layouts: "table" (bucketize's 1-D
boundaries), "gtable" (an embedding table, rows read by index) and "index" (an embedding
lookup's indices inside a mid reduction).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kernelevolve.synth.capture import NotCovered, Value


@dataclass
class KNode:
    name: str
    kind: str                  # unary, binary, where, clamp, cast, reduce, view
    op: str
    args: tuple[Any, ...]      # Refs (kernel inputs or earlier nodes) and Python scalars
    attrs: dict[str, Any]
    layout: str
    dtype: str
    level: int                 # the pass from which this value is available
    source_op: str             # the ATen op it came from (for explain)


@dataclass
class KInput:
    name: str                  # the graph value read
    layout: str
    dtype: str
    # "chan" inputs: the block [a, b) of domain dims they vary along (a (C, 1, 1) bias over
    # (B, C, H, W) is (1, 2)): row r reads element (r / prod(dims b..-1)) % prod(dims a..b)
    block: tuple[int, int] | None = None


@dataclass
class KOutput:
    name: str
    layout: str                # full or row
    shape: tuple[int, ...]     # case-0 shape (the emitter uses the live tensors' shapes)
    dtype: str = "float32"


@dataclass
class Kernel:
    name: str
    nodes: list[KNode]
    inputs: list[KInput]
    outputs: list[KOutput]
    domain: tuple[int, ...]
    domain_of: str             # a value whose shape is the domain at run time (input or output)
    levels: int                # number of reduction passes
    mid_dim: int | None = None  # a mid reduction kernel: the reduced (non-last) dim
    # With no full-size input, an embedding lookup gives the domain: (indices, table) names,
    # domain = indices.shape + (table.shape[1],) (domain_of is then the indices).
    lookup: tuple[str, str] | None = None

    @property
    def has_reduction(self) -> bool:
        return self.levels > 0

    @property
    def flat(self) -> bool:
        """Pure elementwise with no per-column or per-row operand: index the data flat."""
        return self.levels == 0 and all(i.layout in ("full", "scalar", "table")
                                        for i in self.inputs)


# ---- layouts ------------------------------------------------------------------------------

def strip(shape: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def layout_of_shape(shape: tuple[int, ...], domain: tuple[int, ...]) -> str | None:
    n, cols = math.prod(shape), domain[-1] if domain else 1
    if n == 1:
        return "scalar"
    if strip(shape) == strip(domain):
        return "full"
    if shape and shape[-1] == cols and n == cols:
        return "col"
    rows_shape = strip(domain[:-1])
    if shape and shape[-1] == 1 and strip(shape[:-1]) == rows_shape:
        return "row"
    if chan_block(shape, domain) is not None:
        return "chan"
    return None


def chan_block(shape: tuple[int, ...], domain: tuple[int, ...]) -> tuple[int, int] | None:
    """The dims [a, b) a broadcast operand varies along, when they are one block of the
    domain's dims ending before the last (the (C, 1, 1) bias or scale after a convolution,
    a (1, N, 1) over (B, N, D)); None for any other shape."""
    nd = len(domain)
    if len(shape) > nd:
        return None
    padded = (1,) * (nd - len(shape)) + tuple(shape)
    varying = [i for i, size in enumerate(padded) if size != 1]
    if not varying:
        return None
    a, b = varying[0], varying[-1] + 1
    if b >= nd or any(padded[i] != domain[i] for i in range(a, b)):
        return None
    return a, b


def operand_role(kind: str, j: int) -> str | None:
    """Operands read as something other than data: bucketize's boundaries, an embedding
    lookup's table and indices."""
    if kind == "bucketize" and j == 1:
        return "boundaries"
    if kind == "gather":
        return ("embedding table", "embedding indices")[j]
    return None


def role_layout(v: Value, role: str, domain: tuple[int, ...]) -> str:
    """Layouts of role operands: "table" (1-D boundaries), "gtable" (an embedding table
    (num, D)), "row" (the indices: one per row of the (..., D) lookup)."""
    if role == "boundaries":
        if len(v.shape) != 1:
            raise NotCovered(f"bucketize boundaries {v.name} have shape {v.shape}; only 1-D "
                             "boundaries are covered")
        return "table"
    if role == "embedding table":
        if len(v.shape) != 2 or v.shape[1] != domain[-1] or v.dtype != "float32":
            raise NotCovered(f"embedding table {v.name} ({v.dtype}, shape {v.shape}) is not a "
                             f"float32 (num, {domain[-1]}) table")
        return "gtable"
    if v.dtype not in ("int64", "int32") or strip(v.shape) != strip(domain[:-1]):
        raise NotCovered(f"embedding indices {v.name} ({v.dtype}, shape {v.shape}) do not index "
                         f"the rows of the lookup {domain}")
    return "row"


def row_shape_ok(shape, domain) -> bool:
    """A row value that broadcasts against a full one must keep the reduced dim as 1."""
    return bool(shape) and shape[-1] == 1 and len(shape) <= len(domain)


def domain_source(inputs: list[KInput], nodes: list[KNode], kname: str):
    """The input whose run-time shape gives the kernel's domain (a full-size one), or an
    embedding lookup's (indices, table) pair."""
    full = next((i.name for i in inputs if i.layout == "full"), None)
    if full is not None:
        return full, None
    gather = next((n for n in nodes if n.kind == "gather"), None)
    if gather is None:
        raise NotCovered(f"kernel {kname} reads no full-size tensor")
    table, indices = gather.args[0].name, gather.args[1].name
    return indices, (indices, table)
