"""Mean over the middle dim with a pointwise prologue and epilogue: (B, F, D) -> (B, D)."""
import torch
import torch.nn as nn

BATCH = 8
FEATURES = 32
DIM = 128

CASES = [
    {"name": "8x32x128", "weight": 1.0, "BATCH": 8, "FEATURES": 32, "DIM": 128},
    {"name": "tail_13x67x257", "weight": 1.0, "BATCH": 13, "FEATURES": 67, "DIM": 257},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.mean(torch.relu(x) * 1.5 - 0.25, dim=1)
        return torch.sigmoid(y) * 2.0 + 0.5


def get_inputs():
    return [torch.randn(BATCH, FEATURES, DIM)]


def get_init_inputs():
    return []
