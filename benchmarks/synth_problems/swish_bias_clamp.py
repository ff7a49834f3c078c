"""Pointwise chain: y = clamp(x * sigmoid(x) + bias, -1, 3) on a 2-D fp32 tensor.

`bias` has one value per feature (last dim) and broadcasts over the rows. Eager PyTorch runs
four kernels (sigmoid, mul, add, clamp), each a full pass over memory with a full-size
temporary; a fused kernel reads `x` once and writes `y` once.
"""
import torch
import torch.nn as nn

BATCH = 256
FEATURES = 2048
LOWER = -1.0
UPPER = 3.0

CASES = [
    {"name": "256x2048", "weight": 2.0, "BATCH": 256, "FEATURES": 2048},
    {"name": "tail_67x1001", "weight": 1.0, "BATCH": 67, "FEATURES": 1001},
]


class Model(nn.Module):
    def __init__(self, features: int, lower: float, upper: float):
        super().__init__()
        self.lower, self.upper = lower, upper
        self.bias = nn.Parameter(0.5 * torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x * torch.sigmoid(x) + self.bias, self.lower, self.upper)


def get_inputs():
    # Spread wide enough that both clamp bounds are hit on a sizeable share of elements.
    return [2.0 * torch.randn(BATCH, FEATURES)]


def get_init_inputs():
    return [FEATURES, LOWER, UPPER]
