"""RMSNorm over the last dim with a learnable per-feature weight:

    y = x * rsqrt(mean(x**2, dim=-1) + eps) * weight

Written as most model code writes it, which costs eager PyTorch six kernels (pow, mean, add,
rsqrt, mul, mul); a fused kernel reads each row once to reduce and once (from cache) to
scale. Same `Model` signature as `examples/rmsnorm`, so that example's candidate works here.
"""
import torch
import torch.nn as nn

BATCH = 512
DIM = 1024
EPS = 1e-6

CASES = [
    {"name": "512x1024", "weight": 2.0, "BATCH": 512, "DIM": 1024},
    {"name": "tail_63x1537", "weight": 1.0, "BATCH": 63, "DIM": 1537},
]


class Model(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        # Ones plus noise, so a kernel that ignores the weight does not pass by accident.
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(variance + self.eps) * self.weight


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM, EPS]
