"""Pointwise chain mixing activations: y = gelu_tanh(x) + 0.5 * tanh(0.8 * x) on fp32.

`gelu_tanh` is GELU with the tanh approximation (`approximate="tanh"`). Eager PyTorch runs
four kernels (gelu, mul, tanh, mul) plus the add, five full passes over memory; a fused
kernel evaluates both transcendental branches per element in one pass.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 256
FEATURES = 2048
ALPHA = 0.5
BETA = 0.8

CASES = [
    {"name": "256x2048", "weight": 2.0, "BATCH": 256, "FEATURES": 2048},
    {"name": "tail_51x1537", "weight": 1.0, "BATCH": 51, "FEATURES": 1537},
]


class Model(nn.Module):
    def __init__(self, alpha: float, beta: float):
        super().__init__()
        self.alpha, self.beta = alpha, beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh") + self.alpha * torch.tanh(self.beta * x)


def get_inputs():
    return [3.0 * torch.randn(BATCH, FEATURES)]


def get_init_inputs():
    return [ALPHA, BETA]
