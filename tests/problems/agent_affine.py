"""A tiny problem for the agent-loop tests: y = 2x + 1 over a 1-D fp32 tensor, two cases."""
import torch
import torch.nn as nn

N = 4096

CASES = [
    {"name": "n4096", "weight": 1.0, "N": 4096},
    {"name": "tail_1001", "weight": 1.0, "N": 1001},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
