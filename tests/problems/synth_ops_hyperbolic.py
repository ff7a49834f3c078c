"""Exponential, logarithmic and hyperbolic ops on edge values (synthesizer coverage, issue 16).

log / log2 / log10 / log1p at 0, -0, negatives (NaN), -1 (log1p: -inf), subnormals and tiny
arguments (log1p(1e-10) = 1e-10, where log(1 + x) is 0); exp2 / expm1 at large, tiny and
infinite arguments; sinh / cosh / asinh / acosh / atanh at +-0, +-1 (atanh: +-inf; acosh(1) = 0,
below 1 NaN), inf and NaN; erfc in its far tail (erfc(9) = 4e-37) and at -inf (2). Rows 0-5
hold those; the rest are random.
"""
import torch
import torch.nn as nn

ROWS = 16
COLS = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, p):
        return (torch.log(p), torch.log2(p), torch.log10(p), torch.log1p(p), torch.exp2(x),
                torch.expm1(x), torch.sinh(x), torch.cosh(x), torch.asinh(x), torch.acosh(p),
                torch.atanh(x.clamp(-2, 2) * 0.5), torch.erfc(x))


def get_inputs():
    x = torch.randn(ROWS, COLS) * 4
    p = torch.rand(ROWS, COLS) * 10
    nan, inf = float("nan"), float("inf")
    specials = torch.tensor([0.0, -0.0, inf, -inf, nan, 1.0, -1.0, 2.0, -2.0, 0.5])
    x[0, :10] = specials
    p[0, :10] = specials
    p[1, :8] = torch.tensor([1e-45, 1e-40, 1.2e-38, 1e-10, -1e-10, -1.0, -0.999999, 1e30])
    x[1, :8] = torch.tensor([1e-10, -1e-10, 1e-30, 88.0, -88.0, 127.5, -149.5, 200.0])
    x[2, :] = torch.linspace(-12.0, 12.0, COLS)           # erfc's far tail and exp's range
    x[3, :8] = torch.tensor([9.0, 10.0, 10.5, -9.0, 3e38, -3e38, 1e20, -1e20])
    p[3, :8] = torch.tensor([1.0, 1.0000001, 0.9999999, 1e20, 3e38, 2.0, 1e-30, 0.0])
    x[4, :] = torch.logspace(-20, 1.9, COLS)
    x[5, :] = -torch.logspace(-20, 1.9, COLS)
    return [x, p]


def get_init_inputs():
    return []
