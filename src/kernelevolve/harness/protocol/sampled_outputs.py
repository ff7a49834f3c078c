"""Which elements of a timed call's outputs are checked, and how they are read (CPU measure job).

Every timed batch of the candidate is checked (harness/worker/measure.py): one call chosen at random
after the batch ran, and of its outputs either everything (outputs of `SAMPLE_BYTES` or less in
all) or blocks of `BLOCK_BYTES` chosen at random, again after the batch ran, from the kernel's
random source. So what one check costs is bounded whatever the output size, and no timed call is
safe from it: a kernel that computes only part of its output on calls it hopes go unread is
caught with a probability that grows with what it skips (64 blocks per batch: skipping 10% of a
large output passes one batch in 850).

Blocks follow the output's memory layout as the candidate's process describes it (its strides):
each block is a run along the innermost dimension in memory, so it is read in one piece whether
the output is contiguous, a transposed view or a view of a padded buffer. The reference process
gathers the same elements (by logical index) from its own outputs, whatever their layout.

Reading is from outside the candidate's process (/proc/<pid>/mem, through TimedProcess.read_runs):
the selected elements' addresses, sorted, merged where they lie within `GAP_BYTES` of each other,
one read per run. What is read is at most the selected elements plus the gaps merged in, so any
layout the check job accepted (non-contiguous strides, views of larger buffers, broadcast strides)
is read, and what cannot be read is refused with its real reason.
"""
from __future__ import annotations

import os
from typing import Any

SAMPLE_BYTES = 32 << 10   # bytes of one call's outputs checked per batch, at most (whole below)
BLOCK_BYTES = 512         # one block: a run this long along the innermost dimension in memory
MIN_BLOCKS = 4            # per output, however many outputs share the budget
GAP_BYTES = 256           # selected elements closer than this in memory are read in one piece
MAX_RUNS = 1024           # separate reads per output per batch, at most (~1.2 us each)
_ADDRESS_LIMIT = 1 << 56  # no user-space address reaches this


class UnreadableOutput(Exception):
    """An output that cannot be read back; the message says why, for the verdict."""


def choose(layout: list[tuple[str, list[int], list[int]]]) -> list[dict[str, Any] | None]:
    """A selection per output (None: the whole output), drawn now: call it after the batch ran.
    `layout`: per output, the reference's dtype and shape and the candidate's strides."""
    sizes = [_numel(shape) * _itemsize(dtype) for dtype, shape, _ in layout]
    share = SAMPLE_BYTES if sum(sizes) <= SAMPLE_BYTES else SAMPLE_BYTES // max(1, len(layout))
    return [_one(dtype, shape, strides, share) for dtype, shape, strides in layout]


def _one(dtype: str, shape: list[int], strides: list[int], share: int) -> dict[str, Any] | None:
    item, numel = _itemsize(dtype), _numel(shape)
    dense = _dense(shape, strides)
    if numel * item <= share and dense:
        return None  # the common case: one read of the whole output
    rng = _rng()
    if numel * item <= share:
        spec = None
    else:
        block = max(1, BLOCK_BYTES // item)
        count = -(-numel // block)
        k = min(count, max(MIN_BLOCKS, share // (block * item)))
        spec = {"order": memory_order(shape, strides), "block": block,
                "starts": _draw(rng, count, k)}
    if numel == 0 or dense or _run_count(shape, strides, spec, item) <= MAX_RUNS:
        return spec
    # Elements scattered in memory (a narrow view of wide rows, a strided slice): each is its
    # own read, so at most MAX_RUNS of them, single elements drawn at random.
    return {"order": memory_order(shape, strides), "block": 1,
            "starts": _draw(rng, numel, min(numel, MAX_RUNS))}


def _rng():
    """A generator seeded now from the kernel's random source (os.urandom), not from anything
    in this process's memory before the batch ran: one draw of 128 bits per selection, where
    SystemRandom.sample asks the kernel once per pick (64 blocks: 0.5 ms)."""
    import numpy as np

    return np.random.Generator(np.random.PCG64(int.from_bytes(os.urandom(16), "little")))


def _draw(rng, count: int, k: int) -> list[int]:
    return sorted(int(i) for i in rng.choice(count, size=k, replace=False))


def _dense(shape: list[int], strides: list[int]) -> bool:
    """Laid out without gaps or repeats, in some order of the dimensions (one run)."""
    expected = 1
    for d in reversed(memory_order(shape, strides)):
        if shape[d] == 1:
            continue
        if strides[d] != expected:
            return False
        expected *= shape[d]
    return True


def _run_count(shape: list[int], strides: list[int], spec: dict[str, Any] | None,
               item: int) -> int:
    import numpy as np

    _, offset = positions(shape, strides, spec)
    uniq = np.unique(offset)
    return 1 + int(np.count_nonzero(np.diff(uniq) > max(1, GAP_BYTES // item)))


def memory_order(shape: list[int], strides: list[int]) -> list[int]:
    """Dimensions from outermost to innermost in memory: broadcast and size-1 ones first, then by
    stride, largest first (a row-major tensor keeps its order; a transposed view is walked the
    way it lies)."""
    dims = range(len(shape))
    flat = [d for d in dims if shape[d] <= 1 or strides[d] == 0]
    real = sorted((d for d in dims if d not in flat), key=lambda d: -strides[d])
    return flat + real


def positions(shape: list[int], strides: list[int], spec: dict[str, Any] | None):
    """The selected elements as (logical row-major index, offset in elements under `strides`),
    two int64 arrays in selection order. Blocks walk the dimensions in the selection's order
    (the candidate's memory order); the logical indices are what the reference gathers.
    numpy, not torch: a few thousand indices, where torch's advanced indexing costs milliseconds
    (8192 elements, 2.13 on two threads: a boolean mask 6 ms, `t[idx]` 8.6 ms, `index_select`
    14 us, seen), so gathers below use index_select."""
    import numpy as np

    numel = _numel(shape)
    if numel == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if spec is None:
        order = list(range(len(shape)))
        walk = np.arange(numel, dtype=np.int64)
    else:
        order = [int(d) for d in spec["order"]]
        block = int(spec["block"])
        starts = np.asarray(spec["starts"], dtype=np.int64)
        walk = (starts[:, None] * block + np.arange(block, dtype=np.int64)).reshape(-1)
        walk = walk[walk < numel]
    logical = np.zeros_like(walk)
    offset = np.zeros_like(walk)
    rest = walk
    row_major = _row_major(shape)
    for d in reversed(order):  # unravel the walk position over the dims in memory order
        rest, idx = np.divmod(rest, shape[d])
        logical += idx * row_major[d]
        offset += idx * strides[d]
    return logical, offset


def gather(tensor, spec: dict[str, Any] | None):
    """The selected elements of one of the reference's own outputs, contiguous: the whole output
    in its shape, or the blocks' elements in selection order (indexed through the reference's
    own strides, whatever its layout)."""
    import torch

    t = tensor.detach()
    if spec is None:
        return t.contiguous()
    _, offset = positions(list(t.shape), list(t.stride()), spec)
    if offset.size == 0:
        return torch.empty(0, dtype=t.dtype)
    span = int(offset.max()) + 1
    flat = t.as_strided((span,), (1,), t.storage_offset())
    return flat.index_select(0, torch.from_numpy(offset))  # not flat[idx]: see positions()


def read(proc, address: Any, dtype: str, shape: list[int], strides: list[int],
         spec: dict[str, Any] | None):
    """One output of the candidate's, read from its memory (`strides`: from described_strides):
    the selected elements (the whole output in its shape, or the blocks' elements in selection
    order), or UnreadableOutput with the reason."""
    import numpy as np
    import torch

    from kernelevolve.harness.protocol.tensor_bytes import from_bytes, offheap

    if _numel(shape) == 0:
        return torch.empty(shape, dtype=getattr(torch, dtype))
    if not isinstance(address, int) or address <= 0:
        raise UnreadableOutput("its address is not a valid pointer")
    item = _itemsize(dtype)
    reach = sum((s - 1) * st for s, st in zip(shape, strides))
    if address + (reach + 1) * item >= _ADDRESS_LIMIT:
        raise UnreadableOutput(f"its strides {strides} reach past any address")
    if spec is None and _dense(shape, strides):  # one read of its whole span
        raw = proc.read_runs([(address, (reach + 1) * item)])
        if raw is None:
            raise UnreadableOutput(_unmapped(1, address, strides))
        flat = from_bytes(raw, dtype)
        if strides == _row_major(shape):
            return flat.view(shape)
        return offheap(flat.as_strided(shape, strides))
    _, offset = positions(shape, strides, spec)
    uniq, inverse = np.unique(offset, return_inverse=True)
    starts, ends, slot = _runs(uniq, max(1, GAP_BYTES // item))
    runs = [(address + s * item, (e - s + 1) * item) for s, e in zip(starts.tolist(),
                                                                      ends.tolist())]
    raw = proc.read_runs(runs)
    if raw is None:
        raise UnreadableOutput(_unmapped(len(runs), address, strides))
    flat = from_bytes(raw, dtype)
    values = flat.index_select(0, torch.from_numpy(slot[inverse.reshape(-1)]))
    return offheap(values.reshape(shape) if spec is None else values)


def _unmapped(runs: int, address: int, strides: list[int]) -> str:
    return (f"its memory ({runs} run(s) from {address:#x}, strides {strides}) is not mapped in "
            "the candidate's process: it must stay alive, as a plain CPU tensor, until the next "
            "call")


def _runs(uniq, gap: int):
    """Sorted distinct offsets -> (run starts, run ends, each offset's slot in the runs read
    back to back)."""
    import numpy as np

    breaks = np.ones(uniq.size, dtype=bool)
    breaks[1:] = (uniq[1:] - uniq[:-1]) > gap
    run = np.cumsum(breaks) - 1
    starts = uniq[breaks]
    last = np.ones_like(breaks)
    last[:-1] = breaks[1:]
    ends = uniq[last]
    lengths = ends - starts + 1
    base = np.cumsum(lengths) - lengths
    return starts, ends, base[run] + (uniq - starts[run])


def described_strides(described: Any, dtype: str, shape: list[int]) -> list[int]:
    """The strides the candidate's process reported for an output, checked against the
    reference's dtype and shape (the check job compared those already: a difference here is a
    timed call that returned something else)."""
    if not (isinstance(described, list) and len(described) == 3 and
            isinstance(described[2], list)):
        raise UnreadableOutput("the candidate's process answered without its dtype, shape "
                               "and strides (the harness's reply was altered: leave the "
                               "harness's own objects alone)")
    got_dtype, got_shape, strides = described
    if got_dtype != dtype or got_shape != shape:
        raise UnreadableOutput(f"it is a {got_dtype} tensor of shape {got_shape}; the "
                               f"reference's is a {dtype} tensor of shape {shape}")
    if len(strides) != len(shape) or not all(isinstance(s, int) and 0 <= s < _ADDRESS_LIMIT
                                             for s in strides):
        raise UnreadableOutput(f"its strides {strides} are not valid for shape {shape}")
    return strides


def where(spec: dict[str, Any] | None, shape: list[int], strides: list[int],
          position: int) -> str:
    """The index, in the output's own shape, of element `position` of a selection."""
    logical, _ = positions(shape, strides, spec)
    flat = int(logical[position]) if position < logical.size else 0
    index = []
    for n in reversed(shape):
        index.append(flat % max(n, 1))
        flat //= max(n, 1)
    return "[" + ", ".join(str(i) for i in reversed(index)) + "]"


def _row_major(shape: list[int]) -> list[int]:
    out, step = [0] * len(shape), 1
    for d in reversed(range(len(shape))):
        out[d] = step
        step *= max(shape[d], 1)
    return out


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _itemsize(dtype: str) -> int:
    from kernelevolve.harness.protocol.tensor_bytes import itemsize

    return itemsize(dtype)
