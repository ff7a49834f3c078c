"""The planner's vocabulary: kernels, their nodes, inputs, outputs and reductions, and layouts.

A kernel works on a *domain* (R..., C): the shape of its largest elementwise value, seen as
`rows x cols` with cols the last dim. Each value in a kernel has a `Layout` saying what it
varies with: FULL (row and column), ROW (one value per row), COL (one value per column: a
per-feature parameter), CHAN (a kernel input that is one value per group of rows: a
per-channel parameter broadcast over the rows of (B, C, H, W)) or SCALAR; mid reduction
kernels add MID (a reduced value, or an input of the reduced shape) and read ROW as one value
per step of the walk down the reduced dim (a (B, S) mask over (B, S, D)). Operands read in a
special role have their own layouts: TABLE (bucketize's 1-D boundaries), GTABLE (an embedding
table, rows read by index) and INDEX (an embedding lookup's indices inside a mid reduction).

Every enum here is a `str` enum: a member equals (and hashes as) its value, so `layout ==
"full"` and `{"full": ...}[layout]` read the same as before the plan was typed.
The kernel's `schedule` (schedule.py) holds the decisions both emitters read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelevolve.synth.schedule import Schedule


class StrEnum(str, Enum):
    """A str enum that formats as its value (f"{Layout.FULL}" is "full")."""
    __str__ = str.__str__
    __format__ = str.__format__


class Layout(StrEnum):
    FULL = "full"
    ROW = "row"
    COL = "col"
    CHAN = "chan"
    SCALAR = "scalar"
    MID = "mid"
    TABLE = "table"
    GTABLE = "gtable"
    INDEX = "index"
    OUTER = "outer"        # mid kernels: an input of one value per outer index (a count)


class NodeKind(StrEnum):
    UNARY = "unary"
    BINARY = "binary"
    WHERE = "where"
    CLAMP = "clamp"
    CAST = "cast"
    BUCKETIZE = "bucketize"
    GATHER = "gather"          # an embedding lookup: (table, indices)
    REDUCE = "reduce"
    VIEW = "view"


class LoopKind(StrEnum):
    """How a kernel walks its domain."""
    FLAT = "flat"    # elementwise, no per-row or per-column operand: one flat loop
    ROWS = "rows"    # one row at a time: a walk per reduction level, then a store walk
    MID = "mid"      # (outer, F, inner) -> (outer, inner): one walk down the reduced dim


@dataclass
class KNode:
    name: str
    kind: NodeKind
    op: str
    args: tuple[Any, ...]      # Refs (kernel inputs or earlier nodes) and Python scalars
    attrs: dict[str, Any]
    layout: Layout
    dtype: str
    level: int                 # the pass from which this value is available
    source_op: str             # the ATen op it came from (for explain)


@dataclass
class KInput:
    name: str                  # the graph value read
    layout: Layout
    dtype: str
    # CHAN inputs: the block [a, b) of domain dims they vary along (a (C, 1, 1) bias over
    # (B, C, H, W) is (1, 2)): row r reads element (r / prod(dims b..-1)) % prod(dims a..b)
    block: tuple[int, int] | None = None


@dataclass
class KOutput:
    name: str
    layout: Layout             # FULL or ROW (MID in a mid kernel)
    shape: tuple[int, ...]     # case-0 shape (the emitter uses the live tensors' shapes)
    dtype: str = "float32"


_IDENTITY = {"sum": 0.0, "mean": 0.0, "var": 0.0, "max": -math.inf, "min": math.inf}


@dataclass(frozen=True)
class Reduction:
    """One reduction of a kernel: node `node` holds op(`source`) over `dim`; it is available
    from pass `level` (a mid kernel's are all level 1). var reduces the squared deviations
    from its mean (`source` is the `_sq` node) and divides by the count less `correction`."""
    node: str
    op: str                    # sum, mean, var, max, min
    source: str
    dim: int                   # of the reduced value's shape, non-negative
    keepdim: bool
    level: int
    correction: float | None = None

    def __post_init__(self):
        if self.op not in _IDENTITY:
            raise ValueError(f"no reduction {self.op!r}")
        if (self.op == "var") != (self.correction is not None):
            raise ValueError("a correction is var's alone")

    @property
    def identity(self) -> float:
        """The accumulator's starting value (padding lanes read it too)."""
        return _IDENTITY[self.op]

    @property
    def propagates_nan(self) -> bool:
        """max and min make the result NaN once one element is (torch's amax / amin); a sum
        does so by arithmetic."""
        return self.op in ("max", "min")

    @property
    def averages(self) -> bool:
        return self.op in ("mean", "var")


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
    loop: LoopKind = LoopKind.ROWS
    reductions: list[Reduction] = field(default_factory=list)   # in node order
    schedule: Schedule | None = None                             # set by plan() (schedule.py)

    def __post_init__(self):
        if (self.loop is LoopKind.MID) != (self.mid_dim is not None):
            raise ValueError("a mid kernel, and only one, has a mid dim")
        if self.loop is LoopKind.FLAT and self.levels:
            raise ValueError("a flat kernel reduces nothing")

    @property
    def has_reduction(self) -> bool:
        return self.levels > 0

    @property
    def flat(self) -> bool:
        """Pure elementwise with no per-column or per-row operand: index the data flat."""
        return self.loop is LoopKind.FLAT

    def reductions_at(self, level: int) -> list[Reduction]:
        return [r for r in self.reductions if r.level == level]


def loop_of(levels: int, inputs: list[KInput]) -> LoopKind:
    """A row kernel's loop: flat when it reduces nothing and reads no per-row, per-column or
    per-channel operand (embedding lookups need the row too)."""
    if levels == 0 and all(i.layout in (Layout.FULL, Layout.SCALAR, Layout.TABLE)
                           for i in inputs):
        return LoopKind.FLAT
    return LoopKind.ROWS


# ---- layouts ------------------------------------------------------------------------------

def strip(shape: tuple[int, ...]) -> tuple[int, ...]:
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def layout_of_shape(shape: tuple[int, ...], domain: tuple[int, ...]) -> Layout | None:
    """How a value of `shape` broadcasts over a row kernel's domain, or None."""
    n, cols = math.prod(shape), domain[-1] if domain else 1
    if n == 1:
        return Layout.SCALAR
    if strip(shape) == strip(domain):
        return Layout.FULL
    if shape and shape[-1] == cols and n == cols:
        return Layout.COL
    rows_shape = strip(domain[:-1])
    if shape and shape[-1] == 1 and strip(shape[:-1]) == rows_shape:
        return Layout.ROW
    if chan_block(shape, domain) is not None:
        return Layout.CHAN
    return None


def mid_layout_of_shape(shape: tuple[int, ...], domain: tuple[int, ...],
                        dim: int) -> Layout | None:
    """How a value of `shape` broadcasts over a mid kernel's domain (outer..., F, inner...):
    the whole domain (exactly), the inner dims alone (COL), a scalar, one value per reduced
    position (MID: the reduced shape, with the dim kept as 1 or dropped), one value per step
    of the walk (ROW: (outer..., F) with the inner dims as ones or dropped, a mask over a
    sequence), one value per outer index (OUTER: (outer..., 1), a mask's count computed before
the kernel), or None."""
    inner = domain[dim + 1:]
    if math.prod(shape) == 1:
        return Layout.SCALAR
    if tuple(shape) == tuple(domain):
        return Layout.FULL
    if inner and strip(shape) == strip(inner) and len(shape) <= len(domain):
        return Layout.COL
    if tuple(shape) in (domain[:dim] + (1,) + inner, domain[:dim] + inner):
        return Layout.MID
    if tuple(shape) in (domain[:dim + 1] + (1,) * len(inner), domain[:dim + 1]):
        return Layout.ROW
    if dim and tuple(shape) == domain[:dim] + (1,):
        return Layout.OUTER
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
