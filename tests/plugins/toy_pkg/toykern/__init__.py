"""A toy kernel DSL: each call is one counted launch (skipped while launches are suppressed)."""
from __future__ import annotations

import torch

from kernelevolve.runtime import launches

__version__ = "0.1"


def relu(x: torch.Tensor, chunks: int = 1) -> torch.Tensor:
    launches.record("toy")
    out = torch.empty_like(x)
    if launches.suppressed():          # the integrity probe: the kernel must do the work
        return out.zero_()
    flat_in, flat_out = x.contiguous().view(-1), out.view(-1)
    for part_in, part_out in zip(flat_in.chunk(chunks), flat_out.chunk(chunks)):
        torch.clamp(part_in, min=0, out=part_out)
    return out
