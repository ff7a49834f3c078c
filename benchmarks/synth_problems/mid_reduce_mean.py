"""Mean over the middle dimension of a 3-D fp32 tensor: (B, F, D) -> (B, D).

    y[b, d] = mean(x[b, :, d])

The reduced dimension is not the contiguous one, so a kernel must walk `F` with a stride of
`D` while keeping the `D` accumulators in vector registers or cache. Eager PyTorch runs one
reduction kernel (`mean.dim`); the win has to come from a better loop order and threading,
not from fusion.
"""
import torch
import torch.nn as nn

BATCH = 64
FEATURES = 128
DIM = 512

CASES = [
    {"name": "64x128x512", "weight": 2.0, "BATCH": 64, "FEATURES": 128, "DIM": 512},
    {"name": "tail_13x67x257", "weight": 1.0, "BATCH": 13, "FEATURES": 67, "DIM": 257},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, FEATURES, DIM) + 1.0]


def get_init_inputs():
    return []
