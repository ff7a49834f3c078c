"""Maximum over the middle dim of a 3-D tensor: (B, F, D) -> (B, D)."""
import torch
import torch.nn as nn

BATCH = 16
FEATURES = 512
DIM = 256

CASES = [
    {"name": "16x512x256", "weight": 2.0, "BATCH": 16, "FEATURES": 512, "DIM": 256},
    {"name": "tail_9x383x517", "weight": 1.0, "BATCH": 9, "FEATURES": 383, "DIM": 517},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, FEATURES, DIM)]


def get_init_inputs():
    return []
