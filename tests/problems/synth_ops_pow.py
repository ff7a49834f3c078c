"""Powers with constant exponents on edge values: products for integer exponents (torch's own
for 2, 3 and -2), (r)sqrt for +-0.5, 1 for 0 (even at NaN); signed zeros, infinities, NaN,
values whose powers overflow or underflow. Before: x ** 3 and x ** -3 were scalar std::pow
calls (x ** 3 at 0.16x eager); in Triton anything but 2, 3, 0.5, +-1 was not covered."""
import torch
import torch.nn as nn

ROWS = 8
COLS = 64
CASES = [{"name": "base", "weight": 1.0}, {"name": "odd", "weight": 1.0, "ROWS": 3, "COLS": 37}]


class Model(nn.Module):
    def forward(self, x):
        return (torch.pow(x, 3), torch.pow(x, -2), torch.pow(x.abs(), -0.5), torch.pow(x, 5),
                torch.pow(x, 0), torch.pow(x, -3), torch.pow(x, 4), torch.pow(x, 0.5))


def get_inputs():
    x = torch.randn(ROWS, COLS) * 3
    edge = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-13, -1e-13,
                         1e13, -1e13, 1.0, -1.0, 2.5e7, 7e-20, 0.5])
    x.view(-1)[:edge.numel()] = edge
    return [x]


def get_init_inputs():
    return []
