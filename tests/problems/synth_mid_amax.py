"""amax and sum over the middle dim of a 4-D tensor, keepdim: (A, F, B, D) -> (A, 1, B, D)."""
import torch
import torch.nn as nn

CASES = [
    {"name": "4x9x6x33", "weight": 1.0, "SHAPE": (4, 9, 6, 33)},
    {"name": "tail_3x17x5x7", "weight": 1.0, "SHAPE": (3, 17, 5, 7)},
]
SHAPE = (4, 9, 6, 33)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        m = torch.amax(x * x, dim=1, keepdim=True)
        s = torch.sum(x, dim=-3, keepdim=True)
        return torch.tanh(m) + s * 0.5


def get_inputs():
    return [torch.randn(*SHAPE)]


def get_init_inputs():
    return []
