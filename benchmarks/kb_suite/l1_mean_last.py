"""Mean over the last (contiguous) dim of a 2-D tensor: (R, C) -> (R,)."""
import torch
import torch.nn as nn

ROWS = 4096
COLS = 512

CASES = [
    {"name": "4096x512", "weight": 2.0, "ROWS": 4096, "COLS": 512},
    {"name": "256x8192", "weight": 1.0, "ROWS": 256, "COLS": 8192},
    {"name": "tail_2001x1029", "weight": 1.0, "ROWS": 2001, "COLS": 1029},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLS) + 0.5]


def get_init_inputs():
    return []
