"""A flatten kept in torch before a softmax: `x.view(x.size(0) * x.size(1), -1)` traces to the
literal `[128, -1]`. Every size is even, so the harness's held-out case (7, 15, 63) needs the
shape read from x at call time."""
import torch
import torch.nn as nn

BATCH = 8
SEQ = 16
DIM = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = x.view(x.size(0) * x.size(1), -1)
        return torch.softmax(y, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return []
