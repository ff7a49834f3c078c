"""Activations built on exp / log1p / expm1 / tanh, on edge values (synthesizer coverage).

softplus (default, and beta 2 / threshold 10, whose switch to x sits at 20 / 5), mish, elu /
selu / celu (expm1 for x <= 0, signed zero at -0), hardswish / hardsigmoid / relu6 / silu at
their kinks (-3, 3), logit near 0 and 1 (with eps and without), xlogy with x = 0 (0 even for
y = 0 or inf) and NaN y. Rows 0-3 hold those; the rest are random.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 16
COLS = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, p, y):
        return (F.softplus(x), F.softplus(x, beta=2.0, threshold=10.0), F.mish(x), F.elu(x),
                F.selu(x), F.celu(x, alpha=0.7), F.hardswish(x), F.hardsigmoid(x), F.relu6(x),
                F.silu(x), torch.logit(p), torch.logit(p, eps=1e-6), torch.xlogy(x, y))


def get_inputs():
    x = torch.randn(ROWS, COLS) * 4
    p = torch.rand(ROWS, COLS)
    y = torch.rand(ROWS, COLS) * 3
    nan, inf = float("nan"), float("inf")
    x[0, :16] = torch.tensor([0.0, -0.0, inf, -inf, nan, 20.0, 20.5, 5.0, 5.5, -3.0, 3.0, 6.0,
                              -100.0, 100.0, -1e-8, 1e-8])
    x[1, :] = torch.linspace(-30.0, 30.0, COLS)
    p[0, :8] = torch.tensor([0.0, 1.0, 1e-7, 0.9999999, nan, 0.5, -0.1, 1.1])
    x[2, :6] = torch.tensor([0.0, 0.0, 0.0, 1.0, -0.0, 2.0])
    y[2, :6] = torch.tensor([0.0, inf, nan, nan, 0.0, 0.0])
    return [x, p, y]


def get_init_inputs():
    return []
