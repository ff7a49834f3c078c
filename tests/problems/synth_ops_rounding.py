"""Rounding, remainder, sign and classification ops on edge values (synthesizer coverage).

round is half to even (0.5 -> 0, 1.5 -> 2, -2.5 -> -2, -0.4 -> -0); round(decimals=2) and
(decimals=-1) scale in float as torch does (2.675 -> 2.68: 267.5 in float); trunc and frac keep
signed zeros; fmod takes the dividend's sign and is exact for huge quotients (1e30 fmod 3);
copysign reads the sign bit of -0 and -NaN; nextafter steps off 0 into subnormals and off
FLT_MAX to inf; hypot is inf beside a NaN; isnan / isinf / isfinite / isposinf / isneginf;
logical_xor treats NaN as true; clamp_min / clamp_max with scalars, clamp with tensor bounds
(NaN from any side). Rows 0-5 hold those; the rest are random.
"""
import torch
import torch.nn as nn

ROWS = 16
COLS = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, lo):
        return (torch.round(x), torch.round(x, decimals=2), torch.round(x, decimals=-1),
                torch.trunc(x), torch.frac(x), torch.fmod(x, y), torch.fmod(x, 0.7),
                torch.copysign(x, y), torch.nextafter(x, y), torch.hypot(x, y), torch.isnan(x),
                torch.isinf(x), torch.isfinite(x), torch.isposinf(x), torch.isneginf(x),
                torch.logical_xor(x, y), torch.clamp_min(x, -0.5), torch.clamp_max(x, 0.5),
                torch.clamp(x, lo, lo + 1.0), torch.clamp(x, min=lo))


def get_inputs():
    x = torch.randn(ROWS, COLS) * 5
    y = torch.randn(ROWS, COLS) * 2
    lo = torch.randn(ROWS, COLS)
    nan, inf = float("nan"), float("inf")
    x[0, :16] = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.4, 0.4, 2.675, 1.005, -0.125,
                              8388609.0, 16777217.0, 0.0, -0.0, 1e30])
    # (2e38, not FLT_MAX: torch's vectorised fmod overflows to NaN above about 2.1e38)
    x[1, :12] = torch.tensor([0.0, -0.0, inf, -inf, nan, 1e30, -1e30, 5.0, -5.0, 2e38,
                              1e-45, -1e-45])
    y[1, :12] = torch.tensor([3.0, 3.0, 2.0, 2.0, 1.0, 3.0, 3.0, 0.0, inf, inf, -0.0, 1.0])
    # (no subnormal divisors: torch's vectorised fmod gives NaN for them, its scalar tail
    # and C give the remainder, so no kernel can match both)
    y[2, :8] = torch.tensor([-0.0, 0.0, -nan, nan, inf, -inf, 1e-30, -1e-30])
    x[3, :8] = torch.tensor([nan, 0.0, -0.0, 1.0, inf, 0.0, nan, -inf])
    y[3, :8] = torch.tensor([0.0, 0.0, 1.0, 0.0, nan, nan, inf, nan])
    lo[4, :4] = torch.tensor([nan, 0.0, 2.0, -inf])
    x[4, :4] = torch.tensor([1.0, nan, 1.0, 0.0])
    x[5, :] = torch.arange(COLS) * 0.25 - 8.0       # round-half boundaries every other value
    return [x, y, lo]


def get_init_inputs():
    return []
