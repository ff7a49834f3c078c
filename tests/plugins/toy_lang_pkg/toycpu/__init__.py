"""A toy CPU kernel library: each call is one counted launch (skipped while suppressed)."""
from __future__ import annotations

import torch

from kernelevolve.runtime import launches

__version__ = "0.3"


def relu(x: torch.Tensor) -> torch.Tensor:
    launches.record("toycpu")
    out = torch.empty_like(x)
    if launches.suppressed():          # the integrity probe: the kernel must do the work
        return out.zero_()
    return torch.clamp(x, min=0, out=out)
