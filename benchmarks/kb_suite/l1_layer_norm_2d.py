"""LayerNorm over the two trailing dims of an NCHW map (normalized_shape (H, W)), with an
elementwise affine weight and bias of shape (H, W)."""
import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 32
HEIGHT = 32
WIDTH = 32

CASES = [
    {"name": "16x32x32x32", "weight": 2.0, "BATCH": 16, "CHANNELS": 32, "HEIGHT": 32,
     "WIDTH": 32},
    {"name": "tail_3x7x19x23", "weight": 1.0, "BATCH": 3, "CHANNELS": 7, "HEIGHT": 19,
     "WIDTH": 23},
]


class Model(nn.Module):
    def __init__(self, height: int, width: int):
        super().__init__()
        self.norm = nn.LayerNorm((height, width))
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(height, width))
            self.norm.bias.add_(0.1 * torch.randn(height, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) + 3.0]


def get_init_inputs():
    return [HEIGHT, WIDTH]
