"""A toy accelerator runtime: each kernel call is one counted launch on the current stream;
`synchronize` waits for the queue (the work is done at launch; it counts the waits)."""
from __future__ import annotations

import torch

from kernelevolve.runtime import launches

__version__ = "0.1"
FIRMWARE = "2.0"
waits = [0]  # mutated in place: the integrity probe watches this module's bindings


class Stream:
    """A second queue: work on it would escape the platform's timer (the gate refuses it)."""


def synchronize() -> None:
    waits[0] += 1


def relu(x: torch.Tensor) -> torch.Tensor:
    launches.record("toydev")
    out = torch.empty_like(x)
    if launches.suppressed():          # the integrity probe: the kernel must do the work
        return out.zero_()
    return torch.clamp(x, min=0, out=out)
