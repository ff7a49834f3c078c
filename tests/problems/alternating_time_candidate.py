"""For tests/problems/alternating_time.py: correct on every call, as fast as the reference on
odd calls and six times slower on even ones (no compiled kernel: evaluate it with
allow_no_kernel). With one call per timed batch its samples alternate between two speeds, so
the median's 95% interval spans both: a wide interval by construction."""
import torch
import torch.nn as nn

_SPIN = 600_000


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        for _ in range(_SPIN if self.calls % 2 else 6 * _SPIN):
            pass
        return torch.clamp_min(x, 0.0)  # relu's values, not the reference's op (fallback gate)
