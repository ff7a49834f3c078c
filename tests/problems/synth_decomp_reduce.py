"""Reductions over several dims and over everything, vector norms and max over a dim: the
synthesizer's own decompositions turn them into one-dim reductions over merged views. Row 0 of
the input holds NaN and inf (amax, the norms and the sums must propagate them as torch does)."""
import torch
import torch.nn as nn

BATCH = 4
CHANNELS = 8
SIZE = 16

CASES = [
    {"name": "4x8x16", "weight": 1.0, "BATCH": 4, "SIZE": 16},
    {"name": "tail_3x8x13", "weight": 1.0, "BATCH": 3, "SIZE": 13},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return (x.mean(dim=(2, 3)), x.amax(dim=(2, 3), keepdim=True), y.sum(),
                torch.linalg.vector_norm(y, 2, dim=-1), torch.linalg.vector_norm(y, 1, dim=1),
                torch.linalg.vector_norm(y, float("inf"), dim=-1, keepdim=True),
                y.max(dim=-1).values,
                y.min(dim=1, keepdim=True)[0])


def get_inputs():
    x = torch.randn(BATCH, CHANNELS, SIZE, SIZE)
    y = torch.randn(BATCH * CHANNELS, SIZE * 4)
    y[0, 3] = float("nan")
    y[1, 5] = float("inf")
    y[2, 7] = -float("inf")
    x[0, 1, 2, 3] = float("nan")
    return [x, y]


def get_init_inputs():
    return []
