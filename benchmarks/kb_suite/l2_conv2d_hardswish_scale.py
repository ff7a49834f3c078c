"""3x3 conv2d (no padding), hardswish, multiply by a learnable per-channel (C, 1, 1) scale,
then clamp to [-0.25, 2]."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8
IN_CHANNELS = 8
OUT_CHANNELS = 32
HEIGHT = 64
WIDTH = 64
KERNEL = 3

TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

CASES = [
    {"name": "8x8->32x64x64", "weight": 2.0, "BATCH": 8, "IN_CHANNELS": 8,
     "OUT_CHANNELS": 32, "HEIGHT": 64, "WIDTH": 64},
    {"name": "tail_5x3->17x45x53", "weight": 1.0, "BATCH": 5, "IN_CHANNELS": 3,
     "OUT_CHANNELS": 17, "HEIGHT": 45, "WIDTH": 53},
]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel)
        self.scale = nn.Parameter(1.0 + 0.5 * torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.hardswish(self.conv(x)) * self.scale
        return torch.clamp(h, min=-0.25, max=2.0)


def get_inputs():
    return [2.0 * torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
