"""Log-softmax over the middle dim of a (B, C, L) tensor, i.e. over classes per position."""
import torch
import torch.nn as nn

BATCH = 16
CLASSES = 128
LENGTH = 512

CASES = [
    {"name": "16x128x512", "weight": 2.0, "BATCH": 16, "CLASSES": 128, "LENGTH": 512},
    {"name": "tail_6x101x703", "weight": 1.0, "BATCH": 6, "CLASSES": 101, "LENGTH": 703},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [2.0 * torch.randn(BATCH, CLASSES, LENGTH)]


def get_init_inputs():
    return []
