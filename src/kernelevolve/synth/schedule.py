"""A planned kernel's schedule: the loop decisions both emitters read, made once per kernel.

    loop, programs   how the kernel walks its domain (LoopKind) and, for Triton, what one
                     program owns (Programs)
    shape_args,      the integer arguments after the tensors: the domain's sizes, then each
    size_args        bucketize table's / embedding table's length and each per-channel
                     input's row grouping (in the order module.table_args passes them)
    prelude, passes, a row kernel's per-row values before the first pass, one Pass per
    store            reduction level (what it accumulates, the per-element values its column
                     loop computes, the inputs they load, the per-row values defined after it)
                     and the store walk over the full-size outputs; a flat kernel is its store.
                     A mid kernel has the same records: a pass is one walk down the reduced
                     dim (its per-element values are the FULL ones), its `after` values the
                     reduced (MID) values of its level, and the store a last walk
    mid              a mid kernel's uniform values (those the walk down the reduced dim does not
                     change: COL, SCALAR, and MID ones from inputs alone) and the reduced values
                     read after the walk that defines them (C++ keeps a block of each per task)
    uniform_divisors divisions whose divisor is one value per row (C++ multiplies by its
                     reciprocal, computed once per row)
    cost, cache,     C++ only: the work per element (for its parallel threshold), the values
    carry            of the last pass kept in a row buffer for the store pass, and the input
                     whose next row the first pass reads along the last pass (softmax's max)
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from kernelevolve.synth.capture import Ref
from kernelevolve.synth.kernel import Kernel, Layout, LoopKind, NodeKind, Reduction, StrEnum
from kernelevolve.synth.ops import EXPENSIVE

L = Layout
_HEAVY = {"gelu": 16, "gelu_tanh": 12, "erf": 16}     # cost units beyond EXPENSIVE's 10
SHAPE_ARGS = {LoopKind.FLAT: ("n",), LoopKind.ROWS: ("rows", "cols"),
              LoopKind.MID: ("outer", "nred", "inner")}


class Programs(StrEnum):
    """What one Triton program owns."""
    FLAT = "flat"          # BLOCK consecutive elements (1-D grid)
    ROW_BLOCKS = "rows"    # BLOCK_ROWS rows, walked in BLOCK_COLS chunks once per pass
    TILES = "tiles"        # one BLOCK_ROWS x BLOCK_COLS tile (2-D grid; nothing to reduce)
    MID_BLOCKS = "mid"     # BLOCK inner positions of one outer index, walking the reduced dim


@dataclass
class Pass:
    reductions: list[Reduction]   # accumulated in this pass (none: the store walk)
    nodes: list[str]              # per-element values its column loop computes, in plan order
    loads: list[str]              # the FULL / COL inputs they read (in Triton's load order)
    after: list[str] = field(default_factory=list)   # ROW / SCALAR values defined after it
    stores: list[str] = field(default_factory=list)  # mid kernels: the FULL outputs it writes


@dataclass
class Cache:
    """Full values of the last reduction pass kept for the store pass (those with a
    transcendental op in them, softmax's exp) instead of recomputed."""
    values: list[str]
    in_output: str | None         # the float output whose row holds values[0] until stored
    scratch: list[str]            # the others: a per-thread scratch row each
    store_nodes: list[str]        # what the store pass still computes, given the values


@dataclass
class MidSteps:
    uniform: list[str]            # COL / SCALAR values, and MID ones read from inputs alone
    kept: list[str]               # MID values a later walk (or a later level's values) reads
    # kept values full-size values divide by (softmax's sum): C++ keeps their reciprocals
    # too and multiplies (softmax over dim 1 of 16x256x256 on one thread: 0.48 -> 0.41 ms)
    reciprocals: list[str] = field(default_factory=list)


@dataclass
class Schedule:
    loop: LoopKind
    programs: Programs
    shape_args: tuple[str, ...]
    size_args: list[tuple[str, str]]       # (input name, "n" | "in" | "sp")
    uniform_divisors: frozenset[str]
    cost: int
    prelude: list[str] = field(default_factory=list)
    passes: list[Pass] = field(default_factory=list)
    store: Pass | None = None
    full_outputs: list[str] = field(default_factory=list)
    row_outputs: list[str] = field(default_factory=list)     # ROW (MID in a mid kernel)
    cache: Cache | None = None
    carry: str | None = None
    mid: MidSteps | None = None


def schedule(k: Kernel) -> Schedule:
    """Decide `k`'s schedule."""
    s = Schedule(k.loop, _programs(k), SHAPE_ARGS[k.loop], _size_args(k),
                 _uniform_divisors(k), _cost(k))
    if k.loop is LoopKind.MID:
        return _mid_schedule(k, s)
    if k.loop is LoopKind.FLAT:
        s.store = Pass([], [n.name for n in k.nodes], closure(k, [o.name for o in k.outputs])[1])
        s.full_outputs = [o.name for o in k.outputs]
        return s
    s.prelude = _row_values(k, 0)
    for level in range(1, k.levels + 1):
        reds = k.reductions_at(level)
        nodes, loads = closure(k, [r.source for r in reds])
        s.passes.append(Pass(reds, nodes, loads, _row_values(k, level)))
    layout = {n.name: n.layout for n in k.nodes}
    s.full_outputs = [o.name for o in k.outputs if layout[o.name] == L.FULL]
    s.row_outputs = [o.name for o in k.outputs if layout[o.name] == L.ROW]
    if s.full_outputs:
        s.store = Pass([], *closure(k, s.full_outputs))
    s.cache = _cache(k, s)
    s.carry = _carry(k)
    return s


def closure(k: Kernel, targets: list[str], stop: frozenset[str] = frozenset(),
            along: tuple[Layout, ...] = (L.FULL, L.COL)) -> tuple[list[str], list[str]]:
    """(nodes, loads): the per-element nodes needed to compute `targets` in a loop, in plan
    order, names in `stop` taken as given; and the inputs they read, in the order found. The
    per-element values are those whose layout varies `along` the loop: FULL and COL ones
    along a row, FULL ones down a mid kernel's reduced dim."""
    nodes = {n.name: n for n in k.nodes}
    inputs = {i.name: i.layout for i in k.inputs}
    need: set[str] = set()
    loads: list[str] = []
    stack = list(targets)
    while stack:
        name = stack.pop()
        if name in inputs:
            if inputs[name] in along and name not in loads:
                loads.append(name)
            continue
        n = nodes.get(name)
        if n is None or name in need or name in stop or n.layout not in along:
            continue
        need.add(name)
        stack.extend(a.name for a in n.args if isinstance(a, Ref))
    return [n.name for n in k.nodes if n.name in need], loads


def _mid_schedule(k: Kernel, s: Schedule) -> Schedule:
    """A mid kernel: one walk down the reduced dim per level (its reductions and the FULL
    values they read), the level's MID values after it, then a store walk when the kernel
    writes full-size values (softmax over dim 1: max, sum of exp(x - max), store)."""
    along = (L.FULL, L.ROW)      # ROW: a per-step value (a mask), read at each step
    for level in range(1, k.levels + 1):
        reds = k.reductions_at(level)
        nodes, loads = closure(k, [r.source for r in reds], along=along)
        s.passes.append(Pass(reds, nodes, loads, [
            n.name for n in k.nodes if n.layout == L.MID and n.level == level
            and n.kind != NodeKind.REDUCE]))
    layout = {n.name: n.layout for n in k.nodes}
    s.full_outputs = [o.name for o in k.outputs if layout[o.name] == L.FULL]
    s.row_outputs = [o.name for o in k.outputs if layout[o.name] == L.MID]
    kept = _kept(k)
    s.mid = MidSteps([n.name for n in k.nodes if n.layout in (L.COL, L.SCALAR) or (
        n.layout == L.MID and n.level == 0)], kept, _reciprocals(k, kept))
    # A full-size output a reduction walk computes is written by that walk (softmax summed
    # again over the dim: its last walk computes exp(x - max) / sum), the others by a store
    # walk after the last level.
    rest = []
    for name in s.full_outputs:
        walk = next((p for p in s.passes if name in p.nodes), None)
        (walk.stores if walk else rest).append(name)
    if not rest:
        return s
    s.store = Pass([], *closure(k, rest, along=along), stores=rest)
    cache = _cache(k, replace(s, full_outputs=rest), along)
    # Only a value the output's own buffer can hold until stored is cached (softmax's exp);
    # others are recomputed rather than given a scratch block of nred x MID_BLOCK per task.
    if cache and cache.in_output:
        first = cache.values[:1]
        s.cache = Cache(first, cache.in_output, [],
                        closure(k, rest, frozenset(first), along)[0])
    return s


def _reciprocals(k: Kernel, kept: list[str]) -> list[str]:
    """The kept values a full-size float division divides by (float operands only: no cast
    between the operand and the division)."""
    dtype = {n.name: n.dtype for n in k.nodes} | {i.name: i.dtype for i in k.inputs}
    divisors = {n.args[1].name for n in k.nodes
                if (n.kind, n.op, n.layout) == (NodeKind.BINARY, "div", L.FULL)
                and isinstance(n.args[1], Ref) and n.dtype == "float32"
                and all(dtype[a.name] == "float32" for a in n.args if isinstance(a, Ref))}
    return [name for name in kept if name in divisors]


def _kept(k: Kernel) -> list[str]:
    """The MID values read after the walk that defines them: by a full-size value (a later
    walk) or by a MID value of a later level."""
    mids = {n.name: n.level for n in k.nodes if n.layout == L.MID and n.level > 0}
    kept = {a.name for n in k.nodes for a in n.args if isinstance(a, Ref) and a.name in mids
            and (n.layout == L.FULL or n.level > mids[a.name])}
    return [n.name for n in k.nodes if n.name in kept]


def _programs(k: Kernel) -> Programs:
    if k.loop is LoopKind.FLAT:
        return Programs.FLAT
    if k.loop is LoopKind.MID:
        return Programs.MID_BLOCKS
    return Programs.ROW_BLOCKS if k.has_reduction else Programs.TILES


def _size_args(k: Kernel) -> list[tuple[str, str]]:
    out = []
    for i in k.inputs:
        if i.layout in (L.TABLE, L.GTABLE):
            out.append((i.name, "n"))
        elif i.layout == L.CHAN:
            out += [(i.name, "in"), (i.name, "sp")]
    return out


def _uniform_divisors(k: Kernel) -> frozenset[str]:
    layout = {i.name: i.layout for i in k.inputs} | {n.name: n.layout for n in k.nodes}
    # a mid kernel's ROW value changes at each step of the walk: no reciprocal kept for it
    uniform = (L.SCALAR,) if k.loop is LoopKind.MID else (L.ROW, L.SCALAR)
    return frozenset(n.name for n in k.nodes if n.op == "div" and len(n.args) > 1 and (
        not isinstance(n.args[1], Ref) or layout[n.args[1].name] in uniform))


def _cost(k: Kernel) -> int:
    """Work per element in units of one load+store. A mid kernel's reduced values are
    computed once per reduced position (nred times fewer than its elements): only its
    full-size values weigh (log_softmax over dim 0 of 8x32x128 counted its log and went
    parallel: 0.27 ms against eager's 0.20; 0.09 ms on one thread)."""
    units = 4.0 * (1 + k.levels)
    for n in k.nodes:
        if n.kind != NodeKind.REDUCE and (k.loop is not LoopKind.MID or n.layout == L.FULL):
            units += _HEAVY.get(n.op, 10 if n.op in EXPENSIVE else 1)
    return max(1, round(units / 4))


def _row_values(k: Kernel, level: int) -> list[str]:
    return [n.name for n in k.nodes if n.layout in (L.ROW, L.SCALAR) and n.level == level
            and n.kind != NodeKind.REDUCE]


def _cache(k: Kernel, s: Schedule, along: tuple[Layout, ...] = (L.FULL, L.COL)) -> Cache | None:
    if not k.levels or not s.full_outputs:
        return None
    nodes = {n.name: n for n in k.nodes}
    in_last = set(s.passes[-1].nodes)
    both = {name for name in s.store.nodes if name in in_last}

    def costly(name: str, seen: set[str]) -> bool:
        n = nodes.get(name)
        if n is None or name not in both or name in seen:
            return False
        seen.add(name)
        return n.op in EXPENSIVE or any(costly(a.name, seen) for a in n.args
                                        if isinstance(a, Ref))

    frontier = []
    for name in s.store.nodes:
        if name not in both:
            frontier += [a.name for a in nodes[name].args if isinstance(a, Ref) and a.name in both]
    frontier += [o for o in s.full_outputs if o in both]
    values = [n.name for n in k.nodes if n.name in set(frontier) and costly(n.name, set())]
    if not values:
        return None
    in_output = next((o for o in s.full_outputs if nodes[o].dtype == "float32"), None)
    return Cache(values, in_output, values[1:] if in_output else values,
                 closure(k, s.full_outputs, frozenset(values), along)[0])


def _carry(k: Kernel) -> str | None:
    """The input whose next row pass 1 reads along the last pass (when pass 1 only reduces
    one full input by sum / max / min and another pass follows)."""
    first = k.reductions_at(1)
    sources = {r.source for r in first}
    inputs = {i.name for i in k.inputs}
    if k.levels >= 2 and len(sources) == 1 and sources <= inputs and \
            all(r.op in ("max", "min", "sum") for r in first):
        return first[0].source
    return None
