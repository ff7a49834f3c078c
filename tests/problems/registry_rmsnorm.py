"""RMSNorm with a weight, small cases: the kernel registry tests promote, patch and revalidate it.

Batch and dim both vary between cases (one odd), so the validated region has ranges, and the
constructor's `dim` can be inferred from a module's weight.
"""
import torch
import torch.nn as nn

BATCH = 256
DIM = 1024
EPS = 1e-6

CASES = [
    {"name": "256x1024", "weight": 1.0, "BATCH": 256, "DIM": 1024},
    {"name": "128x2048", "weight": 1.0, "BATCH": 128, "DIM": 2048},
    {"name": "tail_63x1537", "weight": 1.0, "BATCH": 63, "DIM": 1537},
]


class Model(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM, EPS]
