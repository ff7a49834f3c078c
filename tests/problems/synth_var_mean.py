"""var_mean and std_mean over the last dim, a block of dims and the first dim. torch takes
their mean from Welford's recurrence: NaN once an inf is followed by another element, the inf
itself when it comes last (torch.mean gives inf for both). Fibers hold an inf first, in the
middle, last, both infs, all infs, and a NaN."""
import torch
import torch.nn as nn

A, B, C = 6, 5, 24

CASES = [
    {"name": "6x5x24", "weight": 1.0, "A": 6, "B": 5, "C": 24},
    {"name": "tail_4x7x37", "weight": 1.0, "A": 4, "B": 7, "C": 37},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        v, m = torch.var_mean(x, dim=-1, keepdim=True)
        s, m2 = torch.std_mean(x, dim=(1, 2))
        v0, m0 = torch.var_mean(x, dim=0, correction=0)
        return v, m, s, m2, v0, m0


def get_inputs():
    x = torch.randn(A, B, C)
    inf, nan = float("inf"), float("nan")
    x[0, 0, 0] = inf                   # first of a last-dim row
    x[0, 1, C // 2] = inf              # in the middle
    x[0, 2, C - 1] = -inf              # last of a row: the mean is -inf
    x[1, 3, 4], x[1, 3, 9] = inf, -inf
    x[2, 4, :] = inf                   # all inf
    x[3, 0, 5] = nan
    x[A - 1, B - 1, C - 1] = inf       # last of the (1, 2) block and of a dim-0 fiber
    x[A - 1, 0, 3] = -inf              # last of a dim-0 fiber
    return [x]


def get_init_inputs():
    return []
