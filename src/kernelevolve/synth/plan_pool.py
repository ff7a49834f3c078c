"""Pool kernels: max, average and adaptive average pooling over 1 to 3 trailing dims.

Each window reads a neighbourhood of its output position, which no fused loop (flat, rows,
mid) models, so a pool gets a kernel of its own that reads one float32 tensor and closes the
kernels it reads, like a solo kernel (plan_solo.py). The input is seen as (planes, D, H, W):
the dims before the pooled ones are planes, and a 1-d or 2-d pool is a 3-d one whose leading
window dims are 1 (torch's own max_pool1d is a max_pool2d of an unsqueezed view). The window
geometry is fixed by the model (the same in every case); the sizes are read at call time.

Torch's CPU semantics kept: a max window starts at its first in-range position (-inf
padding never wins); a NaN wins and the last NaN's index is kept; indices are int64 into the
flattened input plane; ceil_mode's last window is dropped when it would start in the right
padding; count_include_pad counts the padding but never the ceil_mode overhang past it;
divisor_override replaces the count; adaptive windows are [floor(o*I/O), ceil((o+1)*I/O)).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from kernelevolve.synth.capture import Graph, Ref, Value

POOL_OPS = {"max_pool2d_with_indices": ("max", 2), "max_pool3d_with_indices": ("max", 3),
            "avg_pool2d": ("avg", 2), "avg_pool3d": ("avg", 3),
            "_adaptive_avg_pool2d": ("adaptive", 2), "_adaptive_avg_pool3d": ("adaptive", 3)}


@dataclass(frozen=True)
class PoolKernel:
    name: str
    op: str                          # max, avg, adaptive
    source: str                      # the value read
    out: str                         # the value written (a (values, indices) tuple for max)
    nd: int                          # pooled dims (2 or 3; a 1-d pool arrives as 2-d)
    kernel: tuple[int, int, int]     # window sizes, padded to 3 dims with 1
    stride: tuple[int, int, int]
    padding: tuple[int, int, int]
    dilation: tuple[int, int, int]
    ceil_mode: bool
    count_include_pad: bool = True
    divisor: int = 0                 # divisor_override; 0: none
    out_size: tuple[int, ...] = ()   # adaptive: the output sizes (nd of them)
    indices: bool = False            # max: the indices are read, so the kernel writes them
    shape: tuple[int, ...] = ()      # the input's case-0 shape

    @property
    def key(self) -> tuple:
        """What must agree between cases (everything but the names and the sizes)."""
        return (self.op, self.nd, self.kernel, self.stride, self.padding, self.dilation,
                self.ceil_mode, self.count_include_pad, self.divisor, self.out_size,
                len(self.shape))

    @property
    def label(self) -> str:
        if self.op == "adaptive":
            return f"adaptive average pool over the last {self.nd} dims to {self.out_size}"
        what = {"max": "max pool", "avg": "average pool"}[self.op]
        win = "x".join(map(str, self.kernel[3 - self.nd:]))
        extra = [f"stride {self.stride[3 - self.nd:]}", f"padding {self.padding[3 - self.nd:]}"]
        if self.op == "max":
            extra.append(f"dilation {self.dilation[3 - self.nd:]}")
        if self.ceil_mode:
            extra.append("ceil mode")
        if self.op == "avg":
            extra.append("count_include_pad" if self.count_include_pad else "padding not counted")
            if self.divisor:
                extra.append(f"divisor {self.divisor}")
        if self.indices:
            extra.append("with int64 indices")
        return f"{what} {win} ({', '.join(extra)})"


def _three(v, nd: int, default: int) -> tuple[int, int, int]:
    """A torch size argument (an int, a one-element list or nd of them) padded to 3 dims
    (a window of 1 and no padding along the dims the pool does not walk)."""
    if v is None or v == () or v == []:
        vals = (default,) * nd
    elif isinstance(v, int):
        vals = (v,) * nd
    else:
        vals = tuple(v) * nd if len(v) == 1 else tuple(v)
    if len(vals) != nd or not all(isinstance(x, int) for x in vals):
        raise ValueError("size")
    return (1 if default else 0,) * (3 - nd) + vals


def pool_of(v: Value, g: Graph, name: str, users: dict | None = None) -> PoolKernel | None:
    """The pool kernel of node `v`, or None (it stays a torch call)."""
    if v.op not in POOL_OPS or not v.args or not isinstance(v.args[0], Ref):
        return None
    op, nd = POOL_OPS[v.op]
    src = g.values[v.args[0].name]
    if src.dtype != "float32" or len(src.shape) < nd + 1 or math.prod(src.shape) == 0:
        return None
    if v.attrs.get("kwargs"):
        return None
    a = list(v.args[1:])
    try:
        if op == "adaptive":
            size = tuple(a[0]) if isinstance(a[0], (tuple, list)) else (a[0],) * nd
            if len(size) != nd or not all(isinstance(s, int) and s > 0 for s in size):
                return None
            one = (1, 1, 1)
            return PoolKernel(name, op, src.name, v.name, nd, one, one, (0, 0, 0), one, False,
                              out_size=size, shape=tuple(src.shape))
        a += [None] * (6 - len(a))
        kern = _three(a[0], nd, 1)
        stride = _three(a[1], nd, 1) if a[1] not in (None, (), []) else kern
        pad = _three(a[2], nd, 0)
    except (ValueError, TypeError):
        return None
    if op == "max":
        dil = _three(a[3], nd, 1) if a[3] is not None else (1, 1, 1)
        return PoolKernel(name, op, src.name, v.name, nd, kern, stride, pad, dil, bool(a[4]),
                          indices=_indices_read(v, g), shape=tuple(src.shape))
    div = a[5] if isinstance(a[5], int) else 0
    return PoolKernel(name, op, src.name, v.name, nd, kern, stride, pad, (1, 1, 1), bool(a[3]),
                      count_include_pad=a[4] is None or bool(a[4]), divisor=div,
                      shape=tuple(src.shape))


def _indices_read(v: Value, g: Graph) -> bool:
    """Whether anything reads the max pool's indices (getitem 1): when nothing does the
    kernel does not write them (an int64 per output, twice the values' bytes)."""
    for u in g.values.values():
        if u.op == "getitem" and u.args and u.args[0] == Ref(v.name) and u.args[1] == 1:
            return True
    return False


def same_pool(graphs: dict[str, Graph], name: str) -> bool:
    """Every case pools with the same window geometry (only the sizes may differ)."""
    keys = set()
    for g in graphs.values():
        k = pool_of(g.values[name], g, "p")
        if k is None:
            return False
        keys.add(k.key)
    return len(keys) == 1


def explain_line(k: PoolKernel) -> str:
    return (f"kernel {k.name} (a kernel of its own): {k.label}, "
            f"{'x'.join(map(str, k.shape))} float32")
