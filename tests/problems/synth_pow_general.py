"""pow with general exponents and bases (ke_pow in C++, _ke_pow in Triton): a tensor exponent,
a non-integer constant one, a constant base; the edge rows cross every special case of C's
pow (zero, infinite and NaN bases and exponents, x = 1, negative bases to odd, even and
non-integer exponents)."""
import torch
import torch.nn as nn

ROWS = 12
COLS = 48

CASES = [
    {"name": "12x48", "weight": 1.0},
    {"name": "tail_5x37", "weight": 1.0, "ROWS": 5, "COLS": 37},
]

_X = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -1.0, -2.0, 0.5, 3.0, 1e-3]
_Y = [0.0, float("inf"), -float("inf"), float("nan"), 3.0, -3.0, 2.0, 0.5, -1.5, 1e30, -7.0]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return (torch.pow(x, y), torch.pow(x.abs(), 1.7), torch.pow(2.0, y),
                torch.pow(x, -1.5), torch.pow(0.3, y * 10.0))


def get_inputs():
    x = torch.randn(ROWS, COLS) * 3
    y = torch.randn(ROWS, COLS) * 4
    y[0] = torch.round(y[0])           # integer exponents on negative bases: a real sign
    pairs = torch.cartesian_prod(torch.tensor(_X), torch.tensor(_Y))   # 121 pairs, rows 1-4
    flat_x, flat_y = x[1:5].reshape(-1), y[1:5].reshape(-1)
    flat_x[:pairs.shape[0]], flat_y[:pairs.shape[0]] = pairs[:, 0], pairs[:, 1]
    x[1:5], y[1:5] = flat_x.view(4, COLS), flat_y.view(4, COLS)
    return [x, y]


def get_init_inputs():
    return []
