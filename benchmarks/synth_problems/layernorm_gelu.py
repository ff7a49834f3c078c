"""LayerNorm over the last dim followed by GELU: y = gelu(layer_norm(x) * weight + bias).

Eager PyTorch runs two kernels (`native_layer_norm`, then `gelu`) with a full-size temporary
between them; a fused kernel computes each row's mean and variance and writes the activated
output in the same visit to the row.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 512
DIM = 1024
EPS = 1e-5

CASES = [
    {"name": "512x1024", "weight": 2.0, "BATCH": 512, "DIM": 1024},
    {"name": "tail_97x769", "weight": 1.0, "BATCH": 97, "DIM": 769},
]


class Model(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=eps)
        # Not the default ones/zeros, so a kernel that ignores the affine parameters fails.
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.1 * torch.randn(dim))
            self.norm.bias.copy_(0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.norm(x))


def get_inputs():
    # A non-zero mean per row, so a kernel that skips the centring fails.
    return [torch.randn(BATCH, DIM) * 2.0 + 0.5]


def get_init_inputs():
    return [DIM, EPS]
