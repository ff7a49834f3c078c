"""Ops that decompose into the covered ones (core_aten_decompositions), on edge values.

heaviside (values where x = 0, NaN), nan_to_num (NaN, +-inf to +-FLT_MAX), logaddexp (equal
infinities), sinc (x = 0), softsign, tanhshrink, hardshrink / softshrink / threshold at their
thresholds, logsigmoid (a minimum with a 0-d zero: a scalar operand inside the kernel),
deg2rad, lerp with a scalar weight. Row 0 holds the edges; the rest are random.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 16
COLS = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return (torch.heaviside(x, y), torch.nan_to_num(x), torch.logaddexp(x, y), torch.sinc(x),
                F.softsign(x), F.tanhshrink(x), F.hardshrink(x), F.softshrink(x),
                F.threshold(x, 0.1, 20.0), F.logsigmoid(x), torch.deg2rad(x),
                torch.lerp(x, y, 0.3))


def get_inputs():
    x, y = torch.randn(ROWS, COLS) * 3, torch.randn(ROWS, COLS)
    nan, inf = float("nan"), float("inf")
    x[0, :10] = torch.tensor([0.0, -0.0, inf, -inf, nan, 0.5, -0.5, 0.1, 1e-8, 100.0])
    y[0, :10] = torch.tensor([0.5, nan, inf, -inf, 2.0, inf, nan, 0.0, -0.0, 3.0])
    return [x, y]


def get_init_inputs():
    return []
