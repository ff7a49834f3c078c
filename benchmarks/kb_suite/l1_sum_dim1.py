"""Sum over the middle dim of a 3-D tensor, keeping it: (B, F, D) -> (B, 1, D)."""
import torch
import torch.nn as nn

BATCH = 32
FEATURES = 256
DIM = 256

CASES = [
    {"name": "32x256x256", "weight": 2.0, "BATCH": 32, "FEATURES": 256, "DIM": 256},
    {"name": "4x1024x512", "weight": 1.0, "BATCH": 4, "FEATURES": 1024, "DIM": 512},
    {"name": "tail_13x383x517", "weight": 1.0, "BATCH": 13, "FEATURES": 383, "DIM": 517},
]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, FEATURES, DIM)]


def get_init_inputs():
    return [1]
