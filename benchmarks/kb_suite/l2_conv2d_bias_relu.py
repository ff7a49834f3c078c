"""3x3 conv2d (padding 1), then a learnable per-channel bias of shape (C, 1, 1), then ReLU."""
import torch
import torch.nn as nn

BATCH = 8
IN_CHANNELS = 16
OUT_CHANNELS = 32
HEIGHT = 48
WIDTH = 48
KERNEL = 3

TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

CASES = [
    {"name": "8x16->32x48x48", "weight": 2.0, "BATCH": 8, "IN_CHANNELS": 16,
     "OUT_CHANNELS": 32, "HEIGHT": 48, "WIDTH": 48},
    {"name": "tail_3x7->29x37x41", "weight": 1.0, "BATCH": 3, "IN_CHANNELS": 7,
     "OUT_CHANNELS": 29, "HEIGHT": 37, "WIDTH": 41},
]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, padding=kernel // 2)
        self.bias = nn.Parameter(0.2 * torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
