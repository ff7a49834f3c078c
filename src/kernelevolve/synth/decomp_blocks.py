"""A reduction over dims that are not one block (a sum over (0, 2) of (N, C, S), batch norm's
statistics over N and the spatial dims around C), as one-dim reductions of the planner's own
kinds, each block merged into one dim and reduced in turn, the last block first.

Each step's result passes through a view (of its own shape): the view is where the planner
splits two reductions over different dims of different domains into two kernels (a row
reduction over S, then a middle-dim walk over N of the (N, C) result), where otherwise the
second would try to reduce a value the first kernel has not finished. sum, amax and amin
compose exactly; a mean of means is the mean because every block reduces the same count for
every kept position. var does not compose and stays a torch call."""
from __future__ import annotations

import math


def blocks(dims: list[int]) -> list[tuple[int, int]]:
    """The sorted dims as maximal runs [a, b) of consecutive dims."""
    runs: list[tuple[int, int]] = []
    for d in dims:
        if runs and runs[-1][1] == d:
            runs[-1] = (runs[-1][0], d + 1)
        else:
            runs.append((d, d + 1))
    return runs


def reduce_blocks(reduce_one, x, shape: tuple[int, ...], dims: list[int], keepdim: bool):
    """`reduce_one(y, dim)` (keepdim False) over each block of `dims`, last block first, after
    the one-wide dims are viewed away (they change no value, and they split blocks: (4, 1, 3)
    over (0, 2) is (4, 3) over both); the result viewed to the shape torch's reduction over
    all of `dims` has. NotImplemented for anything but float32 (an integer sum widens; a
    half-precision step would round between the blocks where torch rounds once)."""
    import torch

    if x.dtype != torch.float32:
        return NotImplemented
    aten = torch.ops.aten
    wide = [i for i, s in enumerate(shape) if s != 1]
    cur = [shape[i] for i in wide]
    y = aten.view.default(x, cur) if len(cur) != len(shape) else x
    for a, b in reversed(blocks([wide.index(d) for d in dims if d in wide])):
        merged = cur[:a] + [math.prod(cur[a:b])] + cur[b:]
        if merged != cur:
            y = aten.view.default(y, merged)
        cur = merged[:a] + merged[a + 1:]
        y = aten.view.default(reduce_one(y, a), cur)
    out = [1 if i in dims else s for i, s in enumerate(shape)] if keepdim else \
        [s for i, s in enumerate(shape) if i not in dims]
    return aten.view.default(y, out)
