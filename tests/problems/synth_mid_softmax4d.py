"""Softmax and var over a middle dim of 4-D inputs: (A, F, H, W) over dim 1, a scaled
softmax whose result is also summed over dim 1 (a full-size and a reduced output of one
kernel), and std over dim 2 with correction 2 (H = 2 in the tail case: 0 / 0, NaN)."""
import torch
import torch.nn as nn

SHAPE = (2, 7, 5, 9)

CASES = [
    {"name": "2x7x5x9", "weight": 1.0, "SHAPE": (2, 7, 5, 9)},
    {"name": "tail_3x4x2x33", "weight": 1.0, "SHAPE": (3, 4, 2, 33)},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        s = torch.softmax(x * 2.0, dim=1)
        return (s, s.sum(dim=1), torch.var(x, dim=1, keepdim=True),
                torch.std(x, dim=2, correction=2))


def get_inputs():
    x = torch.randn(*SHAPE)
    x[0, :, 1, 2] = float("-inf")
    x[1, 0, 0, 0] = float("inf")
    x[0, 3, 0, 4] = float("nan")
    return [x]


def get_init_inputs():
    return []
