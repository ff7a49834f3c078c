"""A user's project folder: a small softmax problem that sits next to the project's `.env`.

The corpus's secret-file attacks run against this problem. While they run,
`tests/conftest.py::planted_secrets` writes a secret into this folder (`.env`), into the
driver's current folder and under `/opt`; no candidate, compiler or worker may ever read one.
"""
import torch
import torch.nn as nn

BATCH = 64
DIM = 512

CASES = [
    {"name": "64x512", "weight": 1.0, "BATCH": 64, "DIM": 512},
    {"name": "tail_33x77", "weight": 1.0, "BATCH": 33, "DIM": 77},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [4.0 * torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
