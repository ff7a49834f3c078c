"""BatchNorm2d in training mode: each channel normalised with its batch statistics over
(N, H, W) (biased variance), then its affine weight and bias. The module also updates its
running statistics; that is a side effect, not part of the output compared."""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 32
HEIGHT = 56
WIDTH = 56

CASES = [
    {"name": "8x32x56x56", "weight": 2.0, "BATCH": 8, "CHANNELS": 32, "HEIGHT": 56, "WIDTH": 56},
    {"name": "tail_5x19x23x37", "weight": 1.0, "BATCH": 5, "CHANNELS": 19, "HEIGHT": 23,
     "WIDTH": 37},
]


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.norm = nn.BatchNorm2d(channels)
        # Move the affine parameters off their 1/0 defaults so both must be applied.
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(channels))
            self.norm.bias.add_(0.1 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 1.5 + 0.5]


def get_init_inputs():
    return [CHANNELS]
