"""Max pooling over an NCHW map: 3x3 windows, stride 2, padding 1, ceil mode."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 32
HEIGHT = 64
WIDTH = 64

CASES = [
    {"name": "8x32x64x64", "weight": 2.0, "BATCH": 8, "CHANNELS": 32, "HEIGHT": 64, "WIDTH": 64},
    {"name": "tail_3x17x45x31", "weight": 1.0, "BATCH": 3, "CHANNELS": 17, "HEIGHT": 45,
     "WIDTH": 31},
]


class Model(nn.Module):
    def __init__(self, kernel_size: int = 3, stride: int = 2, padding: int = 1):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size, stride=stride, padding=padding, ceil_mode=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [3, 2, 1]
