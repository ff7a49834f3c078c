"""A `toyl` candidate for tests/problems/kb_level1_relu.py: one toykern launch per forward."""
import toykern
import torch
import torch.nn as nn

TUNABLES = {"CHUNKS": [1, 2, 4, 8]}
CHUNKS = 1


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return toykern.relu(x, chunks=CHUNKS)
