"""Average pooling over an NCDHW volume: 3x3x3 windows, stride 2, padding 1, the padding
not counted in the average."""
import torch
import torch.nn as nn

BATCH = 4
CHANNELS = 16
DEPTH = 16
HEIGHT = 32
WIDTH = 32

CASES = [
    {"name": "4x16x16x32x32", "weight": 2.0, "BATCH": 4, "CHANNELS": 16, "DEPTH": 16,
     "HEIGHT": 32, "WIDTH": 32},
    {"name": "tail_3x5x9x17x23", "weight": 1.0, "BATCH": 3, "CHANNELS": 5, "DEPTH": 9,
     "HEIGHT": 17, "WIDTH": 23},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool3d(3, stride=2, padding=1, count_include_pad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, DEPTH, HEIGHT, WIDTH)]


def get_init_inputs():
    return []
