"""A convolution's epilogue: a (C, 1, 1) bias, ReLU and a (C, 1, 1) scale, as level-2 problems
write it; the per-channel operands broadcast over (B, C, H, W) rows."""
import torch
import torch.nn as nn

BATCH = 4
C_IN = 3
C_OUT = 8
SIZE = 24

CASES = [
    {"name": "4x8x24", "weight": 1.0, "BATCH": 4, "SIZE": 24},
    {"name": "tail_3x8x17", "weight": 1.0, "BATCH": 3, "SIZE": 17},
]


class Model(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3)
        self.bias = nn.Parameter(torch.randn(c_out, 1, 1))
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(c_out, 1, 1))

    def forward(self, x):
        return torch.relu(self.conv(x) + self.bias) * self.scale


def get_inputs():
    return [torch.randn(BATCH, C_IN, SIZE, SIZE)]


def get_init_inputs():
    return [C_IN, C_OUT]
