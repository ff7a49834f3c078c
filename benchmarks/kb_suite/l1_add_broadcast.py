"""Add a (1, N, 1) tensor to a (B, N, D) tensor with broadcasting over the first and last dims."""
import torch
import torch.nn as nn

BATCH = 32
N = 128
DIM = 384

CASES = [
    {"name": "32x128x384", "weight": 2.0, "BATCH": 32, "N": 128, "DIM": 384},
    {"name": "8x512x512", "weight": 1.0, "BATCH": 8, "N": 512, "DIM": 512},
    {"name": "tail_13x257x401", "weight": 1.0, "BATCH": 13, "N": 257, "DIM": 401},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


def get_inputs():
    return [torch.randn(BATCH, N, DIM), torch.randn(1, N, 1)]


def get_init_inputs():
    return []
