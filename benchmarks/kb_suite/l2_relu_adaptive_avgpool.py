"""ReLU, then adaptive average pooling of an NCHW map to 7x7 (the input sizes do not divide
by 7 in the tail case: overlapping windows of two lengths)."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 64
HEIGHT = 56
WIDTH = 56

CASES = [
    {"name": "8x64x56x56", "weight": 2.0, "BATCH": 8, "CHANNELS": 64, "HEIGHT": 56, "WIDTH": 56},
    {"name": "tail_3x19x23x30", "weight": 1.0, "BATCH": 3, "CHANNELS": 19, "HEIGHT": 23,
     "WIDTH": 30},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d((7, 7))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(x))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return []
