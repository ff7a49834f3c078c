"""Element-wise ReLU on a 2-D fp32 tensor: y = max(x, 0)."""
import torch
import torch.nn as nn

ROWS = 1024
COLS = 2048

CASES = [
    {"name": "1024x2048", "weight": 2.0, "ROWS": 1024, "COLS": 2048},
    {"name": "tail_511x3001", "weight": 1.0, "ROWS": 511, "COLS": 3001},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
