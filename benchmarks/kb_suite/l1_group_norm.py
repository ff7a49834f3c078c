"""GroupNorm: 4 groups of channels, each normalised over its channels and the spatial dims,
then a per-channel affine weight and bias."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 64
HEIGHT = 32
WIDTH = 32
GROUPS = 4

CASES = [
    {"name": "8x64x32x32", "weight": 2.0, "BATCH": 8, "CHANNELS": 64, "HEIGHT": 32, "WIDTH": 32},
    {"name": "tail_3x12x17x29", "weight": 1.0, "BATCH": 3, "CHANNELS": 12, "HEIGHT": 17,
     "WIDTH": 29},
]


class Model(nn.Module):
    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(channels))
            self.norm.bias.add_(0.1 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 2.0 - 1.0]


def get_init_inputs():
    return [GROUPS, CHANNELS]
