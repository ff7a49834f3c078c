"""What a reference's forward allocates at its peak, traced on the meta device (no memory, no
data): each op's new (non-view) outputs are counted while they live, and the largest total is
the peak.

A problem with small inputs can still make a huge intermediate (x.unsqueeze(-1) *
x.unsqueeze(-2) on a long vector is n^2 floats); sizing the run by its inputs alone let such
problems through to fail out of memory at the file's size. Ops that need data (nonzero, item)
cannot run on meta: the forward is then not measured (None) and the inputs' estimate stands.
"""
from __future__ import annotations

import weakref
from typing import Any


class _Peak:
    """Live bytes of the tensors the traced ops made, and the most there ever were."""

    def __init__(self):
        self.live = 0
        self.peak = 0

    def made(self, t) -> None:
        size = t.untyped_storage().nbytes()
        self.live += size
        self.peak = max(self.peak, self.live)
        weakref.finalize(t, self._freed, size)

    def _freed(self, size: int) -> None:
        self.live -= size


def _returns_new(func) -> bool:
    """False for views and in-place ops (their outputs alias an input: no new memory)."""
    schema = getattr(func, "_schema", None)
    return schema is None or all(r.alias_info is None for r in schema.returns)


def forward_peak(model: Any, inputs: list[Any]) -> int | None:
    """Bytes the forward of `model` on meta `inputs` holds at most at once (its output
    included), or None when the forward cannot run on meta."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    peak = _Peak()

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if _returns_new(func):
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor):
                        peak.made(t)
            return out

    try:
        with torch.device("meta"), torch.no_grad(), Count():
            out = model(*inputs)
    except Exception:  # noqa: BLE001 - an op meta cannot run (data-dependent): not measured
        return None
    del out
    return peak.peak
