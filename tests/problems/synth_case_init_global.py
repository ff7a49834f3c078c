"""Model.__init__ reads DIM, a size global the CASES vary, directly (not through
get_init_inputs): a candidate that copies `DIM = 64` builds a 64-wide scale in the tail case
too. ModelNew cannot see a case's value, so the synthesizer must refuse, naming DIM."""
import torch
import torch.nn as nn

BATCH = 16
DIM = 64

CASES = [
    {"name": "16x64", "weight": 1.0, "BATCH": 16, "DIM": 64},
    {"name": "tail_5x33", "weight": 1.0, "BATCH": 5, "DIM": 33},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(DIM))

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
