"""Normalisations and variances over a non-last dim of (A, B, C): softmax over dim 1,
log_softmax over dim 0, logsumexp over dim 1 (keepdim), var over dim 0 (correction 0, keepdim),
std over dim 1, var_mean over dim 1, and var / std of a dim of one element (y: NaN with
correction 1). Edge fibers of x along dims 0 and 1: one +inf, all -inf, a NaN, an inf as the
last element (torch's var_mean mean is that inf, not NaN), large values (exp would overflow
without the max), signed zeros. The tail case has C > 256 (two inner blocks in C++)."""
import torch
import torch.nn as nn

A, B, C = 5, 12, 40

CASES = [
    {"name": "5x12x40", "weight": 1.0, "A": 5, "B": 12, "C": 40},
    {"name": "tail_3x33x263", "weight": 1.0, "A": 3, "B": 33, "C": 263},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        v, m = torch.var_mean(x, dim=1)
        return (torch.softmax(x, dim=1), torch.log_softmax(x, dim=0),
                torch.logsumexp(x, dim=1, keepdim=True),
                torch.var(x, dim=0, correction=0, keepdim=True), torch.std(x, dim=1), v, m,
                torch.var(y, dim=1), torch.std(y, dim=1, keepdim=True))


def get_inputs():
    x = torch.randn(A, B, C)
    y = torch.randn(A, 1, C)
    nan, inf = float("nan"), float("inf")
    x[0, 3, 5] = inf                   # one +inf in a fiber of each dim
    x[1, :, 7] = -inf                  # a dim-1 fiber all -inf
    x[:, 2, 9] = -inf                  # a dim-0 fiber all -inf
    x[2, 4, 11] = nan
    x[0, B - 1, 13] = inf              # an inf as the last element of a dim-1 fiber
    x[A - 1, 6, 15] = -inf             # ... and of a dim-0 fiber
    x[1, 5, 20:30] = 80.0              # exp(80) overflows float32
    x[A - 2, :, 31] = -0.0
    x[:, 1, 33] = 0.0
    return [x, y]


def get_init_inputs():
    return []
