"""Element-wise hardswish: y = x * clamp(x + 3, 0, 6) / 6, on an NCHW feature map."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8
CHANNELS = 32
HEIGHT = 64
WIDTH = 64

CASES = [
    {"name": "8x32x64x64", "weight": 2.0, "BATCH": 8, "CHANNELS": 32, "HEIGHT": 64, "WIDTH": 64},
    {"name": "tail_7x43x67x61", "weight": 1.0, "BATCH": 7, "CHANNELS": 43, "HEIGHT": 67,
     "WIDTH": 61},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardswish(x)


def get_inputs():
    return [3.0 * torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return []
