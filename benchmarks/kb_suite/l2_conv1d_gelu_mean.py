"""1-D convolution over a (B, C, L) sequence, GELU, then the mean over the length dim:
(B, C_in, L) -> (B, C_out)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
IN_CHANNELS = 64
OUT_CHANNELS = 128
LENGTH = 512
KERNEL = 5

TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

CASES = [
    {"name": "16x64->128x512", "weight": 2.0, "BATCH": 16, "IN_CHANNELS": 64,
     "OUT_CHANNELS": 128, "LENGTH": 512},
    {"name": "tail_5x37->83x611", "weight": 1.0, "BATCH": 5, "IN_CHANNELS": 37,
     "OUT_CHANNELS": 83, "LENGTH": 611},
]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel, padding=kernel // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.conv(x)).mean(dim=2)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, LENGTH)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, KERNEL]
