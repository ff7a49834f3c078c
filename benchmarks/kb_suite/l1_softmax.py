"""Softmax over the last dim of a 2-D tensor of logits."""
import torch
import torch.nn as nn

BATCH = 512
DIM = 2048

CASES = [
    {"name": "512x2048", "weight": 2.0, "BATCH": 512, "DIM": 2048},
    {"name": "64x16384", "weight": 1.0, "BATCH": 64, "DIM": 16384},
    {"name": "tail_257x1999", "weight": 1.0, "BATCH": 257, "DIM": 1999},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [3.0 * torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
