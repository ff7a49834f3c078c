"""Trigonometric ops on edge values random normals miss (synthesizer coverage, issue 16).

sin / cos / tan over +-0 (signed zeros), inf and NaN, floats nearest multiples of pi/2, and
arguments up to 1e5 (the C++ kernels' fast sin / cos / tan reduce |x| <= 2^18 and are NaN
beyond, where FAST_EXP=0's libm takes over: tests/test_synth_ops.py); asin / acos at +-1,
just beyond (1.0000001: NaN), +-0.5 (where their formulas switch); atan and atan2 with every sign of zero and infinity (atan2(+-0, -0) = +-pi,
atan2(+-inf, -inf) = +-3pi/4). Rows 0-5 hold those; the rest are random.
"""
import math

import torch
import torch.nn as nn

ROWS = 16
COLS = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, u, y):
        return (torch.sin(x), torch.cos(x), torch.tan(x), torch.asin(u), torch.acos(u),
                torch.atan(x), torch.atan2(y, x))


def get_inputs():
    x = torch.randn(ROWS, COLS) * 3
    u = torch.rand(ROWS, COLS) * 2 - 1
    y = torch.randn(ROWS, COLS)
    nan, inf = float("nan"), float("inf")
    specials = torch.tensor([0.0, -0.0, inf, -inf, nan, 1.0, -1.0, 0.5, -0.5])
    x[0, :9] = specials
    y[0, :9] = specials.flip(0)
    x[1, :] = torch.arange(COLS) * (math.pi / 2)            # nearest floats to k pi/2
    x[2, :] = (torch.arange(COLS) - COLS // 2) * 3124.7      # up to 1e5
    u[3, :9] = torch.tensor([1.0, -1.0, 1.0000001, -1.0000001, 0.5, -0.5, 0.0, -0.0, nan])
    zeros_infs = torch.tensor([0.0, -0.0, inf, -inf, 1.0, -1.0, nan, 2.0])
    x[4, :] = zeros_infs.repeat(COLS // 8)                   # every (y, x) sign pair
    y[4, :] = zeros_infs.repeat_interleave(COLS // 8)
    x[5, :] = torch.logspace(-30, 5, COLS)                 # tiny to 1e5
    return [x, u, y]


def get_init_inputs():
    return []
