"""Normalisations whose statistics span several dims: batch norm in training mode (statistics
over N, H and W around C), group norm with its affine step and layer norm over (H, W), read
and instance norm with affine weights (its batch varies between the cases: torch's own
composition would bake it into a repeat), read by one forward; an odd tail case so a kernel
that assumes a block multiple fails."""
import torch
import torch.nn as nn

BATCH = 4
CHANNELS = 6
HEIGHT = 8
WIDTH = 8

CASES = [
    {"name": "4x6x8x8", "weight": 1.0, "BATCH": 4, "CHANNELS": 6, "HEIGHT": 8, "WIDTH": 8},
    {"name": "tail_3x6x5x7", "weight": 1.0, "BATCH": 3, "CHANNELS": 6, "HEIGHT": 5, "WIDTH": 7},
]


class Model(nn.Module):
    def __init__(self, channels: int, height: int, width: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        self.gn = nn.GroupNorm(3, channels)
        self.ln = nn.LayerNorm((height, width))
        self.inorm = nn.InstanceNorm2d(channels, affine=True)
        with torch.no_grad():
            for m in (self.bn, self.gn, self.ln, self.inorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        return self.bn(x), self.gn(x), self.ln(x), self.inorm(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) * 2.0 + 0.5]


def get_init_inputs():
    return [CHANNELS, HEIGHT, WIDTH]
