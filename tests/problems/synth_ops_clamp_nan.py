"""torch.clamp with a NaN scalar bound is NaN everywhere (min=nan or max=nan); a select such as
`x < lo ? lo : x` keeps x instead. Also hardtanh and relu6 around NaN and the bounds."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 8
COLS = 64
NAN = float("nan")


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return (torch.clamp(x, min=NAN), torch.clamp(x, max=NAN), torch.clamp(x, -1.0, 1.0),
                F.hardtanh(x), F.relu6(x))


def get_inputs():
    x = torch.randn(ROWS, COLS) * 4
    x[0, :8] = torch.tensor([NAN, -1.0, 1.0, 6.0, 0.0, -0.0, float("inf"), -float("inf")])
    return [x]


def get_init_inputs():
    return []
