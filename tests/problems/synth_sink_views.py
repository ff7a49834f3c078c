"""Reductions over every element of an element-wise result: the 2-norm, nansum, an MSE-style
mean and a sum of a product, whose decompositions reshape the producer's result before the
sum (synth/sink.py moves the reshape to the operands so that each is one kernel). Beside them,
reshapes that must stay where they are: of a broadcast product (a reshape does not commute
with the broadcast) and of a value that something else also reads. Row 0 holds NaN (nansum
skips it, the others propagate it) and row 1 an inf."""
import torch
import torch.nn as nn

ROWS = 16
COLS = 40

CASES = [
    {"name": "16x40", "weight": 1.0},
    {"name": "tail_7x33", "weight": 1.0, "ROWS": 7, "COLS": 33},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, b):
        norm = torch.linalg.vector_norm(x)
        nans = torch.nansum(x)
        mse = ((x - y) ** 2).mean()
        dot = (x * y).sum()
        broadcast = (x * b).reshape(-1).sum()
        shared = x.abs() + 1.0
        both = shared.reshape(-1).sum() + shared.amax()
        return norm, nans, mse, dot, broadcast, both


def get_inputs():
    x = torch.randn(ROWS, COLS)
    y = torch.randn(ROWS, COLS)
    b = torch.randn(ROWS, 1)
    x[0, 3] = float("nan")
    y[1, 5] = float("inf")
    return [x, y, b]


def get_init_inputs():
    return []
