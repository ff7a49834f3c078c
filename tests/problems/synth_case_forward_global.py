"""forward reads size globals the CASES vary: `x.reshape(BATCH, SEQ * DIM)` traces to a
literal shape per case, which the candidate must read from x at call time."""
import torch
import torch.nn as nn

BATCH = 8
SEQ = 4
DIM = 32

CASES = [
    {"name": "8x4x32", "weight": 1.0, "BATCH": 8, "SEQ": 4, "DIM": 32},
    {"name": "tail_3x5x19", "weight": 1.0, "BATCH": 3, "SEQ": 5, "DIM": 19},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log_softmax(x.reshape(BATCH, SEQ * DIM) * 2.0, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return []
