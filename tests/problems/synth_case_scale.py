"""Numbers the model derives from its constructor arguments, which the cases set differently:
`self.scale = dim ** -0.5` and `self.shift = dim / 10` (the trace inlines them, so each case's
graph holds other numbers; lift.py reads them from the model at call time). The cases vary
DIM, which is both an input size and the constructor argument."""
import torch
import torch.nn as nn

ROWS = 32
DIM = 64

CASES = [
    {"name": "32x64", "weight": 1.0},
    {"name": "16x100", "weight": 1.0, "ROWS": 16, "DIM": 100},
    {"name": "tail_7x33", "weight": 1.0, "ROWS": 7, "DIM": 33},
]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = dim ** -0.5
        self.shift = dim / 10.0

    def forward(self, x):
        return torch.softmax(x * self.scale + self.shift, dim=-1) - self.shift


def get_inputs():
    return [torch.randn(ROWS, DIM) * 4]


def get_init_inputs():
    return [DIM]
