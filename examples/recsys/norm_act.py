"""RMSNorm with a learnable per-feature weight followed by SiLU, on an MLP's hidden layer.

    y = silu(x / sqrt(mean(x**2, dim=-1) + eps) * weight)        x: (BATCH, HIDDEN) fp32

The normalisation + activation block that follows each hidden nn.Linear of the recommendation
model's bottom and top MLPs (model.py). Written the way model code usually writes RMSNorm,
it costs eager PyTorch seven kernels (pow, mean, add, rsqrt, mul, mul, silu) with full-size
temporaries between them; a fused kernel needs one read of each row to reduce and one to
scale and activate.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2048
HIDDEN = 512
EPS = 1e-6

CASES = [
    {"name": "2048x512", "weight": 2.0, "BATCH": 2048, "HIDDEN": 512},
    {"name": "512x512", "weight": 1.0, "BATCH": 512, "HIDDEN": 512},
    {"name": "tail_333x512", "weight": 1.0, "BATCH": 333, "HIDDEN": 512},
]


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        # Ones plus noise, so a kernel that ignores the weight does not pass by accident.
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.pow(2).mean(dim=-1, keepdim=True)
        return F.silu(x * torch.rsqrt(variance + self.eps) * self.weight)


def get_inputs():
    # A non-zero mean per row, like a Linear layer's pre-activations with a bias.
    return [torch.randn(BATCH, HIDDEN) * 2.0 + 0.5]


def get_init_inputs():
    return [HIDDEN, EPS]
