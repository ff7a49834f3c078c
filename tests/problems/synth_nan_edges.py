"""Edge values random normals miss, for the synthesizer's NaN / inf / rounding semantics.

torch.maximum / minimum / amax / amin / relu propagate NaN; fmax / fmin return the other side;
floor_divide on floats is not floor(a / b) when the fp32 quotient rounds up to an integer
(1 / 0.1 = 10 in fp32, torch gives 9); a zero divisor gives inf or NaN. Rows 0-7 of the
inputs hold those cases; the rest are random.
"""
import torch
import torch.nn as nn

ROWS = 64
COLS = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return (torch.maximum(x, y), torch.minimum(x, y), torch.fmax(x, y), torch.fmin(x, y),
                torch.relu(x), x.amax(dim=-1), x.amin(dim=-1), torch.floor_divide(x, y))


def get_inputs():
    x = torch.randn(ROWS, COLS)
    y = torch.randn(ROWS, COLS)
    nan, inf = float("nan"), float("inf")
    x[0, ::5] = nan                    # NaN on the left
    y[1, 1::3] = nan                   # NaN on the right
    x[2, ::7] = nan
    y[2, ::7] = nan                    # both
    x[3, ::9] = inf
    x[3, 4::9] = -inf
    x[4, :] = torch.arange(COLS) * 0.3  # exact multiples whose fp32 quotient rounds up
    y[4, :] = 0.1
    x[5, :] = 1.0
    y[5, :] = 0.1
    y[6, ::4] = 0.0                    # zero divisors: inf, -inf, NaN
    x[6, ::8] = 0.0
    x[7, ::2] = -0.0                   # signed zeros
    return [x, y]


def get_init_inputs():
    return []
